"""Fit the valence head with Lightning: best-on-dev checkpoint, resume from the last checkpoint.

Checkpoints live in ``<checkpoint_dir>/``: ``best.ckpt`` (lowest dev MSE so far) and
``last.ckpt`` (written at every validation). When ``last.ckpt`` exists, :func:`fit_valence_head`
resumes from it, so a run that was killed continues where its last validation left off.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import pytorch_lightning as pl
from pytorch_lightning.callbacks import ModelCheckpoint

log = logging.getLogger(__name__)

MONITOR = "ser/val/mse"


def checkpoint_callback(checkpoint_dir: str | Path) -> ModelCheckpoint:
    """Keeps ``best.ckpt`` (lowest ``ser/val/mse``) and ``last.ckpt`` (every validation)."""
    return ModelCheckpoint(dirpath=str(checkpoint_dir), filename="best", monitor=MONITOR, mode="min",
                           save_top_k=1, save_last=True, auto_insert_metric_name=False)


def fit_trainer(make_trainer: Callable[..., pl.Trainer], checkpoint_dir: str | Path, max_steps: int,
                val_every_n_epochs: int = 1, callbacks: Sequence[pl.Callback] = (), **overrides) -> pl.Trainer:
    """A trainer for ``max_steps`` optimiser steps that validates every ``val_every_n_epochs`` epochs
    and keeps best/last checkpoints in ``checkpoint_dir``.

    ``make_trainer(**kwargs)`` builds it (e.g. ``partial(hydra.utils.instantiate, cfg.trainer)``);
    ``overrides`` are passed on (e.g. ``logger=CSVLogger(...)``).
    The same trainer may first run extraction (``trainer.predict``): under plain DDP a second
    Trainer would try to launch the worker processes a second time.
    """
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    if val_every_n_epochs < 1:
        raise ValueError(f"val_every_n_epochs must be >= 1, got {val_every_n_epochs}")
    return make_trainer(callbacks=[checkpoint_callback(checkpoint_dir), *callbacks], max_steps=int(max_steps),
                        max_epochs=-1, check_val_every_n_epoch=int(val_every_n_epochs),
                        num_sanity_val_steps=0, enable_checkpointing=True, log_every_n_steps=50, **overrides)


def fit_valence_head(trainer: pl.Trainer, module: pl.LightningModule, datamodule: pl.LightningDataModule,
                     checkpoint_dir: str | Path) -> pl.Trainer:
    """``trainer.fit``, resuming from ``<checkpoint_dir>/last.ckpt`` when it exists."""
    last = Path(checkpoint_dir) / "last.ckpt"
    resume = str(last) if last.is_file() else None
    if resume:
        log.info("resuming from %s", resume)
    trainer.fit(module, datamodule=datamodule, ckpt_path=resume)
    return trainer

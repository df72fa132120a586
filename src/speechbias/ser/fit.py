"""Fit the valence head with Lightning: best-on-dev checkpoint, resume from the last checkpoint.

Checkpoints live in ``<checkpoint_dir>/``: ``best.ckpt`` (weights of the lowest dev MSE so
far, written when it improves) and ``last.ckpt`` (everything needed to resume, written at the
validations of every ``checkpoint_every_n_epochs``-th epoch). When ``last.ckpt`` exists,
:func:`fit_valence_head` resumes from it, so a run that was killed continues where that
checkpoint left off. (A several-head module keeps each head's best weights itself, in both files.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import pytorch_lightning as pl
from pytorch_lightning.callbacks import ModelCheckpoint

log = logging.getLogger(__name__)

MONITOR = "ser/val/mse"


def checkpoint_callbacks(checkpoint_dir: str | Path, every_n_epochs: int = 1) -> list[ModelCheckpoint]:
    """``best.ckpt`` (weights only, lowest ``ser/val/mse``, checked at every validation) and
    ``last.ckpt`` (full state, every ``every_n_epochs`` epochs). A full checkpoint of the paper's
    three heads is ~12 MB: writing it at every epoch (~50 steps) costs ~15% of the training time."""
    if every_n_epochs < 1:
        raise ValueError(f"checkpoint_every_n_epochs must be >= 1, got {every_n_epochs}")
    best = ModelCheckpoint(dirpath=str(checkpoint_dir), filename="best", monitor=MONITOR, mode="min",
                           save_top_k=1, save_weights_only=True, auto_insert_metric_name=False)
    # a "top-1 without monitor" keeps the newest checkpoint; ``save_last`` would only write when a
    # top-k checkpoint was written in the same step (Lightning 2.6)
    last = ModelCheckpoint(dirpath=str(checkpoint_dir), filename="last", monitor=None, save_top_k=1,
                           every_n_epochs=int(every_n_epochs), enable_version_counter=False)
    return [best, last]


def fit_trainer(make_trainer: Callable[..., pl.Trainer], checkpoint_dir: str | Path, max_steps: int,
                val_every_n_epochs: int = 1, callbacks: Sequence[pl.Callback] = (),
                checkpoint_every_n_epochs: int = 1, **overrides) -> pl.Trainer:
    """A trainer for ``max_steps`` optimiser steps that validates every ``val_every_n_epochs`` epochs
    and keeps best/last checkpoints in ``checkpoint_dir`` (``last.ckpt`` at the validations of
    every ``checkpoint_every_n_epochs``-th epoch).

    ``make_trainer(**kwargs)`` builds it (e.g. ``partial(hydra.utils.instantiate, cfg.trainer)``);
    ``overrides`` are passed on (e.g. ``logger=CSVLogger(...)``).
    The same trainer may first run extraction (``trainer.predict``): under plain DDP a second
    Trainer would try to launch the worker processes a second time.
    """
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    if val_every_n_epochs < 1:
        raise ValueError(f"val_every_n_epochs must be >= 1, got {val_every_n_epochs}")
    return make_trainer(callbacks=[*checkpoint_callbacks(checkpoint_dir, checkpoint_every_n_epochs), *callbacks],
                        max_steps=int(max_steps),
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

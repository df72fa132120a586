"""Fit the valence head with Lightning: best-on-dev checkpoint, resume from the last checkpoint.

Checkpoints live in ``<checkpoint_dir>/``: ``last.ckpt`` (everything needed to resume, including
each head's best-on-dev weights so far, written at the validations of every
``checkpoint_every_n_epochs``-th epoch) and ``best.ckpt`` (each head's weights of its lowest dev
MSE, written when fit ends; loads with ``ValenceRegressor.load_from_checkpoint``). When
``last.ckpt`` exists, :func:`fit_valence_head` resumes from it, so a run that was killed continues
where that checkpoint left off.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint, RichProgressBar

from speechbias.fileio.atomic_file import atomic_write, storage_error

log = logging.getLogger(__name__)


def checkpoint_callbacks(checkpoint_dir: str | Path, every_n_epochs: int = 1) -> list[pl.Callback]:
    """``last.ckpt`` (full state, every ``every_n_epochs`` epochs) and ``best.ckpt`` (at fit end).

    A full checkpoint of the paper's three heads is ~12 MB: written at every epoch (~50 steps) it
    cost ~15% of the training time, and a best.ckpt written on every improvement of the heads'
    mean dev MSE nearly as much; the module keeps each head's best weights in memory instead.
    """
    if every_n_epochs < 1:
        raise ValueError(f"checkpoint_every_n_epochs must be >= 1, got {every_n_epochs}")
    # a "top-1 without monitor" keeps the newest checkpoint; ``save_last`` would only write when a
    # top-k checkpoint was written in the same step (Lightning 2.6)
    last = ModelCheckpoint(
        dirpath=str(checkpoint_dir),
        filename="last",
        monitor=None,
        save_top_k=1,
        every_n_epochs=int(every_n_epochs),
        enable_version_counter=False,
    )
    return [last, BestHeadsCheckpoint(checkpoint_dir)]


class BestHeadsCheckpoint(pl.Callback):
    """Writes ``<checkpoint_dir>/best.ckpt`` when fit ends (global rank 0): a weights-only Lightning
    checkpoint whose ``state_dict`` holds every head's weights of its lowest dev MSE
    (:meth:`ValenceRegressor.best_heads`), with ``hyper_parameters`` and ``best_heads`` (step,
    epoch, dev MSE and R^2 of each). Written to a temporary file and renamed: never half-written."""

    def __init__(self, checkpoint_dir: str | Path):
        self.checkpoint_dir = Path(checkpoint_dir)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        state = {
            f"heads.{k}.{name}": value
            for k, head in enumerate(pl_module.best_heads())
            for name, value in head.state_dict().items()
        }
        dev = [None if b is None else {c: b[c] for c in ("step", "epoch", "mse", "r2")} for b in pl_module.best]
        checkpoint = {
            "state_dict": state,
            "hyper_parameters": dict(pl_module.hparams),
            "best_heads": dev,
            "global_step": int(trainer.global_step),
            "pytorch-lightning_version": pl.__version__,
        }
        atomic_write(self.checkpoint_dir / "best.ckpt", lambda tmp: torch.save(checkpoint, tmp))


def fit_trainer(
    make_trainer: Callable[..., pl.Trainer],
    checkpoint_dir: str | Path,
    max_steps: int,
    val_every_n_epochs: int = 1,
    callbacks: Sequence[pl.Callback] = (),
    checkpoint_every_n_epochs: int = 1,
    **overrides,
) -> pl.Trainer:
    """A trainer for ``max_steps`` optimiser steps that validates every ``val_every_n_epochs`` epochs
    and keeps best/last checkpoints in ``checkpoint_dir`` (``last.ckpt`` at the validations of
    every ``checkpoint_every_n_epochs``-th epoch).

    ``make_trainer(**kwargs)`` builds it (the trainer factory of ``conf/trainer/*.yaml``, a ``_partial_``);
    ``overrides`` are passed on (e.g. ``logger=CSVLogger(...)``).
    The same trainer may first run extraction (``trainer.predict``): under plain DDP a second
    Trainer would try to launch the worker processes a second time. Its progress bar shows the
    epochs that ``max_steps`` take (:class:`StepBoundedProgressBar`).
    """
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    if val_every_n_epochs < 1:
        raise ValueError(f"val_every_n_epochs must be >= 1, got {val_every_n_epochs}")
    trainer = make_trainer(
        callbacks=[*checkpoint_callbacks(checkpoint_dir, checkpoint_every_n_epochs), *callbacks],
        max_steps=int(max_steps),
        max_epochs=-1,
        check_val_every_n_epoch=int(val_every_n_epochs),
        num_sanity_val_steps=0,
        enable_checkpointing=True,
        log_every_n_steps=50,
        **overrides,
    )
    return use_step_bounded_progress_bar(trainer)


def epochs_for_steps(max_steps: int, steps_per_epoch: int) -> int:
    """Epochs that ``max_steps`` optimiser steps take at ``steps_per_epoch`` steps an epoch (the last
    one may be partial): ceil(max_steps / steps_per_epoch)."""
    if max_steps < 1 or steps_per_epoch < 1:
        raise ValueError(f"max_steps and steps_per_epoch must be >= 1, got {max_steps} and {steps_per_epoch}")
    return -(-int(max_steps) // int(steps_per_epoch))


class StepBoundedProgressBar(RichProgressBar):
    """Lightning's rich progress bar for a fit bounded by ``max_steps`` (``max_epochs=-1``).

    Lightning writes ``Epoch e/<max_epochs - 1>``, i.e. ``Epoch 1999/-2`` here. This bar writes
    ``Epoch e/E`` with E = ceil(max_steps / steps per epoch) - 1 (0-based, as Lightning counts) and
    e = optimiser steps done // steps per epoch, which stays right after a resume (Lightning's epoch
    counter runs one ahead after resuming from an epoch-end checkpoint). Steps per epoch come from
    the datamodule's ``steps_per_epoch(world_size)``; without one it keeps Lightning's description.
    ``max_epochs`` itself stays -1: a finite value would stop resumed runs early for that reason.
    Public API only: the hook ``on_train_epoch_start`` and the bar's ``progress`` (a rich
    ``Progress``) and ``train_progress_bar_id``.
    """

    def step_bounded_description(self, trainer: pl.Trainer) -> str | None:
        """``Epoch e/E`` (see the class docstring), or None without the datamodule's steps per epoch."""
        per_epoch = getattr(trainer.datamodule, "steps_per_epoch", None)  # None without a datamodule
        if not (callable(per_epoch) and trainer.max_steps > 0):
            return None
        steps = per_epoch(trainer.world_size)
        last = epochs_for_steps(trainer.max_steps, steps) - 1
        description = f"Epoch {min(trainer.global_step // steps, last)}/{last}"
        return f"{description:{len(self.validation_description)}}"  # as wide as Lightning pads it

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        super().on_train_epoch_start(trainer, pl_module)
        description = self.step_bounded_description(trainer)
        if description is None or self.progress is None or self.train_progress_bar_id is None:
            return
        styled = f"[{self.theme.description}]{description}" if self.theme.description else description
        self.progress.update(self.train_progress_bar_id, description=styled)


def use_step_bounded_progress_bar(trainer: pl.Trainer) -> pl.Trainer:
    """Replace the trainer's default :class:`RichProgressBar` (if it has one, as Lightning makes it
    when rich is installed) by a :class:`StepBoundedProgressBar` with its public settings (refresh
    rate, theme); other progress bars are left alone."""
    for k, callback in enumerate(trainer.callbacks):
        if type(callback) is RichProgressBar:
            trainer.callbacks[k] = StepBoundedProgressBar(refresh_rate=callback.refresh_rate, theme=callback.theme)
    return trainer


def fit_valence_head(
    trainer: pl.Trainer, module: pl.LightningModule, datamodule: pl.LightningDataModule, checkpoint_dir: str | Path
) -> None:
    """``trainer.fit``, resuming from ``<checkpoint_dir>/last.ckpt`` when it exists. A checkpoint that
    cannot be written (full or read-only disk; torch's writer raises its own RuntimeError, judged by the
    file system's state) is a :class:`~speechbias.errors.StorageError` naming it."""
    last = Path(checkpoint_dir) / "last.ckpt"
    resume = str(last) if last.is_file() else None
    if resume:
        log.info("resuming from %s", resume)
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=resume)
    except Exception as exc:
        # an OSError of a move names its destination second (Lightning writes a temporary file, then moves it)
        error = storage_error(Path(getattr(exc, "filename2", None) or getattr(exc, "filename", None) or last), exc)
        if error is exc:
            raise
        raise error from exc

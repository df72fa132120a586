"""train.py's progress bar: ``Epoch e/E`` where E is the last epoch that ``max_steps`` reach."""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pytest
import pytorch_lightning as pl

from speechbias.launch.lightning_trainer import build_trainer
from speechbias.ser.datamodule import LayerMeansDataModule
from speechbias.ser.fit import StepBoundedProgressBar, epochs_for_steps, fit_trainer, fit_valence_head
from speechbias.ser.module import ValenceRegressor


def test_epochs_for_steps_and_steps_per_epoch_by_hand():
    assert [epochs_for_steps(s, 5) for s in (1, 5, 6, 12, 15)] == [1, 1, 2, 3, 3]
    assert epochs_for_steps(4000, 2) == 2000
    with pytest.raises(ValueError, match="must be >= 1"):
        epochs_for_steps(0, 3)
    rng = np.random.default_rng(0)
    dev = np.zeros(47, dtype=bool)
    dev[:10] = True  # 37 training rows
    dm = LayerMeansDataModule(rng.normal(size=(47, 2, 3)), rng.uniform(size=47), dev, batch_size=8)
    assert dm.steps_per_epoch() == 5  # ceil(37 / 8)
    # batch_size is the global batch: each of 2 ranks takes 4 rows of it, so an epoch has the steps of one process
    assert dm.steps_per_epoch(world_size=2) == 5  # ceil(ceil(37 / 2) / (8 / 2)) = ceil(19 / 4)
    assert dm.rank_batch_size(2) == 4 and dm.rank_batch_size(3) == 3


class _Descriptions(pl.Callback):
    """The training bar's description at each epoch's first batch (after every epoch-start hook)."""

    def __init__(self):
        self.seen = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if batch_idx == 0:
            self.seen.append(trainer.progress_bar_callback.train_progress_bar.description.strip())


@pytest.mark.parametrize("steps_per_call", [1, 2])
def test_a_fit_shows_the_epochs_that_max_steps_take(tmp_path, steps_per_call):
    rng = np.random.default_rng(1)
    dev = np.zeros(50, dtype=bool)
    dev[:10] = True  # 40 training rows, batch 8: 5 steps an epoch; 12 steps: epochs 0, 1, 2
    dm = LayerMeansDataModule(
        rng.normal(size=(50, 2, 3)), rng.uniform(size=50), dev, batch_size=8, steps_per_call=steps_per_call
    )
    record = _Descriptions()
    make = partial(
        build_trainer, accelerator="cpu", devices=1, logger=False, enable_model_summary=False, enable_progress_bar=True
    )
    trainer = fit_trainer(make, tmp_path / "ckpt", max_steps=12, callbacks=[record])
    assert isinstance(trainer.progress_bar_callback, StepBoundedProgressBar)
    fit_valence_head(
        trainer, ValenceRegressor(2, 3, hidden_size=4, lr=1e-3, valence_range=(0, 1)), dm, tmp_path / "ckpt"
    )
    last = math.ceil(12 / 5) - 1
    assert record.seen == [f"Epoch {e}/{last}" for e in range(last + 1)]
    assert trainer.global_step == 12 and trainer.max_epochs == -1  # bounded by steps only

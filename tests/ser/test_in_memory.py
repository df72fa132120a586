"""The plain in-memory loop takes exactly the steps Lightning takes (same batches, same Adam)."""

from __future__ import annotations

import copy

import numpy as np
import pytorch_lightning as pl
import torch

from ser.test_training import DIM, LAYERS, _data
from speechbias.ser.datamodule import LayerMeansDataModule
from speechbias.ser.in_memory import train_head_in_memory, train_heads_in_memory
from speechbias.ser.module import ValenceRegressor


def test_in_memory_loop_matches_lightning():
    features, target, dev, _ = _data()
    torch.manual_seed(0)
    module = ValenceRegressor(LAYERS, DIM, hidden_size=16, lr=1e-2)
    head = copy.deepcopy(module.head)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        max_steps=7,
        max_epochs=-1,
        limit_val_batches=0,
        num_sanity_val_steps=0,
    )
    trainer.fit(module, datamodule=LayerMeansDataModule(features, target, dev, batch_size=32, seed=5))
    train_head_in_memory(
        head,
        torch.from_numpy(features[~dev]),
        torch.from_numpy(target[~dev]),
        max_steps=7,
        lr=1e-2,
        batch_size=32,
        seed=5,
    )
    for (name, a), b in zip(module.head.state_dict().items(), head.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7, msg=name)
    assert not np.allclose(head.layer_weights().detach().numpy(), 1 / LAYERS)  # 7 steps happened


def test_heads_trained_together_equal_heads_trained_alone():
    features, target, dev, _ = _data()
    x, y = torch.from_numpy(features[~dev]), torch.from_numpy(target[~dev])
    torch.manual_seed(1)
    heads = [ValenceRegressor(LAYERS, DIM, hidden_size=16).head for _ in range(3)]
    alone = [copy.deepcopy(h) for h in heads]
    lrs = [1e-2, 1e-3, 1e-4]
    train_heads_in_memory(heads, lrs, x, y, max_steps=5, seed=2)
    for h, lr in zip(alone, lrs):
        train_head_in_memory(h, x, y, max_steps=5, lr=lr, seed=2)
    for a, b in zip(heads, alone):
        for (name, pa), pb in zip(a.state_dict().items(), b.state_dict().values()):
            torch.testing.assert_close(pa, pb, rtol=0, atol=0, msg=name)

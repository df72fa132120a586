"""seed_run sets what Lightning's seed_everything(seed, workers=True) sets, without importing Lightning."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
import torch

from speechbias.seeding import seed_run, seed_torch


def _state():
    return (
        random.getstate(),
        np.random.get_state()[1].tolist(),
        torch.random.get_rng_state().tolist(),
        os.environ.get("PL_GLOBAL_SEED"),
        os.environ.get("PL_SEED_WORKERS"),
    )


@pytest.mark.parametrize("seed", [0, 7, 2**32 - 1])
def test_seed_run_is_lightnings_seed_everything(seed, monkeypatch):
    from lightning_fabric.utilities.seed import seed_everything

    monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)
    monkeypatch.delenv("PL_SEED_WORKERS", raising=False)
    seed_everything(seed, workers=True, verbose=False)
    lightning = _state()
    random.random(), np.random.rand(), torch.rand(1)  # move every generator on
    seed_run(seed)
    assert _state() == lightning
    torch.rand(1)
    seed_run(seed, torch=False)  # torch's generator left as it is ...
    assert _state()[2] != lightning[2]
    seed_torch(seed)  # ... until the task seeds it
    assert _state() == lightning


@pytest.mark.parametrize("seed, message", [(-1, "out of range"), (2**32, "out of range"), ("x", "not an integer")])
def test_a_bad_seed_is_one_clear_error(seed, message):
    with pytest.raises(ValueError, match=message):
        seed_run(seed)

"""The run's seed, set as Lightning's ``seed_everything(seed, workers=True)`` sets it, without importing Lightning.

:func:`seed_run` sets ``PL_GLOBAL_SEED`` and ``PL_SEED_WORKERS=1`` (Lightning's DDP ranks and DataLoader
workers seed themselves from them), Python's ``random``, numpy's global generator and torch's.
``torch=False`` leaves torch's generator for later: a task that may finish without torch (a SpEAT run
whose clips are all cached imports none; 1+ s) seeds it with :func:`seed_torch` just before it first
needs torch, where nothing has drawn from torch's generator yet, so its state is what it would have been.
"""

from __future__ import annotations

import os
import random

# numpy's seed range, which Lightning enforces too
MAX_SEED = 2**32 - 1


def check_seed(seed) -> int:
    """``seed`` as an int in 0..2**32-1; a ValueError naming ``seed=`` otherwise."""
    try:
        value = int(seed)
    except (TypeError, ValueError):
        raise ValueError(f"seed={seed!r} is not an integer") from None
    if not 0 <= value <= MAX_SEED:
        raise ValueError(f"seed={value} is out of range: use 0..{MAX_SEED}")
    return value


def seed_run(seed, torch: bool = True) -> int:
    """Seed everything (see the module docstring); ``torch=False``: all but torch's generator."""
    seed = check_seed(seed)
    os.environ["PL_GLOBAL_SEED"] = str(seed)
    random.seed(seed)
    import numpy as np

    np.random.seed(seed)
    if torch:
        seed_torch(seed)
    os.environ["PL_SEED_WORKERS"] = "1"
    return seed


def seed_torch(seed) -> None:
    """Seed torch's generator (CPU and every GPU) with ``seed``, as :func:`seed_run` does."""
    import torch

    torch.manual_seed(check_seed(seed))

"""Test-wide settings: no network, W&B offline, small thread pools, shared helpers."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# idle OpenBLAS threads compete with the test process on 2-core machines (small products 2-3x slower)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pytest  # noqa: E402

# what the entry points register before @hydra.main composes, for tests that compose with hydra.compose:
# the options of config group aggregation (Hydra's ConfigStore) and the ${speechbias.*} resolvers
import speechbias.entry  # noqa: E402,F401

REPO_ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = REPO_ROOT / "conf"
SHARED_DATA = REPO_ROOT.parent / "shared" / "data" / "speat_paper"


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture
def conf_dir() -> Path:
    return CONF_DIR

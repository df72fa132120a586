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
import speechbias.launch.entry  # noqa: E402,F401

REPO_ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = REPO_ROOT / "conf"
SHARED_DATA = REPO_ROOT.parent / "shared" / "data" / "speat_paper"


@pytest.fixture(autouse=True)
def _third_party_warnings_quieted():
    """The scoped filters of known third-party warnings that the entry points install (console_quieting), in
    each test's own warnings context too (pytest resets the filters per test): ``pytest -q`` shows none."""
    from speechbias.console_quieting import quiet_third_party_console

    quiet_third_party_console()


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture
def conf_dir() -> Path:
    return CONF_DIR


@pytest.fixture
def wandb_recorder(monkeypatch):
    """W&B replaced by a recorder: ``(started, logged)``, the keyword arguments of each started run and,
    in order, ``("metrics", values, step)``, ``("table", key, rows)``, ``("images", keys)``, ``("describe",
    name/tags/config)`` (a run started before its job knew them: train.py's live run), ``("finish",)``."""
    from speechbias.report import wandb_run

    started, logged = [], []
    monkeypatch.setattr(wandb_run, "start_run", lambda **kw: started.append(kw) or object())
    monkeypatch.setattr(wandb_run, "log_metrics", lambda run, m, step=None: logged.append(("metrics", dict(m), step)))
    monkeypatch.setattr(wandb_run, "log_table", lambda run, key, df: logged.append(("table", key, len(df))))
    monkeypatch.setattr(wandb_run, "log_images", lambda run, images: logged.append(("images", sorted(images))))
    monkeypatch.setattr(wandb_run, "finish", lambda run: logged.append(("finish",)))
    monkeypatch.setattr(wandb_run, "describe", lambda run, **kw: logged.append(("describe", kw)))
    return started, logged

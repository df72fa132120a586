"""The issue's case as typed: ``train.py`` killed -9 once ``checkpoints/last.ckpt`` exists, then rerun into
the same folder with another ``lr`` and ``max_steps``. It must not resume the stale checkpoint: one line
names the changed keys, the old checkpoints are kept aside, and the results equal those of a clean run of
the new config (before: it logged ``resuming from .../last.ckpt``, exited 0 and labelled the old run's
continuation with the new lr)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
COMMON = ("logger=none", "bias_tests=[demo_voice]", "++trainer.enable_progress_bar=false")


def _command(run: Path, cache: Path, *overrides: str) -> list[str]:
    return [
        sys.executable,
        str(REPO / "train.py"),
        *COMMON,
        *overrides,
        f"hydra.run.dir={run}",
        f"paths.cache_dir={cache}",
    ]


@pytest.mark.slow
def test_a_changed_config_into_a_killed_train_folder_starts_fresh(tmp_path):
    run, cache = tmp_path / "run", tmp_path / "cache"
    env = {**os.environ, **ENV}
    old = ("lr=1e-4", "max_steps=8000", "checkpoint_every_n_epochs=2", "ser_data.val_every_n_epochs=20")
    proc = subprocess.Popen(_command(run, cache, *old), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    last = run / "checkpoints" / "last.ckpt"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not last.is_file():
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert last.is_file() and not (run / "results.json").exists()
    new = ("lr=1e-3", "max_steps=100")
    rerun = subprocess.run(_command(run, cache, *new), env=env, capture_output=True, text=True, timeout=600)
    out = rerun.stdout + rerun.stderr
    assert rerun.returncode == 0, out[-3000:]
    lines = [ln for ln in out.splitlines() if "written by another config" in ln]
    assert len(lines) == 1 and "lr: 0.0001 -> 0.001" in lines[0] and "max_steps: 8000 -> 100" in lines[0], out
    assert "resuming from" not in out + (run / "train.log").read_text()
    assert (run / "checkpoints.stale-1" / "last.ckpt").is_file()  # kept aside, not deleted
    clean = tmp_path / "clean"
    done = subprocess.run(_command(clean, cache, *new), env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    for table in ("predictions.csv", "results.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(run / table), pd.read_csv(clean / table))

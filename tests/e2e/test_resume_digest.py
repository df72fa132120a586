"""A checkpoint is resumed only by the config that wrote it (issue: a train.py folder rerun with another lr
resumed the old run's last.ckpt, exited 0 and labelled the old run's continuation with the new lr).

As typed: train.py into a folder, then train.py into the same folder with another lr. Its heads must be
those of a clean run of the new lr in a fresh folder (predictions equal), the old checkpoints kept aside,
and one line naming the changed key. A rerun with the same config still resumes (nothing moved)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]


def _train(run_dir: Path, cache: Path, *overrides: str) -> str:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    command = [sys.executable, str(REPO / "train.py"), "logger=none", "max_steps=30", "bias_tests=[demo_voice]"]
    command += [f"hydra.run.dir={run_dir}", f"paths.cache_dir={cache}", *overrides]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


@pytest.mark.slow
def test_another_config_never_resumes_a_folders_checkpoint(tmp_path):
    folder, cache = tmp_path / "run", tmp_path / "cache"
    _train(folder, cache, "lr=1e-4")
    assert (folder / "checkpoints" / "last.ckpt").is_file()
    out = _train(folder, cache, "lr=1e-3")
    lines = [ln for ln in out.splitlines() if "were written by another config" in ln]
    assert len(lines) == 1 and "lr: 0.0001 -> 0.001" in lines[0], out[-3000:]
    assert (folder / "checkpoints.stale-1" / "last.ckpt").is_file()  # kept, not deleted
    clean = tmp_path / "clean"
    _train(clean, cache, "lr=1e-3")
    ours, theirs = pd.read_csv(folder / "predictions.csv"), pd.read_csv(clean / "predictions.csv")
    pd.testing.assert_frame_equal(ours, theirs)
    # the same config again (a rerun after a kill): its own checkpoints, resumed, nothing moved
    out = _train(folder, cache, "lr=1e-3", "force=true")
    assert "were written by another config" not in out and not (folder / "checkpoints.stale-2").exists()

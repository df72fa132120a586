"""kill -9 of evaluate.py and train.py in each phase (extraction, statistics or training, writing), then the
same command again: it exits 0 and its results equal those of a run never interrupted (a killed run leaves
no run digest, so its partial files are never taken for finished)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from faults.stop_signals import ENV, REPO, TRAIN_TO_INTERRUPT

EVALUATE = ("logger=none", "speat.n_permutations=200000", "speat.se_curve=true", "speat.n_resamples=2000")
TRAIN = TRAIN_TO_INTERRUPT  # upstream=fbank, as train.py's default
# what differs between a run that extracted and one that read the cache: not a result
NOT_RESULTS = ["n_upstream_forwards"]


def _command(script: str, args: tuple[str, ...], run: Path, cache: Path) -> list[str]:
    return [sys.executable, str(REPO / f"{script}.py"), *args, f"hydra.run.dir={run}", f"paths.cache_dir={cache}"]


def _kill_when(command: list[str], ready: Callable[[], bool], timeout: float = 300) -> bool:
    """Start ``command``, kill -9 it as soon as ``ready()``; True when it was killed (not already finished)."""
    proc = subprocess.Popen(command, env={**os.environ, **ENV}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None and not ready():
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    return proc.returncode == -signal.SIGKILL


def _finish(command: list[str]) -> None:
    proc = subprocess.run(command, env={**os.environ, **ENV}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _table(path: Path) -> pd.DataFrame:
    return pd.read_csv(path).drop(columns=NOT_RESULTS, errors="ignore")


def _entries(cache: Path) -> bool:
    return any((cache / "stats").rglob("*.safetensors")) if (cache / "stats").is_dir() else False


def _logged(run: Path, log: str, text: str) -> Callable[[], bool]:
    return lambda: (run / log).is_file() and text in (run / log).read_text(errors="replace")


@pytest.mark.slow
def test_evaluate_killed_in_each_phase_reruns_to_the_same_results(tmp_path):
    cache = tmp_path / "cache"
    reference = tmp_path / "reference"
    phases = {
        "extraction": lambda run: lambda: _entries(cache),
        "statistics": lambda run: _logged(run, "evaluate.log", "needed an upstream forward"),
        "writing": lambda run: lambda: (run / "results.csv").is_file(),
    }
    killed = []
    for phase, ready in phases.items():
        run = tmp_path / phase
        command = _command("evaluate", EVALUATE, run, cache)
        if _kill_when(command, ready(run)):
            killed.append(phase)
        _finish(command)
        assert json.loads((run / "run_digest.json").read_text())["files"], phase
    assert "extraction" in killed and "statistics" in killed, killed
    _finish(_command("evaluate", EVALUATE, reference, tmp_path / "cold_cache"))
    for phase in phases:
        for table in ("results.csv", "layers.csv", "se_curve.csv"):
            if (reference / table).is_file():
                pd.testing.assert_frame_equal(_table(tmp_path / phase / table), _table(reference / table))


@pytest.mark.slow
def test_train_killed_in_each_phase_reruns_to_the_same_results(tmp_path):
    cache = tmp_path / "cache"
    reference = tmp_path / "reference"
    phases = {
        "extraction": lambda run: lambda: _entries(cache),
        "training": lambda run: lambda: (run / "checkpoints" / "last.ckpt").is_file(),
        "writing": lambda run: lambda: (run / "results.json").is_file() or (run / "predictions.csv").is_file(),
    }
    killed = []
    for phase, ready in phases.items():
        run = tmp_path / phase
        command = _command("train", TRAIN, run, cache)
        if _kill_when(command, ready(run)):
            killed.append(phase)
        _finish(command)
    assert "extraction" in killed and "training" in killed, killed
    _finish(_command("train", TRAIN, reference, tmp_path / "cold_cache"))
    for phase in phases:
        for table in ("predictions.csv", "results.csv"):
            pd.testing.assert_frame_equal(_table(tmp_path / phase / table), _table(reference / table))

"""What `python evaluate.py` and `python train.py` print: results and progress, no third-party noise.

Subprocesses from a fresh working directory, as a user runs them (W&B offline, without
WANDB_SILENT). Noise: Lightning's tips, Python warnings of any category, and Lightning's warning
format (``<file>.py:<line>: <message>``). A warm rerun (every clip cached) shows no progress bar.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parents[2]

NOISE = [
    re.compile(p)
    for p in (
        r"Tip:",
        r"litlogger",
        r"DeprecationWarning",
        r"FutureWarning",
        r"UserWarning",
        r"is deprecated",
        r"TPU available",
        r"\.py:\d+: \S",
    )
]
PROGRESS_BAR = re.compile(r"Predicting|Epoch \d+|━")


def _run(tmp_path: Path, script: str, *overrides: str) -> str:
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("WANDB_SILENT", "PYTHONWARNINGS")}
    env.update(HF_HUB_OFFLINE="1", WANDB_MODE="offline")
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / script),
            f"paths.cache_dir={tmp_path / 'cache'}",
            f"paths.output_root={tmp_path / 'outputs'}",
            *overrides,
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    return out


def _noise(out: str) -> list[str]:
    return [line for line in out.splitlines() if any(p.search(line) for p in NOISE)]


@pytest.mark.slow
def test_evaluate_cold_then_warm_prints_no_noise_and_no_bar_for_zero_work(tmp_path):
    cold = _run(tmp_path, "evaluate.py", f"hydra.run.dir={tmp_path / 'cold'}", "speat.n_permutations=20000")
    assert _noise(cold) == []
    assert "Predicting" in cold and "40 of 40 clips needed an upstream forward" in cold
    assert "results in" in cold
    warm = _run(
        tmp_path, "evaluate.py", f"hydra.run.dir={tmp_path / 'warm'}", "speat.n_permutations=20000", "logger=none"
    )
    assert _noise(warm) == []
    assert "0 of 40 clips needed an upstream forward" in warm
    assert not PROGRESS_BAR.search(warm), warm
    assert pd.read_csv(tmp_path / "warm" / "results.csv")["d"].iloc[0] == pytest.approx(
        pd.read_csv(tmp_path / "cold" / "results.csv")["d"].iloc[0], abs=1e-12
    )


@pytest.mark.slow
def test_evaluate_tiny_model_prints_no_noise(tmp_path):
    out = _run(
        tmp_path,
        "evaluate.py",
        f"hydra.run.dir={tmp_path / 'run'}",
        "upstream=tiny_whisper",
        "bias_test=demo_accent",
        "speat.n_permutations=2000",
        "logger=none",
    )
    assert _noise(out) == []


@pytest.mark.slow
def test_train_shows_the_real_last_epoch(tmp_path):
    max_steps = 30
    out = _run(
        tmp_path,
        "train.py",
        f"hydra.run.dir={tmp_path / 'run'}",
        f"max_steps={max_steps}",
        "logger=none",
        "ser_data.val_every_n_epochs=5",
    )
    assert _noise(out) == []
    epochs = [(int(a), int(b)) for a, b in re.findall(r"Epoch (\d+)/(-?\d+)", out)]
    assert epochs, out[-2000:]
    n_train = int(pd.read_csv(tmp_path / "run" / "results.csv")["n_train"].iloc[0])
    batch = int(OmegaConf.load(tmp_path / "run" / "config.yaml").ser_data.batch_size)
    last = math.ceil(max_steps / math.ceil(n_train / batch)) - 1  # 0-based, as Lightning counts
    assert epochs[-1] == (last, last)
    assert all(total == last for _, total in epochs)


@pytest.mark.slow
def test_train_of_too_few_steps_to_validate_says_why_its_dev_metrics_are_nan_and_no_lightning_warning(tmp_path):
    """``python train.py max_steps=10`` with the default logger (W&B offline): the demo validates every 10
    epochs, so 10 steps never validate; one line says so (dev metrics NaN), and Lightning's
    ``log_every_n_steps`` warning (an epoch of fewer batches than 50) is not printed."""
    out = _run(tmp_path, "train.py", f"hydra.run.dir={tmp_path / 'run'}", "max_steps=10")
    assert _noise(out) == [] and "log_every_n_steps" not in out
    assert re.search(r"ser/val/r2 = nan", out), out[-2000:]
    n_train = int(pd.read_csv(tmp_path / "run" / "results.csv")["n_train"].iloc[0])
    cfg = OmegaConf.load(tmp_path / "run" / "config.yaml")
    every = cfg.ser_data.val_every_n_epochs * math.ceil(n_train / cfg.ser_data.batch_size)
    assert every > 10  # the premise: no validation within the run's steps
    why = [line for line in out.splitlines() if "are NaN" in line]
    assert len(why) == 1, out[-3000:]
    assert (
        f"ser/val/r2 and ser/val/mse are NaN: no validation ran in its 10 training steps (validation every "
        f"{cfg.ser_data.val_every_n_epochs} epoch(s) = every {every} steps)"
    ) in why[0]
    assert why[0].endswith("raise max_steps or lower ser_data.val_every_n_epochs")

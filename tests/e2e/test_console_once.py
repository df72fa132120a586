"""The demo commands' console: the DEMO caveat once per run, no transformers bars, rounded metric values.

Subprocesses from a fresh folder, as a user types the README's offline demos.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from speechbias.report.caveat import DEMO_CAVEAT

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, script: str, *overrides: str) -> str:
    env = dict(os.environ, HF_HUB_OFFLINE="1", SPEECHBIAS_CACHE=str(tmp_path / "cache"))
    proc = subprocess.run(
        [sys.executable, str(REPO / script), f"paths.output_root={tmp_path / 'out'}", "logger=none", *overrides],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


@pytest.mark.slow
def test_wer_disparity_demo_prints_no_transformers_bars_and_the_caveat_once(tmp_path):
    out = _run(tmp_path, "evaluate.py", "task=wer_disparity")
    assert "Writing model shards" not in out and "Loading weights" not in out
    assert out.count(DEMO_CAVEAT) == 1


@pytest.mark.slow
def test_speat_demo_prints_the_caveat_once(tmp_path):
    out = _run(tmp_path, "evaluate.py", "speat.n_permutations=1000", "speat.per_layer=false")
    assert out.count(DEMO_CAVEAT) == 1


@pytest.mark.slow
def test_spoken_stereoset_demo_prints_the_caveat_once(tmp_path):
    out = _run(tmp_path, "evaluate.py", "task=spoken_stereoset")
    assert out.count("DEMO:") == 1


@pytest.mark.slow
def test_train_demo_rounds_its_metric_values_and_says_the_caveat_once(tmp_path):
    out = _run(tmp_path, "train.py", "max_steps=200")
    r2 = re.search(r"ser/val/r2 = (\S+)", out)
    assert r2, out[-2000:]
    digits = r2.group(1).lstrip("-").replace(".", "").lstrip("0")
    assert len(digits) <= 4, r2.group(0)  # 4 significant digits, not the float's 17
    assert out.count(DEMO_CAVEAT) == 1

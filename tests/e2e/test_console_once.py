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
def test_spoken_stereoset_demo_prints_the_caveat_once_and_no_absl_line_or_blank_line(tmp_path):
    out = _run(tmp_path, "evaluate.py", "task=spoken_stereoset")
    assert out.count("DEMO:") == 1
    assert "[absl]" not in out and "Using default tokenizer" not in out  # rouge_score's INFO line
    assert "" not in out.splitlines(), out  # rich's stopped progress bar left one into a log


@pytest.mark.slow
def test_train_demo_rounds_its_metric_values_and_says_the_caveat_once(tmp_path):
    out = _run(tmp_path, "train.py", "max_steps=200")
    r2 = re.search(r"ser/val/r2 = (\S+)", out)
    assert r2, out[-2000:]
    digits = r2.group(1).lstrip("-").replace(".", "").lstrip("0")
    assert len(digits) <= 4, r2.group(0)  # 4 significant digits, not the float's 17
    assert out.count(DEMO_CAVEAT) == 1


@pytest.mark.parametrize("launcher", ["basic", pytest.param("parallel", marks=pytest.mark.slow)])
def test_a_demo_sweep_prints_the_caveat_once_for_all_its_jobs(tmp_path, launcher):
    """A 4-job sweep on the demo test printed the caveat 4 times (the issue saw 12); now once per sweep,
    whichever process runs which job (parallel: two loky workers), and every job's report.md keeps it."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", SPEECHBIAS_CACHE=str(tmp_path / "cache"))
    command = [
        sys.executable,
        str(REPO / "evaluate.py"),
        "-m",
        "logger=none",
        "upstream=fbank,mfcc",
        "aggregation=mean_sum,max_sum",
        "bias_test=demo_voice",
        "speat.n_permutations=500",
        "speat.per_layer=false",
        f"hydra/launcher={launcher}",
        *(["hydra.launcher.n_jobs=2"] if launcher == "parallel" else []),
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
    ]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert out.count(DEMO_CAVEAT) == 1
    reports = list((tmp_path / "sweep").glob("*/report.md"))
    assert len(reports) == 4 and all(DEMO_CAVEAT in r.read_text() for r in reports)

"""A mistyped sweep folder for task=report: one line that names the close folders (did you mean ...?)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from speechbias.results.sweep_results import collect

REPO = Path(__file__).resolve().parents[2]


def test_a_missing_sweep_folder_names_its_close_siblings(tmp_path):
    for name in ("paper_speat", "paper_propagation", "2026-12-03"):
        (tmp_path / "multirun" / name).mkdir(parents=True)
    with pytest.raises(ValueError, match=r"paper_speet: no such folder \(did you mean .*multirun/paper_speat\?\)"):
        collect(tmp_path / "multirun" / "paper_speet")
    with pytest.raises(ValueError, match=r"no such folder \(give the multirun folder of a sweep"):
        collect(tmp_path / "multirun" / "zzz")  # nothing close: what a sweep folder looks like
    with pytest.raises(ValueError, match=r"no such folder \(give the multirun folder"):
        collect(tmp_path / "nowhere" / "paper_speat")  # no parent folder either


def test_report_of_a_mistyped_sweep_dir_is_one_line_with_the_suggestion(tmp_path):
    """What the user types, from a folder holding multirun/paper_speat."""
    cwd = tmp_path / "cwd"
    (cwd / "multirun" / "paper_speat").mkdir(parents=True)
    env = dict(os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="offline")
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.run(
        [sys.executable, str(REPO / "evaluate.py"), "task=report", "sweep_dir=multirun/paper_speet", "logger=none",
         f"paths.output_root={tmp_path / 'outputs'}"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert proc.returncode == 1 and len(lines) == 1, lines
    assert lines[0].startswith("error: ") and "did you mean" in lines[0] and "multirun/paper_speat?" in lines[0]

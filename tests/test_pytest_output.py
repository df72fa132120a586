"""``python -m pytest -q`` as typed prints its dots and its summary, no third-party warnings: a test that
imports wandb-workspaces (whose pydantic V1 validators warn on import) run in a pytest of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_pytest_q_prints_no_third_party_warning():
    env = dict(os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="offline")
    env.pop("PYTHONWARNINGS", None)
    test = "tests/sweep/test_sweep_report.py::test_wandb_report_is_built_from_the_summary_run_and_skipped_offline"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert "warning" not in proc.stdout.lower(), proc.stdout[-3000:]
    assert len(lines) == 2 and lines[-1].startswith("1 passed"), proc.stdout  # the dots, the summary

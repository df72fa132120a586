"""The statistics of a SpEAT run show their progress on a terminal (the permutation test, d at every layer,
the bootstrap SE curve) and nothing when the output goes to a file or a pipe. The terminal is a real
pseudo-terminal (util-linux `script`), the command as a user types it."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STEPS = ("SpEAT permutation test (1,000,000 permutations)", "SpEAT d at every layer", "bootstrap SE of d (200")


def _command(tmp_path: Path) -> list[str]:
    return [sys.executable, str(REPO / "evaluate.py"), "logger=none", f"paths.output_root={tmp_path / 'out'}"] + [
        f"paths.cache_dir={tmp_path / 'cache'}",
        "speat.se_curve=true",
        "speat.n_resamples=200",
    ]


@pytest.mark.skipif(shutil.which("script") is None, reason="util-linux script (a pseudo-terminal) not installed")
def test_statistics_show_progress_on_a_terminal_and_nothing_in_a_pipe(tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1", TERM="xterm")
    on_terminal = subprocess.run(
        ["script", "-qec", shlex.join(_command(tmp_path)), "/dev/null"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        timeout=600,
    )
    assert on_terminal.returncode == 0, on_terminal.stdout[-2000:]
    shown = on_terminal.stdout.decode("utf-8", "replace")
    assert all(step in shown for step in STEPS), shown[-2000:]
    piped = subprocess.run(_command(tmp_path), env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert piped.returncode == 0 and not any(step in piped.stdout + piped.stderr for step in STEPS)

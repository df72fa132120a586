"""The SpEAT steps' progress line: drawn on a terminal, nothing (and rich not imported) elsewhere."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

STEP = r"""
import sys, time
from speechbias.speat import progress
with progress.step("counting sheep", 3) as done:
    for _ in range(3):
        time.sleep(0.2)
        done()
print("rich imported" if "rich" in sys.modules else "rich not imported", flush=True)
"""


def run_step(stderr_terminal: bool, **env: str) -> tuple[str, str]:
    """(stdout, what reached stderr) of a process running one step, stderr a pipe or a terminal (a pty)."""
    environ = {k: v for k, v in os.environ.items() if k not in ("TTY_COMPATIBLE", "FORCE_COLOR")}
    environ.update(PYTHONPATH=str(SRC), TERM="xterm", **env)
    if not stderr_terminal:
        proc = subprocess.run([sys.executable, "-c", STEP], capture_output=True, text=True, env=environ, timeout=60)
        return proc.stdout, proc.stderr
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", STEP], stdout=subprocess.PIPE, stderr=follower, env=environ)
    os.close(follower)
    shown = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the process closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    out = proc.communicate(timeout=60)[0].decode()
    os.close(leader)
    return out, shown.decode(errors="replace")


def test_no_terminal_no_line_and_no_rich():
    out, err = run_step(False)
    assert out.strip() == "rich not imported"
    assert "counting sheep" not in err


def test_a_terminal_shows_the_line():
    out, shown = run_step(True)
    assert out.strip() == "rich imported"
    assert "counting sheep" in shown


def test_rich_decides_where_the_environment_forces_a_terminal():
    """FORCE_COLOR makes rich draw on a pipe too: the step leaves that to rich."""
    out, err = run_step(False, FORCE_COLOR="1")
    assert out.strip() == "rich imported"
    assert "counting sheep" in err

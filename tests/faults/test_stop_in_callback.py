"""A stop signal whose handler runs inside a callback that cannot raise (a weakref callback, ``__del__``, a gc
callback) still ends the command at once: one line, exit 128 + the signal, the job recorded as any stop.

Before: the handler's ``RunStopped`` was an "unraisable" exception there; Python printed ``Exception ignored
in: <function _get_module_lock.<locals>.cb ...>`` and a 5-line traceback, the run went on, and only the
watchdog ended it 4 s later (a rare flake of test_signals_runs.py's start-up test). The script
(``unraisable_stop.py``) sends the signal to itself from inside the callback, so the handler runs there every
time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from faults.stop_signals import ENV, expected_line
from speechbias.launch.signals import FORCE_EXIT_S

SCRIPT = Path(__file__).with_name("unraisable_stop.py")
SIGNALS = [signal.SIGTERM, signal.SIGINT]


def _run(tmp_path: Path, context: str, signum: int = signal.SIGINT) -> tuple[subprocess.CompletedProcess, float]:
    """Run the script; returns what it left and the seconds from its signal to its exit (0 when it sent none)."""
    job_dir, sent = tmp_path / "job", tmp_path / "sent"
    job_dir.mkdir()
    cmd = [sys.executable, str(SCRIPT), context, signal.Signals(signum).name, str(job_dir), str(sent)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, **ENV})
    ended = time.monotonic()  # CLOCK_MONOTONIC: the same clock as the script's
    return done, (ended - float(sent.read_text())) if sent.is_file() else 0.0


@pytest.mark.parametrize("context", ["weakref", "weakrefs", "del", "gc"])
@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_a_stop_inside_a_callback_ends_the_command_with_one_line(tmp_path, context, signum):
    done, seconds = _run(tmp_path, context, signum)
    assert done.returncode == 128 + signum, done.stderr[-3000:]
    assert done.stderr.splitlines() == [expected_line(signum, "start-up")]  # no "Exception ignored in"
    assert done.stdout == ""  # the stop ended the body where the callback returned (and a next callback)
    # the watchdog would end it FORCE_EXIT_S after the signal; the stop itself takes milliseconds
    assert 0 < seconds < FORCE_EXIT_S / 2, seconds
    status = json.loads((tmp_path / "job" / "job_status.json").read_text())
    name = signal.Signals(signum).name
    recorded = (status["status"], status["signal"], status["error"])
    assert recorded == ("failed", name, f"stopped by {name} during start-up")


def test_another_exception_in_a_callback_is_reported_as_python_does_and_the_run_goes_on(tmp_path):
    done, _ = _run(tmp_path, "error")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["ran on past the callback", "finished"]
    lines = done.stderr.splitlines()
    assert lines[0].startswith("Exception ignored in: <function FailsWhenDeleted.__del__")
    assert lines[-1] == "ValueError: not a stop"


def test_another_exception_in_a_callback_goes_to_the_hook_set_before_the_handlers(tmp_path):
    done, _ = _run(tmp_path, "error-own-hook")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == ""
    assert done.stdout.splitlines() == [
        "own hook: ValueError: not a stop; in FailsWhenDeleted.__del__",
        "ran on past the callback",
        "finished",
    ]

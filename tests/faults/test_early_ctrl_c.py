"""Ctrl-C in the first moments of a command: one line and exit 130, never a ``KeyboardInterrupt`` traceback.

Before (issue 40): until ``launch/signals`` had installed its handlers (the entry script's first import, ~0.1 s;
~0.4 s on a loaded machine) Python's own SIGINT handler raised ``KeyboardInterrupt`` and a Ctrl-C printed a
4- to 30-line traceback (rc -2). The clock starts when the entry script's own code runs: the command is started
with ``python -X importtime`` and the first import after the ``site`` module's says the script has begun. What
precedes it is the interpreter's own start (site, its .pth files: ~10-20 ms), where CPython reports a Ctrl-C
itself ("Fatal Python error: init_import_site ..."), out of the project's reach.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time

import pytest

from faults.stop_signals import ENV, command

# seconds after the script's first import; the handlers used to come ~0.1 s after it (quiet machine)
DELAYS = (0.0, 0.005, 0.01, 0.02, 0.04, 0.08, 0.15, 0.25, 0.4)
STOP_LINE = re.compile(r"speechbias: stopped by SIGINT during [a-z-]+; rerun the same command to resume")


def _interrupt_early(cmd: list[str], delay: float) -> tuple[int, list[str]]:
    """Run ``cmd`` under ``-X importtime``; SIGINT ``delay`` s after the script's first import. Returns the exit
    code and stderr's lines other than importtime's."""
    proc = subprocess.Popen(
        [cmd[0], "-X", "importtime", *cmd[1:]],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **ENV},
        # Ctrl-C's default, as at a terminal: a background job of a non-interactive shell (CI) inherits it ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines: list[str] = []
    script_began = threading.Event()

    def read() -> None:  # drains stderr (importtime writes ~1,000 lines) and spots the script's first import
        site_done = False
        for line in proc.stderr:
            if line.startswith("import time:"):
                name = line.rsplit("|", 1)[-1].strip()
                if site_done and name != "__future__":
                    script_began.set()
                site_done = site_done or name == "site"
            elif line.strip():
                lines.append(line.rstrip("\n"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert script_began.wait(60), "the script never began"
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        returncode = proc.wait(timeout=60)
    finally:
        proc.kill()
    reader.join(10)
    return returncode, lines


@pytest.mark.parametrize("script", ["evaluate", "train"])
def test_ctrl_c_right_after_start_prints_one_line(tmp_path, script):
    outcomes = {}
    for delay in DELAYS:
        run = tmp_path / f"{delay}"
        cmd = command(script, "upstream=fbank", "logger=none", f"hydra.run.dir={run}", f"paths.cache_dir={run}_cache")
        outcomes[delay] = _interrupt_early(cmd, delay)
    wrong = {
        delay: (rc, lines[-30:])
        for delay, (rc, lines) in outcomes.items()
        if rc != 130 or len(lines) != 1 or not STOP_LINE.fullmatch(lines[0])
    }
    assert not wrong, wrong

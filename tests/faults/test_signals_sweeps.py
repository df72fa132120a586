"""SIGTERM to a sweep (``-m``) while its first job extracts: the running jobs end the way a single run does
(recorded failed with the signal), the sweep prints its status table and one line and exits 143; the same
command again finishes every job. Basic launcher (jobs in the sweep's process) and ``hydra/launcher=parallel``
(loky workers, which get the signal from the sweep's process and record their stop before it exits).

Before (issue 31): the job logged ``Received SIGTERM`` and the sweep went on."""

from __future__ import annotations

import csv
import json
import os
import signal
import time

import pytest

from faults.stop_signals import STOP_BOUND_S, cache_entries, command, expected_line, noise_manifest, run, stop_when

LAUNCHERS = {"basic": (), "parallel": ("hydra/launcher=parallel", "hydra.launcher.n_jobs=2")}


@pytest.mark.slow
@pytest.mark.parametrize("launcher", list(LAUNCHERS))
def test_a_sweep_given_sigterm_ends_its_jobs_and_prints_its_table(tmp_path, launcher):
    manifest = noise_manifest(tmp_path, {"X": 10, "Y": 10, "A": 10, "B": 10}, seconds=5.0)
    sweep, cache = tmp_path / "sweep", tmp_path / "cache"
    cmd = command(
        "evaluate",
        "-m",
        "upstream=tiny_wav2vec2",
        f"bias_test.manifest={manifest}",
        "logger=none",
        "speat.n_permutations=20000",
        "seed=0,1",
        *LAUNCHERS[launcher],
        f"hydra.sweep.dir={sweep}",
        "hydra.sweep.subdir=${hydra.job.num}",
        f"paths.cache_dir={cache}",
    )
    stopped = stop_when(cmd, lambda: bool(cache_entries(cache)), signal.SIGTERM, tmp_path / "logs")
    assert stopped.returncode == 143, stopped.stderr[-20:]
    assert stopped.seconds < STOP_BOUND_S
    # basic: the job ran in the sweep's process, whose line names its phase; parallel: the sweep's process waited
    assert stopped.stderr == [expected_line(signal.SIGTERM, "extraction" if launcher == "basic" else "", sweep=True)]
    assert "sweep jobs" in stopped.stdout and "stopped by SIGTERM during" in stopped.stdout
    with open(sweep / "sweep_status.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    started = 1 if launcher == "basic" else 2  # the basic launcher runs one job at a time
    assert len(rows) == started
    assert all(r["status"] == "failed" and r["error"].startswith("stopped by SIGTERM during ") for r in rows), rows
    for job in sweep.glob("*/job_status.json"):
        status = json.loads(job.read_text())
        assert status["signal"] == "SIGTERM"
        assert _ended(status["pid"]) or status["pid"] == 0  # no worker left running
    again = run(cmd)
    assert again.returncode == 0, again.stderr[-3000:]
    with open(sweep / "sweep_status.csv", newline="") as f:
        assert [r["status"] for r in csv.DictReader(f)] == ["ok", "ok"]


def _ended(pid: int, wait_s: float = 3.0) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False

"""Two sweeps given one sweep folder: the second stops in one line naming the folder and the first sweep's
process, and the first ends with a table of its own jobs only; a sweep killed with ``kill -9`` leaves no lock
that blocks the next one.

Before (issue 40): both ran, their jobs wrote into the same job folders and one printed the other's table."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import time

import pytest

from faults.stop_signals import ENV, command, noise_manifest, run


def _sweep(manifest, sweep_dir, cache, seeds: str) -> list[str]:
    return command(
        "evaluate",
        "-m",
        "upstream=fbank",
        "logger=none",
        f"bias_test.manifest={manifest}",
        "speat.n_permutations=1000000",
        "speat.per_layer=false",
        f"seed={seeds}",
        f"hydra.sweep.dir={sweep_dir}",
        "hydra.sweep.subdir=${hydra.job.num}",
        f"paths.cache_dir={cache}",
    )


def _start(cmd: list[str], log) -> subprocess.Popen:
    return subprocess.Popen(cmd, env={**os.environ, **ENV}, stdout=log, stderr=subprocess.STDOUT, text=True)


def _wait_for(path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, "the first sweep ended before its first job started"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_second_sweep_into_a_busy_folder_stops_in_one_line(tmp_path):
    manifest = noise_manifest(tmp_path, {"X": 30, "Y": 30, "A": 30, "B": 30}, seconds=0.3)
    sweep, cache = tmp_path / "sweep", tmp_path / "cache"
    with open(tmp_path / "first.log", "w") as log:
        first = _start(_sweep(manifest, sweep, cache, "0,1,2"), log)
        try:
            _wait_for(sweep / "0" / "job_status.json", first)
            second = run(_sweep(manifest, sweep, cache, "7,8"))
            lines = [line for line in (second.stdout + second.stderr).splitlines() if line.strip()]
            assert second.returncode == 1 and len(lines) == 1, lines[-20:]
            assert lines[0].startswith(
                f"error: hydra.sweep.dir={sweep}: another sweep is writing into this folder (pid {first.pid} on "
            ), lines[0]
            assert first.wait(timeout=600) == 0, (tmp_path / "first.log").read_text()[-3000:]
        finally:
            first.kill()
    with open(sweep / "sweep_status.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    seeds = [[o for o in r["overrides"].split() if o.startswith("seed=")] for r in rows]
    assert [(r["job"], *seed, r["status"]) for r, seed in zip(rows, seeds)] == [
        ("0", "seed=0", "ok"),
        ("1", "seed=1", "ok"),
        ("2", "seed=2", "ok"),
    ]


@pytest.mark.slow
def test_a_sweep_killed_with_sigkill_does_not_block_the_next(tmp_path):
    manifest = noise_manifest(tmp_path, {"X": 30, "Y": 30, "A": 30, "B": 30}, seconds=0.3)
    sweep, cache = tmp_path / "sweep", tmp_path / "cache"
    with open(tmp_path / "killed.log", "w") as log:
        killed = _start(_sweep(manifest, sweep, cache, "0,1,2"), log)
        try:
            _wait_for(sweep / "0" / "job_status.json", killed)
            killed.send_signal(signal.SIGKILL)
            killed.wait(timeout=60)
        finally:
            killed.kill()
    assert (sweep / ".sweep.lock").exists()  # the file stays; its lock went with the process
    again = run(_sweep(manifest, sweep, cache, "0,1"))
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "2 ok" in again.stdout

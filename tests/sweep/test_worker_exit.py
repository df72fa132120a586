"""After ``kill -9`` of a parallel sweep's process its loky workers end within seconds (they finished their
job and stayed alive > 10 minutes), and their running jobs are recorded as failed with the reason."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from speechbias.launch.parent_watch import PARENT_DIED, SWEEP_PID_ENV, watch_sweep_parent


def _live_children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (zombies left out), from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_workers_end_when_the_sweeps_process_is_killed(repo_root, tmp_path):
    sweep = tmp_path / "sweep"
    env = dict(os.environ, HF_HUB_OFFLINE="1", SPEECHBIAS_CACHE=str(tmp_path / "cache"), PYTHONWARNINGS="ignore")
    proc = subprocess.Popen(
        [
            sys.executable,
            str(repo_root / "evaluate.py"),
            "-m",
            "hydra/launcher=parallel",
            "hydra.launcher.n_jobs=2",
            f"hydra.sweep.dir={sweep}",
            "logger=none",
            "upstream=fbank,mfcc",
            "speat.n_permutations=300",
        ],
        cwd=repo_root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    workers: list[int] = []
    try:
        deadline = time.time() + 120
        while len(list(sweep.glob("*/job_status.json"))) < 2 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.2)
        workers = _live_children(proc.pid)  # 2 loky workers + the resource trackers
        assert len(workers) >= 2, "the sweep did not start its two workers"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.time() + 10
        while any(map(_alive, workers)) and time.time() < deadline:
            time.sleep(0.2)
        assert not [w for w in workers if _alive(w)], "workers still alive 10 s after the sweep's process died"
    finally:
        for pid in [proc.pid, *workers]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    statuses = [json.loads(p.read_text()) for p in sweep.glob("*/job_status.json")]
    assert len(statuses) == 2
    assert all(s["status"] == "ok" or (s["status"], s["error"]) == ("failed", PARENT_DIED) for s in statuses)


def test_only_a_worker_of_the_sweeps_process_is_watched(monkeypatch):
    monkeypatch.delenv(SWEEP_PID_ENV, raising=False)
    assert not watch_sweep_parent()  # outside a multirun
    monkeypatch.setenv(SWEEP_PID_ENV, str(os.getpid()))
    assert not watch_sweep_parent()  # basic launcher: the job runs in the sweep's process
    monkeypatch.setenv(SWEEP_PID_ENV, str(os.getppid() + 1 if os.getppid() != 1 else 2))
    assert not watch_sweep_parent()  # a SLURM job: its parent is slurmstepd, not the sweep's process

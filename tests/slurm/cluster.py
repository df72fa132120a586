"""Running the entry points on the SLURM cluster of this machine (``.ci/slurm/start`` starts a one-node
one on localhost), as a user types them; tests using it skip where ``sbatch`` does not answer."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# a CPU job that fits the CI node (2 cores, 16 GB configured); squeue every second
CPU_JOB = [
    "hydra/launcher=slurm",
    "hydra.launcher.gpus_per_node=0",
    "hydra.launcher.cpus_per_task=1",
    "hydra.launcher.mem_gb=2",
    "hydra.launcher.poll_s=1",
]
# one job of two tasks, one DDP rank each, gloo on CPU
TWO_RANKS = ["hydra.launcher.tasks_per_node=2", "trainer=ddp", "trainer.accelerator=cpu"]


@lru_cache(maxsize=1)
def sbatch_answers() -> bool:
    """Whether ``sbatch`` accepts a job here (``--test-only``: nothing is submitted)."""
    if shutil.which("sbatch") is None:
        return False
    try:
        proc = subprocess.run(
            ["sbatch", "--test-only", "-n1", "--wrap", "true"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0


# tests marked so skip where no cluster answers (the fixture is in tests/slurm/conftest.py)
needs_cluster = pytest.mark.usefixtures("slurm_cluster")


def env(cache: Path) -> dict:
    return dict(
        os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="offline", SPEECHBIAS_CACHE=str(cache), PYTHONWARNINGS="ignore"
    )


def command(script: str, *overrides: str) -> list[str]:
    return [sys.executable, str(REPO / script), *overrides]


def run(script: str, *overrides: str, cache: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        command(script, *overrides), cwd=REPO, env=env(cache), capture_output=True, text=True, timeout=timeout
    )


def start(script: str, *overrides: str, cache: Path, log: Path) -> subprocess.Popen:
    """Start a command in the background, its stdout and stderr going to ``log``."""
    with open(log, "w") as out:
        return subprocess.Popen(
            command(script, *overrides), cwd=REPO, env=env(cache), stdout=out, stderr=subprocess.STDOUT, text=True
        )


def wait_for(predicate, timeout: float, what: str, every: float = 0.5):
    """Poll ``predicate`` until it returns something truthy (returned) or fail after ``timeout`` s."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def job_ids(sweep: Path) -> list[str]:
    """SLURM ids of a sweep's submitted jobs (``<array>_<index>``, or ``<id>`` for a one-job sweep):
    the names of the submitit folders holding a submitted job."""
    folder = sweep / ".submitit"
    return sorted(p.parent.name for p in folder.glob("*/*_submitted.pkl")) if folder.is_dir() else []


def queue_state(job_id: str) -> str:
    """The job's SLURM state (``PENDING``, ``RUNNING``, ``COMPLETED``...; "" when SLURM forgot it)."""
    out = subprocess.run(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else ""


def step_pids(job_id: str) -> dict[int, int]:
    """PID of each task (rank) of the job's first srun step, by task id (``scontrol listpids``)."""
    out = subprocess.run(["scontrol", "listpids", job_id], capture_output=True, text=True).stdout
    pids = {}
    for line in out.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 4 and fields[2] == "0" and fields[3].isdigit():
            pids[int(fields[3])] = int(fields[0])
    return pids

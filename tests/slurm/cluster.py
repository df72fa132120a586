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


@lru_cache(maxsize=4)
def nodes_answer(nodes: int) -> bool:
    """Whether ``sbatch`` accepts a job of ``nodes`` nodes here (``.ci/slurm/start --nodes N``, N >= nodes)."""
    if not sbatch_answers():
        return False
    proc = subprocess.run(
        ["sbatch", "--test-only", f"-N{nodes}", "--ntasks-per-node=1", "--wrap", "true"],
        capture_output=True,
        text=True,
        timeout=20,
    )
    return proc.returncode == 0


def two_nodes_answer() -> bool:
    """Whether ``sbatch`` accepts a job of two nodes here (``.ci/slurm/start --nodes 2``)."""
    return nodes_answer(2)


# tests marked so skip where no cluster answers (the fixture is in tests/slurm/conftest.py)
needs_cluster = pytest.mark.usefixtures("slurm_cluster")


def env(cache: Path, extra: dict | None = None) -> dict:
    """The environment of a command (``extra``: more variables; sbatch passes them on to the jobs)."""
    return dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        WANDB_MODE="offline",
        SPEECHBIAS_CACHE=str(cache),
        PYTHONWARNINGS="ignore",
        **(extra or {}),
    )


def command(script: str, *overrides: str) -> list[str]:
    return [sys.executable, str(REPO / script), *overrides]


def run(
    script: str, *overrides: str, cache: Path, timeout: float = 600, extra_env: dict | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        command(script, *overrides),
        cwd=REPO,
        env=env(cache, extra_env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start(script: str, *overrides: str, cache: Path, log: Path, extra_env: dict | None = None) -> subprocess.Popen:
    """Start a command in the background, its stdout and stderr going to ``log``."""
    with open(log, "w") as out:
        return subprocess.Popen(
            command(script, *overrides),
            cwd=REPO,
            env=env(cache, extra_env),
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
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


def ddp_started(sweep: Path) -> bool:
    """Whether rank 1 of a sweep's job joined its process group of 2 (Lightning's line, in the rank's
    own submitit log: the job's train.log is written by both ranks, one line may overwrite another)."""
    return any("MEMBER: 2/2" in p.read_text(errors="replace") for p in sweep.glob(".submitit/*/*_1_log.err"))


def ran_two_ranks(sweep: Path) -> bool:
    """Whether the sweep's job ran as one process group of 2: each rank's line in its own task log."""
    lines = {0: "GLOBAL_RANK: 0, MEMBER: 1/2", 1: "GLOBAL_RANK: 1, MEMBER: 2/2"}
    logs = {t: list(sweep.glob(f".submitit/*/*_{t}_log.err")) for t in lines}
    return all(len(logs[t]) == 1 and lines[t] in logs[t][0].read_text(errors="replace") for t in lines)


def cancel_jobs(sweep: Path) -> None:
    """``scancel`` every job the sweep submitted (a failed test leaves no job holding the nodes)."""
    for job_id in job_ids(sweep):
        subprocess.run(["scancel", job_id], capture_output=True)


def queue_state(job_id: str) -> str:
    """The job's SLURM state (``PENDING``, ``RUNNING``, ``COMPLETED``...; "" when SLURM forgot it)."""
    out = subprocess.run(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else ""


def step_pids(job_id: str) -> dict[int, int]:
    """PID of each task (rank) of the job's first srun step, by task id: the processes of this machine
    (every node of the test clusters shares its process table) whose SLURM variables name the job,
    step 0 and a task, running submitit's job runner (not its forked children). ``scontrol listpids``
    would ask only the slurmd of the node it runs on."""
    found = {}  # pid -> (task id, parent pid)
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            environ = dict(
                item.split("=", 1) for item in (proc / "environ").read_text(errors="replace").split("\0") if "=" in item
            )
        except OSError:
            continue
        argv = cmdline.split(b"\0")
        python = Path(argv[0].decode(errors="replace")).name.startswith("python")  # not srun or the batch shell
        if not python or b"submitit.core._submit" not in argv or environ.get("SLURM_STEP_ID") != "0":
            continue
        array = f"{environ.get('SLURM_ARRAY_JOB_ID')}_{environ.get('SLURM_ARRAY_TASK_ID')}"
        if job_id in (environ.get("SLURM_JOB_ID"), array) and environ.get("SLURM_PROCID", "").isdigit():
            try:
                parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            found[int(proc.name)] = (int(environ["SLURM_PROCID"]), parent)
    return {task: pid for pid, (task, parent) in found.items() if parent not in found}

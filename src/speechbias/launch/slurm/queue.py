"""The state of a sweep's SLURM jobs, read with ``squeue`` (no accounting database needed).

:func:`queue_states` asks ``squeue`` for the jobs of some job arrays; :class:`PendingReporter` prints
one line for a job pending longer than a minute (its SLURM reason, again when it changes);
:func:`failure_reason` says in one line why a job ended without a result.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

# states after which a job will not run again (REQUEUED, REQUEUE_HOLD, PENDING... are not among them)
TERMINAL_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
)

# what a terminal state means, with the setting to change where there is one
STATE_MEANING = {
    "CANCELLED": "cancelled (scancel or an administrator)",
    "TIMEOUT": "reached its time limit (hydra.launcher.timeout_min) after its requeues (hydra.launcher.max_num_timeout)",
    "OUT_OF_MEMORY": "ran out of memory (raise hydra.launcher.mem_gb)",
    "NODE_FAIL": "its node failed",
    "PREEMPTED": "was pre-empted and not requeued",
    "FAILED": "exited with an error",
    "BOOT_FAIL": "its node did not boot",
    "DEADLINE": "missed its deadline",
    "COMPLETED": "ended without writing its result",
}

_STEPD_LINE = re.compile(r"\*\*\* (?:JOB|STEP) [\w.]+ ON \S+ (CANCELLED AT \S+(?: DUE TO [A-Z ]+| BY \S+)?)")
_SRUN_TASK_LINE = re.compile(r"srun: error: \S+: (tasks? [\d,\-]+: .+)")


@dataclass(frozen=True)
class QueueEntry:
    """One job as ``squeue`` shows it: ``state`` (``PENDING``, ``RUNNING``, ``COMPLETED``...) and
    ``reason`` (why it is pending, e.g. ``Resources``, ``PartitionConfig``)."""

    job_id: str
    state: str
    reason: str


def parse_squeue(text: str) -> dict[str, QueueEntry]:
    """Entries of ``squeue -h -r -t all -o '%i|%T|%r'`` by job id (``<array id>_<index>``)."""
    out = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3:
            out[parts[0]] = QueueEntry(parts[0], parts[1], parts[2])
    return out


def queue_states(array_ids: Iterable[str], run: Callable = subprocess.run) -> dict[str, QueueEntry] | None:
    """The jobs of these job arrays that SLURM still knows (finished jobs stay ``MinJobAge`` seconds),
    or None when ``squeue`` did not answer (then ask again later)."""
    ids = ",".join(sorted(set(array_ids)))
    try:
        out = run(
            ["squeue", "-h", "-r", "-t", "all", "-o", "%i|%T|%r", "-j", ids], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        # every id purged: squeue says "Invalid job id specified"; that is an answer (none known)
        return {} if "Invalid job id" in (out.stderr or "") else None
    return parse_squeue(out.stdout)


@dataclass
class PendingReporter:
    """Prints ``SLURM job <id> (<overrides>) pending for <n> s: <reason>`` once a job has been pending
    ``after_s`` seconds, and again whenever its reason changes."""

    after_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    file: object = None
    started: float = field(default=0.0)
    shown: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        self.started = self.started or self.clock()

    def update(self, entries: dict[str, QueueEntry], labels: dict[str, str]) -> None:
        waited = self.clock() - self.started
        for job_id, entry in entries.items():
            if entry.state != "PENDING" or waited < self.after_s or self.shown.get(job_id) == entry.reason:
                continue
            self.shown[job_id] = entry.reason
            hint = PENDING_HINTS.get(entry.reason, "")
            print(
                f"SLURM job {job_id} ({labels.get(job_id, '')}) pending for {waited:.0f} s: {entry.reason}{hint}",
                file=self.file or sys.stderr,
                flush=True,
            )


PENDING_HINTS = {
    "PartitionConfig": " (the request exceeds the partition's limits: lower hydra.launcher.cpus_per_task, "
    "mem_gb, nodes or timeout_min, or choose hydra.launcher.partition)",
    "ReqNodeNotAvail": " (the nodes it needs are down or reserved)",
    "QOSMaxJobsPerUserLimit": " (your QOS limits running jobs; they start as others end)",
    "AssocGrpGRES": " (your account's GPU limit is reached)",
}


def failure_reason(job_id: str, state: str | None, log_files: Iterable[Path] = ()) -> str:
    """One line for a job that ended without a result: its state's meaning, the first failed task
    (``srun: error: <node>: task 1: Killed``: the rank that brought the job down) and the
    ``slurmstepd`` line (``CANCELLED AT ... DUE TO TIME LIMIT``) of its log, and the log to read."""
    details, shown_log = [], None
    logs = [Path(p) for p in log_files if Path(p).is_file()]
    for path in logs:
        text = path.read_text(encoding="utf-8", errors="replace")
        tasks, stepd = _SRUN_TASK_LINE.findall(text), _STEPD_LINE.findall(text)
        if tasks:
            details.append(tasks[0].strip())
        if stepd:
            details.append(stepd[-1].strip())
        if (tasks or stepd) and shown_log is None:
            shown_log = path
    meaning = STATE_MEANING.get(state or "", "ended without a result (no longer in the queue)")
    line = f"SLURM job {job_id} {meaning}"
    if details:
        line += f" ({'; '.join(details)})"
    shown_log = shown_log or (logs[0] if logs else None)
    if shown_log is not None:
        line += f"; log: {shown_log}"
    return line

"""A job folder's own record of what happened to it (``job_status.json``), and why a folder has no results.

Every job of a sweep (and every single run) writes :class:`JobStatus` into its folder when it starts
(``running``) and when it ends (``ok``, ``skipped``, ``failed``); :mod:`speechbias.launch.sweep_status`
collects the records of a sweep, and :func:`incomplete_reason` tells a sweep report (``task=report``)
why a folder it reads holds no results. A SpEAT job of several pairs also lists its current pairs when it
starts (:data:`CURRENT_PAIRS_FILE`), named here so that the job writes it without importing the report's
readers (pandas).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from speechbias.fileio.atomic_file import atomic_write

# a job of several pairs: the pairs of its current lists, written when it starts ({"pairs": ["<test>/<agg>"]});
# results/sweep_results.py reads it
CURRENT_PAIRS_FILE = "pair_list.json"

STATUS_FILE = "job_status.json"
NO_END = "no end recorded (the job was killed, ran out of memory or time, or is still running)"


@dataclass
class JobStatus:
    """One job's record. ``status``: ok | skipped | failed | running; ``seconds``: wall time of the job;
    ``error``: the one-line reason of a failure; ``sweep_id``: the multirun that started the job;
    ``reused``: the job found the results of an earlier run (status and seconds are that run's);
    ``pid``: the process that ran it; ``signal``: the signal that stopped it (``SIGTERM``, ``SIGINT``)."""

    status: str
    overrides: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""
    traceback: str = ""
    sweep_id: str = ""
    started: float = 0.0
    reused: bool = False
    pid: int = 0
    signal: str = ""

    def write(self, job_dir: str | Path) -> Path:
        text = json.dumps(asdict(self), indent=1)
        return atomic_write(Path(job_dir) / STATUS_FILE, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def read_status(job_dir: str | Path) -> JobStatus | None:
    """The job's status record, or None when it has none (or an unreadable one)."""
    path = Path(job_dir) / STATUS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return JobStatus(**{k: v for k, v in data.items() if k in JobStatus.__dataclass_fields__})
    except (OSError, ValueError, TypeError, AttributeError):  # AttributeError: JSON that is not an object
        return None


def mark_stopped(job_dir: str | Path, error: str, signal_name: str) -> bool:
    """Record a running job as failed by a stop signal (``error``: ``stopped by SIGTERM during ...``);
    a job that recorded its end keeps it. Returns True when it wrote."""
    status = read_status(job_dir)
    if status is None or status.status != "running":
        return False
    status.status, status.error, status.signal = "failed", error, signal_name
    if status.started:
        status.seconds = time.time() - status.started
    status.write(job_dir)
    return True


def _last_error_in_logs(job_dir: Path) -> str:
    """The last line of the job's Hydra log(s) that names an error ("" when none does)."""
    for log_file in sorted(job_dir.glob("*.log")):
        try:
            lines = log_file.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        hits = [ln.strip() for ln in lines if "Error" in ln or "error:" in ln]
        if hits:
            return hits[-1]
    return ""


def incomplete_reason(job_dir: str | Path) -> str:
    """Why a job folder has no results: its recorded error, else the last error line of its log,
    else that nothing was recorded."""
    job_dir = Path(job_dir)
    status = read_status(job_dir)
    if status is not None:
        if status.status == "failed":
            return f"failed: {status.error}"
        if status.status == "running":
            return NO_END
        return f"{status.status}, but its results are missing (deleted?)"
    from_log = _last_error_in_logs(job_dir)
    if from_log:
        return f"failed (from its log): {from_log}"
    return "no status or error recorded (interrupted before it started, or run by an older version)"

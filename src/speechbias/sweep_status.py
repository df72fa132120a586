"""What happened to each job of a sweep: every job records it in its folder, the sweep collects it.

Each job (basic, joblib or submitit launcher alike) writes ``<job folder>/job_status.json`` when it
starts (``running``) and when it ends (``ok``, ``skipped``: it found its finished results, or
``failed``), with its overrides, seconds and the one-line error. Jobs of a multirun do not raise, so
every job runs and Hydra calls :class:`SweepStatusCallback` at the end, which reads the status files
of this sweep's jobs, prints a table, writes ``<sweep_dir>/sweep_status.csv`` and exits 1 when a job
failed. A job that never recorded its end (killed, out of memory, time limit) reads as ``failed``.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from speechbias.atomic_file import atomic_write

STATUS_FILE = "job_status.json"
STATUS_CSV = "sweep_status.csv"
SWEEP_ID_ENV = "SPEECHBIAS_SWEEP_ID"
STATUSES = ("ok", "skipped", "failed", "running")
CSV_COLUMNS = ("job", "overrides", "status", "seconds", "error")
NO_END = "no end recorded (the job was killed, ran out of memory or time, or is still running)"


@dataclass
class JobStatus:
    """One job's record. ``status``: ok | skipped | failed | running; ``seconds``: wall time of the job;
    ``error``: the one-line reason of a failure; ``sweep_id``: the multirun that started the job."""

    status: str
    overrides: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""
    traceback: str = ""
    sweep_id: str = ""
    started: float = 0.0

    def write(self, job_dir: str | Path) -> Path:
        text = json.dumps(asdict(self), indent=1)
        return atomic_write(Path(job_dir) / STATUS_FILE, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def read_status(job_dir: str | Path) -> JobStatus | None:
    """The job's status record, or None when it has none (or an unreadable one)."""
    path = Path(job_dir) / STATUS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return JobStatus(**{k: v for k, v in data.items() if k in JobStatus.__dataclass_fields__})
    except (OSError, ValueError, TypeError):
        return None


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


def current_sweep_id() -> str:
    """The id of the multirun this process belongs to ("" outside one)."""
    return os.environ.get(SWEEP_ID_ENV, "")


@dataclass(frozen=True)
class StatusRow:
    job: str
    overrides: str
    status: str
    seconds: float
    error: str


def _row(sweep_dir: Path, job_dir: Path, status: JobStatus) -> StatusRow:
    state, error = status.status, status.error
    if state == "running":
        state, error = "failed", NO_END
    return StatusRow(job=str(job_dir.relative_to(sweep_dir)), overrides=" ".join(status.overrides),
                     status=state, seconds=round(float(status.seconds), 1), error=error)


def collect_statuses(sweep_dir: str | Path, sweep_id: str | None = None) -> list[StatusRow]:
    """One row per job folder below ``sweep_dir`` with a status file (of multirun ``sweep_id`` only,
    when given), sorted by folder. Jobs still marked ``running`` read as failed (:data:`NO_END`)."""
    sweep_dir = Path(sweep_dir)
    rows = []
    for path in sorted(sweep_dir.rglob(STATUS_FILE)):
        status = read_status(path.parent)
        if status is None or (sweep_id and status.sweep_id != sweep_id):
            continue
        rows.append(_row(sweep_dir, path.parent, status))
    return rows


def write_status_csv(rows: Sequence[StatusRow], path: str | Path) -> Path:
    """``sweep_status.csv``: job, overrides, status, seconds, error (one row per job)."""
    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(CSV_COLUMNS)
            for r in rows:
                writer.writerow([r.job, r.overrides, r.status, f"{r.seconds:.1f}", r.error])
    return atomic_write(path, write)


def print_status_table(rows: Sequence[StatusRow], csv_path: Path, file=None) -> None:
    """A rich table of the jobs and a count line (``2 ok, 1 failed of 3 job(s); <csv_path>``)."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file or sys.stdout, width=max(100, Console().width))
    table = Table(title="sweep jobs", title_justify="left", show_lines=False)
    for name, style in (("job", "cyan"), ("status", None), ("seconds", None), ("error", "red")):
        table.add_column(name, style=style, overflow="fold", justify="right" if name == "seconds" else "left")
    colour = {"ok": "green", "skipped": "yellow", "failed": "bold red"}
    for r in rows:
        table.add_row(r.job, f"[{colour.get(r.status, '')}]{r.status}[/]", f"{r.seconds:.1f}", r.error)
    console.print(table)
    console.print(f"{count_line(rows)}; {csv_path}", highlight=False, soft_wrap=True)


def count_line(rows: Sequence[StatusRow]) -> str:
    counts = {s: sum(r.status == s for r in rows) for s in ("ok", "skipped", "failed")}
    return ", ".join(f"{n} {s}" for s, n in counts.items() if n) + f" of {len(rows)} job(s)"


class SweepStatusCallback(Callback):
    """Hydra callback (``hydra.callbacks`` of the entry configs): tags the jobs of a multirun with one
    sweep id, then prints their statuses, writes ``sweep_status.csv`` and exits 1 if a job failed."""

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        # inherited by joblib workers and (sbatch exports the environment) SLURM jobs
        os.environ[SWEEP_ID_ENV] = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        sweep_dir = Path(str(config.hydra.sweep.dir))
        rows = collect_statuses(sweep_dir, current_sweep_id() or None)
        path = write_status_csv(rows, sweep_dir / STATUS_CSV)
        print_status_table(rows, path)
        os.environ.pop(SWEEP_ID_ENV, None)
        if any(r.status == "failed" for r in rows):
            sys.exit(1)

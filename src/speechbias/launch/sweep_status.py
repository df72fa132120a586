"""What happened to each job of a sweep: every job records it in its folder, the sweep collects it.

Each job (basic, joblib or submitit launcher alike) writes ``<job folder>/job_status.json`` when it
starts (``running``) and when it ends (``ok``, ``skipped``: it found its finished results, or
``failed``), with its overrides, seconds and the one-line error. A job that finds its finished results
keeps the last real outcome of its folder (``ok`` with the seconds of the run that computed them) and
says ``reused``; only a job with no earlier record reads ``skipped``. Jobs of a multirun do not raise, so
every job runs and Hydra calls :class:`SweepStatusCallback` at the end, which reads the status files
of this sweep's jobs, prints a table, writes ``<sweep_dir>/sweep_status.csv`` and exits 1 when a job
failed (:func:`report_sweep`; a sweep stopped by SIGTERM or SIGINT prints it too, then exits 128 + the
signal: :mod:`speechbias.launch.signals`). A job that never recorded its end (killed, out of memory, time limit) reads as ``failed``;
the SLURM launcher records the reason SLURM gives (cancelled, time limit, node failure) with
:func:`record_failure`.

A job's error is one line (:func:`job_error`): a user error's message, else the exception's type and
the last line of its message (the whole traceback stays in the job's log and ``job_status.json``).
Error text is shown verbatim in the table (``[/x]`` in a path is text, never rich markup).
"""

from __future__ import annotations

import csv
import os
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hydra.errors import InstantiationException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from speechbias.fileio.atomic_file import atomic_write
from speechbias.launch.parent_watch import SWEEP_PID_ENV
from speechbias.launch.signals import sweep_ended, sweep_started
from speechbias.fileio.folder_lock import FolderBusyError
from speechbias.launch.sweep_folder import claim_sweep_folder, release_sweep_folder
from speechbias.results.job_status import NO_END, STATUS_FILE, JobStatus, read_status
from speechbias.run_context import SWEEP_ID_ENV
from speechbias.errors import find_user_error, message_line

STATUS_CSV = "sweep_status.csv"
CSV_COLUMNS = ("job", "overrides", "status", "seconds", "error", "reused")


def reused_status(earlier: JobStatus | None, status: JobStatus) -> JobStatus:
    """``status`` of a job that found its finished results: the outcome ``earlier`` (the folder's record
    before this job started) says computed them (``ok`` and its seconds), marked ``reused``; ``skipped``
    when there is no such record (an older version's folder, or a record of another outcome)."""
    if earlier is not None and earlier.status == "ok":
        status.status, status.seconds, status.error = "ok", earlier.seconds, ""
    else:
        status.status, status.seconds = "skipped", time.time() - status.started
    status.reused = True
    return status


def job_error(exc: BaseException) -> str:
    """A failed job's one-line error: a user error's message (:mod:`speechbias.errors`), else
    ``<ExceptionType>: <last line of its message>`` (an error raised in a DDP worker carries the
    worker's whole traceback in its message; its last line is the worker's error)."""
    user = find_user_error(exc)
    if user is not None:
        return message_line(user)
    if isinstance(exc, InstantiationException) and exc.__cause__ is not None:
        # Hydra's wrapper ends with "full_key: task.run": the cause (an import error of the task's module,
        # an error in its constructor) is what failed, the key where
        key = [ln.strip() for ln in str(exc).splitlines() if ln.strip().startswith("full_key:")]
        lines = [ln.strip() for ln in str(exc.__cause__).splitlines() if ln.strip()]
        lines = [ln for ln in lines if not ln.startswith("Are you sure")][-2:]
        where = f" ({key[-1]})" if key else ""
        return f"{type(exc.__cause__).__name__}: {' '.join(lines)}{where}"
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {lines[-1]}" if lines else type(exc).__name__


def record_failure(
    job_dir: str | Path, error: str, overrides: Sequence[str] = (), sweep_id: str = "", add_to_failed: bool = False
) -> bool:
    """Mark a job failed with ``error`` unless it already recorded an end (ok, skipped or failed: what
    the job said about itself wins). For jobs that ended without saying so: cancelled, timed out, or
    killed by SLURM. ``add_to_failed``: a job that recorded its own failure gets ``error`` in front of
    it (``<error>; the job said: <its error>``): when a rank is killed, the survivor's record (its
    peer closed the connection) is a consequence, SLURM's line the cause. Returns True when it wrote."""
    earlier = read_status(job_dir)
    if earlier is not None and earlier.status == "failed" and add_to_failed and error not in earlier.error:
        earlier.error = f"{error}; the job said: {earlier.error}"
        earlier.write(job_dir)
        return True
    if earlier is not None and earlier.status != "running":
        return False
    status = earlier or JobStatus("running", overrides=list(overrides), sweep_id=sweep_id)
    status.status, status.error = "failed", error
    if status.started:
        status.seconds = time.time() - status.started
    Path(job_dir).mkdir(parents=True, exist_ok=True)
    status.write(job_dir)
    return True


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
    reused: bool = False


def collect_statuses(sweep_dir: str | Path, sweep_id: str | None = None) -> list[StatusRow]:
    """One row per job folder below ``sweep_dir`` with a status file (of multirun ``sweep_id`` only,
    when given), sorted by folder. Jobs still marked ``running`` read as failed (:data:`NO_END`)."""
    sweep_dir = Path(sweep_dir)
    rows = []
    for path in sorted(sweep_dir.rglob(STATUS_FILE)):
        status = read_status(path.parent)
        if status is None or (sweep_id and status.sweep_id != sweep_id):
            continue
        ended = status.status != "running"
        rows.append(
            StatusRow(
                job=str(path.parent.relative_to(sweep_dir)),
                overrides=" ".join(status.overrides),
                status=status.status if ended else "failed",
                seconds=round(float(status.seconds), 1),
                error=status.error if ended else NO_END,
                reused=bool(status.reused),
            )
        )
    return rows


def write_status_csv(rows: Sequence[StatusRow], path: str | Path) -> Path:
    """``sweep_status.csv``: job, overrides, status, seconds, error, reused (one row per job; ``reused``:
    ``yes`` where the job found the results of an earlier run, whose status and seconds the row keeps)."""

    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(CSV_COLUMNS)
            for r in rows:
                writer.writerow([r.job, r.overrides, r.status, f"{r.seconds:.1f}", r.error, "yes" if r.reused else ""])

    return atomic_write(path, write)


def print_status_table(rows: Sequence[StatusRow], csv_path: Path, file=None) -> None:
    """A rich table of the jobs and a count line (``2 ok, 1 failed of 3 job(s); <csv_path>``); written to a
    file or a log (not a terminal), no cell is folded or cut."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    out = file or sys.stdout
    # on a terminal its width (long cells fold); into a file or a log, every cell whole on its line. A
    # terminal is the stream's own isatty(): rich's is_terminal also says yes to a file when FORCE_COLOR or
    # TTY_COMPATIBLE is set (CI runners, schedulers), and its width is then COLUMNS or 80
    isatty = getattr(out, "isatty", None)
    on_terminal = bool(isatty and isatty())
    console = Console(file=out, width=max(100, Console(file=out).width) if on_terminal else 100_000)
    table = Table(title="sweep jobs", title_justify="left", show_lines=False)
    for name, style in (("job", "cyan"), ("status", None), ("seconds", None), ("error", "red")):
        table.add_column(name, style=style, overflow="fold", justify="right" if name == "seconds" else "left")
    colour = {"ok": "green", "skipped": "yellow", "failed": "bold red"}
    for r in rows:  # Text cells: brackets in overrides or errors (paths like /tmp/[/x]) are not markup
        state = f"{r.status}, reused" if r.reused and r.status == "ok" else r.status
        table.add_row(Text(r.job), Text(state, style=colour.get(r.status, "")), f"{r.seconds:.1f}", Text(r.error))
    console.print(table)
    console.print(Text(f"{count_line(rows)}; {csv_path}"), highlight=False, soft_wrap=True)


def count_line(rows: Sequence[StatusRow]) -> str:
    """``2 ok (1 reused), 1 failed of 3 job(s)``."""
    counts = {s: sum(r.status == s for r in rows) for s in ("ok", "skipped", "failed")}
    reused = sum(r.reused and r.status == "ok" for r in rows)
    parts = [f"{n} {s}" + (f" ({reused} reused)" if s == "ok" and reused else "") for s, n in counts.items() if n]
    return ", ".join(parts) + f" of {len(rows)} job(s)"


class SweepStatusCallback(Callback):
    """Hydra callback (``hydra.callbacks`` of the entry configs): tags the jobs of a multirun with one
    sweep id, then prints their statuses, writes ``sweep_status.csv`` and exits 1 if a job failed.

    The sweep folder is the one resolved when the multirun starts (the folder the launcher makes and
    the jobs write below), remembered for the end: the table never reads another folder."""

    def __init__(self) -> None:
        self.sweep_dir: Path | None = None
        self.folder_lock = None

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        self.sweep_dir = Path(str(config.hydra.sweep.dir))
        try:  # one sweep at a time in a folder: a second one stops here, naming the first
            self.folder_lock = claim_sweep_folder(self.sweep_dir)
        except FolderBusyError as busy:
            print(f"error: {busy}", file=sys.stderr)
            sys.exit(1)
        # inherited by joblib workers and (sbatch exports the environment) SLURM jobs
        os.environ[SWEEP_ID_ENV] = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        os.environ[SWEEP_PID_ENV] = str(os.getpid())  # local workers end when this process dies (parent_watch)
        sweep_started(self.sweep_dir, os.environ[SWEEP_ID_ENV])  # a stop signal reaches its workers, shows the table

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        sweep_dir = self.sweep_dir or Path(str(config.hydra.sweep.dir))
        sweep_ended()
        rows = report_sweep(sweep_dir, current_sweep_id())
        release_sweep_folder(self.folder_lock)  # (a process's end releases it too, whichever way it ends)
        os.environ.pop(SWEEP_ID_ENV, None)
        os.environ.pop(SWEEP_PID_ENV, None)
        if any(r.status == "failed" for r in rows):
            sys.exit(1)


def report_sweep(sweep_dir: Path, sweep_id: str) -> list[StatusRow]:
    """The rows of multirun ``sweep_id`` (every one below ``sweep_dir`` when ""), written to
    ``sweep_status.csv`` and printed as a table (a table that cannot be shown still returns the rows)."""
    rows = collect_statuses(sweep_dir, sweep_id or None)
    path = write_status_csv(rows, sweep_dir / STATUS_CSV)
    try:
        print_status_table(rows, path)
    except Exception as exc:  # noqa: BLE001 - the csv and the exit status matter more than the table
        print(f"sweep status table not shown ({exc}); see {path}", file=sys.stderr)
    return rows

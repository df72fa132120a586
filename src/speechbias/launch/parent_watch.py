"""Worker processes of a local parallel sweep end when the sweep's own process dies.

``hydra/launcher=parallel`` runs jobs in joblib/loky worker processes. After ``kill -9`` of the sweep's
process they used to finish their job and stay alive (idle workers wait minutes for work). A job that
runs in such a worker (its parent is the process that started the multirun, whose id
:class:`~speechbias.launch.sweep_status.SweepStatusCallback` puts in ``SPEECHBIAS_SWEEP_PID``) starts, once per
process, a daemon thread that polls ``os.getppid()`` every :data:`POLL_S` seconds; when the parent is
gone (the worker was re-parented) it records the running job as failed and ends the process (exit 1).
The basic launcher (jobs in the sweep's process) and SLURM jobs (their parent is slurmstepd) are not watched.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

SWEEP_PID_ENV = "SPEECHBIAS_SWEEP_PID"
POLL_S = 0.5
PARENT_DIED = "the sweep's process died (killed?); this worker ended with it"

_job_dir: list[Path | None] = [None]
_watcher: list[threading.Thread] = []


def watch_sweep_parent(job_dir: str | Path | None = None) -> bool:
    """Watch the sweep's process from this worker (see the module docstring); ``job_dir``: the running job's
    folder, recorded as failed if the parent dies during it. Returns True when this process is watched."""
    value = os.environ.get(SWEEP_PID_ENV, "")  # the process that started this multirun ("" outside one)
    parent = int(value) if value.isdigit() else None
    if parent is None or parent == os.getpid() or os.getppid() != parent:
        return False
    _job_dir[0] = Path(job_dir) if job_dir is not None else None
    if not _watcher:
        thread = threading.Thread(target=_watch, args=(parent,), name="speechbias-sweep-parent-watch", daemon=True)
        thread.start()
        _watcher.append(thread)
    return True


def job_done() -> None:
    """The running job ended (its own status is written): a later parent death records nothing."""
    _job_dir[0] = None


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(POLL_S)
    job_dir = _job_dir[0]
    if job_dir is not None:
        try:
            from speechbias.launch.sweep_status import record_failure

            record_failure(job_dir, PARENT_DIED)
        except Exception:  # noqa: BLE001 - ending the process matters more than the record
            pass
    os._exit(1)

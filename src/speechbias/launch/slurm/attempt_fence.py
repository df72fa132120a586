"""A SLURM job attempt fences its job folder: once a requeued copy of a job has started, the attempt
before it can no longer write there.

A requeued job keeps its job id and SLURM counts its starts (``SLURM_RESTART_COUNT``). When the node
of the first attempt loses its slurmd, SLURM requeues the job while that attempt may still run; on
a cluster of several nodes the copy starts elsewhere and both would write one job folder. Each attempt
records ``<job id>.r<restart count>`` in the folder (:data:`FENCE_FILE`) when it starts; every write
through :func:`speechbias.fileio.atomic_file.atomic_write` into the folder first checks that the record
is still its own, and a stale attempt stops with one line (:class:`StaleAttemptError`).
"""

from __future__ import annotations

import os
from pathlib import Path

FENCE_FILE = ".slurm_attempt"


class StaleAttemptError(RuntimeError):
    """A newer attempt of this job owns the job folder: this one must not write there."""


def attempt_id(job_id: str, environ: dict | None = None) -> str:
    """``<job id>.r<SLURM_RESTART_COUNT>`` (0 for a job's first start)."""
    env = os.environ if environ is None else environ
    count = env.get("SLURM_RESTART_COUNT", "0")
    return f"{job_id}.r{int(count) if count.isdigit() else 0}"


def _restarts(attempt: str) -> tuple[str, int]:
    job, _, count = attempt.rpartition(".r")
    return job, int(count) if count.isdigit() else 0


class AttemptFence:
    """The fence of ``folder`` for ``attempt`` (see :func:`attempt_id`); a write guard when called."""

    def __init__(self, folder: str | Path, attempt: str):
        self.folder, self.attempt = Path(folder).resolve(), attempt

    def owner(self) -> str | None:
        try:
            return (self.folder / FENCE_FILE).read_text().strip() or None
        except OSError:
            return None

    def claim(self) -> None:
        """Record this attempt as the folder's owner, unless a later attempt of the same job already did."""
        owner = self.owner()
        if owner is not None and owner != self.attempt:
            (job, count), (own_job, own_count) = _restarts(owner), _restarts(self.attempt)
            if job == own_job and count > own_count:
                raise StaleAttemptError(self._stale_line(owner))
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".{FENCE_FILE}.{os.getpid()}.tmp"
        tmp.write_text(self.attempt + "\n")
        os.replace(tmp, self.folder / FENCE_FILE)

    def __call__(self, path: Path) -> None:
        """Raise :class:`StaleAttemptError` before a write into the folder by an attempt that no longer owns it."""
        if not Path(path).resolve().is_relative_to(self.folder):
            return
        owner = self.owner()
        if owner is not None and owner != self.attempt:
            raise StaleAttemptError(self._stale_line(owner, path))

    def _stale_line(self, owner: str, path: Path | None = None) -> str:
        what = f"not writing {path}" if path is not None else "not starting"
        return (
            f"SLURM attempt {self.attempt} of this job is stale: attempt {owner} (a requeued copy) owns "
            f"{self.folder}; {what}"
        )

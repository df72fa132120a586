"""One sweep at a time writes into a sweep folder (``hydra.sweep.dir``).

Two multiruns given the same folder wrote their jobs into the same job folders (``0/``, ``1/``, ...) and each
printed a table that was partly the other's. :func:`claim_sweep_folder` (the sweep-status callback, when a
multirun starts) holds ``<sweep folder>/.sweep.lock`` for the sweep's lifetime with the one folder lock of
:mod:`speechbias.fileio.folder_lock` (``fcntl.flock``: the kernel drops it when its process ends in any way,
``kill -9`` included, so a stale file never blocks a rerun); a second sweep finds it held and stops with one
line naming the folder and the holder (pid, host, start, command).
"""

from __future__ import annotations

from pathlib import Path

from speechbias.fileio.folder_lock import hold, release

LOCK_FILE = ".sweep.lock"


def claim_sweep_folder(sweep_dir: str | Path) -> Path:
    """Hold ``sweep_dir`` for this process (created if absent) until :func:`release_sweep_folder`; returns it.
    Raises :class:`~speechbias.fileio.folder_lock.FolderBusyError` when another process holds it."""
    hold(
        sweep_dir,
        fix="wait for it to end, or give this sweep another hydra.sweep.dir",
        lock_file=LOCK_FILE,
        busy="another sweep is writing into this folder",
        label=f"hydra.sweep.dir={sweep_dir}",
    )
    return Path(sweep_dir)


def release_sweep_folder(sweep_dir: str | Path | None) -> None:
    """End this process's hold (the file stays: the next sweep takes it over)."""
    if sweep_dir is not None:
        release(sweep_dir, LOCK_FILE)

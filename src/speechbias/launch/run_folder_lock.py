"""One writer per run folder (:mod:`speechbias.fileio.folder_lock`), taken before anything is written there.

A single run takes its folder's lock in :class:`FolderLockCallback` (``hydra.callbacks.folder_lock`` of the
entry configs: ``on_run_start``, before Hydra saves ``.hydra/`` into the folder); every job, a multirun's
too, takes it in :func:`speechbias.launch.entry.run_entry` before its status, checkpoint claim, results
check or task (:func:`hold_run_folder`; rank zero only: a job's other ranks write through it). A second
process refuses in one line naming the folder and the process that writes it, and exits 1, having written
nothing there (a multirun's job is reported failed, its folder left to its writer).
"""

from __future__ import annotations

from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from speechbias.errors import user_error_ends_command
from speechbias.fileio.atomic_file import storage_error
from speechbias.fileio.folder_lock import LOCK_FILE, hold
from speechbias.launch.slurm.job_environment import process_rank

FIX = "wait for it to end, or give this run another folder (hydra.run.dir=...)"


def hold_run_folder(folder: str | Path) -> bool:
    """Take ``folder``'s lock for this process (True: this call took it, the caller releases it; False:
    held already). :class:`~speechbias.fileio.folder_lock.FolderBusyError` when another process writes
    it; a :class:`~speechbias.errors.StorageError` when the lock file cannot be made there."""
    try:
        return hold(folder, fix=FIX)
    except OSError as exc:
        raise storage_error(Path(folder) / LOCK_FILE, exc) from exc


class FolderLockCallback(Callback):
    """Hydra callback: a single run's folder is locked before Hydra writes into it (see the module docstring)."""

    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        if process_rank() != 0:  # a rank Lightning started by running the command again: rank zero holds it
            return
        with user_error_ends_command():
            hold_run_folder(str(OmegaConf.select(config, "hydra.run.dir")))

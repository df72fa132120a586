"""One sweep at a time writes into a sweep folder (``hydra.sweep.dir``).

Two multiruns given the same folder wrote their jobs into the same job folders (``0/``, ``1/``, ...) and each
printed a table that was partly the other's. :func:`claim_sweep_folder` (the sweep-status callback, when a
multirun starts) takes an exclusive ``fcntl.flock`` on ``<sweep folder>/.sweep.lock`` for the sweep's
lifetime and writes there who holds it; a second sweep finds it held and stops with one line naming the
folder and the holder. ``fcntl`` rather than the ``filelock`` package: a process that fails to take a
``filelock`` lock truncates the file (its ``O_TRUNC`` open), so the holder could not be named. The kernel
releases the lock when its process ends in any way (``kill -9`` included): a stale file never blocks a rerun.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import IO

LOCK_FILE = ".sweep.lock"


class SweepFolderBusy(Exception):
    """Another live sweep holds the folder; the message says which (one line)."""


def claim_sweep_folder(sweep_dir: str | Path) -> IO[str]:
    """Hold ``sweep_dir`` for this process (created if absent): the open lock file, to keep open while the
    sweep runs (:func:`release_sweep_folder`). Raises :class:`SweepFolderBusy` when another process holds it."""
    sweep_dir = Path(sweep_dir)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    lock = open(sweep_dir / LOCK_FILE, "a+", encoding="utf-8")  # noqa: SIM115 - held for the sweep's lifetime
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip()
        lock.close()
        raise SweepFolderBusy(
            f"hydra.sweep.dir={sweep_dir}: another sweep is writing into this folder ({_holder_words(holder)}); "
            "wait for it to end, or give this sweep another hydra.sweep.dir"
        ) from None
    lock.seek(0)
    lock.truncate()
    record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(), "command": sys.argv}
    lock.write(json.dumps(record))
    lock.flush()
    return lock


def release_sweep_folder(lock: IO[str] | None) -> None:
    """End this process's hold (the file stays: the next sweep takes it over)."""
    if lock is not None and not lock.closed:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def _holder_words(holder: str) -> str:
    """``pid 123 on node1, started 14:02:11: python evaluate.py -m ...`` from the holder's record."""
    try:
        record = json.loads(holder)
        started = time.strftime("%H:%M:%S", time.localtime(float(record["started"])))
        command = " ".join(str(a) for a in record.get("command", []))[:200]
        return f"pid {record['pid']} on {record['host']}, started {started}: {command}"
    except (ValueError, KeyError, TypeError):
        return "its process has not said which yet"

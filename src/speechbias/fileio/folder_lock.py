"""One writer per run folder: an exclusive lock on ``<folder>/.speechbias.lock`` held while a process writes it.

``fcntl.flock`` (standard library), not ``filelock`` (which builds the corpus manifests' locks): the lock file
itself holds the holder's pid, start time and command, so a second process can say who writes the folder,
which filelock's API does not give; and flock belongs to the open file, so the kernel drops it when its
process ends in any way (``kill -9``, a crash, the end of a SLURM job): a lock left by a killed process
never blocks a rerun. The lock file is never removed (removing it while held would let a third process lock
a new file of the same name); its name is hidden, so it is not one of a run's outputs. POSIX only.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path

LOCK_FILE = ".speechbias.lock"
# folders this process holds (resolved path -> the open lock file's descriptor)
_held: dict[str, int] = {}


class FolderBusyError(Exception):
    """Another live process holds the folder's lock (a user error: one line naming the folder and it)."""


def holder(folder: str | Path) -> dict:
    """What the lock file of ``folder`` says of its (last) holder: ``pid``, ``started`` (epoch s), ``command``;
    {} when there is none or it cannot be read."""
    try:
        return json.loads((Path(folder) / LOCK_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _busy(folder: Path, fix: str) -> FolderBusyError:
    who = holder(folder)
    pid = who.get("pid")
    since = time.strftime("%H:%M:%S", time.localtime(who["started"])) if "started" in who else None
    command = " ".join(str(c) for c in who.get("command", []))[-120:]
    what = f"process {pid}" if pid else "another process"
    detail = ", ".join(x for x in (f"since {since}" if since else "", command) if x)
    return FolderBusyError(
        f"{folder}: another process is writing this run folder ({what}{f': {detail}' if detail else ''}); {fix}"
    )


def hold(folder: str | Path, fix: str = "wait for it to end, or give another folder") -> bool:
    """Take the exclusive lock of ``folder`` (made if missing) for this process, without waiting.

    Returns True when this call took it (the caller :func:`release`s it), False when this process held it
    already. Raises :class:`FolderBusyError` when another process holds it (``fix``: what the user can do),
    OSError when the lock file cannot be made (the caller converts a storage failure)."""
    folder = Path(folder)
    key = os.path.realpath(folder)
    if key in _held:
        return False
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise _busy(folder, fix) from None
    except BaseException:
        os.close(fd)
        raise
    record = {"pid": os.getpid(), "started": time.time(), "command": [os.path.basename(sys.argv[0]), *sys.argv[1:]]}
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
    except OSError:  # a full disk: the lock is given up with its file (the caller names the failure)
        os.close(fd)
        raise
    _held[key] = fd
    return True


def release(folder: str | Path) -> None:
    """Give up this process's lock of ``folder`` (nothing when it holds none)."""
    fd = _held.pop(os.path.realpath(folder), None)
    if fd is not None:
        os.close(fd)  # closing the only descriptor of the open file releases the flock

"""One writer per folder: an exclusive lock on a hidden file in it, held while a process writes the folder: a run
folder's ``.speechbias.lock`` (launch/run_folder_lock), a sweep folder's ``.sweep.lock`` (launch/sweep_folder).

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
import socket
import sys
import time
from pathlib import Path

LOCK_FILE = ".speechbias.lock"
# locks this process holds ((resolved folder, lock file name) -> the open lock file's descriptor)
_held: dict[tuple[str, str], int] = {}


class FolderBusyError(Exception):
    """Another live process holds the folder's lock (a user error: one line naming the folder and it)."""


def holder(folder: str | Path, lock_file: str = LOCK_FILE) -> dict:
    """What the lock file of ``folder`` says of its (last) holder: ``pid``, ``host``, ``started`` (epoch s),
    ``command``; {} when there is none or it cannot be read."""
    try:
        record = json.loads((Path(folder) / lock_file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def holder_words(who: dict) -> str:
    """``pid 123 on node1, started 14:02:11: python evaluate.py -m ...`` (what is known of it)."""
    if not who.get("pid"):
        return "a process that has not said which yet"
    words = f"pid {who['pid']}" + (f" on {who['host']}" if who.get("host") else "")
    try:
        words += f", started {time.strftime('%H:%M:%S', time.localtime(float(who['started'])))}"
    except (KeyError, TypeError, ValueError):
        pass
    command = " ".join(str(c) for c in who.get("command", []) or [])[-160:]
    return f"{words}: {command}" if command else words


def hold(
    folder: str | Path,
    fix: str = "wait for it to end, or give another folder",
    lock_file: str = LOCK_FILE,
    busy: str = "another process is writing this run folder",
    label: str | None = None,
) -> bool:
    """Take the exclusive lock ``<folder>/<lock_file>`` (folder made if missing) for this process, without waiting.

    Returns True when this call took it (the caller :func:`release`s it), False when this process held it
    already. Raises :class:`FolderBusyError` when another process holds it: ``<label>: <busy> (<holder>);
    <fix>`` (``label``: the folder, or how the user named it). OSError when the lock file cannot be made (the
    caller converts a storage failure)."""
    folder = Path(folder)
    key = (os.path.realpath(folder), lock_file)
    if key in _held:
        return False
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / lock_file, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        who = holder_words(holder(folder, lock_file))
        raise FolderBusyError(f"{label or folder}: {busy} ({who}); {fix}") from None
    except BaseException:
        os.close(fd)
        raise
    record = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": time.time(),
        "command": [os.path.basename(sys.argv[0]), *sys.argv[1:]],
    }
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
    except OSError:  # a full disk: the lock is given up with its file (the caller names the failure)
        os.close(fd)
        raise
    _held[key] = fd
    return True


def release(folder: str | Path, lock_file: str = LOCK_FILE) -> None:
    """Give up this process's lock ``<folder>/<lock_file>`` (nothing when it holds none)."""
    fd = _held.pop((os.path.realpath(folder), lock_file), None)
    if fd is not None:
        os.close(fd)  # closing the only descriptor of the open file releases the flock

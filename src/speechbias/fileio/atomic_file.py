"""Write a file or a folder so that readers see the old one or the whole new one, never a half-written one.

The one atomic writer of the project (caches, manifests, run files, tiny model folders, generated audio):
the new content goes to a temporary name beside the target that is unique per process and call, then
replaces the target in one rename, so concurrent writers never share a temporary file.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from speechbias.errors import StorageError

# write failures that are the storage's, not the program's: the user frees space or points the run elsewhere
# below this many free bytes a failed write is taken for a full disk
MIN_FREE_BYTES = 1 << 16
STORAGE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EEXIST}


# folders a run writes to and the setting that moves each (registered by the entry point: the run folder,
# the feature cache), so that a failed write names the setting to change; longest folder first wins
STORAGE_SETTINGS: dict[Path, str] = {}
GENERIC_STORAGE_SETTING = (
    "paths.cache_dir=... or SPEECHBIAS_CACHE for the feature cache, paths.output_root=... for results"
)


def register_storage_setting(folder: str | Path, setting: str) -> None:
    """A failed write below ``folder`` names ``setting`` (e.g. ``paths.cache_dir=...``) as the way on."""
    STORAGE_SETTINGS[Path(folder).expanduser().absolute()] = setting


def storage_setting(path: str | Path) -> str:
    """The setting that moves the folder ``path`` lies in (:func:`register_storage_setting`), or a
    generic hint naming the output and cache settings."""
    path = Path(path).expanduser().absolute()
    below = [f for f in STORAGE_SETTINGS if f == path or f in path.parents]
    return STORAGE_SETTINGS[max(below, key=lambda f: len(f.parts))] if below else GENERIC_STORAGE_SETTING


# checks run before a write replaces its target; one raises to stop the write (a SLURM job attempt's
# fence of its job folder: speechbias.launch.slurm.attempt_fence)
WRITE_GUARDS: list[Callable[[Path], None]] = []


def add_write_guard(guard: Callable[[Path], None]) -> None:
    """Call ``guard(path)`` before every :func:`atomic_write` replaces ``path`` (it raises to refuse)."""
    WRITE_GUARDS.append(guard)


def temporary_name(path: Path) -> Path:
    """A hidden name beside ``path``, unique per process and call, ending like ``path`` (``.wav``,
    ``.csv``) so writers that choose a format by extension (soundfile, pandas) write the right one."""
    return path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp{path.suffix}")


def atomic_write(path: str | Path, write: Callable[[Path], object]) -> Path:
    """``write(tmp)`` writes a temporary file beside ``path`` (parents are created), which then
    replaces ``path`` in one ``os.replace``; the temporary file is removed if ``write`` fails."""
    path = Path(path)
    tmp = temporary_name(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(tmp)
        for guard in WRITE_GUARDS:
            guard(path)
        os.replace(tmp, path)
    except Exception as exc:
        error = storage_error(path, exc)
        if error is exc:
            raise
        raise error from exc
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def storage_problem(folder: Path) -> str | None:
    """``No space left on device`` / ``Read-only file system`` when the file system of ``folder`` (or of
    its nearest existing parent) is full or read-only now, else None."""
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    try:
        fs = os.statvfs(folder)
    except OSError:
        return None
    if fs.f_flag & os.ST_RDONLY:
        return os.strerror(errno.EROFS)
    if fs.f_bavail * fs.f_frsize < MIN_FREE_BYTES:
        return os.strerror(errno.ENOSPC)
    return None


def storage_error(path: Path, exc: BaseException) -> BaseException:
    """A :class:`~speechbias.errors.StorageError` (one line naming ``path`` and the fix) for a write
    that failed on full, read-only or missing storage; ``exc`` itself for any other failure. Writers that
    wrap the OS error in their own type (safetensors' SafetensorError) are recognised by the state of the
    file system after the failure."""
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS:
        problem = os.strerror(exc.errno)
    else:
        problem = storage_problem(path.parent)
    if problem is None:
        return exc
    return StorageError(
        f"{path}: cannot write it ({problem}); free space there or point the run at another folder "
        f"({storage_setting(path)})"
    )


def atomic_folder(path: str | Path, write: Callable[[Path], object]) -> Path:
    """``write(tmp)`` fills a new temporary folder beside ``path``, which is then renamed to ``path``.

    When another process has made ``path`` meanwhile (a rename onto a non-empty folder fails), its
    folder is kept and ours is removed: the writers of one folder write the same content (e.g. a tiny
    model built from a seed). The temporary folder is removed if ``write`` fails.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path)
    tmp.mkdir()
    try:
        write(tmp)
        try:
            os.replace(tmp, path)
        except OSError:
            if not path.is_dir():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return path

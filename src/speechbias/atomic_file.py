"""Write a file or a folder so that readers see the old one or the whole new one, never a half-written one.

The one atomic writer of the project (caches, manifests, run files, tiny model folders, generated audio):
the new content goes to a temporary name beside the target that is unique per process and call, then
replaces the target in one rename, so concurrent writers never share a temporary file.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path


def temporary_name(path: Path) -> Path:
    """A hidden name beside ``path``, unique per process and call, ending like ``path`` (``.wav``,
    ``.csv``) so writers that choose a format by extension (soundfile, pandas) write the right one."""
    return path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp{path.suffix}")


def atomic_write(path: str | Path, write: Callable[[Path], object]) -> Path:
    """``write(tmp)`` writes a temporary file beside ``path`` (parents are created), which then
    replaces ``path`` in one ``os.replace``; the temporary file is removed if ``write`` fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


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

"""Write a file so that readers see the old file or the whole new one, never a half-written one."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def atomic_write(path: str | Path, write: Callable[[Path], object]) -> Path:
    """``write(tmp)`` writes a temporary file beside ``path`` (parents are created), which then
    replaces ``path`` in one ``os.replace``; the temporary file is removed if ``write`` fails.
    The temporary name is unique per process and call, so concurrent writers never share one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path

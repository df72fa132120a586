"""How much memory a run's extraction has, read without importing torch.

Host: physical memory (``os.sysconf`` SC_PHYS_PAGES x SC_PAGE_SIZE), or the process's cgroup limit where
one is set lower (cgroup v2 ``memory.max`` of its cgroup and the cgroups above it; v1
``memory.limit_in_bytes``; a SLURM job's ``--mem`` is such a limit). GPU: the smallest total memory of the
GPUs ``nvidia-smi`` lists (those of ``CUDA_VISIBLE_DEVICES`` where it names them), None when nvidia-smi is
not there or fails (the caller then bounds by host memory). Each read once per process.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
NVIDIA_SMI_SECONDS = 10


def physical_memory_bytes() -> int:
    """The machine's physical memory, bytes."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _limit_in(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max": no limit


def cgroup_limit_bytes(proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = CGROUP_ROOT) -> int | None:
    """The lowest memory limit of this process's cgroup and those above it; None when none is set."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    limits = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: memory.max of the cgroup and each parent below the mount
            folder = root / path.lstrip("/")
            while True:
                limits.append(_limit_in(folder / "memory.max"))
                if folder == root or root not in folder.parents:
                    break
                folder = folder.parent
        elif "memory" in controllers.split(","):
            limits.append(_limit_in(root / "memory" / path.lstrip("/") / "memory.limit_in_bytes"))
            limits.append(_limit_in(root / "memory" / "memory.limit_in_bytes"))
    found = [n for n in limits if n is not None and n > 0]
    return min(found) if found else None


@functools.lru_cache(maxsize=1)
def host_memory_bytes() -> int:
    """Physical memory, or the cgroup's limit where it is lower."""
    physical = physical_memory_bytes()
    limit = cgroup_limit_bytes()
    return min(physical, limit) if limit else physical


@functools.lru_cache(maxsize=1)
def gpu_memory_bytes() -> int | None:
    """The smallest total memory of the visible GPUs (nvidia-smi), bytes; None when not readable."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=index,uuid,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_SECONDS,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    sizes = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not parts[2].isdigit():
            continue
        index, uuid, mib = parts
        if not visible or index in visible or uuid in visible:
            sizes.append(int(mib) << 20)
    return min(sizes) if sizes else None

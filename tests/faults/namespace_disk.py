"""Commands run with a REAL small disk: a tmpfs mounted in a private mount namespace (``unshare --mount``
as root, ``unshare --user --map-root-user --mount`` otherwise), optionally filled or read-only, so a
write there fails with the kernel's own ENOSPC/EROFS. The mount lives only as long as the command; what
the test must inspect is copied out (``keep``)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline", "WANDB_SILENT": "true"}


def _unshare() -> list[str]:
    return ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "--user", "--map-root-user", "--mount"]


def namespaces_or_skip() -> None:
    """Skip the test (with the reason) where a mount namespace with a tmpfs cannot be made."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    probe = subprocess.run(
        [
            *_unshare(),
            "sh",
            "-c",
            "mount -t tmpfs -o size=64k tmpfs /mnt 2>&1 || mount -t tmpfs -o size=64k tmpfs /tmp",
        ],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        pytest.skip(f"mount namespaces are not allowed here: {probe.stderr.strip() or probe.returncode}")


def run_on_small_disk(
    mount: Path,
    size_kib: int,
    command: list[str],
    *,
    fill_kib: int | None = None,
    read_only: bool = False,
    folders: tuple[str, ...] = (),
    keep: Path | None = None,
    timeout: int = 600,
) -> subprocess.CompletedProcess:
    """Run ``command`` (argv) with a ``size_kib`` tmpfs on ``mount``: ``folders`` made on it first, then
    ``fill_kib`` of it filled (None: all of it), or it remounted read-only; afterwards its contents are
    copied to ``keep``. Returns the command's result (its own exit status)."""
    mount.mkdir(parents=True, exist_ok=True)
    steps = [f"mount -t tmpfs -o size={size_kib}k tmpfs {shlex.quote(str(mount))}"]
    steps += [f"mkdir -p {shlex.quote(str(mount / f))}" for f in folders]
    if fill_kib is None:
        steps.append(f"dd if=/dev/zero of={shlex.quote(str(mount / 'fill'))} bs=4k 2>/dev/null || true")
    elif fill_kib:
        steps.append(
            f"dd if=/dev/zero of={shlex.quote(str(mount / 'fill'))} bs=1k count={fill_kib} 2>/dev/null || true"
        )
    if read_only:
        steps.append(f"mount -o remount,ro {shlex.quote(str(mount))}")
    script = " && ".join(steps) + f" || exit 99; {shlex.join(command)}; rc=$?; "
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        script += f"cp -a {shlex.quote(str(mount))}/. {shlex.quote(str(keep))}/ 2>/dev/null; "
    return subprocess.run(
        [*_unshare(), "sh", "-c", script + "exit $rc"],
        env={**os.environ, **ENV},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def entry_command(script: str, *overrides: str) -> list[str]:
    """``python <script>.py <overrides>`` of this checkout."""
    return [sys.executable, str(REPO / f"{script}.py"), *overrides]


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    """The console's error lines (``error: ...``)."""
    return [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("error:")]


def assert_one_error_line(proc: subprocess.CompletedProcess, *words: str) -> str:
    """Exit 1, exactly one ``error:`` line holding every one of ``words``, no traceback and no logging
    error; returns the line."""
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    lines = error_lines(proc)
    assert len(lines) == 1, out[-3000:]
    assert "Traceback" not in out and "Logging error" not in out, out[-3000:]
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]

"""Running an entry point (``evaluate.py``, ``train.py``) as a user types it, in a subprocess, for tests."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_entry(
    script: str,
    *overrides: str,
    python_flags: tuple[str, ...] = (),
    timeout: float = 600,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """``python [python_flags] <script> <overrides>`` in the repository root, offline (``HF_HUB_OFFLINE=1``,
    W&B offline; ``env``: further variables, e.g. ``HF_HOME``); its output captured as text."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="offline", **(env or {}))
    return subprocess.run(
        [sys.executable, *python_flags, script, *overrides],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def import_probe(heavy: tuple[str, ...]) -> str:
    """Python code (``python -c <code> <script> <out> <args>``) that runs an entry script as typed and writes to
    ``<out>`` which of the ``heavy`` modules it imported, comma-separated."""
    return (
        "import runpy, sys\n"
        "script, out = sys.argv[1], sys.argv[2]\n"
        "sys.argv = [script] + sys.argv[3:]\n"
        "try:\n"
        "    runpy.run_path(script, run_name='__main__')\n"
        "finally:\n"
        f"    open(out, 'w').write(','.join(m for m in {tuple(heavy)!r} if m in sys.modules))\n"
    )

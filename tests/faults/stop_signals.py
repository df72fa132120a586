"""What the signal tests share: a command started as a user types it, a signal sent when it reaches a phase,
and what came back (exit code, seconds from the signal to the exit, stderr lines)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

REPO = Path(__file__).resolve().parents[2]
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
# a train.py run long enough to interrupt after its first last.ckpt (every 2 epochs), short enough to finish
TRAIN_TO_INTERRUPT = (
    "upstream=fbank",
    "logger=none",
    "bias_tests=[demo_voice]",
    "++trainer.enable_progress_bar=false",
    "max_steps=3000",
    "checkpoint_every_n_epochs=2",
    "ser_data.val_every_n_epochs=20",
)
# the README's promise is 5 s, which the watchdog of launch/signals holds (it ends the process at 4 s);
# measured stops take 0.01-0.85 s. This bound tells "stopped by the signal" from "ran on to its end" with
# room for a loaded CI machine: a behaviour check, not a speed goal (no timed tests)
STOP_BOUND_S = 15.0


def command(script: str, *args: str) -> list[str]:
    return [sys.executable, str(REPO / f"{script}.py"), *args]


def expected_line(signum: int, phase: str, sweep: bool = False) -> str:
    name = signal.Signals(signum).name
    during = f" during {phase}" if phase else ""
    return f"speechbias: {'sweep ' if sweep else ''}stopped by {name}{during}; rerun the same command to resume"


@dataclass
class Stopped:
    returncode: int | None  # None: it had already ended when the signal was due
    seconds: float  # from the signal to the exit
    stderr: list[str]  # its non-empty lines
    stdout: str


def stop_when(
    cmd: list[str],
    ready: Callable[[], bool],
    signum: int,
    log_dir: Path,
    after_s: float = 0.0,
    env: dict | None = None,
    timeout: float = 300,
) -> Stopped:
    """Start ``cmd``, send ``signum`` ``after_s`` seconds after ``ready()`` first holds, wait for the exit."""
    log_dir.mkdir(parents=True, exist_ok=True)
    out, err = log_dir / "stdout.txt", log_dir / "stderr.txt"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen(cmd, env={**os.environ, **ENV, **(env or {})}, stdout=stdout, stderr=stderr)
        deadline = time.monotonic() + timeout
        while proc.poll() is None and not ready() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(after_s)
        if proc.poll() is not None:
            return Stopped(None, 0.0, _lines(err), out.read_text())
        sent = time.monotonic()
        proc.send_signal(signum)
        try:
            proc.wait(timeout=60)
        finally:
            proc.kill()
        seconds = time.monotonic() - sent
    return Stopped(proc.returncode, seconds, _lines(err), out.read_text())


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


def run(cmd: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env={**os.environ, **ENV, **(env or {})}, capture_output=True, text=True, timeout=600)


def cache_entries(cache: Path) -> list[Path]:
    """The feature cache's entry files (per clip and upstream)."""
    stats = cache / "stats"
    return sorted(stats.rglob("*.safetensors")) if stats.is_dir() else []


def noise_manifest(folder: Path, per_role: dict[str, int], seconds: float) -> Path:
    """A manifest of generated noise clips (``per_role``: clips of each role X, Y, A, B), 16 kHz WAV."""
    audio = folder / "audio"
    audio.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    rows = ["clip_id,path,role,group,speaker,pair_id,stratum"]
    for role, n in per_role.items():
        for i in range(n):
            path = audio / f"{role}{i}.wav"
            sf.write(path, (0.1 * rng.standard_normal(int(16_000 * seconds))).astype("float32"), 16_000)
            rows.append(f"{role}{i},{path},{role},group_{role},{role}_speaker{i},{role}{i},")
    manifest = folder / "manifest.csv"
    manifest.write_text("\n".join(rows) + "\n")
    return manifest

"""Issue 40's second case as typed: two ``train.py`` runs with different lr into one ``hydra.run.dir``, the
second started while the first trains. Before, the second resumed the first's live checkpoint and both
exited 0; the folder ended with lr=1e-4 checkpoints under an lr=1e-3 record. Now the second refuses in one
line naming the folder and the first's pid, writes nothing there, and the first ends with a folder of its
own config only. A lock left by a process killed with -9 never blocks the rerun. The same for evaluate.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
TRAIN = ("logger=none", "bias_tests=[demo_voice]", "++trainer.enable_progress_bar=false")
LOCK = ".speechbias.lock"


def _command(script: str, run: Path, cache: Path, *overrides: str) -> list[str]:
    return [sys.executable, str(REPO / script), *overrides, f"hydra.run.dir={run}", f"paths.cache_dir={cache}"]


def _holding(run: Path, proc: subprocess.Popen, timeout: float = 300) -> None:
    """Wait until ``proc`` holds ``run``'s lock (its pid in the lock file)."""
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        try:
            if json.loads((run / LOCK).read_text()).get("pid") == proc.pid:
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"{proc.args} never held {run} (exit {proc.poll()})")


def _refused(done: subprocess.CompletedProcess, run: Path, pid: int) -> None:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert f"{run}: another process is writing this run folder (pid {pid}" in lines[0], lines[0]


def _config_lr(run: Path) -> float:
    return yaml.safe_load((run / "config.yaml").read_text())["lr"]


@pytest.mark.slow
def test_a_second_train_into_a_folder_being_trained_refuses(tmp_path):
    run, cache = tmp_path / "run", tmp_path / "cache"
    env = {**os.environ, **ENV}
    first = subprocess.Popen(
        _command("train.py", run, cache, *TRAIN, "lr=1e-4", "max_steps=20000"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _holding(run, first)
        deadline = time.time() + 300  # the case: the second starts while the first trains
        while time.time() < deadline and not (run / "checkpoints" / "last.ckpt").is_file():
            time.sleep(0.1)
        assert first.poll() is None, "the first run ended before the second could start"
        hydra_config = (run / ".hydra" / "config.yaml").read_bytes()
        second = _command("train.py", run, cache, *TRAIN, "lr=1e-3", "max_steps=100")
        _refused(subprocess.run(second, env=env, capture_output=True, text=True, timeout=300), run, first.pid)
        assert (run / ".hydra" / "config.yaml").read_bytes() == hydra_config  # nothing of the second written
        assert first.poll() is None and _config_lr(run) == 1e-4
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)
    # a lock left by a killed process never blocks: the rerun takes the folder (another config: fresh)
    done = subprocess.run(second, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "written by another config" in done.stdout + done.stderr
    assert _config_lr(run) == 1e-3 and json.loads((run / LOCK).read_text())["pid"] != first.pid
    record = json.loads((run / "checkpoint_digest.json").read_text())
    assert json.loads(record["values"]["lr"]) == 1e-3
    assert json.loads(json.loads((run / "run_digest.json").read_text())["values"]["lr"]) == 1e-3


@pytest.mark.slow
def test_two_evaluate_runs_into_one_folder_one_refuses(tmp_path):
    run, cache = tmp_path / "run", tmp_path / "cache"
    env = {**os.environ, **ENV}
    first = subprocess.Popen(
        _command("evaluate.py", run, cache, "logger=none"), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    _holding(run, first)
    first.send_signal(signal.SIGSTOP)  # held mid-run (a slow run) while the second starts, whatever the load
    try:
        second = _command("evaluate.py", run, cache, "logger=none", "aggregation=max_last")
        _refused(subprocess.run(second, env=env, capture_output=True, text=True, timeout=300), run, first.pid)
    finally:
        first.send_signal(signal.SIGCONT)
    _out, err = first.communicate(timeout=600)
    assert first.returncode == 0, err[-3000:]
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["aggregation"]["layer"] == "sum"
    assert json.loads(json.loads((run / "run_digest.json").read_text())["values"]["aggregation.layer"]) == "sum"

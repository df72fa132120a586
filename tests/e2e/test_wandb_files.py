"""W&B keeps its files inside the project's folders: a run with logger=wandb (offline, the real wandb)
writes nothing under ~/.cache/wandb or ~/.local/share/wandb; its cache and data folders are under
paths.cache_dir/wandb, unless the user set WANDB_CACHE_DIR / WANDB_DATA_DIR, which are kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from speechbias.report import wandb_run

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, **env_extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HOME=str(tmp_path / "home"), HF_HUB_OFFLINE="1", WANDB_MODE="offline", **env_extra)
    for name in ("WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_DIR", "XDG_CACHE_HOME", "XDG_DATA_HOME"):
        if name not in env_extra:
            env.pop(name, None)
    command = [sys.executable, str(REPO / "evaluate.py"), "logger=wandb", "speat.n_permutations=1000"]
    command += ["speat.per_layer=false", f"paths.output_root={tmp_path / 'out'}", f"paths.cache_dir={tmp_path / 'c'}"]
    return subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_a_wandb_run_writes_nothing_under_home(tmp_path):
    proc = _run(tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    home = tmp_path / "home"
    assert not (home / ".cache" / "wandb").exists() and not (home / ".local" / "share" / "wandb").exists()
    assert (tmp_path / "c" / "wandb" / "cache").is_dir()  # W&B's service log and cache
    assert list((tmp_path / "out").rglob("offline-run-*"))  # the run itself, in its run folder
    mine = tmp_path / "my_wandb_cache"
    proc = _run(tmp_path, WANDB_CACHE_DIR=str(mine))  # the user's setting wins
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert mine.is_dir() and any(mine.rglob("*"))


def test_keep_files_in_leaves_the_users_variables_and_moves_its_own(monkeypatch, tmp_path):
    monkeypatch.setenv("WANDB_CACHE_DIR", "/users/own")
    monkeypatch.delenv("WANDB_DATA_DIR", raising=False)
    monkeypatch.setattr(wandb_run, "_set_here", {})
    wandb_run.keep_files_in(tmp_path / "a")
    assert os.environ["WANDB_CACHE_DIR"] == "/users/own"
    assert os.environ["WANDB_DATA_DIR"] == str(tmp_path / "a" / "data")
    wandb_run.keep_files_in(tmp_path / "b")  # a later job of the same process, another cache folder
    assert os.environ["WANDB_DATA_DIR"] == str(tmp_path / "b" / "data")
    wandb_run.keep_files_in(None)
    assert os.environ["WANDB_DATA_DIR"] == str(tmp_path / "b" / "data")

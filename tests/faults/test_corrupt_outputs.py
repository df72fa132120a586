"""A finished run folder whose outputs were damaged afterwards (emptied, cut in half, deleted, edited) is
not reused: the rerun names the file and why in one line, recomputes, exits 0 and leaves the same results
as the run that first computed them. An intact folder is reused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
FAST = ("logger=none", "speat.n_permutations=1000")


def _run(script: str, run: Path, cache: Path, *overrides: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(REPO / f"{script}.py"), *overrides, f"hydra.run.dir={run}", f"paths.cache_dir={cache}"],
        env={**os.environ, **ENV},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def _damage_lines(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if "recomputing" in ln or "skipping" in ln]


def _halve(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _append(path: Path) -> None:
    with open(path, "a") as f:
        f.write("0,0\n")


DAMAGES = [
    ("results.json", lambda p: p.write_text(""), "results.json empty"),
    ("results.json", _halve, "results.json cut short"),
    ("results.csv", lambda p: p.unlink(), "results.csv missing"),
    ("layers.csv", _append, "layers.csv changed since the run wrote it"),
    ("report.md", lambda p: p.write_text(p.read_text().replace("d", "D")), "report.md changed since the run wrote it"),
]


@pytest.mark.slow
def test_a_damaged_speat_folder_is_recomputed_with_one_line_naming_the_file(tmp_path):
    run, cache = tmp_path / "run", tmp_path / "cache"
    _run("evaluate", tmp_path / "warm", cache, *FAST)  # every run below reads the cache (0 upstream forwards)
    _run("evaluate", run, cache, *FAST)
    originals = {p.name: p.read_bytes() for p in run.iterdir() if p.name in {d[0] for d in DAMAGES}}
    for name, damage, why in DAMAGES:
        damage(run / name)
        out = _run("evaluate", run, cache, *FAST)
        lines = _damage_lines(out)
        assert len(lines) == 1 and f"{run}/{why}" in lines[0] and "recomputing" in lines[0], out[-3000:]
        for kept, content in originals.items():  # the same results as the first run wrote, byte for byte
            assert (run / kept).read_bytes() == content, kept
    out = _run("evaluate", run, cache, *FAST)
    assert [ln for ln in _damage_lines(out) if "results already exist" in ln], out[-3000:]


@pytest.mark.slow
def test_a_damaged_train_folder_is_recomputed(tmp_path):
    run, cache = tmp_path / "run", tmp_path / "cache"
    fast = ("logger=none", "max_steps=60", "bias_tests=[demo_voice]")
    _run("train", run, cache, *fast)
    results = json.loads((run / "results.json").read_text())
    figure = next(run.glob("propagation_*.png"))
    figure.write_bytes(figure.read_bytes()[:100])  # a figure cut short
    out = _run("train", run, cache, *fast)
    lines = _damage_lines(out)
    assert len(lines) == 1 and f"{figure.name} cut short" in lines[0], out[-3000:]
    assert json.loads((run / "results.json").read_text()) == results
    assert figure.stat().st_size > 1000

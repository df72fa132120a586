"""Issue 40's first case as typed: the demo tests' clips copied, a run finished, then one WAV rewritten with
other audio of the same size and its mtime set back (``os.utime``). A rerun into the finished folder must
name the clip in one line and recompute, giving the d of a run into a new folder (before: "results already
exist ... skipping" with the old d). The same for a list job's pairs: those of the changed test recompute,
the other test's are reused."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "experiments" / "demo"
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
TESTS = ("demo_accent", "demo_voice")


def _demo_copy(folder: Path) -> Path:
    """The demo tests' manifests with their clips as 16-bit WAV files under ``folder`` (a paths.demo_dir)."""
    for test in TESTS:
        rows = list(csv.DictReader(open(DEMO / f"{test}.csv", newline="", encoding="utf-8")))
        for row in rows:
            audio, rate = sf.read(DEMO / row["path"])
            row["path"] = str(Path(row["path"]).with_suffix(".wav"))
            (folder / row["path"]).parent.mkdir(parents=True, exist_ok=True)
            sf.write(folder / row["path"], audio, rate, subtype="PCM_16")
        with open(folder / f"{test}.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return folder


def _rewrite_same_size_same_mtime(clip: Path, other: Path) -> None:
    """``clip`` gets ``other``'s samples (cut or repeated to its length), same format and size, and its
    old atime/mtime back."""
    before = clip.stat()
    audio, rate = sf.read(clip)
    replacement = np.resize(sf.read(other)[0], len(audio))
    assert not np.allclose(replacement, audio)
    sf.write(clip, replacement, rate, subtype=sf.info(clip).subtype)
    os.utime(clip, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = clip.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def _evaluate(run: Path, demo: Path, cache: Path, *overrides: str) -> str:
    command = [sys.executable, str(REPO / "evaluate.py"), "logger=none", *overrides]
    command += [f"paths.demo_dir={demo}", f"paths.cache_dir={cache}", f"hydra.run.dir={run}"]
    done = subprocess.run(command, env={**os.environ, **ENV}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done.stdout + done.stderr


def _d(folder: Path) -> float:
    return json.loads((folder / "results.json").read_text())[0]["d"]


@pytest.mark.slow
def test_a_clip_rewritten_with_its_mtime_set_back_is_recomputed(tmp_path):
    demo, cache = _demo_copy(tmp_path / "demo"), tmp_path / "cache"
    run, job = tmp_path / "run", tmp_path / "job"
    pairs = ("bias_test=[demo_accent,demo_voice]", "aggregation=[mean_sum,max_last]")
    _evaluate(run, demo, cache, "bias_test=demo_accent")
    _evaluate(job, demo, cache, *pairs)
    before = _d(run)
    rows = list(csv.DictReader(open(demo / "demo_accent.csv", newline="", encoding="utf-8")))
    clip = demo / next(r["path"] for r in rows if r["role"] == "X")
    _rewrite_same_size_same_mtime(clip, demo / next(r["path"] for r in rows if r["role"] == "A"))

    out = _evaluate(run, demo, cache, "bias_test=demo_accent")
    named = [line for line in out.splitlines() if str(clip) in line]
    assert len(named) == 1 and "recomputing" in named[0] and "skipping" not in out, out
    fresh = tmp_path / "fresh"
    _evaluate(fresh, demo, cache, "bias_test=demo_accent")
    assert _d(run) == _d(fresh) != before

    out = _evaluate(job, demo, cache, *pairs)
    named = [line for line in out.splitlines() if str(clip) in line]
    # the job's own record, then each of the changed test's two pairs; the other test's pairs are reused
    assert len(named) == 3 and all("recomputing" in line for line in named), out
    assert "2 pair(s) (2 of 4 already finished)" in out, out
    assert _d(job / "demo_accent" / "mean_sum") == _d(fresh)
    rerun = _evaluate(job, demo, cache, *pairs)  # nothing changed since: the whole job is reused
    assert "skipping" in rerun and str(clip) not in rerun, rerun
    shutil.rmtree(cache)  # no audio index: every clip is decoded again, the same audio, still reused
    assert "skipping" in _evaluate(run, demo, cache, "bias_test=demo_accent")

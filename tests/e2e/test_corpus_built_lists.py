"""A list of corpus-built bias tests, mixed with a demo test, runs as typed on corpora laid out as the real
ones are (the Speech Accent Archive and MESS fixture trees of tests/stimuli/corpus_trees.py): one job
builds every test's stimuli from the corpora and computes every pair, and each pair's d and p are those of
the test run alone. On e9b6a27 this command failed in Hydra before anything ran ("bias_test_base@bias_test
appears more than once in the final defaults list"): the list tests used demo tests only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.stimuli import corpus_trees as trees

REPO = Path(__file__).resolve().parents[2]
FAST = ("upstream=fbank", "speat.n_permutations=2000", "speat.per_layer=false", "logger=none")
CORPUS_TESTS = ("female_male", "young_old", "us_foreign")


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> Path:
    """SAA with 200 US-born speakers (60 age-matched female/male pairs, 120 clips with ages), 6 Korean
    speakers (us_foreign's matched pairs) and MESS (the pleasant/unpleasant attribute clips)."""
    root = tmp_path_factory.mktemp("corpora")
    rng = np.random.default_rng(0)
    speakers = trees.saa_speakers(rng, n_us=200, n_korean=6, n_uk=4)
    saa = trees.write_saa_scraped(root / "speech_accent_archive", speakers, audio_by="id")
    mess = root / "morgan_emotional_speech_set"
    trees.write_mess(mess, rng, clips_per_actor=20)
    # every clip its own tone (the trees' are alike: identical clips are refused, and give d no spread)
    clips = sorted(saa.glob("*.wav")) + sorted(mess.glob("*.wav"))
    for i, path in enumerate(clips):
        trees.write_tone(path, 0.1 + 0.001 * (i % 50), freq=120.0 + 7.3 * i)
    return root


def _evaluate(workdir: Path, corpora: Path, run_dir: Path, *overrides: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="offline", SPEECHBIAS_CACHE=str(workdir / "cache"))
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run(
        [
            sys.executable,
            str(REPO / "evaluate.py"),
            *overrides,
            *FAST,
            f"paths.data_root={corpora}",
            f"hydra.run.dir={run_dir}",
        ],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _result(folder: Path) -> dict:
    rows = json.loads((folder / "results.json").read_text())
    return rows[0] if isinstance(rows, list) else rows


def test_a_list_of_corpus_built_and_demo_tests_runs_as_typed_and_equals_each_test_alone(tmp_path, corpora):
    names = [*CORPUS_TESTS, "demo_voice"]
    job = tmp_path / "job"
    proc = _evaluate(tmp_path, corpora, job, f"bias_test=[{','.join(names)}]")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    for name in CORPUS_TESTS[:2]:  # two of them alone, from the cache the list job filled
        alone = tmp_path / f"alone_{name}"
        single = _evaluate(tmp_path, corpora, alone, f"bias_test={name}")
        assert single.returncode == 0, single.stderr[-3000:]
        in_list, by_itself = _result(job / name / "mean_sum"), _result(alone)
        assert in_list["n_x"] == by_itself["n_x"] and in_list["n_a"] == by_itself["n_a"]
        assert in_list["d"] == by_itself["d"] and in_list["p"] == by_itself["p"], name
    for name in names:
        result = _result(job / name / "mean_sum")
        assert np.isfinite(result["d"]) and 0 < result["p"] <= 1, (name, result)
    # each corpus-built test's stimuli were built from the corpora: its manifest, with the paper's sizes
    built = {name: (tmp_path / "cache" / "manifests" / f"{name}-ours-seed0.csv") for name in CORPUS_TESTS}
    assert all(path.is_file() for path in built.values()), sorted(p.name for p in (tmp_path / "cache").rglob("*.csv"))
    assert _result(job / "female_male" / "mean_sum")["n_x"] == 60

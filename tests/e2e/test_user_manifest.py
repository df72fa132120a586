"""A user's manifest (README: ``bias_test.manifest=...``) is the user's test: named after its file (or
``bias_test.name``), labelled from its own group column, never the demo's name, espeak labels or caveat."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from speechbias.stimuli.bias_test import BiasTest

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "experiments" / "demo"
GROUPS = {"X": "alto", "Y": "bass", "A": "bright", "B": "dark"}


def _user_manifest(tmp_path: Path, pair_ids: bool = True) -> Path:
    df = pd.read_csv(DEMO / "demo_voice.csv", dtype=str, keep_default_na=False)
    df["path"] = [str(DEMO / p) for p in df["path"]]
    df["group"] = df["role"].map(GROUPS)
    if not pair_ids:
        df["pair_id"] = ""
    path = tmp_path / "my_voices.csv"
    df.to_csv(path, index=False)
    return path


def _evaluate(tmp_path: Path, *overrides: str) -> tuple[str, Path]:
    run = tmp_path / "run"
    env = dict(os.environ, HF_HUB_OFFLINE="1", SPEECHBIAS_CACHE=str(tmp_path / "cache"))
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "evaluate.py"),
            f"hydra.run.dir={run}",
            "logger=none",
            "speat.n_permutations=1000",
            *overrides,
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr, run


def _metric_keys(run: Path) -> set[str]:
    entries = [json.loads(line) for line in (run / "tracker_log.jsonl").read_text().splitlines()]
    return {k for e in entries if e["kind"] == "metrics" for k in e["values"]}


@pytest.mark.slow
def test_a_user_manifest_is_named_and_labelled_from_its_own_content(tmp_path):
    out, run = _evaluate(tmp_path, f"bias_test.manifest={_user_manifest(tmp_path)}")
    report = (run / "report.md").read_text()
    assert "SpEAT: fbank / my_voices / mean_sum" in report
    assert "alto (X) is more associated with bright than bass (Y) is" in report
    for demo_word in ("demo_voice", "espeak", "DEMO", "prosody"):
        assert demo_word not in report and demo_word not in out, demo_word
    assert _metric_keys(run) >= {"speat/my_voices/d", "speat/my_voices/p"}
    assert json.loads((run / "results.json").read_text())[0]["test"] == "my_voices"


@pytest.mark.slow
def test_bias_test_name_names_a_user_manifest(tmp_path):
    _, run = _evaluate(
        tmp_path, f"bias_test.manifest={_user_manifest(tmp_path)}", "bias_test.name=choir", "speat.per_layer=false"
    )
    assert _metric_keys(run) == {"speat/choir/d", "speat/choir/p"}


def test_the_shipped_manifest_stays_the_demo(tmp_path):
    demo = BiasTest(
        name="demo_voice",
        manifest=str(DEMO / "demo_voice.csv"),
        demo_manifest=str(DEMO / ".." / "demo" / "demo_voice.csv"),
        x_label="espeak female voice",
    )
    assert demo.name == "demo_voice" and not demo.user_manifest and demo.x_label == "espeak female voice"


def test_a_user_manifest_without_pair_ids_is_resampled_iid(tmp_path):
    test = BiasTest(
        name="demo_voice",
        manifest=str(_user_manifest(tmp_path, pair_ids=False)),
        resampling="paired",
        demo_manifest=str(DEMO / "demo_voice.csv"),
        x_label="espeak female voice",
        human_iat_d=0.3,
    )
    assert test.user_manifest and test.name == "my_voices" and test.human_iat_d is None
    test.load()
    assert (test.x_label, test.y_label, test.a_label, test.b_label) == ("alto", "bass", "bright", "dark")
    assert test.resampling == "iid"
    paired = BiasTest(
        name="demo_voice",
        manifest=str(_user_manifest(tmp_path)),
        resampling="paired",
        demo_manifest=str(DEMO / "demo_voice.csv"),
    )
    paired.load()
    assert paired.resampling == "paired"

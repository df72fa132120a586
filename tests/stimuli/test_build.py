"""End to end: bias test configs -> builder -> cached manifest + sidecar report (ours and paper selections)."""

from __future__ import annotations

import json
import math

import hydra
import numpy as np
import pandas as pd
import pytest
import soundfile as sf
from omegaconf import OmegaConf

from speechbias.config_composition import bias_test_config

from speechbias.stimuli.bias_test import BiasTest
from speechbias.stimuli.paper_lists import PaperListError
from speechbias.stimuli.registry import RECIPES
from speechbias.stimuli.selection import build_test

from tests.conftest import CONF_DIR
from tests.stimuli import corpus_trees as trees

TABLE1 = {
    "abled_disabled": 0.45,
    "european_african_american": 0.37,
    "female_male": 0.31,
    "human_synthesized": 0.33,
    "us_foreign": 0.32,
    "young_old": 0.49,
}


@pytest.fixture
def us_data(tmp_path):
    rng = np.random.default_rng(0)
    root = tmp_path / "data"
    speakers = trees.saa_speakers(rng, n_us=30, n_korean=6, n_uk=4)
    trees.write_saa_scraped(root / "speech_accent_archive", speakers, audio_by="id")
    trees.write_mess(root / "morgan_emotional_speech_set", rng, clips_per_actor=20)
    return root, speakers


def compose(test: str, data_root, cache_dir, **extra):
    cfg = OmegaConf.create({"paths": {"data_root": str(data_root), "cache_dir": str(cache_dir)}, "seed": 0, **extra})
    cfg.bias_test = bias_test_config(test, CONF_DIR)
    return cfg


def test_every_paper_config_names_a_recipe_and_table1_values():
    names = sorted(p.stem for p in (CONF_DIR / "bias_test").glob("*.yaml") if not p.stem.startswith("demo_"))
    assert names == sorted(RECIPES)
    for name in names:
        cfg = compose(name, "/data", "/cache")
        bt = cfg.bias_test
        assert bt.name == name == bt.builder.test and bt.resampling in ("iid", "paired", "stratified")
        assert bt.manifest == f"/cache/manifests/{name}-ours-seed0.csv"
        if name in TABLE1:
            assert bt.human_iat_d == TABLE1[name]
    paper = compose("female_male", "/data", "/cache", selection={"name": "paper", "paper_lists_dir": "/lists"})
    assert paper.bias_test.manifest == "/cache/manifests/female_male-paper-seed0.csv"
    assert paper.bias_test.builder.paper_lists_dir == "/lists"


def test_config_builds_once_caches_and_writes_report(us_data, tmp_path):
    root, speakers = us_data
    cfg = compose("female_male", root, tmp_path / "cache")
    cfg.bias_test.builder.params = {"n_pairs": 8}
    bt = hydra.utils.instantiate(cfg.bias_test)
    assert isinstance(bt, BiasTest) and bt.human_iat_d == 0.31 and bt.resampling == "paired"
    df = bt.load()
    manifest = tmp_path / "cache" / "manifests" / "female_male-ours-seed0.csv"
    assert manifest.is_file()
    assert df.groupby("role").size().to_dict() == {"A": 60, "B": 60, "X": 8, "Y": 8}
    report = json.loads(manifest.with_name("female_male-ours-seed0.report.json").read_text())
    assert report["counts"]["per_group"] == {"A:pleasant": 60, "B:unpleasant": 60, "X:female": 8, "Y:male": 8}
    assert report["counts"]["n_pairs"] == 8 and report["seed"] == 0
    assert report["clip_length"]["test"].startswith("paired") and report["clip_length"]["n_pairs"] == 8
    assert report["attribute_pool"]["valence_on_age"]["n"] == 120  # all rated MESS clips
    assert manifest.with_name("female_male-ours-seed0.valence_residuals.png").is_file()
    assert report["attribute_pool"]["valence_on_age"]["plot"] == str(
        manifest.with_name("female_male-ours-seed0.valence_residuals.png")
    )
    assert "exact matching on age" in manifest.with_name("female_male-ours-seed0.report.md").read_text()

    def must_not_build():
        raise AssertionError("builder called although the manifest is cached")

    again = BiasTest(name="female_male", manifest=str(manifest), builder=must_not_build)
    cols = ["clip_id", "path", "role", "group", "speaker", "pair_id", "stratum"]
    pd.testing.assert_frame_equal(again.load()[cols], df[cols])
    # the whole build is a function of the seed
    twin = build_test("female_male", data_root=root, seed=0, params={"n_pairs": 8})
    assert list(twin["clip_id"]) == list(df["clip_id"])


def _paper_lists(lists, speakers, mess_codes):
    us = speakers[speakers["birth_place"].str.endswith("usa") & speakers["has_mp3"]]
    f, m = us[us["sex"] == "female"].head(3), us[us["sex"] == "male"].head(3)
    rows = pd.concat([f.assign(pair_id=range(3)), m.assign(pair_id=range(3))])
    rows["url"], rows["age_rank"], rows["index"] = "", "", range(len(rows))
    d = lists / "speech_accent_archive" / "male_female"
    d.mkdir(parents=True)
    rows.to_csv(d / "clip_info.csv", index=False)
    (lists / "morgan_emotional_speech_set").mkdir(parents=True)
    (lists / "morgan_emotional_speech_set" / "all.tsv").write_text(
        "data/morgan_emotional_speech_set\n" + "".join(f"{c}_SCR.wav\t1600\n" for c in mess_codes)
    )
    return rows


def test_paper_selection_uses_published_rows_and_reports_missing(us_data, tmp_path):
    root, speakers = us_data
    mess = pd.read_csv(root / "morgan_emotional_speech_set" / "Coded stimuli final.csv")
    rows = _paper_lists(tmp_path / "lists", speakers, mess["code"])
    df = build_test(
        "female_male",
        selection="paper",
        data_root=root,
        paper_lists_dir=tmp_path / "lists",
        manifest_path=tmp_path / "m.csv",
    )
    x = df[df["role"] == "X"]
    assert sorted(x["speaker"]) == sorted(rows.loc[rows["sex"] == "female", "name"])
    assert set(df.loc[df["role"].isin(["X", "Y"]), "pair_id"]) == {"paper-0", "paper-1", "paper-2"}
    assert df.groupby("role").size()[["A", "B"]].tolist() == [60, 60]
    gone = rows.iloc[0]
    (root / "speech_accent_archive" / f"{gone['id']}.wav").unlink()
    with pytest.raises(PaperListError, match=rf"1 of 6 published clips not found, e.g. \['saa:{gone['name']}"):
        build_test("female_male", selection="paper", data_root=root, paper_lists_dir=tmp_path / "lists")
    partial = build_test(
        "female_male",
        selection="paper",
        data_root=root,
        paper_lists_dir=tmp_path / "lists",
        allow_missing=True,
        manifest_path=tmp_path / "p.csv",
    )
    assert partial.groupby("role").size()[["X", "Y"]].tolist() == [2, 2]  # the partner of the missing clip goes too
    assert "dropped them and 1 broken pair" in (tmp_path / "p.report.md").read_text()
    with pytest.raises(ValueError, match="needs paper_lists_dir"):
        build_test("female_male", selection="paper", data_root=root)


def test_european_african_american_cuts_segments_and_tests_lengths(tmp_path):
    root = tmp_path / "data"
    cells = [("f", "y", "f"), ("f", "o", "m"), ("m", "y", "f"), ("m", "o", "m")]
    lengths = [[6.0, 8.0, 11.0], [7.0, 9.5], [6.5, 12.0], [8.0, 10.0]]
    for k, (_cell, ls) in enumerate(zip(cells, lengths)):
        trees.write_buckeye_recording(root / "buckeye", f"s{k + 1:02d}01a", ls)
    pd.DataFrame(
        {
            "speaker": [f"S{k + 1:02d}" for k in range(4)],
            "speaker_gender": [c[0] for c in cells],
            "speaker_age": [c[1] for c in cells],
            "interviewer_gender": [c[2] for c in cells],
        }
    ).to_csv(root / "buckeye" / "speakers.csv", index=False)
    full = {"f": "Female", "m": "Male"}
    trees.write_coraal_component(
        root / "CORAAL",
        "ROC",
        [
            {
                "file": f"ROC_se0_ag{k}_{g}_01_1",
                "spkr": f"ROC_se0_ag{k}_{g}_01",
                "gender": full[g],
                "age": 24 if a == "y" else 55,
                "interviewer": full[i],
                "lengths": [x + 0.3 for x in ls],
            }
            for k, ((g, a, i), ls) in enumerate(zip(cells, lengths))
        ],
    )
    trees.write_mess(root / "morgan_emotional_speech_set", np.random.default_rng(1), clips_per_actor=20)
    man_path = tmp_path / "cache" / "ea_aa.csv"
    df = build_test(
        "european_african_american",
        data_root=root,
        seed=0,
        manifest_path=man_path,
        params={"pairs_per_cell": 2, "caliper_s": 0.5},
    )
    t = df[df["role"].isin(["X", "Y"])]
    assert t.groupby("role").size().to_dict() == {"X": 8, "Y": 8}
    for r in t.itertuples():
        assert r.path.startswith(str(tmp_path / "cache" / "ea_aa_segments"))
        info = sf.info(r.path)
        assert info.frames / info.samplerate == pytest.approx(r.end_s - r.start_s, abs=2e-3)
    wide = t.pivot(index="pair_id", columns="role", values="duration_s")
    d = wide["X"] - wide["Y"]
    expected_t = d.mean() / (d.std(ddof=1) / math.sqrt(len(d)))
    report = json.loads((tmp_path / "cache" / "ea_aa.report.json").read_text())
    assert report["clip_length"]["t"] == pytest.approx(expected_t)
    assert report["counts"]["per_stratum"] == {
        "A:F1": 10,
        "A:F2": 10,
        "A:F3": 10,
        "A:M1": 10,
        "A:M2": 10,
        "A:M3": 10,
        "B:F1": 10,
        "B:F2": 10,
        "B:F3": 10,
        "B:M1": 10,
        "B:M2": 10,
        "B:M3": 10,
        "X:female|old": 2,
        "X:female|young": 2,
        "X:male|old": 2,
        "X:male|young": 2,
        "Y:female|old": 2,
        "Y:female|young": 2,
        "Y:male|old": 2,
        "Y:male|young": 2,
    }
    with pytest.raises(ValueError, match="not a SpEAT paper test"):
        build_test("nonsense", data_root=root)


def test_us_foreign_sidecar_reports_propensity_balance(us_data, tmp_path):
    root, speakers = us_data
    manifest = tmp_path / "us_foreign.csv"
    df = build_test("us_foreign", data_root=root, seed=0, manifest_path=manifest)
    report = json.loads(manifest.with_name("us_foreign.report.json").read_text())
    bal = report["balance"]
    n_pairs = int((df["role"] == "X").sum())
    assert bal["n_pairs"] == n_pairs == report["counts"]["n_pairs"] and bal["caliper"] == 0.001
    assert set(bal["smd"]) == {"age", "male"} and set(bal["smd"]["age"]) >= {"before", "after"}
    ko = speakers[speakers["native_language"] == "korean"]
    assert bal["n_pairs"] + bal["n_unmatched_treated"] == len(ko)
    md = manifest.with_name("us_foreign.report.md").read_text()
    assert "## Covariate balance" in md and "| age |" in md and "| male |" in md
    assert df.attrs["report"]["balance"] == bal

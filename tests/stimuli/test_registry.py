"""The bias-test registry: one recipe per paper test, each fact in one place, and loading tests by name."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from omegaconf import OmegaConf

from speechbias.config_composition import bias_test_config

from speechbias.stimuli.bias_test import BiasTest
from speechbias.stimuli.paper_lists import PaperListError
from speechbias.stimuli.registry import RECIPES, load_bias_tests, published_tests, recipe
from speechbias.stimuli.selection import build_test
from speechbias.stimuli.selection.sources import CORPUS_DIRS

from tests.conftest import CONF_DIR
from tests.stimuli import corpus_trees as trees

RECIPE_FACTS = ("x_label", "y_label", "a_label", "b_label")  # the groups' names: the recipe's, via the manifest


def paths_node(tmp_path):
    return OmegaConf.create(
        {
            "root_dir": str(tmp_path / "project"),
            "data_root": str(tmp_path / "data"),
            "cache_dir": str(tmp_path / "cache"),
            "demo_dir": str(tmp_path / "demo"),
        }
    )


def test_every_recipe_names_known_corpora_and_a_yaml_that_does_not_restate_it():
    for name, r in RECIPES.items():
        assert r.name == name and len(r.groups) == 2 and r.groups[0] != r.groups[1]
        assert set(r.corpora) | {r.attributes.corpus} <= set(CORPUS_DIRS), name
        raw = OmegaConf.load(CONF_DIR / "bias_test" / f"{name}.yaml")  # the file: scoring and display only
        assert not set(RECIPE_FACTS) & set(raw) and "builder" not in raw, name
        composed = bias_test_config(name, CONF_DIR)  # with the shared builder of conf/bias_test_base
        assert OmegaConf.to_container(composed)["builder"]["test"] == "${..name}", name
    assert recipe("female_male") is RECIPES["female_male"]
    with pytest.raises(ValueError, match=r"'nonsense' is not a SpEAT paper test; known: \['abled_disabled'"):
        recipe("nonsense")
    assert "abled_disabled_uaspeech" not in published_tests() and "female_male" in published_tests()


def test_demo_tests_keep_their_own_labels(tmp_path):
    voice, accent = load_bias_tests(["demo_voice", "demo_accent"], paths_node(tmp_path), seed=0, config_dir=CONF_DIR)
    assert voice.manifest == str(tmp_path / "demo" / "demo_voice.csv") and voice.builder is None
    assert (voice.x_label, voice.y_label) == ("espeak female voice", "espeak male voice")
    assert accent.name == "demo_accent" and accent.resampling == "paired"


def test_load_bias_tests_resolves_paths_seed_and_selection_without_building(tmp_path):
    paths = paths_node(tmp_path)
    (fm,) = load_bias_tests(["female_male"], paths, seed=3, config_dir=CONF_DIR)
    assert isinstance(fm, BiasTest) and fm.human_iat_d == 0.31 and fm.resampling == "paired"
    assert fm.manifest == str(tmp_path / "cache" / "manifests" / "female_male-ours-seed3.csv")
    assert fm.builder.keywords["seed"] == 3 and fm.builder.keywords["test"] == "female_male"
    assert fm.builder.keywords["data_root"] == str(tmp_path / "data")
    assert not (tmp_path / "cache").exists()  # instantiating builds nothing
    (paper,) = load_bias_tests(
        ["female_male"], paths, seed=0, config_dir=CONF_DIR, selection={"name": "paper", "paper_lists_dir": "/lists"}
    )
    assert paper.manifest.endswith("female_male-paper-seed0.csv")
    assert paper.builder.keywords["paper_lists_dir"] == "/lists"
    # config_dir defaults to <paths.root_dir>/conf
    (tmp_path / "project" / "conf" / "bias_test").mkdir(parents=True)
    (tmp_path / "project" / "conf" / "bias_test" / "mine.yaml").write_text(
        "_target_: speechbias.stimuli.bias_test.BiasTest\nname: mine\nmanifest: ${paths.cache_dir}/m${seed}.csv\n"
    )
    assert load_bias_tests(["mine"], paths, seed=7)[0].manifest == str(tmp_path / "cache" / "m7.csv")


def test_load_bias_tests_takes_inline_configs_and_rejects_unknown_and_repeated_names(tmp_path):
    paths = paths_node(tmp_path)
    inline = {"_target_": "speechbias.stimuli.bias_test.BiasTest", "name": "own", "manifest": "${paths.demo_dir}/o.csv"}
    own, voice = load_bias_tests([inline, "demo_voice"], paths, seed=0, config_dir=CONF_DIR)
    assert own.name == "own" and own.manifest == str(tmp_path / "demo" / "o.csv") and voice.name == "demo_voice"
    with pytest.raises(
        ValueError, match=r"no bias test 'nope' \(.*nope.yaml does not exist\); known: .*demo_accent, demo_voice"
    ):
        load_bias_tests(["nope"], paths, seed=0, config_dir=CONF_DIR)
    with pytest.raises(ValueError, match=r"lists a test twice: \['demo_voice', 'demo_voice'\]"):
        load_bias_tests(["demo_voice", "demo_voice"], paths, seed=0, config_dir=CONF_DIR)
    with pytest.raises(ValueError, match="must be a list of bias test names"):
        load_bias_tests("demo_voice", paths, seed=0, config_dir=CONF_DIR)


def test_labels_are_the_recipe_groups_for_both_selections(tmp_path):
    rng = np.random.default_rng(0)
    root = tmp_path / "data"
    trees.write_saa_scraped(root / "speech_accent_archive", trees.saa_speakers(rng, n_us=30, n_korean=6, n_uk=4))
    trees.write_mess(root / "morgan_emotional_speech_set", rng, clips_per_actor=20)
    (test,) = load_bias_tests(["female_male"], paths_node(tmp_path), seed=0, config_dir=CONF_DIR)
    test.builder.keywords["params"] = {"n_pairs": 4}
    assert test.x_label is None  # named by the manifest on load
    df = test.load()
    assert (test.x_label, test.y_label, test.a_label, test.b_label) == ("female", "male", "pleasant", "unpleasant")
    assert df.groupby("role")["group"].unique().map(list).to_dict() == {
        "A": ["pleasant"],
        "B": ["unpleasant"],
        "X": ["female"],
        "Y": ["male"],
    }
    with pytest.raises(PaperListError, match=r"no published list for test 'abled_disabled_uaspeech'; published: \["):
        build_test("abled_disabled_uaspeech", selection="paper", data_root=root, paper_lists_dir=tmp_path)


# --- uk_female_male: a test added by one YAML and one recipe ---------------------------------------


def test_uk_female_male_builds_from_the_corpus_trees(tmp_path):
    rng = np.random.default_rng(0)
    root = tmp_path / "data"
    speakers = trees.saa_speakers(rng, n_us=6, n_korean=2, n_uk=13)
    uk = speakers["birth_place"] == "leeds, uk"  # sexes alternate f, m, f, ...: one same-age man per woman
    speakers.loc[uk, "age"] = 20.0 + 10 * (np.arange(uk.sum()) // 2)  # but the 13th, a woman of 80
    trees.write_saa_scraped(root / "speech_accent_archive", speakers)
    trees.write_eu_emotion(root / "EU_Emotion_Stimulus_Set", rng)  # 4 actors
    (test,) = load_bias_tests(["uk_female_male"], paths_node(tmp_path), seed=0, config_dir=CONF_DIR)
    assert test.resampling == "paired" and test.human_iat_d == 0.31
    df = test.load()
    assert (test.x_label, test.y_label) == ("female", "male")
    assert df.groupby(["role", "group"]).size().to_dict() == {
        ("A", "pleasant"): 12,
        ("B", "unpleasant"): 12,
        ("X", "female"): 6,
        ("Y", "male"): 6,
    }
    targets = df[df["role"].isin(["X", "Y"])]
    assert set(targets["speaker"]) == set(speakers.loc[uk, "name"].iloc[:12])  # UK speakers only, not the 80-year-old
    wide = targets.pivot(index="pair_id", columns="role", values="age")
    assert len(wide) == 6 and (wide["X"] == wide["Y"]).all()
    assert set(df.loc[df["role"].isin(["A", "B"]), "clip_id"].str.split(":").str[0]) == {"eu_emotion"}
    report = (tmp_path / "cache" / "manifests" / "uk_female_male-ours-seed0.report.md").read_text()
    assert "exact matching on age (years) of UK/Ireland-born native English speakers; 6 possible" in report
    with pytest.raises(PaperListError, match="no published list for test 'uk_female_male'"):
        build_test("uk_female_male", selection="paper", data_root=root, paper_lists_dir=tmp_path)


@pytest.mark.skipif(not trees.SHARED_PAPER_DATA.is_dir(), reason="../shared/data/speat_paper not available")
def test_uk_female_male_on_the_real_speaker_list():
    from speechbias.stimuli.corpora.saa import read_saa_metadata
    from speechbias.stimuli.selection import targets as T

    saa = read_saa_metadata(trees.SHARED_PAPER_DATA / "speech_accent_archive" / "speaker_list.csv")
    for seed in (0, 1):
        clips = T.uk_female_male(saa, np.random.default_rng(seed)).clips
        assert clips.groupby("role").size().to_dict() == {"X": 12, "Y": 12}


def test_the_modules_a_speat_run_imports_leave_the_recipes_and_scipy_stats_out():
    """Every SpEAT run's config builds its tests through the registry (``load_bias_tests``): importing it
    imports neither its recipes' procedures (every selection procedure, corpus and published-list reader:
    built on first use of ``RECIPES``) nor scipy.stats (~0.7 CPU-s; the selection diagnostics, imported
    with a corpus-built test's builder, import it only when they run)."""
    code = (
        "import sys, speechbias.launch.entry, speechbias.stimuli.registry, speechbias.tasks.speat, "
        "speechbias.tasks.speat_pairs, speechbias.speat.results, speechbias.stimuli.selection; "
        "print(sorted(m for m in ('scipy.stats', 'statsmodels', 'speechbias.stimuli.paper_lists', "
        "'speechbias.stimuli.selection.targets') if m in sys.modules)); "
        "from speechbias.stimuli.registry import RECIPES, recipe; "
        "print(recipe('female_male') is RECIPES['female_male'], 'speechbias.stimuli.paper_lists' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "True True"]

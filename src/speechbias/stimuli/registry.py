"""The bias tests there are, one registration each, and loading them by name.

A bias test is its YAML ``conf/bias_test/<name>.yaml``, what users select (``bias_test=<name>``).
The YAML is the single source of how the test is scored and shown: human IAT d, resampling design,
description; a corpus-built test takes its builder and cached manifest from
``conf/bias_test_base/corpus_built.yaml`` through its defaults list. A SpEAT paper test also has one :class:`Recipe` in
:data:`RECIPES`, the single source of how its stimuli are built: the target selection procedure and
the corpora it reads, the attribute set, the authors' published list and its reader, and the names of
groups X and Y (written into the manifest's ``group`` column, which is where the test's labels come
from). The YAML's builder (:func:`speechbias.stimuli.selection.build_test`) looks its recipe up here.

Adding a paper test: a YAML of five keys (copy one: its defaults list, ``name``, ``human_iat_d``,
``resampling``, ``description``) and a ``Recipe`` below; a new selection procedure goes to
:mod:`speechbias.stimuli.selection.targets`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import hydra
import numpy as np
from omegaconf import DictConfig, ListConfig, OmegaConf

from speechbias.config_composition import bias_test_config, bias_test_configs
from speechbias.stimuli.bias_test import BiasTest

if TYPE_CHECKING:
    import pandas as pd

    from speechbias.stimuli.paper_lists import PaperList
    from speechbias.stimuli.selection.result import Selection
    from speechbias.stimuli.selection.sources import CorpusSources

# (clip tables of the recipe's corpora, in order, rng, **params) -> targets with roles X, Y
TargetFn = Callable[..., "Selection"]


@dataclass(frozen=True)
class AttributeSet:
    """Pleasant (A) / unpleasant (B) stimuli: the corpus key they come from, and how they are chosen
    with selection=ours (``ours(clip table, rng)``) and selection=paper (``paper(lists_dir, sources,
    allow_missing)``)."""

    corpus: str
    ours: Callable[[pd.DataFrame, np.random.Generator], Selection]
    paper: Callable[[str | Path, CorpusSources, bool], Selection]


@dataclass(frozen=True)
class Recipe:
    """How one paper test's stimuli are built.

    ``groups``: names of X and Y. ``corpora``: keys of :data:`~speechbias.stimuli.selection.sources.CORPUS_DIRS`
    whose clip tables ``targets`` takes, in order (a published list's reader gets the same keys).
    ``paper_list``: the authors' list of the targets (None: selection=paper is not available).
    """

    name: str
    groups: tuple[str, str]
    corpora: tuple[str, ...]
    targets: TargetFn
    attributes: AttributeSet
    paper_list: PaperList | None = None

    def select_targets(self, sources: CorpusSources, rng: np.random.Generator, params: dict) -> Selection:
        """Targets by the paper's procedure (selection=ours); ``params`` are keyword overrides of ``targets``."""
        return self.targets(*(sources.table(c) for c in self.corpora), rng, **params)


SAA = "speech_accent_archive"  # folder of the archive's published lists
# RECIPES, MESS, EU_EMOTION: built on first use (module __getattr__), since their procedures import every
# selection procedure, corpus reader and published-list reader (~40-60 ms), which a run that loads its tests
# by name (load_bias_tests, every SpEAT run's config) does not need
LAZY = ("RECIPES", "MESS", "EU_EMOTION")


def __getattr__(name: str):
    """``RECIPES`` (test name -> :class:`Recipe`) and the attribute sets ``MESS``, ``EU_EMOTION``, built once."""
    if name in LAZY:
        return _registrations()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _registrations() -> dict:
    from speechbias.stimuli import paper_lists as lists
    from speechbias.stimuli.paper_lists import PaperList
    from speechbias.stimuli.selection import targets as T
    from speechbias.stimuli.selection.attributes import eu_emotion_attributes, mess_attributes

    MESS = AttributeSet("mess", mess_attributes, lists.paper_mess_attributes)
    EU_EMOTION = AttributeSet("eu_emotion", eu_emotion_attributes, lists.paper_eu_emotion_attributes)
    recipes = {
        r.name: r
        for r in (
            Recipe(
                "female_male",
                ("female", "male"),
                ("saa",),
                T.female_male,
                MESS,
                PaperList(f"{SAA}/male_female/clip_info.csv", lists.saa_sex_pairs),
            ),
            Recipe(
                "us_foreign",
                ("us", "foreign"),
                ("saa",),
                T.us_foreign,
                MESS,
                PaperList(f"{SAA}/us_korean/clip_info.csv", lists.saa_language_pairs),
            ),
            Recipe(
                "young_old",
                ("young", "old"),
                ("saa",),
                T.young_old,
                MESS,
                PaperList(f"{SAA}/usa_young_old/clip_info.csv", lists.saa_age_ranks),
            ),
            Recipe(
                "human_synthesized",
                ("human", "synthesized"),
                ("saa", "synthesized"),
                T.human_synthesized,
                MESS,
                PaperList("human_synthesized/clip_info.csv", lists.saa_and_synthesized),
            ),
            Recipe(
                "abled_disabled",
                ("abled", "disabled"),
                ("torgo",),
                T.abled_disabled,
                MESS,
                PaperList("TORGO/clip_info.csv", lists.torgo_pairs),
            ),
            Recipe(
                "european_african_american",
                ("european_american", "african_american"),
                ("buckeye", "coraal"),
                T.european_african_american,
                MESS,
                PaperList("coraal_buckeye_joined/clip_info.csv", lists.interview_segment_pairs),
            ),
            Recipe(
                "uk_young_old",
                ("young", "old"),
                ("saa",),
                T.uk_young_old,
                EU_EMOTION,
                PaperList(f"{SAA}/british_young_old/clip_info.csv", lists.saa_age_ranks),
            ),
            Recipe(
                "uk_british_foreign",
                ("british", "foreign"),
                ("romero_rivas",),
                T.uk_british_foreign,
                EU_EMOTION,
                PaperList("audio_iats/romero_rivas_et_al/clip_info.csv", lists.romero_rivas_pairs),
            ),
            Recipe("uk_female_male", ("female", "male"), ("saa",), T.uk_female_male, EU_EMOTION),
            Recipe("abled_disabled_uaspeech", ("abled", "disabled"), ("uaspeech",), T.abled_disabled_uaspeech, MESS),
            Recipe(
                "human_synthesized_mitchell",
                ("human", "synthesized"),
                ("mitchell",),
                T.human_synthesized_mitchell,
                MESS,
                PaperList("audio_iats/mitchell_et_al/audio_info.csv", lists.mitchell_by_voice),
            ),
            Recipe(
                "female_male_mitchell",
                ("female", "male"),
                ("mitchell",),
                T.female_male_mitchell,
                MESS,
                PaperList("audio_iats/mitchell_et_al/audio_info.csv", lists.mitchell_by_sex),
            ),
            Recipe(
                "us_foreign_pantos_perkins",
                ("us", "foreign"),
                ("pantos_perkins",),
                T.us_foreign_pantos_perkins,
                MESS,
                PaperList("audio_iats/pantos_perkins/clip_info.csv", lists.pantos_perkins_pairs),
            ),
        )
    }
    return {"RECIPES": recipes, "MESS": MESS, "EU_EMOTION": EU_EMOTION}


def recipe(test: str) -> Recipe:
    """The recipe of paper test ``test``; ValueError naming the known tests otherwise."""
    recipes = _registrations()["RECIPES"]
    if test not in recipes:
        raise ValueError(f"test {test!r} is not a SpEAT paper test; known: {sorted(recipes)}")
    return recipes[test]


def published_tests() -> list[str]:
    """Names of the paper tests whose targets the authors published (selection=paper)."""
    return sorted(name for name, r in _registrations()["RECIPES"].items() if r.paper_list is not None)


# --- bias tests by name (conf/bias_test/<name>.yaml) ---------------------------------------------


def load_bias_tests(
    entries, paths, seed: int | None, selection=None, config_dir: str | Path | None = None
) -> list[BiasTest]:
    """Instantiated bias tests of ``entries`` (names of ``conf/bias_test/<name>.yaml`` or inline BiasTest
    configs), with ``${paths.*}`` from ``paths`` (the run's paths node), ``${seed}`` from ``seed`` and
    ``${selection.*}`` from ``selection`` (a node with ``name`` and ``paper_lists_dir``; None: ours).

    ``config_dir``: the run's config folder holding ``bias_test/`` (default ``<paths.root_dir>/conf``).
    Nothing is built: a test's manifest is read or built by its ``load()``. ValueError for an unknown
    name (listing the known ones), a test listed twice, or ``entries`` that are not a list.
    """
    if not isinstance(entries, (list, tuple, ListConfig)):
        raise ValueError(f"bias_tests must be a list of bias test names, got {entries!r}")
    paths = paths if isinstance(paths, DictConfig) else OmegaConf.create(paths)
    folder = Path(config_dir if config_dir is not None else Path(str(paths.root_dir)) / "conf")
    context = {"paths": paths, "seed": seed, **({"selection": selection} if selection is not None else {})}
    bias_test_configs([e for e in entries if isinstance(e, str)], folder)  # composed together, then reused
    nodes = [bias_test_config(e, folder) if isinstance(e, str) else e for e in entries]  # a name, or inline
    tests = [hydra.utils.instantiate(OmegaConf.merge(context, {"bias_test": node}).bias_test) for node in nodes]
    names = [t.name for t in tests]
    if len(set(names)) != len(names):
        raise ValueError(f"bias_tests lists a test twice: {names}")
    return tests

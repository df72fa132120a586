"""The SpEAT paper's target stimulus selections (X = the group humans favour in the IAT, Y = the other).

Each function takes clip tables from :mod:`speechbias.stimuli.corpora` and a seeded
``numpy.random.Generator`` and returns a :class:`~speechbias.stimuli.selection.result.Selection`
whose clips have a ``role`` (X or Y); the groups' names are the test's entry in
:mod:`speechbias.stimuli.registry`, which the build writes into ``group``.
Counts default to the paper's; matching constraints are exact unless a caliper is stated; the
young/old age groups and the US/Korean propensity matching follow the authors' code
(github.com/isaacOnline/SpEAT, ``preprocessing/download_saa.py``) and their published lists.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from speechbias.stimuli.corpora.saa import british_native_english, korean_native_korean, us_native_english
from speechbias.stimuli.selection.authors_psm import knn_caliper_pairs
from speechbias.stimuli.selection.matching import (
    SelectionError,
    balance,
    exact_pairs,
    nearest_pairs,
    rank_extremes,
    sample_per_cell,
    sample_rows,
)
from speechbias.stimuli.selection.propensity import (
    authors_fold_scores,
    pair_differences,
    propensity_pairs,
    propensity_scores,
    standardized_mean_differences,
)
from speechbias.stimuli.selection.result import Selection, label, paired


def _usable_saa(df: pd.DataFrame) -> pd.DataFrame:
    """Speakers with audio (or listed audio, for metadata-only tables), a known sex and age; no synthetic voices."""
    ok = df["sex"].isin(["female", "male"]) & df["age"].notna() & (df["language"] != "synthesized")
    if "listed_audio" in df.columns:
        ok &= df["listed_audio"].astype(bool)
    return df[ok]


def _female_male(
    speakers: pd.DataFrame, rng: np.random.Generator, n_pairs: int | None, prefix: str, who: str
) -> Selection:
    pairs = exact_pairs(speakers[speakers["sex"] == "female"], speakers[speakers["sex"] == "male"], ["age"], rng)
    chosen = sample_rows(pairs, n_pairs, rng, f"{prefix}: age-matched female/male pairs")
    clips = paired(speakers, speakers, chosen, prefix)
    drawn = "all of them taken" if n_pairs is None else f"{n_pairs} drawn at random"
    return Selection(clips, f"exact matching on age (years) of {who}; {len(pairs)} possible disjoint pairs, {drawn}")


def female_male(saa: pd.DataFrame, rng: np.random.Generator, n_pairs: int = 60) -> Selection:
    """US-born native English speakers: female (X) and male (Y) matched exactly on age; ``n_pairs`` pairs."""
    return _female_male(
        _usable_saa(us_native_english(saa)), rng, n_pairs, "female_male", "US-born native English speakers"
    )


def uk_female_male(saa: pd.DataFrame, rng: np.random.Generator, n_pairs: int | None = None) -> Selection:
    """UK/Ireland-born native English speakers: female (X) and male (Y) matched exactly on age.

    As :func:`female_male` for the speakers of :func:`uk_young_old`; ``n_pairs`` None takes every
    disjoint pair (12 on the SpEAT authors' speaker table, where UK women are few).
    """
    return _female_male(
        _usable_saa(british_native_english(saa)),
        rng,
        n_pairs,
        "uk_female_male",
        "UK/Ireland-born native English speakers",
    )


US_FOREIGN_COVARIATES = ("age", "male")  # the authors' propensity model: age (years) and sex (1 = male)
US_FOREIGN_CALIPER = 0.001  # the authors' caliper, on the propensity-score (probability) scale


PROPENSITY_MODELS = ("logit", "authors_folds")


def us_foreign(
    saa: pd.DataFrame,
    rng: np.random.Generator,
    caliper: float = US_FOREIGN_CALIPER,
    n_pairs: int | None = None,
    propensity_model: str = "logit",
) -> Selection:
    """US natives (X) vs. Korean-born native Korean speakers (Y), propensity-score matched on age and sex.

    As the paper: P(Korean | age, male) from a logistic regression on both groups; each Korean
    speaker, in table (archive id) order, takes the US speaker with the nearest score, without
    replacement, within ``caliper`` on the probability scale; Koreans without one are left out.
    The number of pairs is a result; ``n_pairs`` (default: all) draws that many of them at random.
    ``propensity_model``: "logit" (one maximum-likelihood fit on all speakers; exact-distance ties
    broken by ``rng``) or "authors_folds" (the authors' psmpy procedure replayed:
    :func:`~speechbias.stimuli.selection.propensity.authors_fold_scores` and
    :func:`~speechbias.stimuli.selection.authors_psm.knn_caliper_pairs`; their 59 pairs, the same US
    partner for each Korean speaker, for any seed, and as poorly matched as theirs). The selection's ``balance`` has the
    model, the standardised mean differences before/after and the within-pair gaps.
    """
    if propensity_model not in PROPENSITY_MODELS:
        raise SelectionError(
            f"us_foreign: propensity_model must be one of {PROPENSITY_MODELS}, got {propensity_model!r}"
        )
    us, ko = _usable_saa(us_native_english(saa)), _usable_saa(korean_native_korean(saa))
    both = pd.concat([ko, us])
    treated = pd.Series(np.r_[np.ones(len(ko), bool), np.zeros(len(us), bool)], index=both.index)
    if not both.index.is_unique:
        raise SelectionError("us_foreign: the speaker table's index must be unique")
    covariates = pd.DataFrame({"age": both["age"].astype(float), "male": (both["sex"] == "male").astype(float)})
    if propensity_model == "logit":
        score, model = propensity_scores(treated, covariates, "us_foreign")
        matched = propensity_pairs(score, treated, caliper, rng)
    else:
        score = authors_fold_scores(treated, covariates)
        model = {
            "model": "the SpEAT authors' psmpy scores: L2-penalised logistic fits (C = 1) on class-balanced "
            "folds, averaged",
            "n": int(len(score)),
            "n_treated": int(treated.sum()),
        }
        # psmpy's nearest-neighbour order, ties included: the authors' partners, pair by pair
        matched = knn_caliper_pairs(score, treated, caliper)
    pairs = pd.DataFrame({"x": matched["control"], "y": matched["treated"]})
    chosen = sample_rows(pairs, n_pairs, rng, "us_foreign: propensity-matched US/Korean pairs")
    clips = paired(us, ko, chosen, "us_foreign", stratum_of=lambda r: r["sex"])
    smd = standardized_mean_differences(
        covariates.loc[ko.index], covariates.loc[us.index], covariates.loc[chosen["y"]], covariates.loc[chosen["x"]]
    )
    matching = {
        "method": "propensity-score matching, greedy 1:1 nearest neighbour without replacement",
        "treated": "foreign (Korean natives, Y)",
        "control": "us (US natives, X)",
        "covariates": list(US_FOREIGN_COVARIATES),
        "caliper": float(caliper),
        "caliper_scale": "propensity score",
        **model,
        "n_control": int(len(us)),
        "n_pairs": int(len(chosen)),
        "n_matched": int(len(pairs)),
        "n_unmatched_treated": int(len(ko) - len(pairs)),
        "smd": smd,
        "pair_differences": pair_differences(covariates.loc[chosen["y"]], covariates.loc[chosen["x"]]),
    }
    drawn = "" if n_pairs is None else f", {n_pairs} of them drawn at random"
    fit = "logistic model" if propensity_model == "logit" else "the authors' class-balanced-fold logistic models"
    return Selection(
        clips,
        f"propensity-score matching of Korean natives to US natives: {fit} of "
        f"P(Korean | age, male), greedy nearest neighbour without replacement within a caliper "
        f"of {caliper} on the score; {len(pairs)} of {len(ko)} Korean speakers matched{drawn}",
        balance=matching,
    )


def _young_old(speakers: pd.DataFrame, rng: np.random.Generator, n_extreme: int, name: str) -> Selection:
    young_idx, old_idx = rank_extremes(speakers, "age", n_extreme)
    ranked = pd.concat([speakers.loc[young_idx].assign(age_rank="young"), speakers.loc[old_idx].assign(age_rank="old")])
    balanced = balance(ranked, ["age_rank", "sex"], rng)
    young, old = balanced[balanced["age_rank"] == "young"], balanced[balanced["age_rank"] == "old"]
    clips = pd.concat([label(young, "X", stratum=young["sex"]), label(old, "Y", stratum=old["sex"])], ignore_index=True)
    per = len(young) // 2
    ages = speakers.loc[young_idx, "age"].max(), speakers.loc[old_idx, "age"].min()
    male = (ranked["sex"] == "male").astype(float).to_frame("male")
    smd = standardized_mean_differences(
        male[ranked["age_rank"] == "old"],
        male[ranked["age_rank"] == "young"],
        male.loc[old.index],
        male.loc[young.index],
    )
    sizes = ranked.groupby(["age_rank", "sex"]).size()
    balance_report = {
        "method": "sex-balanced subsample of the age groups",
        "treated": "old (Y)",
        "control": "young (X)",
        "covariates": ["male"],
        "smd": smd,
        "cells_before": {f"{a}|{s}": int(n) for (a, s), n in sizes.items()},
        "per_cell_after": int(per),
    }
    return Selection(
        clips,
        f"{name}: the {n_extreme} youngest and {n_extreme} oldest speakers by mean age rank "
        f"(a tie at the cut is in when its mean rank is; here ages <= {ages[0]:g} "
        f"({len(young_idx)}) and >= {ages[1]:g} ({len(old_idx)})), then balanced on sex by "
        f"drawing the smallest age-group x sex cell size ({per}) from every cell",
        balance=balance_report,
    )


def young_old(saa: pd.DataFrame, rng: np.random.Generator, n_extreme: int = 60) -> Selection:
    """Youngest (X) vs. oldest (Y) US-born native English speakers, balanced on sex (see :func:`uk_young_old`)."""
    return _young_old(_usable_saa(us_native_english(saa)), rng, n_extreme, "US natives")


def uk_young_old(saa: pd.DataFrame, rng: np.random.Generator, n_extreme: int = 25) -> Selection:
    """Youngest (X) vs. oldest (Y) UK/Ireland-born native English speakers, balanced on sex.

    The age groups are deterministic (:func:`~speechbias.stimuli.selection.matching.rank_extremes`:
    the ``n_extreme`` youngest/oldest by mean age rank); ``rng`` only draws the sex-balanced
    subsample, as the paper's ``groupby(["age_rank", "sex"]).sample(smallest cell)``.
    """
    return _young_old(_usable_saa(british_native_english(saa)), rng, n_extreme, "UK/Irish natives")


def human_synthesized(saa: pd.DataFrame, synth: pd.DataFrame, rng: np.random.Generator) -> Selection:
    """US natives (X) sampled to match the synthesized voices (Y) in number per sex."""
    us = _usable_saa(us_native_english(saa))
    humans = []
    for sex, n in synth["sex"].value_counts().sort_index().items():
        humans.append(sample_rows(us[us["sex"] == sex], int(n), rng, f"human_synthesized: US natives of sex {sex}"))
    human = pd.concat(humans)
    clips = pd.concat(
        [label(human, "X", stratum=human["sex"]), label(synth, "Y", stratum=synth["sex"])], ignore_index=True
    )
    return Selection(
        clips,
        "all synthesized voices; US-born native English speakers drawn at random, as many per sex "
        "as there are synthesized voices of that sex",
    )


def abled_disabled(torgo: pd.DataFrame, rng: np.random.Generator, pairs_per_sex: int = 30) -> Selection:
    """TORGO multi-word phrases: control (X) and dysarthric (Y) clips with the same text and speaker sex."""
    phrases = torgo[torgo["num_words"] > 1]
    control, dys = phrases[~phrases["dysarthric"]], phrases[phrases["dysarthric"]]
    pairs = exact_pairs(control, dys, ["sex", "text"], rng)
    pairs["sex"] = control.loc[pairs["x"], "sex"].to_numpy()
    chosen = sample_per_cell(pairs, ["sex"], pairs_per_sex, rng, "abled_disabled: text- and sex-matched pairs")
    clips = paired(control, dys, chosen, "abled_disabled", stratum_of=lambda r: r["sex"])
    return Selection(
        clips,
        f"exact matching on prompt text and speaker sex of head-mic phrases (> 1 word); "
        f"{len(pairs)} possible pairs, {pairs_per_sex} drawn per sex",
    )


def abled_disabled_uaspeech(ua: pd.DataFrame, rng: np.random.Generator, words_per_speaker: int = 5) -> Selection:
    """UASpeech: each dysarthric speaker's words (Y) paired with their control's same word, block and mic (X)."""
    parts, notes = [], []
    for number, spk in ua.groupby("speaker_number", sort=True):
        dys, ctrl = spk[spk["dysarthric"]], spk[~spk["dysarthric"]]
        if dys.empty or ctrl.empty:
            notes.append(f"speaker {number}: no {'control' if ctrl.empty else 'dysarthric'} recordings, skipped")
            continue
        pairs = exact_pairs(ctrl, dys, ["word", "block", "mic"], rng)
        pairs["word"] = ctrl.loc[pairs["x"], "word"].to_numpy()
        pairs = pairs.iloc[rng.permutation(len(pairs))].drop_duplicates("word")
        parts.append(sample_rows(pairs, words_per_speaker, rng, f"abled_disabled_uaspeech: words of speaker {number}"))
    if not parts:
        raise SelectionError("abled_disabled_uaspeech: no dysarthric speaker has a matching control speaker")
    chosen = pd.concat(parts, ignore_index=True)
    clips = paired(ua, ua, chosen, "uaspeech", stratum_of=lambda r: r["sex"])
    return Selection(
        clips,
        f"per dysarthric speaker, {words_per_speaker} distinct words drawn at random among those "
        "recorded by the speaker and their control with the same block and microphone",
        notes=notes,
    )


def european_african_american(
    buckeye: pd.DataFrame,
    coraal: pd.DataFrame,
    rng: np.random.Generator,
    pairs_per_cell: int = 15,
    caliper_s: float = 1.0,
) -> Selection:
    """Buckeye (X, European American) vs. CORAAL (Y, African American) segments > 5 s.

    Exact matching on speaker sex, age group and interviewer sex; nearest neighbour on segment
    length within ``caliper_s``; ``pairs_per_cell`` pairs drawn per sex x age-group cell.
    """
    keys = ["sex", "age_group", "interviewer_sex"]
    pairs = nearest_pairs(buckeye, coraal, keys, "duration_s", caliper_s, rng)
    pairs["sex"] = buckeye.loc[pairs["x"], "sex"].to_numpy()
    pairs["age_group"] = buckeye.loc[pairs["x"], "age_group"].to_numpy()
    chosen = sample_per_cell(
        pairs, ["sex", "age_group"], pairs_per_cell, rng, "european_african_american: matched segment pairs"
    )
    clips = paired(buckeye, coraal, chosen, "ea_aa", stratum_of=lambda r: f"{r['sex']}|{r['age_group']}")
    return Selection(
        clips,
        f"exact matching on speaker sex, age group (young < 30, old > 40) and interviewer sex; "
        f"greedy nearest-neighbour matching on segment length within {caliper_s} s without "
        f"replacement ({len(pairs)} pairs); {pairs_per_cell} pairs drawn per sex x age group",
    )


def human_synthesized_mitchell(mitchell: pd.DataFrame, rng: np.random.Generator | None = None) -> Selection:
    """Mitchell et al.'s human (X) and synthesized (Y) voices, all clips, stratified by sex (``rng`` unused)."""
    h, s = mitchell[mitchell["voice"] == "human"], mitchell[mitchell["voice"] == "synthesized"]
    clips = pd.concat([label(h, "X", stratum=h["sex"]), label(s, "Y", stratum=s["sex"])], ignore_index=True)
    return Selection(clips, "all clips of Mitchell et al. (2011)")


def female_male_mitchell(mitchell: pd.DataFrame, rng: np.random.Generator | None = None) -> Selection:
    """Mitchell et al.'s female (X) and male (Y) voices, all clips, stratified by human/synthesized (``rng`` unused)."""
    f, m = mitchell[mitchell["sex"] == "female"], mitchell[mitchell["sex"] == "male"]
    clips = pd.concat([label(f, "X", stratum=f["voice"]), label(m, "Y", stratum=m["voice"])], ignore_index=True)
    return Selection(clips, "all clips of Mitchell et al. (2011)")


def us_foreign_pantos_perkins(pp: pd.DataFrame, rng: np.random.Generator) -> Selection:
    """Pantos & Perkins: US-accented (X) and Korean-accented (Y) readings of the same phrases, paired by phrase."""
    am, ko = pp[pp["accent"] == "american"], pp[pp["accent"] == "foreign"]
    pairs = exact_pairs(am, ko, ["phrase"], rng)
    return Selection(
        paired(am, ko, pairs, "pantos_perkins"),
        "clips of the phrases used by Pantos & Perkins (2012), paired by phrase",
    )


def uk_british_foreign(rr: pd.DataFrame, rng: np.random.Generator) -> Selection:
    """Romero-Rivas et al.: neutral words by the native British (X) and Spanish-accented (Y) speaker."""
    neutral = rr[rr["word_type"] == "neutral"]
    nat, frn = neutral[neutral["accent"] == "native"], neutral[neutral["accent"] == "foreign"]
    pairs = exact_pairs(nat, frn, ["word", "background"], rng)
    clips = paired(nat, frn, pairs, "romero_rivas", stratum_of=lambda r: r["background"])
    return Selection(
        clips, "neutral words of Romero-Rivas et al. (2021), quiet and noise versions, paired by word and background"
    )

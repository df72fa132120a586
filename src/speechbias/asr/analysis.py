"""From a corpus and its hypotheses to per-utterance error counts and the disparity tables."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from speechbias.asr.corpora import EXCLUDED_COLUMNS, LEVEL_SPELLING_COLUMNS, ASRCorpus
from speechbias.asr.disparity import relative_gaps, wer_by_group, wer_ratio_table
from speechbias.asr.groups import GroupRule, level_table
from speechbias.asr.levels import spelling_table
from speechbias.asr.scoring import score_utterances


@dataclass
class WerDisparityResult:
    utterances: pd.DataFrame  # corpus columns + hypothesis, normalised texts, error counts
    table2: pd.DataFrame
    gaps: pd.DataFrame
    table3: pd.DataFrame
    excluded: pd.DataFrame  # EXCLUDED_COLUMNS
    notes: list[str] = field(default_factory=list)
    fits: dict = field(default_factory=dict)
    categories: list[str] = field(default_factory=list)
    speaker_column: str | None = None
    # every level of every category: counts, compared or why not (groups.LEVEL_COLUMNS)
    levels: pd.DataFrame = field(default_factory=pd.DataFrame)
    # which raw values became which level, over the scored utterances (corpora.LEVEL_SPELLING_COLUMNS)
    spellings: pd.DataFrame = field(default_factory=pd.DataFrame)
    rule: GroupRule = field(default_factory=GroupRule)
    # utterances of the corpus table dropped before scoring, per level (DROP_COLUMNS)
    drops: pd.DataFrame = field(default_factory=pd.DataFrame)


DROP_COLUMNS = ["category", "group", "dropped", "reasons"]


def scored_spellings(corpus: ASRCorpus, utts: pd.DataFrame, categories: list[str]) -> pd.DataFrame:
    """LEVEL_SPELLING_COLUMNS counted over the scored utterances ``utts`` (the corpus's own table
    counts every row it kept, including those dropped later); the corpus's table when it has no raw values."""
    if corpus.raw_values is None:
        return corpus.levels[corpus.levels["category"].isin(categories)].reset_index(drop=True)
    raw = utts[["utterance_id", *categories]].merge(
        corpus.raw_values, on="utterance_id", how="left", suffixes=("", "__raw")
    )
    parts = [spelling_table(raw[c], raw[f"{c}__raw"]).assign(category=c) for c in categories]
    return pd.concat(parts, ignore_index=True)[LEVEL_SPELLING_COLUMNS]


def dropped_per_level(
    corpus: ASRCorpus, utts: pd.DataFrame, excluded: pd.DataFrame, categories: list[str]
) -> pd.DataFrame:
    """DROP_COLUMNS: per level, the utterances of the corpus table that were not scored (audio that
    failed to decode, no hypothesis, reference empty after normalisation) and why."""
    gone = corpus.utterances[~corpus.utterances["utterance_id"].isin(utts["utterance_id"])]
    if gone.empty:
        return pd.DataFrame(columns=DROP_COLUMNS)
    why = dict(zip(excluded["utterance_id"], excluded["reason"].astype(str).str.split(":").str[0]))
    gone = gone.assign(_reason=gone["utterance_id"].map(why).fillna("not scored"))
    rows = []
    for c in categories:
        for level, g in gone.groupby(c, sort=True):
            counts = g["_reason"].value_counts()
            rows.append(
                {
                    "category": c,
                    "group": str(level),
                    "dropped": int(len(g)),
                    "reasons": "; ".join(f"{r} ({n})" for r, n in counts.items()),
                }
            )
    return pd.DataFrame(rows, columns=DROP_COLUMNS)


def excluded_rows(utts: pd.DataFrame, mask: pd.Series, reason: str) -> pd.DataFrame:
    """EXCLUDED_COLUMNS of the utterances ``utts[mask]``, each left out for ``reason``."""
    return utts.loc[mask, ["utterance_id", "path"]].assign(row=pd.NA, reason=reason)[EXCLUDED_COLUMNS]


def analyse_wer_disparity(
    corpus: ASRCorpus,
    hypotheses: pd.DataFrame,
    failed: pd.DataFrame | None = None,
    normalizer: str = "whisper_english",
    categories: list[str] | None = None,
    covariates: list[str] | None = None,
    n_agq: int = 1,
    n_resamples: int = 1000,
    wer_ci_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    rule: GroupRule = GroupRule(),
    n_jobs: int = 1,
) -> WerDisparityResult:
    """Score every utterance with a hypothesis and build Table 2 and Table 3.

    Utterances whose audio could not be decoded (``failed``) or whose reference is empty after
    normalisation are excluded and listed with the reason. ``rule`` says which levels are compared
    (minimum utterances and speakers per group; undisclosed left out by default).
    """
    cats = list(categories) if categories else list(corpus.categories)
    unknown = [c for c in cats if c not in corpus.utterances.columns]
    if unknown:
        raise ValueError(
            f"categories {unknown} are not columns of corpus {corpus.source} (has {list(corpus.utterances.columns)})"
        )
    excluded = [corpus.excluded]
    utts = corpus.utterances.merge(hypotheses[["utterance_id", "hypothesis"]], on="utterance_id", how="left")
    no_hyp = utts["hypothesis"].isna()
    if failed is not None and len(failed):
        excluded.append(failed.assign(row=pd.NA)[EXCLUDED_COLUMNS])
        no_hyp &= ~utts["utterance_id"].isin(failed["utterance_id"])
    if no_hyp.any():
        excluded.append(excluded_rows(utts, no_hyp, "no hypothesis (not transcribed; other shard?)"))
    utts = utts[utts["hypothesis"].notna()].reset_index(drop=True)
    scores = score_utterances(utts["reference"].tolist(), utts["hypothesis"].tolist(), normalizer)
    utts = pd.concat([utts, scores], axis=1)
    empty = utts["ref_words"] == 0
    if empty.any():
        excluded.append(excluded_rows(utts, empty, f"reference empty after {normalizer} normalisation"))
        utts = utts[~empty].reset_index(drop=True)
    excl = (
        pd.concat([e for e in excluded if len(e)], ignore_index=True)
        if any(len(e) for e in excluded)
        else pd.DataFrame(columns=EXCLUDED_COLUMNS)
    )
    notes = list(corpus.notes)
    if len(excl):
        counts = excl["reason"].str.split(":").str[0].value_counts().to_dict()
        notes.append(f"{len(excl)} utterance(s) excluded ({counts}); see excluded.csv for which rows.")
    if utts.empty:
        raise ValueError(f"{corpus.source}: no utterance left to score ({len(excl)} excluded)")
    spk = corpus.speaker_column
    table2 = wer_by_group(utts, cats, spk, n_resamples=wer_ci_resamples, seed=seed, confidence=confidence, rule=rule)
    ratios = wer_ratio_table(
        utts,
        cats,
        spk,
        covariates=covariates,
        n_agq=n_agq,
        n_resamples=n_resamples,
        seed=seed,
        confidence=confidence,
        rule=rule,
        n_jobs=n_jobs,
    )
    gaps = relative_gaps(table2)
    no_gap = [c for c in cats if c not in set(gaps["category"])]
    if no_gap:
        notes.append(f"no relative gap for {no_gap}: fewer than two compared levels.")
    return WerDisparityResult(
        utterances=utts,
        table2=table2,
        gaps=gaps,
        table3=ratios.table,
        excluded=excl,
        notes=notes + ratios.notes,
        fits=ratios.fits,
        categories=cats,
        speaker_column=spk,
        levels=level_table(utts, cats, spk, rule),
        spellings=scored_spellings(corpus, utts, cats),
        rule=rule,
        drops=dropped_per_level(corpus, utts, excl, cats),
    )

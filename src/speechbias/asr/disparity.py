"""WER disparities between demographic groups: Fair-Speech's Table 2 and Table 3.

Input: a per-utterance table with ``errors`` (S + D + I), ``ref_words``, ``substitutions``,
``deletions``, ``insertions``, one column per category, and optionally ``speaker``.

* Table 2 (:func:`wer_by_group`): per category and group, corpus WER = total errors / total
  reference words (never a mean of per-utterance WERs), utterance and speaker counts, and a
  bootstrap CI of the WER (speakers resampled within the group when speakers are known,
  utterances otherwise). :func:`relative_gaps`: per category, (highest WER - lowest WER) /
  lowest WER.
* Table 3 (:func:`wer_ratio_table`): per category, the Poisson mixed model (speaker random
  intercept, offset log words, cell-means group effects, optional covariates) and all pairwise WER
  ratios exp(mu_a - mu_b) with speaker-bootstrap percentile CIs (``speechbias.stats.glmm``).

Only compared levels (:mod:`speechbias.asr.groups`: stated answers with enough utterances and
speakers) enter the gaps and ratios; Table 2 lists every level with its counts and status.
Problems that concern one category or group (a level not compared, a group without errors, a fit
that does not converge) are returned as notes; the other categories go on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from speechbias.asr.groups import GroupRule, compared_groups, level_table
from speechbias.stats.glmm import bootstrap_wer_ratios, fit_poisson_glmm

log = logging.getLogger(__name__)

TABLE2_COLUMNS = [
    "category",
    "group",
    "utterances",
    "speakers",
    "ref_words",
    "errors",
    "substitutions",
    "deletions",
    "insertions",
    "wer",
    "wer_ci_low",
    "wer_ci_high",
    "compared",
    "status",
]
TABLE3_COLUMNS = [
    "category",
    "group_a",
    "group_b",
    "wer_ratio",
    "ci_low",
    "ci_high",
    "significant",
    "degenerate",
    "method",
    "sigma",
    "resampling",
    "n_resamples",
    "n_failed",
]


def _ratio_ci(
    err: np.ndarray, words: np.ndarray, n_resamples: int, rng: np.random.Generator, confidence: float
) -> tuple[float, float]:
    """Percentile CI of sum(err)/sum(words) resampling the given clusters with replacement."""
    n = err.size
    est = []
    for start in range(0, n_resamples, 200):  # chunks bound memory for large groups
        b = min(200, n_resamples - start)
        idx = rng.integers(0, n, size=(b, n))
        est.append(err[idx].sum(axis=1) / words[idx].sum(axis=1))
    est = np.concatenate(est)
    a = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(est, [a, 1.0 - a])
    return float(lo), float(hi)


def wer_by_group(
    utts: pd.DataFrame,
    categories: list[str],
    speaker_column: str | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    rule: GroupRule = GroupRule(),
) -> pd.DataFrame:
    """Table 2: one row per (category, level), every level including those not compared.

    ``compared`` / ``status`` come from :func:`speechbias.asr.groups.level_table`. The CI is NaN
    when the level has fewer than two resampling units (speakers, or utterances without speaker
    ids): one unit has no sampling variability to resample, and a zero-width interval would claim
    certainty.
    """
    rng = np.random.default_rng(seed)
    levels = level_table(utts, categories, speaker_column, rule).set_index(["category", "group"])
    rows = []
    for cat in categories:
        for grp, g in utts.groupby(cat, sort=True, dropna=False):
            units = g[speaker_column].astype(str).to_numpy() if speaker_column else np.arange(len(g)).astype(str)
            per = g.groupby(units)[["errors", "ref_words"]].sum()
            lo, hi = (
                _ratio_ci(per["errors"].to_numpy(float), per["ref_words"].to_numpy(float), n_resamples, rng, confidence)
                if n_resamples > 0 and len(per) >= 2
                else (np.nan, np.nan)
            )
            lv = levels.loc[(cat, str(grp))]
            rows.append(
                {
                    "category": cat,
                    "group": str(grp),
                    "utterances": int(len(g)),
                    "speakers": int(g[speaker_column].nunique()) if speaker_column else np.nan,
                    "ref_words": int(g["ref_words"].sum()),
                    "errors": int(g["errors"].sum()),
                    "substitutions": int(g["substitutions"].sum()),
                    "deletions": int(g["deletions"].sum()),
                    "insertions": int(g["insertions"].sum()),
                    "wer": float(g["errors"].sum() / g["ref_words"].sum()),
                    "wer_ci_low": lo,
                    "wer_ci_high": hi,
                    "compared": bool(lv["compared"]),
                    "status": str(lv["status"]),
                }
            )
    return pd.DataFrame(rows, columns=TABLE2_COLUMNS)


GAP_COLUMNS = ["category", "lowest_group", "lowest_wer", "highest_group", "highest_wer", "relative_gap", "n_groups"]


def relative_gaps(table2: pd.DataFrame) -> pd.DataFrame:
    """Per category with >= 2 compared levels: lowest/highest-WER groups and (WER_high - WER_low) / WER_low.

    Levels with ``compared`` False (undisclosed, too small) take no part; ``n_groups`` = how many did.
    """
    rows = []
    for cat, t in table2[table2["compared"].astype(bool)].groupby("category", sort=False):
        if len(t) < 2:
            continue
        lo, hi = t.loc[t["wer"].idxmin()], t.loc[t["wer"].idxmax()]
        gap = (hi["wer"] - lo["wer"]) / lo["wer"] if lo["wer"] > 0 else np.inf
        rows.append(
            {
                "category": cat,
                "lowest_group": lo["group"],
                "lowest_wer": lo["wer"],
                "highest_group": hi["group"],
                "highest_wer": hi["wer"],
                "relative_gap": gap,
                "n_groups": int(len(t)),
            }
        )
    return pd.DataFrame(rows, columns=GAP_COLUMNS)


def covariate_matrix(df: pd.DataFrame, columns: list[str]) -> pd.DataFrame | None:
    """Numeric columns as they are; other columns dummy-coded with their first level dropped."""
    if not columns:
        return None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"covariate column(s) {missing} not in the utterance table (has {list(df.columns)})")
    parts = []
    for c in columns:
        col = pd.to_numeric(df[c], errors="coerce")
        if col.notna().all():
            parts.append(col.rename(c).astype(float))
        else:
            parts.append(pd.get_dummies(df[c].astype(str), prefix=c, drop_first=True, dtype=float))
    return pd.concat(parts, axis=1)


@dataclass
class RatioAnalysis:
    table: pd.DataFrame  # TABLE3_COLUMNS
    notes: list[str] = field(default_factory=list)
    fits: dict = field(default_factory=dict)  # category -> PoissonGLMMFit


def wer_ratio_table(
    utts: pd.DataFrame,
    categories: list[str],
    speaker_column: str | None = None,
    covariates: list[str] | None = None,
    n_agq: int = 1,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    rule: GroupRule = GroupRule(),
    n_jobs: int = 1,
) -> RatioAnalysis:
    """Table 3: per category, the WER model over the compared levels and their pairwise WER ratios."""
    out = RatioAnalysis(table=pd.DataFrame(columns=TABLE3_COLUMNS))
    rows = []
    covariates = list(covariates or [])
    levels = level_table(utts, categories, speaker_column, rule)
    for k, cat in enumerate(categories):
        lv = levels[levels["category"] == cat]
        left_out = lv[~lv["compared"]]
        if len(left_out):
            out.notes.append(
                f"{cat}: level(s) left out of the gap and the WER model: "
                + "; ".join(f"'{r.group}' {r.status.removeprefix('not compared: ')}" for r in left_out.itertuples())
                + "."
            )
        d = utts[utts[cat].astype(str).isin(compared_groups(levels, cat))]
        zero = d.groupby(cat)["errors"].sum()
        zero = sorted(zero[zero == 0].index.astype(str))
        if zero:
            out.notes.append(
                f"{cat}: group(s) {zero} have no word errors at all; their WER ratio is not "
                "estimable (log WER = -inf); left out of the WER model."
            )
            d = d[~d[cat].astype(str).isin(zero)]
        if d[cat].nunique() < 2:
            out.notes.append(f"{cat}: fewer than two groups left; no WER ratios.")
            continue
        try:
            model = {  # what the fit and its bootstrap are given alike
                "errors": d["errors"].to_numpy(),
                "words": d["ref_words"].to_numpy(),
                "group": d[cat].astype(str).to_numpy(),
                "speaker": d[speaker_column].to_numpy() if speaker_column else None,
                "covariates": covariate_matrix(d, covariates),
                "n_agq": n_agq,
            }
            fit = fit_poisson_glmm(**model)
            if not fit.converged:
                out.notes.append(f"{cat}: the WER model did not converge ({fit.message}); no WER ratios reported.")
                continue
            boot = bootstrap_wer_ratios(
                **model,
                fit=fit,
                n_resamples=n_resamples,
                seed=seed + k,
                confidence=confidence,
                n_jobs=n_jobs,
            )
        except ValueError as exc:
            out.notes.append(f"{cat}: WER model not fitted: {exc}")
            continue
        out.fits[cat] = fit
        if boot.n_failed:
            out.notes.append(
                f"{cat}: {boot.n_failed} of {boot.n_resamples} bootstrap replicates could not be "
                f"fitted and were dropped ({boot.failures})."
            )
        for r in boot.table.itertuples():
            rows.append(
                {
                    "category": cat,
                    "group_a": r.group_a,
                    "group_b": r.group_b,
                    "wer_ratio": r.ratio,
                    "ci_low": r.ci_low,
                    "ci_high": r.ci_high,
                    "significant": bool(r.significant),
                    "degenerate": bool(r.degenerate),
                    "method": fit.method,
                    "sigma": fit.sigma,
                    "resampling": boot.resampling,
                    "n_resamples": boot.n_resamples,
                    "n_failed": boot.n_failed,
                }
            )
    out.table = pd.DataFrame(rows, columns=TABLE3_COLUMNS)
    return out

"""Statistics of a whole SpEAT sweep: pure functions from results tables to results tables (no I/O).

Input: the sweep's SpEAT table, one row per (model, test, aggregation) run with at least ``upstream``,
``test``, ``aggregation``, ``d`` (effect size) and ``p`` (one-sided permutation p); ``temporal``,
``layer``, ``family``, ``human_iat_d`` and ``model_id`` where a function says so
(:func:`speechbias.results.sweep_results.collect` reads it from the run folders).

* :func:`add_significance`: Bonferroni / Holm (/ BH) corrected p-values within each aggregation;
* :func:`main_table`: the runs of the paper's main aggregation;
* :func:`positive_by_aggregation`: proportion of positive d per temporal x layer strategy (appendix D);
* :func:`family_anova`: two-way ANOVA of d on test x model family;
* :func:`human_congruence`, :func:`aggregation_congruence`: signs of d vs. the human IAT D;
* :func:`compare_with_paper`: this sweep's d beside the paper's published d.

The numbers come from :func:`speechbias.stats.correct_pvalues`, :func:`~speechbias.stats.two_way_anova`
and :func:`~speechbias.stats.sign_congruence` (float64).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from speechbias.aggregation import LAYER_CHOICES, TEMPORAL
from speechbias.stats.anova import two_way_anova
from speechbias.stats.congruence import sign_congruence
from speechbias.stats.corrections import correct_pvalues
from speechbias.stats.validation import StatsInputError


def main_table(speat: pd.DataFrame, aggregation: str) -> pd.DataFrame:
    """Rows of one aggregation; when it is absent, the most frequent aggregation of the sweep."""
    if speat.empty:
        return speat
    if aggregation not in set(speat["aggregation"]):
        aggregation = speat["aggregation"].value_counts().index[0]
    return speat[speat["aggregation"] == aggregation].reset_index(drop=True)


def add_significance(
    speat: pd.DataFrame, alpha: float = 0.05, methods: Sequence[str] = ("bonferroni", "holm")
) -> pd.DataFrame:
    """Add ``p_<method>`` and ``significant_<method>`` columns, correcting within each aggregation
    (the family is every model x test of one strategy, as in the paper), plus ``significant``
    (uncorrected p < alpha) and ``significance``: ``corrected`` (significant after the first method),
    ``uncorrected`` or ``none``."""
    out = speat.copy()
    if out.empty:
        return out
    out["significant"] = out["p"] < alpha
    for method in methods:
        out[f"p_{method}"] = np.nan
        out[f"significant_{method}"] = False
    for _, idx in out.groupby("aggregation", sort=False).groups.items():
        p = out.loc[idx, "p"].astype(float)
        for method in methods:
            res = correct_pvalues(p.to_numpy(), method=method, alpha=alpha)
            out.loc[idx, f"p_{method}"] = res.p_adjusted
            out.loc[idx, f"significant_{method}"] = res.reject
    first = f"significant_{methods[0]}" if methods else "significant"
    out["significance"] = np.where(out[first], "corrected", np.where(out["significant"], "uncorrected", "none"))
    return out


def positive_by_aggregation(speat: pd.DataFrame) -> pd.DataFrame:
    """Long table ``temporal, layer, aggregation, n, n_positive, proportion_positive`` (appendix D),
    rows in layer-strategy order (sum, mean, ..., last), then temporal order (mean, min, max)."""
    if speat.empty:
        return pd.DataFrame(columns=["temporal", "layer", "aggregation", "n", "n_positive", "proportion_positive"])
    g = speat.assign(positive=speat["d"] > 0).groupby(["temporal", "layer", "aggregation"], sort=False)
    out = g["positive"].agg(n="size", n_positive="sum").reset_index()
    out["proportion_positive"] = out["n_positive"] / out["n"]
    t_rank = {t: i for i, t in enumerate(TEMPORAL)}
    l_rank = {v: i for i, v in enumerate(LAYER_CHOICES)}
    out = out.assign(_t=out["temporal"].map(t_rank), _l=out["layer"].map(l_rank))
    return out.sort_values(["_l", "_t"]).drop(columns=["_t", "_l"]).reset_index(drop=True)


# fewer residual degrees of freedom than this leave F and p resting on a handful of numbers (a demo sweep
# of 12 results and 10 cells has 2, and fbank = mfcc made its residual ~0: F = 1.3e6, p = 8e-7);
# the paper's 16 models x 6 tests leave 72 with the interaction
MIN_RESIDUAL_DF = 10
# a residual sum of squares this small against the total means the model fits the d values exactly
EXACT_FIT = 1e-9


def family_anova(table: pd.DataFrame, min_resid_df: int = MIN_RESIDUAL_DF) -> tuple[pd.DataFrame | None, str]:
    """Type I ANOVA of d on test x model family: with their interaction when that leaves at least
    ``min_resid_df`` residual degrees of freedom, else the additive model, else none.

    Returns (table with a ``source`` column, or None; a one-line note: the formula and the residual
    df, or why there is no table: too few residual df, or an exact fit, whose F would be meaningless).
    """
    if table.empty:
        return None, "no SpEAT results"
    reasons = []
    for interaction in (True, False):
        try:
            res = two_way_anova(table, value="d", test="test", family="family", interaction=interaction)
        except StatsInputError as exc:
            reasons.append(str(exc))
            continue
        if res.df_resid < min_resid_df:
            reasons.append(
                f"{res.formula} leaves {res.df_resid} residual degrees of freedom "
                f"(fewer than {min_resid_df}) for {res.n_obs} results"
            )
            continue
        resid = float(res.type1.loc["Residual", "sum_sq"])
        total = float(res.type1["sum_sq"].sum())
        if total > 0 and resid <= EXACT_FIT * total:
            reasons.append(
                f"{res.formula} fits the {res.n_obs} d values exactly (residual sum of squares "
                f"{resid:.2g}), so F and p are meaningless"
            )
            continue
        anova = res.type1.reset_index().rename(columns={"index": "source"})
        note = (
            f"type I sums of squares (test entered first), {res.formula}, {res.n_obs} model x test "
            f"results, {res.n_tests} tests, {res.n_families} families, {res.df_resid} residual degrees of "
            "freedom" + (f" (no interaction term: {reasons[0]})" if reasons else "")
        )
        return anova, note
    return None, "not computed: " + "; ".join(reasons)


def _human_iat(table: pd.DataFrame) -> tuple[dict[str, float], pd.DataFrame]:
    """(test -> human IAT D, for the tests that have one; the rows of those tests)."""
    human = {}
    if "human_iat_d" in table.columns:
        known = table.dropna(subset=["human_iat_d"]).drop_duplicates("test")
        human = {str(t): float(v) for t, v in zip(known["test"], known["human_iat_d"])}
    return human, table[table["test"].astype(str).isin(human)] if not table.empty else table


def human_congruence(table: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Per test: models whose d has the sign of the human IAT D (tests without an IAT D are left out).

    Returns (table ``test, human_iat_d, n_models, n_congruent, mean_d, mean_congruent``, totals dict).
    """
    human, rows = _human_iat(table)
    cols = ["test", "human_iat_d", "n_models", "n_congruent", "mean_d", "mean_congruent"]
    if rows.empty:
        return pd.DataFrame(columns=cols), {"n_congruent": 0, "n_total": 0}
    res = sign_congruence(rows.rename(columns={"upstream": "model"})[["model", "test", "d"]], human=human)
    per = (
        res.table.groupby("test", sort=False)
        .agg(n_models=("agree", "size"), n_congruent=("agree", "sum"), mean_d=("value", "mean"))
        .reset_index()
    )
    per.insert(1, "human_iat_d", per["test"].map(human))
    per["mean_congruent"] = np.sign(per["mean_d"]) == np.sign(per["human_iat_d"])
    return per[cols], {"n_congruent": res.n_agree, "n_total": res.n_total}


def aggregation_congruence(speat: pd.DataFrame) -> pd.DataFrame:
    """Per aggregation: tests whose mean d over models has the sign of the human IAT D
    (the paper's "150 of 180" count over 30 strategies x 6 tests)."""
    cols = ["aggregation", "n_tests", "n_congruent", "mean_abs_d"]
    human, rows = _human_iat(speat)
    if rows.empty:
        return pd.DataFrame(columns=cols)
    means = rows.groupby(["aggregation", "test"], sort=False)["d"].mean().reset_index()
    means["congruent"] = np.sign(means["d"]) == np.sign(means["test"].map(human))
    out = means.groupby("aggregation", sort=False).agg(n_tests=("test", "size"), n_congruent=("congruent", "sum"))
    out["mean_abs_d"] = rows.assign(abs_d=rows["d"].abs()).groupby("aggregation", sort=False)["abs_d"].mean()
    return out.reset_index()[cols]


def compare_with_paper(
    speat: pd.DataFrame, paper: pd.DataFrame, equivalent_aggregations: Sequence[str] = ("mean_mean", "mean_sum")
) -> pd.DataFrame:
    """The paper's d beside this sweep's d for every (model, test) both have.

    ``speat``: the sweep's SpEAT table (``model_id``, ``upstream``, ``test``, ``aggregation``, ``d``, ``p``);
    ``paper``: :func:`speechbias.results.paper_results.load_paper_results`. The published table is temporal
    mean / layer mean; cosine similarity ignores the scale of a vector and the layer sum is L x the
    layer mean, so ``mean_sum`` gives exactly the same d. Only runs with an aggregation in
    ``equivalent_aggregations`` count; when a (model, test) has several, the first in that list is
    used. Columns: ``upstream, model_id, paper_model, test, aggregation, d, paper_d, d_minus_paper
    (this - paper), p, paper_p, n_x, paper_n_targets, same_sign``.
    """
    cols = [
        "upstream",
        "model_id",
        "paper_model",
        "test",
        "aggregation",
        "d",
        "paper_d",
        "d_minus_paper",
        "p",
        "paper_p",
        "n_x",
        "paper_n_targets",
        "same_sign",
    ]
    if speat.empty or paper.empty or "model_id" not in speat.columns:
        return pd.DataFrame(columns=cols)
    rank = {a: i for i, a in enumerate(equivalent_aggregations)}
    ours = speat[speat["aggregation"].isin(rank)].copy()
    ours["_rank"] = ours["aggregation"].map(rank)
    ours = ours.sort_values("_rank", kind="stable").drop_duplicates(["model_id", "test"], keep="first")
    merged = ours.merge(paper, on=["model_id", "test"], how="inner")
    merged["d_minus_paper"] = merged["d"] - merged["paper_d"]
    merged["same_sign"] = (merged["d"] > 0) == (merged["paper_d"] > 0)
    for c in cols:
        if c not in merged.columns:
            merged[c] = pd.NA
    return merged[cols].reset_index(drop=True)

"""The paper's tables computed from a sweep's collected results (pure functions on DataFrames).

* :func:`add_significance`: Bonferroni / Holm (/ BH) corrected p-values within each aggregation;
* :func:`positive_by_aggregation`: proportion of positive d per temporal x layer strategy (appendix D);
* :func:`family_anova`: two-way ANOVA of d on test x model family;
* :func:`human_congruence`, :func:`aggregation_congruence`: signs of d vs. the human IAT D;
* :func:`propagation_table`: SpEAT d beside the downstream Cohen's d, per learning rate and pooled.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import pandas as pd

from speechbias import stats
from speechbias.aggregation import LAYER_CHOICES, TEMPORAL
from speechbias.ser.pooling import lr_label, pooled_propagation

log = logging.getLogger(__name__)

LAYER_ROW_ORDER = ("sum", "mean", "min", "max", "first", "second", "q1", "q2", "q3", "penultimate", "last")


def main_table(speat: pd.DataFrame, aggregation: str) -> pd.DataFrame:
    """Rows of one aggregation; when it is absent, the most frequent aggregation of the sweep."""
    if speat.empty:
        return speat
    if aggregation in set(speat["aggregation"]):
        return speat[speat["aggregation"] == aggregation].reset_index(drop=True)
    counts = speat["aggregation"].value_counts()
    return speat[speat["aggregation"] == counts.index[0]].reset_index(drop=True)


def add_significance(speat: pd.DataFrame, alpha: float = 0.05,
                     methods: Sequence[str] = ("bonferroni", "holm")) -> pd.DataFrame:
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
            res = stats.correct_pvalues(p.to_numpy(), method=method, alpha=alpha)
            out.loc[idx, f"p_{method}"] = res.p_adjusted
            out.loc[idx, f"significant_{method}"] = res.reject
    first = f"significant_{methods[0]}" if methods else "significant"
    out["significance"] = np.where(out[first], "corrected", np.where(out["significant"], "uncorrected", "none"))
    return out


def positive_by_aggregation(speat: pd.DataFrame) -> pd.DataFrame:
    """Long table ``temporal, layer, aggregation, n, n_positive, proportion_positive`` (appendix D)."""
    if speat.empty:
        return pd.DataFrame(columns=["temporal", "layer", "aggregation", "n", "n_positive", "proportion_positive"])
    g = speat.assign(positive=speat["d"] > 0).groupby(["temporal", "layer", "aggregation"], sort=False)
    out = g["positive"].agg(n="size", n_positive="sum").reset_index()
    out["proportion_positive"] = out["n_positive"] / out["n"]
    t_rank = {t: i for i, t in enumerate(TEMPORAL)}
    l_rank = {v: i for i, v in enumerate(LAYER_ROW_ORDER)}
    out = out.assign(_t=out["temporal"].map(t_rank), _l=out["layer"].map(l_rank))
    return out.sort_values(["_l", "_t"]).drop(columns=["_t", "_l"]).reset_index(drop=True)


def positive_pivot(long: pd.DataFrame) -> pd.DataFrame:
    """Appendix D layout: one row per layer strategy, one column per temporal strategy (proportion)."""
    if long.empty:
        return pd.DataFrame()
    pivot = long.pivot(index="layer", columns="temporal", values="proportion_positive")
    rows = [v for v in LAYER_ROW_ORDER if v in pivot.index] + [v for v in pivot.index if v not in LAYER_CHOICES]
    cols = [t for t in TEMPORAL if t in pivot.columns]
    return pivot.loc[rows, cols]


def family_anova(table: pd.DataFrame) -> tuple[pd.DataFrame | None, str]:
    """Type I ANOVA of d on test x model family (with their interaction when estimable).

    Returns (table with a ``source`` column, or None; a one-line note of the formula or why not).
    """
    if table.empty:
        return None, "no SpEAT results"
    last_error = ""
    for interaction in (True, False):
        try:
            res = stats.two_way_anova(table, value="d", test="test", family="family", interaction=interaction)
        except stats.StatsInputError as exc:
            last_error = str(exc)
            continue
        anova = res.type1.reset_index().rename(columns={"index": "source"})
        note = (f"type I sums of squares (test entered first), {res.formula}, {res.n_obs} model x test "
                f"results, {res.n_tests} tests, {res.n_families} families")
        return anova, note
    return None, f"not computable: {last_error}"


def _human_iat(table: pd.DataFrame) -> dict[str, float]:
    if "human_iat_d" not in table.columns:
        return {}
    known = table.dropna(subset=["human_iat_d"]).drop_duplicates("test")
    return {str(t): float(v) for t, v in zip(known["test"], known["human_iat_d"])}


def human_congruence(table: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Per test: models whose d has the sign of the human IAT D (tests without an IAT D are left out).

    Returns (table ``test, human_iat_d, n_models, n_congruent, mean_d, mean_congruent``, totals dict).
    """
    human = _human_iat(table)
    rows = table[table["test"].astype(str).isin(human)] if not table.empty else table
    cols = ["test", "human_iat_d", "n_models", "n_congruent", "mean_d", "mean_congruent"]
    if rows.empty:
        return pd.DataFrame(columns=cols), {"n_congruent": 0, "n_total": 0}
    res = stats.sign_congruence(rows.rename(columns={"upstream": "model"})[["model", "test", "d"]], human=human)
    per = res.table.groupby("test", sort=False).agg(n_models=("agree", "size"), n_congruent=("agree", "sum"),
                                                    mean_d=("value", "mean")).reset_index()
    per.insert(1, "human_iat_d", per["test"].map(human))
    per["mean_congruent"] = np.sign(per["mean_d"]) == np.sign(per["human_iat_d"])
    return per[cols], {"n_congruent": res.n_agree, "n_total": res.n_total}


def aggregation_congruence(speat: pd.DataFrame) -> pd.DataFrame:
    """Per aggregation: tests whose mean d over models has the sign of the human IAT D
    (the paper's "150 of 180" count over 30 strategies x 6 tests)."""
    cols = ["aggregation", "n_tests", "n_congruent", "mean_abs_d"]
    human = _human_iat(speat)
    rows = speat[speat["test"].astype(str).isin(human)] if not speat.empty else speat
    if rows.empty:
        return pd.DataFrame(columns=cols)
    means = rows.groupby(["aggregation", "test"], sort=False)["d"].mean().reset_index()
    means["congruent"] = np.sign(means["d"]) == np.sign(means["test"].map(human))
    out = means.groupby("aggregation", sort=False).agg(n_tests=("test", "size"), n_congruent=("congruent", "sum"))
    out["mean_abs_d"] = rows.assign(abs_d=rows["d"].abs()).groupby("aggregation", sort=False)["abs_d"].mean()
    return out.reset_index()[cols]


def propagation_table(propagation: pd.DataFrame, predictions: pd.DataFrame) -> pd.DataFrame:
    """SpEAT d and downstream Cohen's d per (upstream, test) and head: one row per learning rate and,
    when the per-clip predictions are there, one pooled row (``lr = "pooled"``: all heads' predicted
    valence pooled per group, with :func:`speechbias.ser.pooling.pooled_propagation`).

    Columns: ``upstream, family, test, lr, speat_d, cohens_d, agree``; several runs of one
    (upstream, test, lr), e.g. seeds, are averaged.
    """
    cols = ["upstream", "family", "test", "lr", "speat_d", "cohens_d", "agree"]
    if propagation.empty:
        return pd.DataFrame(columns=cols)
    prop = propagation.assign(
        family=propagation["family"] if "family" in propagation else "other",
        speat_d=propagation["speat_d"] if "speat_d" in propagation else np.nan,
        lr=propagation["lr"].map(lr_label) if "lr" in propagation else "all")
    info = prop.groupby(["upstream", "test"], sort=False).agg(family=("family", "first"),
                                                             speat_d=("speat_d", "mean")).reset_index()
    table = prop.groupby(["upstream", "test", "lr"], sort=False)["cohens_d"].mean().reset_index()
    if not predictions.empty:
        try:
            pooled = pooled_propagation([predictions], by=("upstream", "test"))
        except ValueError as exc:
            log.warning("could not pool the heads' predictions: %s", exc)
        else:
            pooled = pooled[pooled["lr"] == "pooled"][["upstream", "test", "lr", "cohens_d"]]
            table = pd.concat([pooled, table], ignore_index=True)
    out = table.merge(info, on=["upstream", "test"], how="left")
    out["agree"] = np.sign(out["speat_d"]) == np.sign(out["cohens_d"])
    out = out.assign(_o=out["lr"].map(_lr_rank)).sort_values("_o", kind="stable").drop(columns="_o")
    return out[cols].reset_index(drop=True)


def agreement_counts(prop: pd.DataFrame) -> pd.DataFrame:
    """Per learning rate (and pooled): how many (model, test) have SpEAT d and Cohen's d of equal sign."""
    cols = ["lr", "n_agree", "n_total"]
    if prop.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for lr, g in prop.groupby("lr", sort=False):
        g = g.dropna(subset=["speat_d", "cohens_d"]).groupby(["upstream", "test"], as_index=False)[
            ["speat_d", "cohens_d"]].mean()
        if g.empty:
            continue
        res = stats.sign_agreement(g.rename(columns={"upstream": "model"})[["model", "test", "speat_d"]],
                                   g.rename(columns={"upstream": "model"})[["model", "test", "cohens_d"]])
        rows.append({"lr": lr, "n_agree": res.n_agree, "n_total": res.n_total})
    out = pd.DataFrame(rows, columns=cols)
    return out.assign(_o=out["lr"].map(_lr_rank)).sort_values("_o", kind="stable").drop(columns="_o") \
        .reset_index(drop=True)


def _lr_rank(lr: str) -> float:
    """Sort key: pooled first, then learning rates from large to small."""
    if lr == "pooled":
        return -np.inf
    try:
        return -float(lr)
    except ValueError:
        return np.inf

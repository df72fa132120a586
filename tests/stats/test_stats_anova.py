"""two_way_anova(): sums of squares against least-squares fits written with numpy, F and p from scipy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from speechbias.stats import AnovaResult, StatsInputError, two_way_anova

TESTS = ["abled_disabled", "european_african_american", "female_male", "human_synthesized", "us_foreign", "young_old"]
FAMILIES = {"wav2vec2": 3, "hubert": 3, "wavlm": 3, "whisper": 7}


def effect_table(seed, drop=0):
    rng = np.random.default_rng(seed)
    test_effect = dict(zip(TESTS, rng.normal(0, 0.4, len(TESTS))))
    family_effect = dict(zip(FAMILIES, rng.normal(0, 0.3, len(FAMILIES))))
    rows = []
    for family, n_models in FAMILIES.items():
        for m in range(n_models):
            for test in TESTS:
                d = 0.2 + test_effect[test] + family_effect[family] + rng.normal(0, 0.25)
                rows.append({"model": f"{family}_{m}", "family": family, "test": test, "d": d})
    table = pd.DataFrame(rows)
    if drop:
        table = table.drop(index=rng.choice(len(table), drop, replace=False)).reset_index(drop=True)
    return table


def dummies(values):
    levels = sorted(set(values))
    return np.column_stack([[v == lev for v in values] for lev in levels[1:]]).astype(float)


def rss(y, *blocks):
    design = np.column_stack([np.ones(len(y)), *blocks])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ coef
    return float(resid @ resid), np.linalg.matrix_rank(design)


def reference_sums_of_squares(table):
    y = table["d"].to_numpy()
    t, f = dummies(table["test"].tolist()), dummies(table["family"].tolist())
    cells = dummies((table["test"] + "|" + table["family"]).tolist())
    rss0, _ = rss(y)
    rss_t, _ = rss(y, t)
    rss_f, _ = rss(y, f)
    rss_tf, rank_tf = rss(y, t, f)
    rss_cells, rank_cells = rss(y, cells)
    return {
        "type1": {"test": rss0 - rss_t, "family": rss_t - rss_tf, "Residual": rss_tf},
        "type2": {"test": rss_f - rss_tf, "family": rss_t - rss_tf, "Residual": rss_tf},
        "interaction": rss_tf - rss_cells,
        "residual_cells": rss_cells,
        "df_resid": len(y) - rank_tf,
        "df_resid_cells": len(y) - rank_cells,
    }


def test_balanced_design_sums_of_squares_from_group_means():
    table = effect_table(0)
    result = two_way_anova(table)
    assert isinstance(result, AnovaResult)
    grand = table["d"].mean()
    ss_test = sum(len(g) * (g["d"].mean() - grand) ** 2 for _, g in table.groupby("test"))
    # Families have unequal model counts, so only the first-entered factor has the simple form.
    assert result.type1.loc["test", "sum_sq"] == pytest.approx(ss_test, rel=1e-10)
    assert (result.n_obs, result.n_tests, result.n_families) == (96, 6, 4)


@pytest.mark.parametrize("drop", [0, 11])
def test_type1_and_type2_match_least_squares_references(drop):
    table = effect_table(1, drop=drop)
    result = two_way_anova(table)
    ref = reference_sums_of_squares(table)
    for typ, frame in (("type1", result.type1), ("type2", result.type2)):
        for row, ss in ref[typ].items():
            assert frame.loc[row, "sum_sq"] == pytest.approx(ss, rel=1e-9), (typ, row)
    df_resid = ref["df_resid"]
    assert result.type2.loc["Residual", "df"] == df_resid
    f_test = (ref["type2"]["test"] / 5) / (ref["type2"]["Residual"] / df_resid)
    assert result.type2.loc["test", "F"] == pytest.approx(f_test, rel=1e-9)
    assert result.type2.loc["test", "PR(>F)"] == pytest.approx(stats.f.sf(f_test, 5, df_resid), rel=1e-6)


def test_interaction_term_with_replicated_models():
    table = effect_table(2)
    result = two_way_anova(table, interaction=True)
    ref = reference_sums_of_squares(table)
    assert result.type1.loc["test:family", "sum_sq"] == pytest.approx(ref["interaction"], rel=1e-9)
    assert result.type1.loc["Residual", "sum_sq"] == pytest.approx(ref["residual_cells"], rel=1e-9)
    assert result.type1.loc["test:family", "df"] == 15
    assert "C(test)" in result.formula and result.interaction


def test_custom_column_names():
    table = effect_table(3).rename(columns={"d": "effect", "test": "bias_test", "family": "model_family"})
    result = two_way_anova(table, value="effect", test="bias_test", family="model_family")
    assert result.formula.startswith("effect ~")
    assert result.type1.loc["test", "df"] == 5


@pytest.mark.parametrize(
    "change, kwargs, match",
    [
        (lambda t: t.drop(columns="family"), {}, r"table: missing column\(s\) \['family'\]"),
        (lambda t: t.assign(family="one"), {}, "column 'family' needs at least 2 levels"),
        (
            lambda t: t.assign(d=t["d"].where(t.index != 4, np.nan)),
            {},
            r"column 'd' is not a finite number in row\(s\) \[4\]",
        ),
        (
            lambda t: pd.DataFrame({"d": [0.1, 0.2, 0.3], "test": list("aba"), "family": list("xxy")}),
            {},
            "3 rows leave no residual degrees of freedom for 3 model parameters",
        ),
        (lambda t: t.drop_duplicates(["test", "family"]), {"interaction": True}, "interaction needs several models"),
        (lambda t: t.to_dict("list"), {}, "table: expected a pandas DataFrame"),
    ],
)
def test_bad_input_raises_value_error(change, kwargs, match):
    with pytest.raises(StatsInputError, match=match):
        two_way_anova(change(effect_table(4)), **kwargs)

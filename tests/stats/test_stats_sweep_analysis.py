"""stats.sweep_analysis on small hand-written tables: the selection, ordering and edge cases that
tests/sweep (fake sweeps of the paper's models) do not reach."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from speechbias.stats import sweep_analysis


def _speat(rows) -> pd.DataFrame:
    """``(upstream, test, aggregation, d, p)`` rows as a SpEAT table with temporal / layer columns."""
    df = pd.DataFrame(rows, columns=["upstream", "test", "aggregation", "d", "p"])
    parts = df["aggregation"].str.split("_", n=1)
    return df.assign(temporal=parts.str[0], layer=parts.str[1])


def test_main_table_falls_back_to_the_most_frequent_aggregation():
    speat = _speat([("a", "t", "max_q3", 0.1, 0.4), ("b", "t", "max_q3", 0.2, 0.3), ("a", "t", "min_last", 0.3, 0.2)])
    assert set(sweep_analysis.main_table(speat, "min_last")["aggregation"]) == {"min_last"}
    fallback = sweep_analysis.main_table(speat, "mean_sum")
    assert set(fallback["aggregation"]) == {"max_q3"} and list(fallback.index) == [0, 1]
    assert sweep_analysis.main_table(speat.iloc[:0], "mean_sum").empty


def test_significance_levels_follow_the_first_correction():
    speat = _speat([("a", "t1", "mean_sum", 0.9, 0.001), ("b", "t1", "mean_sum", 0.5, 0.03),
                    ("c", "t1", "mean_sum", 0.1, 0.4), ("a", "t1", "max_q3", 0.5, 0.03)])
    out = sweep_analysis.add_significance(speat, alpha=0.05, methods=("holm", "bonferroni"))
    # mean_sum: 3 tests; holm 0.003, 0.06, 0.4; max_q3 alone: 0.03 stays 0.03
    assert np.allclose(out["p_holm"], [0.003, 0.06, 0.4, 0.03])
    assert np.allclose(out["p_bonferroni"], [0.003, 0.09, 1.0, 0.03])
    assert list(out["significance"]) == ["corrected", "uncorrected", "none", "corrected"]
    assert "significance" not in speat.columns  # the input is not changed
    assert sweep_analysis.add_significance(speat.iloc[:0]).empty


def test_positive_proportions_come_in_layer_then_temporal_order():
    speat = _speat([("a", "t", "max_last", 0.1, 0.5), ("a", "t", "mean_last", -0.1, 0.5),
                    ("a", "t", "min_sum", 0.2, 0.5), ("b", "t", "min_sum", -0.2, 0.5)])
    out = sweep_analysis.positive_by_aggregation(speat)
    assert list(out["aggregation"]) == ["min_sum", "mean_last", "max_last"]
    assert list(out["n"]) == [2, 1, 1] and list(out["proportion_positive"]) == [0.5, 0.0, 1.0]
    assert list(sweep_analysis.positive_by_aggregation(speat.iloc[:0]).columns) == [
        "temporal", "layer", "aggregation", "n", "n_positive", "proportion_positive"]


def test_anova_that_cannot_be_fitted_says_why():
    one_family = _speat([("a", "t1", "mean_sum", 0.1, 0.5), ("b", "t2", "mean_sum", 0.3, 0.5)]).assign(family="x")
    anova, note = sweep_analysis.family_anova(one_family)
    assert anova is None and note.startswith("not computable: ")
    assert sweep_analysis.family_anova(one_family.iloc[:0]) == (None, "no SpEAT results")


def test_congruence_leaves_out_tests_without_a_human_iat_d():
    table = _speat([("a", "t1", "mean_sum", 0.4, 0.5), ("b", "t1", "mean_sum", -0.2, 0.5),
                    ("a", "t2", "mean_sum", 0.3, 0.5)]).assign(human_iat_d=[0.5, 0.5, None])
    per_test, totals = sweep_analysis.human_congruence(table)
    assert totals == {"n_congruent": 1, "n_total": 2}
    assert per_test.to_dict("records") == [{"test": "t1", "human_iat_d": 0.5, "n_models": 2, "n_congruent": 1,
                                            "mean_d": pytest.approx(0.1), "mean_congruent": True}]
    by_agg = sweep_analysis.aggregation_congruence(table)
    assert by_agg.to_dict("records") == [{"aggregation": "mean_sum", "n_tests": 1, "n_congruent": 1,
                                          "mean_abs_d": pytest.approx(0.3)}]
    _, none = sweep_analysis.human_congruence(table.drop(columns="human_iat_d"))
    assert none == {"n_congruent": 0, "n_total": 0}


def test_paper_comparison_takes_the_first_equivalent_aggregation():
    speat = _speat([("a", "t", "mean_sum", 0.5, 0.1), ("a", "t", "mean_mean", 0.4, 0.2),
                    ("b", "t", "mean_sum", -0.2, 0.6), ("b", "t", "max_q3", 0.9, 0.01)])
    speat = speat.assign(model_id=speat["upstream"].map({"a": "hub/a", "b": "hub/b"}), n_x=8)
    paper = pd.DataFrame({"model_id": ["hub/a", "hub/b", "hub/c"], "paper_model": ["A", "B", "C"],
                          "test": "t", "paper_d": [0.6, 0.1, 1.0], "paper_p": 0.05, "paper_n_targets": 8})
    comp = sweep_analysis.compare_with_paper(speat, paper).set_index("upstream")
    assert list(comp.index) == ["a", "b"]
    assert comp.loc["a", "aggregation"] == "mean_mean" and comp.loc["a", "d"] == 0.4  # mean_mean listed first
    assert comp.loc["b", "d_minus_paper"] == pytest.approx(-0.3) and not comp.loc["b", "same_sign"]
    flipped = sweep_analysis.compare_with_paper(speat, paper, ("mean_sum",)).set_index("upstream")
    assert flipped.loc["a", "d"] == 0.5
    assert sweep_analysis.compare_with_paper(speat.drop(columns="model_id"), paper).empty

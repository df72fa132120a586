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
    speat = _speat(
        [
            ("a", "t1", "mean_sum", 0.9, 0.001),
            ("b", "t1", "mean_sum", 0.5, 0.03),
            ("c", "t1", "mean_sum", 0.1, 0.4),
            ("a", "t1", "max_q3", 0.5, 0.03),
        ]
    )
    out = sweep_analysis.add_significance(speat, alpha=0.05, methods=("holm", "bonferroni"))
    # mean_sum: 3 tests; holm 0.003, 0.06, 0.4; max_q3 alone: 0.03 stays 0.03
    assert np.allclose(out["p_holm"], [0.003, 0.06, 0.4, 0.03])
    assert np.allclose(out["p_bonferroni"], [0.003, 0.09, 1.0, 0.03])
    assert list(out["significance"]) == ["corrected", "uncorrected", "none", "corrected"]
    assert "significance" not in speat.columns  # the input is not changed
    assert sweep_analysis.add_significance(speat.iloc[:0]).empty


def test_positive_proportions_come_in_layer_then_temporal_order():
    speat = _speat(
        [
            ("a", "t", "max_last", 0.1, 0.5),
            ("a", "t", "mean_last", -0.1, 0.5),
            ("a", "t", "min_sum", 0.2, 0.5),
            ("b", "t", "min_sum", -0.2, 0.5),
        ]
    )
    out = sweep_analysis.positive_by_aggregation(speat)
    assert list(out["aggregation"]) == ["min_sum", "mean_last", "max_last"]
    assert list(out["n"]) == [2, 1, 1] and list(out["proportion_positive"]) == [0.5, 0.0, 1.0]
    assert list(sweep_analysis.positive_by_aggregation(speat.iloc[:0]).columns) == [
        "temporal",
        "layer",
        "aggregation",
        "n",
        "n_positive",
        "proportion_positive",
    ]


def test_anova_that_cannot_be_fitted_says_why():
    one_family = _speat([("a", "t1", "mean_sum", 0.1, 0.5), ("b", "t2", "mean_sum", 0.3, 0.5)]).assign(family="x")
    anova, note = sweep_analysis.family_anova(one_family)
    assert anova is None and note.startswith("not computed: ")
    assert sweep_analysis.family_anova(one_family.iloc[:0]) == (None, "no SpEAT results")


def test_congruence_leaves_out_tests_without_a_human_iat_d():
    table = _speat(
        [("a", "t1", "mean_sum", 0.4, 0.5), ("b", "t1", "mean_sum", -0.2, 0.5), ("a", "t2", "mean_sum", 0.3, 0.5)]
    ).assign(human_iat_d=[0.5, 0.5, None])
    per_test, totals = sweep_analysis.human_congruence(table)
    assert totals == {"n_congruent": 1, "n_total": 2}
    assert per_test.to_dict("records") == [
        {
            "test": "t1",
            "human_iat_d": 0.5,
            "n_models": 2,
            "n_congruent": 1,
            "mean_d": pytest.approx(0.1),
            "mean_congruent": True,
        }
    ]
    by_agg = sweep_analysis.aggregation_congruence(table)
    assert by_agg.to_dict("records") == [
        {"aggregation": "mean_sum", "n_tests": 1, "n_congruent": 1, "mean_abs_d": pytest.approx(0.3)}
    ]
    _, none = sweep_analysis.human_congruence(table.drop(columns="human_iat_d"))
    assert none == {"n_congruent": 0, "n_total": 0}


def test_paper_comparison_takes_the_first_equivalent_aggregation():
    speat = _speat(
        [
            ("a", "t", "mean_sum", 0.5, 0.1),
            ("a", "t", "mean_mean", 0.4, 0.2),
            ("b", "t", "mean_sum", -0.2, 0.6),
            ("b", "t", "max_q3", 0.9, 0.01),
        ]
    )
    speat = speat.assign(model_id=speat["upstream"].map({"a": "hub/a", "b": "hub/b"}), n_x=8)
    paper = pd.DataFrame(
        {
            "model_id": ["hub/a", "hub/b", "hub/c"],
            "paper_model": ["A", "B", "C"],
            "test": "t",
            "paper_d": [0.6, 0.1, 1.0],
            "paper_p": 0.05,
            "paper_n_targets": 8,
        }
    )
    comp = sweep_analysis.compare_with_paper(speat, paper).set_index("upstream")
    assert list(comp.index) == ["a", "b"]
    assert comp.loc["a", "aggregation"] == "mean_mean" and comp.loc["a", "d"] == 0.4  # mean_mean listed first
    assert comp.loc["b", "d_minus_paper"] == pytest.approx(-0.3) and not comp.loc["b", "same_sign"]
    flipped = sweep_analysis.compare_with_paper(speat, paper, ("mean_sum",)).set_index("upstream")
    assert flipped.loc["a", "d"] == 0.5
    assert sweep_analysis.compare_with_paper(speat.drop(columns="model_id"), paper).empty


def _design(
    n_models_per_family: int,
    families=("hubert", "wavlm", "whisper"),
    tests=("t1", "t2", "t3"),
    noise: float = 0.1,
    seed: int = 0,
) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for f_i, fam in enumerate(families):
        for m in range(n_models_per_family):
            for t_i, t in enumerate(tests):
                rows.append(
                    {
                        "upstream": f"{fam}{m}",
                        "family": fam,
                        "test": t,
                        "d": 0.3 * t_i - 0.2 * f_i + noise * rng.normal(),
                    }
                )
    return pd.DataFrame(rows)


def test_anova_states_its_residual_degrees_of_freedom():
    # 3 families x 4 models x 3 tests = 36 results; with interaction 9 cells -> 36 - 9 = 27 residual df
    anova, note = sweep_analysis.family_anova(_design(4))
    assert note.endswith("27 residual degrees of freedom") and "C(test):C(family)" in note
    assert int(anova.set_index("source").loc["Residual", "df"]) == 27


def test_anova_falls_back_to_the_additive_model_then_refuses_too_few_residual_df():
    # 2 models per family: interaction leaves 18 - 9 = 9 < 10, the additive model 18 - 5 = 13
    anova, note = sweep_analysis.family_anova(_design(2))
    assert anova is not None and note.startswith(
        "type I sums of squares (test entered first), d ~ C(test) + C(family),"
    )
    assert (
        "13 residual degrees of freedom (no interaction term: d ~ C(test) + C(family) + C(test):C(family) leaves 9"
        in note
    )
    # the demo sweep's shape: 12 results, 2 tests, 5 families -> 2 and 6 residual df: no table, and why
    demo = _design(1, families=("classical", "wav2vec2", "hubert", "wavlm", "whisper"), tests=("t1", "t2"))
    demo = pd.concat([demo, demo[demo["family"] == "classical"].assign(upstream="mfcc")], ignore_index=True)
    anova, note = sweep_analysis.family_anova(demo)
    assert anova is None
    assert "C(test) + C(family) + C(test):C(family) leaves 2 residual degrees of freedom (fewer than 10)" in note
    assert "d ~ C(test) + C(family) leaves 6 residual degrees of freedom" in note
    # with a minimum of 2 the interaction fit is still refused: fbank = mfcc make it fit exactly (residual ~0);
    # the additive model with its 6 residual df is used and says why there is no interaction term
    anova, note = sweep_analysis.family_anova(demo, min_resid_df=2)
    assert int(anova.set_index("source").loc["Residual", "df"]) == 6
    assert "6 residual degrees of freedom (no interaction term: " in note and "fits the 12 d values exactly" in note


def test_anova_refuses_an_exact_fit():
    exact = _design(4, noise=0.0)  # d = test effect + family effect, no residual at all
    anova, note = sweep_analysis.family_anova(exact)
    assert anova is None and "exactly" in note and "meaningless" in note

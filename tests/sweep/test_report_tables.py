"""Collection of a sweep's runs and the report's tables, checked against loops written from the formulas."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from speechbias.results.paper_results import load_paper_results
from speechbias.report import sweep_tables
from speechbias.ser import sweep_propagation
from speechbias.stats import sweep_analysis
from speechbias.stats.sweep_analysis import compare_with_paper
from speechbias.results.sweep_results import REPORT_MARKER, collect
from sweep.fake_sweep import PAPER_MODELS, US_TESTS, write_propagation_sweep, write_speat_run, write_speat_sweep


@pytest.fixture
def sweep(tmp_path):
    root = tmp_path / "multirun" / "s"
    write_speat_sweep(root, models=PAPER_MODELS[:6], aggregations=("mean_sum", "max_q3"))
    return root


def test_collect_reads_every_finished_run_and_lists_incomplete_ones(sweep):
    unfinished = sweep / "aggregation=mean_sum,bias_test=female_male,upstream=extra"
    (unfinished / ".hydra").mkdir(parents=True)
    res = collect(sweep)
    assert len(res.speat) == 6 * 6 * 2
    assert res.incomplete == [unfinished.name]
    assert set(res.speat["aggregation"]) == {"mean_sum", "max_q3"}
    # layers: every layer of every run; SE curves: every size of every run
    assert len(res.layers) == sum(m[3] for m in PAPER_MODELS[:6]) * 6 * 2
    assert len(res.se_curves) == 59 * 6 * 6 * 2
    assert res.speat["overrides"].str.contains("upstream=").all()


def test_collect_keeps_one_of_a_repeated_run_and_skips_report_folders(sweep):
    src = sweep / "aggregation=mean_sum,bias_test=female_male,upstream=hubert-base-ls960"
    shutil.copytree(src, sweep / "again" / src.name)
    (sweep / "report").mkdir()
    write_speat_run(sweep / "report", PAPER_MODELS[0], "female_male", 0.31)
    (sweep / "report" / REPORT_MARKER).write_text("")
    res = collect(sweep)
    assert res.duplicates == 1
    assert len(res.speat) == 6 * 6 * 2
    assert not res.speat["run_dir"].str.startswith("report").any()


def test_collect_names_random_controls_apart(tmp_path):
    model = PAPER_MODELS[0]
    write_speat_run(tmp_path / "a", model, "female_male", 0.31)
    write_speat_run(
        tmp_path / "b",
        (model[0], model[1], model[2] + "-rand", model[3]),
        "female_male",
        0.31,
        overrides=["upstream=wav2vec2_base", "upstream.randomize=true"],
    )
    names = set(collect(tmp_path).speat["upstream"])
    assert names == {"wav2vec2-base", "wav2vec2-base (random init)"}


def test_collect_rejects_a_missing_sweep_folder(tmp_path):
    with pytest.raises(ValueError, match="no such folder"):
        collect(tmp_path / "nope")


def _holm_loop(p: list[float]) -> list[float]:
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def test_significance_is_corrected_within_each_aggregation(sweep):
    table = sweep_analysis.add_significance(collect(sweep).speat, alpha=0.05)
    for _agg, g in table.groupby("aggregation"):
        p = g["p"].tolist()
        assert np.allclose(g["p_bonferroni"], [min(1.0, len(p) * v) for v in p])
        assert np.allclose(g["p_holm"], _holm_loop(p))
        for r in g.itertuples():
            expected = "corrected" if r.p * len(p) < 0.05 else ("uncorrected" if r.p < 0.05 else "none")
            assert r.significance == expected


def test_proportion_positive_per_aggregation_counts_by_hand(sweep):
    speat = collect(sweep).speat
    long = sweep_analysis.positive_by_aggregation(speat)
    for r in long.itertuples():
        ds = [row.d for row in speat.itertuples() if row.temporal == r.temporal and row.layer == r.layer]
        assert r.n == len(ds) and r.n_positive == sum(d > 0 for d in ds)
        assert r.proportion_positive == pytest.approx(sum(d > 0 for d in ds) / len(ds))
    pivot = sweep_tables.positive_pivot(long)
    assert list(pivot.columns) == ["mean", "max"] and list(pivot.index) == ["sum", "q3"]


def test_congruence_with_human_iat_counts_by_hand(sweep):
    main = sweep_analysis.main_table(collect(sweep).speat, "mean_sum")
    per_test, totals = sweep_analysis.human_congruence(main)
    agree = sum((r.d > 0) == (US_TESTS[r.test] > 0) for r in main.itertuples())
    assert totals == {"n_congruent": agree, "n_total": 36}
    for r in per_test.itertuples():
        ds = main.loc[main["test"] == r.test, "d"]
        assert r.n_congruent == int((ds > 0).sum()) and r.mean_d == pytest.approx(ds.mean())
    by_agg = sweep_analysis.aggregation_congruence(collect(sweep).speat)
    assert set(by_agg["aggregation"]) == {"mean_sum", "max_q3"} and (by_agg["n_tests"] == 6).all()


def test_anova_test_sum_of_squares_matches_the_between_group_formula(sweep):
    main = sweep_analysis.main_table(collect(sweep).speat, "mean_sum")
    anova, note = sweep_analysis.family_anova(main)
    grand = main["d"].mean()
    ss_test = sum(len(g) * (g["d"].mean() - grand) ** 2 for _, g in main.groupby("test"))
    ss_total = ((main["d"] - grand) ** 2).sum()
    row = anova.set_index("source")
    assert row.loc["test", "sum_sq"] == pytest.approx(ss_test)
    assert row["sum_sq"].sum() == pytest.approx(ss_total)
    assert "C(test)" in note


def test_propagation_pools_heads_and_counts_sign_agreement(tmp_path):
    preds = write_propagation_sweep(tmp_path)
    res = collect(tmp_path)
    prop = sweep_propagation.propagation_table(res.propagation, res.predictions)
    assert list(dict.fromkeys(prop["lr"])) == ["pooled", "1e-3", "1e-4", "1e-5"]
    pooled = prop[prop["lr"] == "pooled"]
    for r in pooled.itertuples():
        g = preds[(preds["upstream"] == r.upstream) & (preds["test"] == r.test)]
        x = g.loc[g["role"] == "X", "predicted_valence"].to_numpy()
        y = g.loc[g["role"] == "Y", "predicted_valence"].to_numpy()
        sd = np.sqrt(((len(x) - 1) * x.var(ddof=1) + (len(y) - 1) * y.var(ddof=1)) / (len(x) + len(y) - 2))
        assert r.cohens_d == pytest.approx((x.mean() - y.mean()) / sd)
    counts = sweep_propagation.agreement_counts(prop)
    for r in counts.itertuples():
        g = prop[prop["lr"] == r.lr]
        assert r.n_total == len(g) and r.n_agree == sum((a > 0) == (b > 0) for a, b in zip(g.speat_d, g.cohens_d))


PAPER_CSV = "../shared/data/speat_paper/results/all_mean_mean_results.csv"


@pytest.fixture
def paper(repo_root):
    from omegaconf import OmegaConf

    path = repo_root / PAPER_CSV
    if not path.is_file():
        pytest.skip(f"{path} not available")
    task = OmegaConf.load(repo_root / "conf" / "task" / "report.yaml").task
    return load_paper_results(path, dict(task.paper_models), dict(task.paper_tests))


def test_paper_results_map_to_16_models_and_12_tests(paper, repo_root):
    assert len(paper) == 192
    assert paper.groupby("test")["model_id"].nunique().eq(16).all() and paper["test"].nunique() == 12
    bias_tests = {p.stem for p in (repo_root / "conf" / "bias_test").glob("*.yaml")}
    assert set(paper["test"]) <= bias_tests
    raw = pd.read_csv(repo_root / PAPER_CSV)
    hit = raw[(raw["Speech Model"] == "hubert_xtralarge_ll60k") & (raw["Target Dataset"] == "TORGO Recordings")]
    row = paper[(paper["model_id"] == "facebook/hubert-xlarge-ll60k") & (paper["test"] == "abled_disabled")]
    assert row["paper_d"].item() == pytest.approx(hit["SpEAT d"].item())


def test_comparison_with_the_paper_uses_equivalent_aggregations(paper, tmp_path):
    write_speat_sweep(tmp_path, models=PAPER_MODELS[:3], aggregations=("mean_sum", "max_q3"))
    speat = collect(tmp_path).speat
    comp = compare_with_paper(speat, paper)
    assert len(comp) == 3 * 6 and set(comp["aggregation"]) == {"mean_sum"}
    for r in comp.itertuples():
        paper_d = paper[(paper["model_id"] == r.model_id) & (paper["test"] == r.test)]["paper_d"].item()
        ours = speat[
            (speat["model_id"] == r.model_id) & (speat["test"] == r.test) & (speat["aggregation"] == "mean_sum")
        ]["d"].item()
        assert r.d_minus_paper == pytest.approx(ours - paper_d)
    assert compare_with_paper(speat[speat["aggregation"] == "max_q3"], paper).empty


def test_paper_results_reject_a_table_in_another_layout(tmp_path):
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"model": ["a"], "d": [1.0]}).to_csv(bad, index=False)
    with pytest.raises(ValueError, match="missing column"):
        load_paper_results(bad, {}, {})


def test_speat_d_bound_is_the_largest_d_any_associations_give():
    """|d| = |mean_x - mean_y| / sd(all, population) is largest when each group's values are equal; a
    random search over association values never exceeds the bound and the two-point values reach it."""
    import math

    from speechbias.results.sweep_results import speat_d_bound

    rng = np.random.default_rng(0)
    for n_x, n_y in ((10, 10), (3, 7), (1, 5)):
        bound = speat_d_bound(n_x, n_y)
        two_point = np.r_[np.ones(n_x), np.zeros(n_y)]
        assert abs(two_point[:n_x].mean() - two_point[n_x:].mean()) / two_point.std() == pytest.approx(bound)
        for _ in range(2000):
            s = rng.normal(size=n_x + n_y) * rng.uniform(0.01, 1, n_x + n_y) + np.r_[np.full(n_x, 3.0), np.zeros(n_y)]
            assert abs(s[:n_x].mean() - s[n_x:].mean()) / s.std() <= bound + 1e-12
    assert speat_d_bound(10, 10) == 2.0 and math.isinf(speat_d_bound(None, 3))

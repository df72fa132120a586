"""Propensity-score matching (us_foreign) against hand-derived scores, pairs and SMDs, and on the paper's table."""

from __future__ import annotations

import math
import tempfile

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize

from speechbias.stimuli.corpora.saa import read_saa_metadata
from speechbias.stimuli.selection import targets as T
from speechbias.stimuli.selection.matching import SelectionError
from speechbias.stimuli.selection.authors_psm import knn_caliper_pairs, liblinear_logit_scores, neighbour_order
from speechbias.stimuli.selection.propensity import (
    authors_fold_scores,
    pair_differences,
    propensity_pairs,
    propensity_scores,
    standardized_mean_differences,
)

from tests.stimuli import corpus_trees as trees

SHARED = trees.SHARED_PAPER_DATA
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/speat_paper not available")

# Four (sex, age) cells whose treated/control counts have multiplicative odds, so the main-effects
# logistic model reproduces each cell's share of treated rows exactly (its MLE is the saturated fit):
# odds f20 = 2/1, f40 = 2/2, m20 = 1/2, m40 = 1/4 -> logit = 2 ln2 - (ln2 / 20) age - 2 ln2 male.
CELLS = [("f20", 0, 20, 2, 1), ("f40", 0, 40, 2, 2), ("m20", 1, 20, 1, 2), ("m40", 1, 40, 1, 4)]
SCORE = {"f20": 2 / 3, "f40": 1 / 2, "m20": 1 / 3, "m40": 1 / 5}


def toy_table() -> pd.DataFrame:
    rows = []
    for cell, male, age, n_t, _n_c in CELLS:
        rows += [{"cell": cell, "male": male, "age": age, "treated": True, "name": f"t_{cell}{k}"} for k in range(n_t)]
    for cell, male, age, _n_t, n_c in CELLS:
        rows += [{"cell": cell, "male": male, "age": age, "treated": False, "name": f"c_{cell}{k}"} for k in range(n_c)]
    return pd.DataFrame(rows).set_index("name")


def test_propensity_scores_are_the_cell_shares_and_coefficients_the_hand_logits():
    df = toy_table()
    score, model = propensity_scores(df["treated"], df[["age", "male"]], "toy")
    assert score.to_numpy() == pytest.approx(df["cell"].map(SCORE).to_numpy(), abs=1e-8)
    coef = model["coefficients"]
    ln2 = math.log(2)
    assert coef["const"] == pytest.approx(2 * ln2, abs=1e-6)
    assert coef["age"] == pytest.approx(-ln2 / 20, abs=1e-8)
    assert coef["male"] == pytest.approx(-2 * ln2, abs=1e-6)
    assert model["n"] == 15 and model["n_treated"] == 6


def test_caliper_excludes_the_known_pair_and_a_wider_one_admits_it():
    df = toy_table()
    score, _ = propensity_scores(df["treated"], df[["age", "male"]], "toy")
    cell = df["cell"]
    # caliper 0.1: every treated row but the second f20 one finds a control of its own cell; the nearest
    # free control of t_f201 is an f40 one at |2/3 - 1/2| = 1/6 > 0.1
    pairs = propensity_pairs(score, df["treated"], 0.1, np.random.default_rng(0))
    assert list(pairs["treated"]) == ["t_f200", "t_f400", "t_f401", "t_m200", "t_m400"]
    assert (cell[pairs["treated"]].to_numpy() == cell[pairs["control"]].to_numpy()).all()
    # caliper 0.2: t_f201 takes an f40 control (1/6), so t_f401 must take an m20 one (|1/2 - 1/3| = 1/6)
    pairs = propensity_pairs(score, df["treated"], 0.2, np.random.default_rng(0))
    got = dict(zip(pairs["treated"], cell[pairs["control"]]))
    assert got == {"t_f200": "f20", "t_f201": "f40", "t_f400": "f40", "t_f401": "m20", "t_m200": "m20", "t_m400": "m40"}
    assert pairs["control"].is_unique
    # pair gaps: t_f201 (f, 20) with an f40 control: age 20; t_f401 (f, 40) with an m20 control: age 20, sex 1
    gaps = pair_differences(df.loc[pairs["treated"], ["age", "male"]], df.loc[pairs["control"], ["age", "male"]])
    assert gaps["age"] == {"mean_abs": pytest.approx(40 / 6), "max_abs": 20.0, "n_equal": 4}
    assert gaps["male"] == {"mean_abs": pytest.approx(1 / 6), "max_abs": 1.0, "n_equal": 5}
    # the f40 control t_f201 takes is a seeded tie-break between the two equally near ones
    taken = {propensity_pairs(score, df["treated"], 0.2, np.random.default_rng(s)).iloc[1]["control"] for s in range(8)}
    assert taken == {"c_f400", "c_f401"}
    with pytest.raises(SelectionError, match="caliper"):
        propensity_pairs(score, df["treated"], 0.0, np.random.default_rng(0))


def test_standardized_mean_differences_by_hand():
    df = toy_table()
    t, c = df[df["treated"]], df[~df["treated"]]
    cov = ["age", "male"]
    # treated ages 20,20,40,40,20,40: mean 30, s^2 = 600/5; controls 3 x 20, 6 x 40: mean 100/3, s^2 = 800/8
    sd_age = math.sqrt((120 + 100) / 2)
    # treated male 2 of 6: s^2 = (4/9 + 8/9)/5; controls male 6 of 9: s^2 = (12/9 + 6/9)/8
    sd_male = math.sqrt(((12 / 9) / 5 + (18 / 9) / 8) / 2)
    after_t = t.loc[["t_f200", "t_f201", "t_f400", "t_f401", "t_m200", "t_m400"], cov]
    after_c = c.loc[["c_f200", "c_f400", "c_f401", "c_m200", "c_m201", "c_m400"], cov]
    smd = standardized_mean_differences(t[cov], c[cov], after_t, after_c)
    assert smd["age"]["before"] == pytest.approx((30 - 100 / 3) / sd_age)
    assert smd["male"]["before"] == pytest.approx((1 / 3 - 2 / 3) / sd_male)
    assert smd["age"]["after"] == pytest.approx(0.0, abs=1e-12)  # matched controls' ages: 20,40,40,20,20,40
    assert smd["male"]["after"] == pytest.approx((1 / 3 - 1 / 2) / sd_male)  # denominator of the unmatched groups


def test_propensity_model_that_separates_the_groups_is_a_selection_error():
    df = pd.DataFrame({"age": [20.0, 21, 22, 40, 41, 42], "male": [0.0, 1, 0, 1, 0, 1]})
    with pytest.raises(SelectionError, match="toy: the logistic propensity model cannot be fitted"):
        propensity_scores(pd.Series([True, True, True, False, False, False]), df, "toy")


def independent_scores(y: np.ndarray, covariates: np.ndarray) -> np.ndarray:
    """P(y = 1 | covariates) by minimising the logistic negative log-likelihood with scipy (no statsmodels)."""
    x = np.c_[np.ones(len(y)), (covariates - covariates.mean(0)) / covariates.std(0)]

    def nll(b):
        eta = x @ b
        return float(np.sum(np.logaddexp(0, eta) - y * eta))

    def grad(b):
        return x.T @ (1 / (1 + np.exp(-(x @ b))) - y)

    b = minimize(nll, np.zeros(x.shape[1]), jac=grad, method="BFGS", options={"gtol": 1e-10}).x
    return 1 / (1 + np.exp(-(x @ b)))


def reference_pair_count(ps_treated: np.ndarray, ps_control: np.ndarray, caliper: float) -> int:
    """Brute force: treated in order, each taking the nearest free control within the caliper."""
    free, n = list(range(len(ps_control))), 0
    for p in ps_treated:
        dist = [abs(ps_control[j] - p) for j in free]
        if dist and min(dist) <= caliper:
            free.pop(int(np.argmin(dist)))
            n += 1
    return n


def check_us_foreign(saa: pd.DataFrame, caliper: float, seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """us_foreign's pairs against scores and a pair count derived independently of the implementation."""
    sel = T.us_foreign(saa, np.random.default_rng(seed), caliper=caliper)
    ok = saa["sex"].isin(["female", "male"]) & saa["age"].notna() & saa["listed_audio"]
    us = saa[ok & (saa["birth_country"] == "usa") & (saa["native_language"] == "english")]
    ko = saa[ok & saa["birth_place"].str.contains("korea") & (saa["native_language"] == "korean")]
    both = pd.concat([ko, us])
    y = np.r_[np.ones(len(ko)), np.zeros(len(us))]
    ps = pd.Series(
        independent_scores(y, np.c_[both["age"], both["sex"] == "male"].astype(float)), index=both["speaker"].to_numpy()
    )
    clips = sel.clips
    x_rows, y_rows = clips[clips["role"] == "X"], clips[clips["role"] == "Y"]
    assert set(x_rows["speaker"]) <= set(us["speaker"]) and set(y_rows["speaker"]) <= set(ko["speaker"])
    pair = pd.merge(x_rows, y_rows, on="pair_id", suffixes=("_x", "_y"))
    assert len(pair) == len(x_rows) == len(y_rows) and not clips["speaker"].duplicated().any()
    gap = ps[pair["speaker_x"]].to_numpy() - ps[pair["speaker_y"]].to_numpy()
    assert np.abs(gap).max() <= caliper + 1e-6
    n_ref = reference_pair_count(ps[ko["speaker"]].to_numpy(), ps[us["speaker"]].to_numpy(), caliper)
    assert len(pair) == n_ref
    bal = sel.balance
    assert bal["n_pairs"] == n_ref and bal["n_unmatched_treated"] == len(ko) - n_ref
    pooled = math.sqrt((ko["age"].var() + us["age"].var()) / 2)
    assert bal["smd"]["age"]["before"] == pytest.approx((ko["age"].mean() - us["age"].mean()) / pooled)
    assert bal["smd"]["age"]["after"] == pytest.approx((pair["age_y"].mean() - pair["age_x"].mean()) / pooled)
    return pair, bal


def test_us_foreign_pairs_match_an_independent_propensity_reference():
    speakers = trees.saa_speakers(np.random.default_rng(0), 80, 30, 10)
    with tempfile.TemporaryDirectory() as d:
        speakers.to_csv(f"{d}/speaker_list.csv", index=False)
        saa = read_saa_metadata(f"{d}/speaker_list.csv")
    pair, bal = check_us_foreign(saa, caliper=0.001)
    assert bal["covariates"] == ["age", "male"] and bal["caliper"] == 0.001
    # 3 Koreans per (sex, age) cell (f 20,22,..,28; m 21,..,29) against 2 US speakers per cell up to age 27 and
    # 1 at 28 and 29: at most 2 x 4 + 1 = 9 same-cell pairs per sex; a neighbouring age is beyond the caliper
    assert len(pair) == 18 and (pair["sex_x"] == pair["sex_y"]).all() and (pair["age_x"] == pair["age_y"]).all()
    sub = T.us_foreign(saa, np.random.default_rng(0), n_pairs=10)
    assert sub.clips.groupby("role").size().to_dict() == {"X": 10, "Y": 10}
    with pytest.raises(SelectionError, match="need 999"):
        T.us_foreign(saa, np.random.default_rng(0), n_pairs=999)


@needs_shared
def test_us_foreign_on_the_papers_speaker_table():
    """The paper's matching on the authors' table: scores, pair count and balance checked independently."""
    saa = read_saa_metadata(SHARED / "speech_accent_archive" / "speaker_list.csv")
    pair, bal = check_us_foreign(saa, caliper=0.001)
    # the matching balances both covariates (|SMD| < 0.1, the usual threshold) though the groups differ before
    for cov in ("age", "male"):
        assert abs(bal["smd"][cov]["before"]) > 0.2 and abs(bal["smd"][cov]["after"]) < 0.1, (
            cov,
            bal["smd"],
            len(pair),
        )


# --- the authors' psmpy scores (propensity_model="authors_folds") ----------------------------------


def _liblinear_objective(y, x, c=1.0):
    design = np.c_[x, np.ones(len(x))]
    sign = 2.0 * y - 1.0
    return design, (lambda w: 0.5 * w @ w + c * float(np.sum(np.logaddexp(0.0, -sign * (design @ w)))))


def test_liblinear_scores_stop_where_liblinear_stops_near_the_exact_optimum():
    rng = np.random.default_rng(0)
    x = np.c_[rng.uniform(18, 70, 60), rng.integers(0, 2, 60)]
    y = (rng.uniform(size=60) < 0.4).astype(float)
    p = liblinear_logit_scores(y, x, c=1.0)
    design, objective = _liblinear_objective(y, x)
    # the weights behind the scores, and the objective's gradient there: w - c sum_i (y_i - p_i) [x_i, 1]
    w = np.linalg.lstsq(design, np.log(p / (1 - p)), rcond=None)[0]
    grad_at = lambda w_, p_: w_ - design.T @ (y - p_)  # noqa: E731
    g0 = grad_at(np.zeros(3), np.full(60, 0.5))
    n_pos = int(y.sum())
    assert np.linalg.norm(grad_at(w, p)) <= 1e-4 * min(n_pos, 60 - n_pos) / 60 * np.linalg.norm(g0) * (1 + 1e-6)
    # close to, but not exactly at, the optimum that a tight solver (scipy BFGS) finds
    exact = minimize(objective, np.zeros(3), method="BFGS", options={"gtol": 1e-10}).x
    p_exact = 1 / (1 + np.exp(-(design @ exact)))
    assert np.abs(p - p_exact).max() < 1e-3
    # a tighter liblinear tolerance converges onto the exact optimum
    assert np.abs(liblinear_logit_scores(y, x, tol=1e-12) - p_exact).max() < 1e-6


def test_neighbour_order_sorts_by_distance():
    """Nearest first with the Euclidean distances; which of three tied rows comes first is scikit-learn's
    heap-and-quicksort order, pinned by the paper's 59 pairs below (test_authors_folds_reproduce...)."""
    values = np.array([0.5, 0.2, 0.2, 0.9, 0.2, 0.4, 0.65])
    order, dist = neighbour_order(0.5, values)
    assert dist == pytest.approx(np.abs(values[order] - 0.5), abs=1e-7)
    assert list(order[:3]) == [0, 5, 6] and set(order[3:6]) == {1, 2, 4} and order[6] == 3
    # more than one chunk of candidates, merged over threads: still a sort by distance
    many = np.random.default_rng(0).uniform(size=600)
    order, dist = neighbour_order(0.3, many, chunk=256, n_threads=2)
    assert sorted(order) == list(range(600)) and np.all(np.diff(dist) >= -1e-12)


def test_knn_caliper_pairs_take_the_first_unused_neighbour_within_the_caliper():
    score = pd.Series([0.50, 0.70, 0.501, 0.52, 0.69, 0.10], index=list("abcdef"))
    treated = pd.Series([True, True, False, False, False, False], index=score.index)
    pairs = knn_caliper_pairs(score, treated, caliper=0.02)
    assert pairs.values.tolist() == [["a", "c"], ["b", "e"]]
    # a is nearest to c; with c taken by a, the next treated row cannot reuse it
    # (the smaller group is matched: two treated rows against three controls)
    score2 = pd.Series([0.50, 0.5005, 0.501, 0.90, 0.10], index=list("abcde"))
    treated2 = pd.Series([True, True, False, False, False], index=score2.index)
    assert knn_caliper_pairs(score2, treated2, caliper=0.01).values.tolist() == [["a", "c"]]


def test_authors_folds_give_one_half_when_every_fold_is_balanced():
    # 25 small-group rows; the large group is 2 folds of 25 with the same covariates plus 21 leftover rows
    # equal to the 21 small-group rows psmpy draws for the last fold (RandomState(42)): every fold's two
    # groups then have equal covariate sums, so the penalised optimum is w = 0 and every score is 1/2
    rng = np.random.default_rng(1)
    small = pd.DataFrame({"age": rng.uniform(18, 70, 25).round(), "male": rng.integers(0, 2, 25).astype(float)})
    drawn = small.iloc[np.random.RandomState(42).choice(25, size=21, replace=False)]
    large = pd.concat([small, small, drawn], ignore_index=True)
    cov = pd.concat([small, large], ignore_index=True)
    treated = pd.Series(np.r_[np.ones(25, bool), np.zeros(71, bool)])
    assert authors_fold_scores(treated, cov).to_numpy() == pytest.approx(np.full(96, 0.5), abs=1e-6)
    # a different last fold breaks the balance there and only there
    cov.loc[95, "age"] += 30
    scores = authors_fold_scores(treated, cov)
    assert scores.iloc[25:75].to_numpy() == pytest.approx(np.full(50, 0.5), abs=1e-6)
    assert abs(scores.iloc[95] - 0.5) > 1e-3
    with pytest.raises(SelectionError, match="too few for psmpy's last fold"):
        authors_fold_scores(treated.iloc[:40], cov.iloc[:40])


@needs_shared
def test_authors_folds_reproduce_the_papers_59_pairs():
    """With the authors' scores the paper's count and Korean speakers come back, and each published pair
    lies within the caliper of 0.001 under those scores."""
    saa = read_saa_metadata(SHARED / "speech_accent_archive" / "speaker_list.csv")
    paper = pd.read_csv(SHARED / "speech_accent_archive" / "us_korean" / "clip_info.csv")
    paper_ko = paper[paper["language"] == "korean"].sort_values("pair_id")
    paper_us = paper[paper["language"] == "english"].sort_values("pair_id")
    sel = T.us_foreign(saa, np.random.default_rng(0), propensity_model="authors_folds")
    clips = sel.clips
    assert (clips["role"] == "Y").sum() == 59 == len(paper_ko)
    assert set(clips.loc[clips["role"] == "Y", "speaker"]) == set(paper_ko["name"])
    ok = saa["sex"].isin(["female", "male"]) & saa["listed_audio"]
    us = saa[ok & (saa["birth_country"] == "usa") & (saa["native_language"] == "english")]
    ko = saa[ok & saa["birth_place"].str.contains("korea") & (saa["native_language"] == "korean")]
    both = pd.concat([ko, us])
    cov = pd.DataFrame({"age": both["age"], "male": (both["sex"] == "male").astype(float)})
    scores = authors_fold_scores(
        pd.Series(np.r_[np.ones(len(ko), bool), np.zeros(len(us), bool)], index=both.index), cov
    ).set_axis(both["speaker"].to_numpy())
    gaps = np.abs(scores[paper_ko["name"]].to_numpy() - scores[paper_us["name"]].to_numpy())
    assert gaps.max() <= 0.001
    assert sel.balance["pair_differences"]["male"]["n_equal"] == int(
        (paper_ko["sex"].to_numpy() == paper_us["sex"].to_numpy()).sum()
    )
    # pair by pair: every Korean speaker has the paper's US partner, whatever the seed
    published = dict(zip(paper_ko["name"], paper_us["name"]))
    for seed in (0, 1):
        c = T.us_foreign(saa, np.random.default_rng(seed), propensity_model="authors_folds").clips
        ours = dict(
            zip(
                c.loc[c["role"] == "Y"].sort_values("pair_id")["speaker"],
                c.loc[c["role"] == "X"].sort_values("pair_id")["speaker"],
            )
        )
        assert ours == published


@pytest.mark.parametrize(("n_small", "n_large"), [(25, 60), (30, 45)])
def test_authors_folds_come_in_psmpys_row_order_when_its_last_fold_is_topped_up(n_small, n_large):
    """psmpy (logistic_ps, balance=True) concatenates its folds and puts the rows scored in several folds
    first (in the order they first occur), then the rows scored once. A last fold of <= 20 leftover rows
    is topped up with rows already folded (RandomState(42) picks them) against 20 drawn rows of the
    smaller group, so those rows lead their group; knn_matched visits and breaks ties in that order."""
    rng = np.random.default_rng(3)
    cov = pd.DataFrame(
        {"age": rng.uniform(18, 70, n_small + n_large).round(), "male": rng.integers(0, 2, n_small + n_large) * 1.0}
    )
    treated = pd.Series(np.r_[np.ones(n_small, bool), np.zeros(n_large, bool)])
    small, large = list(range(n_small)), list(range(n_small, n_small + n_large))
    k, rest = n_large // n_small, n_large % n_small
    assert 0 < rest <= 20
    top_up = {large[i] for i in np.random.RandomState(42).choice(k * n_small, size=20 - rest, replace=False)}
    drawn = {small[i] for i in np.random.RandomState(42).choice(n_small, size=20, replace=False)}
    # the smaller group is scored in every whole fold: with two or more it is all repeated, in table order
    small_first = small if k >= 2 else sorted(drawn) + [s for s in small if s not in drawn]
    large_first = sorted(top_up) + [r for r in large if r not in top_up]
    order = authors_fold_scores(treated, cov).index.tolist()
    assert [r for r in order if r < n_small] == small_first
    assert [r for r in order if r >= n_small] == large_first
    assert sorted(order) == list(range(n_small + n_large))


def test_authors_folds_refuse_groups_of_equal_size_as_psmpy_does():
    """psmpy 0.3.13's logistic_ps(balance=True) raises 'No objects to concatenate' when the two groups have
    the same size: there are no authors' pairs to replay, so the replay refuses (the logit model still
    matches them)."""
    speakers = trees.saa_speakers(np.random.default_rng(0), 30, 30, 10)
    with tempfile.TemporaryDirectory() as d:
        speakers.to_csv(f"{d}/speaker_list.csv", index=False)
        saa = read_saa_metadata(f"{d}/speaker_list.csv")
    with pytest.raises(SelectionError, match="authors_folds: both groups have 30 rows.*propensity_model=logit"):
        T.us_foreign(saa, np.random.default_rng(0), propensity_model="authors_folds")
    assert len(T.us_foreign(saa, np.random.default_rng(0), propensity_model="logit").clips) > 0
    # one row more on either side is a larger group again: scored, not refused
    cov = pd.DataFrame({"age": np.arange(61.0) % 40 + 18, "male": np.arange(61.0) % 2})
    treated = pd.Series(np.arange(61) < 30)
    assert len(authors_fold_scores(treated, cov)) == 61
    with pytest.raises(SelectionError, match="both groups have 30 rows"):
        authors_fold_scores(treated.iloc[:60], cov.iloc[:60])

"""bootstrap_se(): SE of d against a simple loop bootstrap of each design, design invariants, bad input."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from speechbias.stats import BootstrapSEResult, StatsInputError, bootstrap_se, effect_size


def d_formula(xs, ys):
    pooled = xs + ys
    mean = sum(pooled) / len(pooled)
    var = sum((v - mean) ** 2 for v in pooled) / (len(pooled) - 1)
    if var <= 1e-24:
        return None
    return (sum(xs) / len(xs) - sum(ys) / len(ys)) / math.sqrt(var)


def stdev(values):
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def loop_se(draw_one, n_resamples, seed):
    """SE (ddof=1) of d over resamples produced one at a time by draw_one(rng) -> (xs, ys)."""
    rng = random.Random(seed)
    ds = [d for d in (d_formula(*draw_one(rng)) for _ in range(n_resamples)) if d is not None]
    return stdev(ds)


def iid_draw(sx, sy, n):
    return lambda rng: ([rng.choice(sx) for _ in range(n)], [rng.choice(sy) for _ in range(n)])


def paired_draw(px, py, n):
    def draw(rng):
        idx = [rng.randrange(len(px)) for _ in range(n)]
        return [px[i] for i in idx], [py[i] for i in idx]

    return draw


def stratified_draw(groups_x, groups_y, n):
    """groups_*: list of per-stratum value lists; n split evenly, remainder to random strata."""

    def one_group(rng, groups):
        base, extra = divmod(n, len(groups))
        lucky = set(rng.sample(range(len(groups)), extra))
        out = []
        for k, members in enumerate(groups):
            out += [rng.choice(members) for _ in range(base + (k in lucky))]
        return out

    return lambda rng: (one_group(rng, groups_x), one_group(rng, groups_y))


@pytest.fixture
def scores():
    rng = np.random.default_rng(0)
    return rng.normal(0.3, 1.0, 24), rng.normal(0.0, 1.3, 20)


LOOP_RESAMPLES = 3000


@pytest.mark.parametrize("n", [3, 8, 20])
def test_iid_se_matches_loop_bootstrap(scores, n):
    sx, sy = scores
    result = bootstrap_se(s_x=sx, s_y=sy, sizes=[n], n_resamples=10_000, seed=1)
    expected = loop_se(iid_draw(sx.tolist(), sy.tolist(), n), LOOP_RESAMPLES, seed=n)
    assert result.se[0] == pytest.approx(expected, rel=0.10)


@pytest.mark.parametrize("m_x, m_y, n", [(70, 66, 5), (70, 66, 12), (64, 9, 7)])
def test_iid_se_matches_loop_bootstrap_with_and_without_pair_tables(m_x, m_y, n):
    # m > 64: single draws (no pair table); m = 64: the largest pair table; odd n: one single draw.
    rng = np.random.default_rng(m_x + n)
    sx, sy = rng.normal(0.3, 1.0, m_x), rng.normal(0.0, 1.3, m_y)
    result = bootstrap_se(s_x=sx, s_y=sy, sizes=[n], n_resamples=10_000, seed=4)
    expected = loop_se(iid_draw(sx.tolist(), sy.tolist(), n), LOOP_RESAMPLES, seed=n)
    assert result.se[0] == pytest.approx(expected, rel=0.10)


@pytest.mark.parametrize("n", [3, 12])
def test_paired_se_matches_loop_bootstrap(n):
    rng = np.random.default_rng(1)
    common = rng.normal(size=16)
    sx = common + rng.normal(0.2, 0.5, 16)
    sy = common + rng.normal(0.0, 0.5, 16)
    order = rng.permutation(16)  # Y listed in another order; pair ids align them
    ids = [f"p{i}" for i in range(16)]
    result = bootstrap_se(
        s_x=sx,
        s_y=sy[order],
        design="paired",
        pair_ids_x=ids,
        pair_ids_y=[ids[i] for i in order],
        sizes=[n],
        n_resamples=10_000,
        seed=2,
    )
    expected = loop_se(paired_draw(sx.tolist(), sy.tolist(), n), LOOP_RESAMPLES, seed=n)
    assert result.se[0] == pytest.approx(expected, rel=0.10)
    # Ignoring the pairing (iid) gives a visibly different SE for strongly paired data.
    iid = bootstrap_se(s_x=sx, s_y=sy, sizes=[n], n_resamples=10_000, seed=2)
    assert iid.se[0] > 1.15 * result.se[0]


@pytest.mark.parametrize("n", [5, 12])
def test_stratified_se_matches_loop_bootstrap(n):
    rng = np.random.default_rng(2)
    strata_x = np.array(["f"] * 6 + ["m"] * 14)
    strata_y = np.array(["f|old", "f|young", "m|old", "m|young"] * 4 + ["m|old"] * 3)
    sx = rng.normal(size=20) + (strata_x == "f") * 1.5
    sy = rng.normal(size=19) + np.char.startswith(strata_y, "f") * 1.0
    result = bootstrap_se(
        s_x=sx,
        s_y=sy,
        design="stratified",
        strata_x=strata_x,
        strata_y=strata_y,
        sizes=[n],
        n_resamples=10_000,
        seed=3,
    )
    groups_x = [sx[strata_x == k].tolist() for k in sorted(set(strata_x))]
    groups_y = [sy[strata_y == k].tolist() for k in sorted(set(strata_y))]
    expected = loop_se(stratified_draw(groups_x, groups_y, n), LOOP_RESAMPLES, seed=n)
    assert result.se[0] == pytest.approx(expected, rel=0.10)


def test_paired_design_keeps_pairs_together():
    # Both members of a pair carry the same value: any resample of whole pairs has mean X = mean Y,
    # so d is exactly 0 in every resample; splitting pairs would make d vary.
    values = np.random.default_rng(3).normal(size=12)
    ids = list(range(12))
    result = bootstrap_se(s_x=values, s_y=values[::-1], design="paired", pair_ids_x=ids, pair_ids_y=ids[::-1], seed=4)
    np.testing.assert_allclose(result.se, 0.0, atol=1e-12)
    assert result.ci_low == pytest.approx(0.0, abs=1e-12) and result.ci_high == pytest.approx(0.0, abs=1e-12)
    iid = bootstrap_se(s_x=values, s_y=values[::-1], seed=4)
    assert (iid.se > 0.1).all()


def test_stratified_design_keeps_per_stratum_counts():
    # Constant value within each stratum: a resample's values are fixed by its per-stratum counts.
    strata_x = np.array(["a"] * 3 + ["b"] * 9)  # unbalanced in the data
    strata_y = np.array(["a"] * 7 + ["b"] * 7)
    sx = np.where(strata_x == "a", 1.0, 0.0)
    sy = np.where(strata_y == "a", 0.8, -0.5)
    result = bootstrap_se(
        s_x=sx, s_y=sy, design="stratified", strata_x=strata_x, strata_y=strata_y, sizes=[2, 4, 5, 10], seed=5
    )
    # Even n: n/2 per stratum in every resample -> one possible d -> SE 0.
    np.testing.assert_allclose(result.se[[0, 1, 3]], 0.0, atol=1e-12)
    # Odd n: the extra draw goes to a random stratum -> d varies.
    assert result.se[2] > 0.01
    # Full size keeps the data's own counts (3 + 9, 7 + 7): every resample reproduces d.
    assert result.ci_low == pytest.approx(result.d) and result.ci_high == pytest.approx(result.d)
    assert result.d == pytest.approx(d_formula(sx.tolist(), sy.tolist()))


def test_result_records_provenance_and_default_grid(scores):
    sx, sy = scores
    result = bootstrap_se(s_x=sx, s_y=sy, n_resamples=500, seed=9)
    assert isinstance(result, BootstrapSEResult)
    np.testing.assert_array_equal(result.sizes, np.arange(2, 21))  # 2 .. smaller group (20)
    assert result.se.shape == result.n_valid.shape == (19,)
    assert (result.n_x, result.n_y, result.n_resamples, result.design, result.seed) == (24, 20, 500, "iid", 9)
    assert (result.n_valid == 500).all() and result.n_valid_full == 500
    assert result.ci_low < result.d < result.ci_high and result.ci_level == 0.95
    assert np.all(np.diff(result.se) < 0.05)  # SE shrinks (up to noise) as n grows
    assert result.se[-1] < 0.5 * result.se[0]
    with pytest.raises(ValueError):
        result.se[0] = 1.0


def test_full_size_ci_matches_loop_percentiles(scores):
    sx, sy = scores
    result = bootstrap_se(s_x=sx, s_y=sy, sizes=[2], n_resamples=10_000, ci=0.9, seed=10)
    rng = random.Random(0)
    ds = sorted(
        d_formula([rng.choice(sx.tolist()) for _ in sx], [rng.choice(sy.tolist()) for _ in sy]) for _ in range(4000)
    )
    loop_low, loop_high = ds[int(0.05 * 4000)], ds[int(0.95 * 4000)]
    width = loop_high - loop_low
    assert result.ci_low == pytest.approx(loop_low, abs=0.1 * width)
    assert result.ci_high == pytest.approx(loop_high, abs=0.1 * width)


def test_embeddings_and_associations_give_the_same_result():
    rng = np.random.default_rng(6)
    X, Y, A, B = (rng.normal(size=(n, 8)) for n in (10, 9, 5, 5))
    from_embeddings = bootstrap_se(X, Y, A, B, n_resamples=300, seed=1)
    unit = lambda m: m / np.linalg.norm(m, axis=1, keepdims=True)  # noqa: E731
    direction = unit(A).mean(0) - unit(B).mean(0)
    from_scores = bootstrap_se(s_x=unit(X) @ direction, s_y=unit(Y) @ direction, n_resamples=300, seed=1)
    np.testing.assert_allclose(from_embeddings.se, from_scores.se, rtol=1e-9)
    assert from_embeddings.d == pytest.approx(effect_size(X, Y, A, B))


def test_seed_reproducibility():
    rng = np.random.default_rng(7)
    sx, sy = rng.normal(size=15), rng.normal(size=15)
    a = bootstrap_se(s_x=sx, s_y=sy, n_resamples=200, seed=3)
    b = bootstrap_se(s_x=sx, s_y=sy, n_resamples=200, seed=3)
    c = bootstrap_se(s_x=sx, s_y=sy, n_resamples=200, seed=4)
    np.testing.assert_array_equal(a.se, b.se)
    assert a.ci_low == b.ci_low
    assert not np.array_equal(a.se, c.se)


def test_degenerate_resamples_are_counted_not_returned_as_nan():
    sx = [0.0, 0.0, 0.0, 0.0, 1.0]
    sy = [0.0, 0.0, 0.0, 0.0, 0.0, -1.0]
    result = bootstrap_se(s_x=sx, s_y=sy, sizes=[2, 3], n_resamples=2000, seed=8)
    assert np.isfinite(result.se).all()
    # P(all four draws are 0) = (4/5)^2 (5/6)^2 at n=2: about 44 % of resamples have no d.
    share = (0.8**2) * (5 / 6) ** 2
    assert result.n_valid[0] == pytest.approx(2000 * (1 - share), abs=5 * math.sqrt(2000 * share * (1 - share)))
    assert result.n_valid[1] > result.n_valid[0]


IDS = [f"p{i}" for i in range(6)]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(design="bogus"), "design: must be one of"),
        (dict(design="paired"), "pair_ids_x, pair_ids_y: design='paired' needs"),
        (dict(design="paired", pair_ids_x=IDS, pair_ids_y=IDS[:5]), "pair_ids_y: has 5 labels but the group has 6"),
        (
            dict(design="paired", pair_ids_x=IDS[:5] + ["p0"], pair_ids_y=IDS),
            r"pair_ids_x: pair id\(s\) \['p0'\] occur",
        ),
        (dict(design="paired", pair_ids_x=IDS[:5] + ["q"], pair_ids_y=IDS), r"ids only in X: \['q'\]"),
        (dict(design="paired", pair_ids_x=IDS[:5] + [""], pair_ids_y=IDS), "pair_ids_x: missing"),
        (dict(design="stratified", strata_x=list("aabbcc")), "strata_x, strata_y: design='stratified' needs"),
        (dict(design="stratified", strata_x=list("aabbc"), strata_y=list("aabbcc")), "strata_x: has 5 labels"),
        (dict(design="iid", strata_x=list("aabbcc"), strata_y=list("aabbcc")), "design='iid' takes no"),
        (dict(sizes=[1, 2]), "sizes: every size must be >= 2"),
        (dict(sizes=[2.5]), "sizes: expected a non-empty 1-D sequence of integers"),
        (dict(n_resamples=1), "n_resamples: must be >= 2"),
        (dict(ci=1.5), "ci: must be a number strictly between 0 and 1"),
        (dict(s_y=[0.1]), "s_y: has 1 value"),
        (dict(s_y=[0.1, np.nan, 0.2]), "s_y: contains NaN or inf"),
        (dict(X=np.ones((3, 2))), "give either the four embedding arrays or s_x and s_y"),
        (dict(s_x=None, s_y=None, X=np.ones((3, 2))), "Y, A, B: missing"),
        (dict(s_x=[0.2] * 6, s_y=[0.2] * 6), "standard deviation 0"),
    ],
)
def test_bad_input_raises_value_error(kwargs, match):
    args = dict(s_x=[0.1, 0.5, -0.2, 0.3, 0.0, 0.4], s_y=[0.0, -0.3, 0.2, -0.1, 0.1, -0.2], n_resamples=50)
    args.update(kwargs)
    with pytest.raises(StatsInputError, match=match):
        bootstrap_se(**args)

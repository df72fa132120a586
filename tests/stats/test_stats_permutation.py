"""Permutation test: exact p by brute-force enumeration, sampled p within Monte-Carlo error of it."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from speechbias.stats import permutation_test
from speechbias.stats.permutation import (
    _count_by_rejection,
    _count_by_selection_sampling,
    byte_sum_tables,
    complement_counts,
    exact_null_sums,
    rejection_words_per_subset,
)

KERNELS = [_count_by_selection_sampling, _count_by_rejection]


def brute_force_p(s_x, s_y):
    """Share of all re-partitions (observed included) whose X-sum is >= the observed X-sum."""
    pooled = list(s_x) + list(s_y)
    observed = sum(s_x)
    subsets = list(itertools.combinations(range(len(pooled)), len(s_x)))
    hits = sum(1 for c in subsets if sum(pooled[i] for i in c) >= observed - 1e-12)
    return hits / len(subsets)


@pytest.mark.parametrize("n_x, n_y, seed", [(4, 4, 0), (5, 3, 1), (2, 7, 2), (6, 6, 3)])
def test_exact_p_equals_brute_force_enumeration(n_x, n_y, seed):
    rng = np.random.default_rng(seed)
    s_x, s_y = rng.normal(0.3, 1, n_x), rng.normal(0, 1, n_y)
    result = permutation_test(s_x, s_y, n_permutations=10_000)
    assert result.exact
    assert result.n_permutations == math.comb(n_x + n_y, n_x)
    assert result.seed is None
    assert (result.n_x, result.n_y) == (n_x, n_y)
    assert result.p == pytest.approx(brute_force_p(s_x, s_y), abs=1e-15)
    assert result.statistic == pytest.approx(s_x.sum())


def test_exact_enumeration_lists_every_subset_sum():
    s = np.random.default_rng(4).normal(size=11)
    expected = sorted(sum(c) for c in itertools.combinations(s.tolist(), 4))
    np.testing.assert_allclose(np.sort(exact_null_sums(s, 4)), expected, rtol=0, atol=1e-12)


def test_ties_count_as_at_least_the_observed_statistic():
    # Every partition has the same sum: p must be exactly 1 (exact) and 1 (sampled).
    s_x, s_y = [0.1, 0.1, 0.1], [0.1, 0.1, 0.1, 0.1]
    assert permutation_test(s_x, s_y, n_permutations=100).p == 1.0
    assert permutation_test(s_x, s_y, n_permutations=10, seed=1).p == 1.0
    # Duplicated values: swapping equal-valued targets across groups gives tied sums.
    s_x, s_y = [0.3, 0.7, 0.7], [0.3, 0.2, 0.7]
    assert permutation_test(s_x, s_y, n_permutations=100).p == pytest.approx(brute_force_p(s_x, s_y))


def test_most_extreme_partition_gets_the_smallest_p():
    s_x, s_y = [5.0, 6.0, 7.0], [0.0, 1.0, 2.0, 3.0]
    assert permutation_test(s_x, s_y, n_permutations=1000).p == pytest.approx(1 / math.comb(7, 3))
    sampled = permutation_test(s_x, s_y, n_permutations=20, seed=0)
    assert not sampled.exact
    assert sampled.p >= 1 / 21  # the observed partition is always counted


@pytest.mark.parametrize("n_x, n_y, seed", [(10, 10, 5), (13, 7, 6)])
def test_sampled_p_is_within_monte_carlo_error_of_exact(n_x, n_y, seed):
    rng = np.random.default_rng(seed)
    s_x, s_y = rng.normal(0.4, 1, n_x), rng.normal(0, 1, n_y)
    exact = permutation_test(s_x, s_y, n_permutations=math.comb(n_x + n_y, n_x))
    assert exact.exact
    assert exact.p == pytest.approx(brute_force_p(s_x, s_y))
    n_perm = 40_000
    sampled = permutation_test(s_x, s_y, n_permutations=n_perm, seed=11)
    assert not sampled.exact and sampled.n_permutations == n_perm and sampled.seed == 11
    sigma = math.sqrt(exact.p * (1 - exact.p) / n_perm) + 1 / n_perm
    assert abs(sampled.p - exact.p) < 5 * sigma


def _exact_integer_tail(s_x, s_y):
    """(P(T >= T_obs), P(T >= T_obs and total - T >= T_obs)) over all re-partitions, T the X-sum: integer
    arithmetic on integer-valued data, every subset enumerated."""
    pooled = [int(v) for v in list(s_x) + list(s_y)]
    observed, total = sum(int(v) for v in s_x), sum(pooled)
    subsets = [sum(pooled[i] for i in c) for c in itertools.combinations(range(len(pooled)), len(s_x))]
    at_least = [t >= observed for t in subsets]
    both = [t >= observed and total - t >= observed for t in subsets]
    return sum(at_least) / len(subsets), sum(both) / len(subsets)


@pytest.mark.parametrize("shift", [0, -1])  # X above the mean (p < 0.5) and below it (p > 0.5)
def test_complement_layout_is_unbiased_with_no_more_variance_than_independent_permutations(shift):
    # 8 + 8 integer-valued targets (ties included) have an exact p; 600 seeds of 1,001 sampled partitions,
    # each drawn subset counted with its complement (the last one alone). The mean over seeds equals the
    # exact p within 3.5 standard errors; the variance over seeds equals what an antithetic pair gives
    # (Var(I1 + I2) = 2 p (1 - p) + 2 (P(both) - p^2), from the enumeration) and is below the binomial
    # variance of 1,001 independent partitions (sampling error of a variance over 600 seeds: ~6 %).
    rng = np.random.default_rng(17)
    s_x = rng.integers(0, 9, 8) + shift
    s_y = rng.integers(0, 9, 8)
    exact_p, both = _exact_integer_tail(s_x, s_y)
    assert 0.2 < exact_p < 0.8
    n_perm, seeds = 1_001, 600
    shares = []
    for seed in range(seeds):
        result = permutation_test(s_x.astype(float), s_y.astype(float), n_permutations=n_perm, seed=seed)
        assert not result.exact
        shares.append((round(result.p * (n_perm + 1)) - 1) / n_perm)  # count / n_perm
    shares = np.array(shares)
    standard_error = shares.std(ddof=1) / math.sqrt(seeds)
    assert abs(shares.mean() - exact_p) < 3.5 * standard_error
    pairs, lone = n_perm // 2, n_perm % 2
    pair_variance = 2 * exact_p * (1 - exact_p) + 2 * (both - exact_p**2)
    antithetic = (pairs * pair_variance + lone * exact_p * (1 - exact_p)) / n_perm**2
    independent = exact_p * (1 - exact_p) / n_perm
    assert antithetic < 0.8 * independent  # what the test can tell apart
    assert shares.var(ddof=1) == pytest.approx(antithetic, rel=0.25)
    assert shares.var(ddof=1) < independent


def test_unbalanced_groups_count_each_drawn_subset_once():
    # the complement of a 7-subset of 15 is an 8-subset: not a partition of 7 + 8, never counted
    assert complement_counts(15, 7, 1_001) == (1_001, 0)
    assert complement_counts(16, 8, 1_001) == (501, 500)
    assert complement_counts(16, 8, 1) == (1, 0)
    weights = np.zeros(15)
    weights[3] = 1.0
    count = _count_by_rejection(weights, 7, 0.5, 20_000, np.random.default_rng(1))
    share = 7 / 15
    assert abs(count / 20_000 - share) < 5 * math.sqrt(share * (1 - share) / 20_000)


@pytest.mark.parametrize("kernel", KERNELS)
def test_sampled_partitions_are_uniform_over_all_subsets(kernel):
    # With s = powers of two every 4-subset of 9 items has its own sum, so the counts of sums
    # >= each threshold give the whole sampled distribution; compare with exact tail shares.
    s = 2.0 ** np.arange(9)
    sums = np.sort(np.array([sum(c) for c in itertools.combinations(s.tolist(), 4)]))
    n_perm = 60_000
    rng = np.random.default_rng(0)
    centred = s - s.mean()
    shift = 4 * s.mean()
    for threshold in sums[::7]:
        count = kernel(centred, 4, threshold - shift, n_perm, rng)
        share = np.mean(sums >= threshold)
        sigma = math.sqrt(share * (1 - share) / n_perm) + 1e-9
        assert abs(count / n_perm - share) < 5 * sigma, threshold


@pytest.mark.parametrize("kernel, n, k", [(_count_by_selection_sampling, 30, 9), (_count_by_rejection, 130, 60)])
def test_each_item_is_included_with_probability_k_over_n(kernel, n, k):
    # Indicator weights: the count of sampled subsets containing item i (sum >= 1 with weight 1 on i).
    # n = 130 spans three 64-bit words and a partial last byte.
    n_perm = 30_000
    for item in (0, 14, n - 1):
        weights = np.zeros(n)
        weights[item] = 1.0
        count = kernel(weights, k, 0.5, n_perm, np.random.default_rng(item))
        share = k / n
        assert abs(count / n_perm - share) < 5 * math.sqrt(share * (1 - share) / n_perm)


def test_rejection_kernel_pairs_are_uniform_on_a_multi_word_mask():
    # Two items in different 64-bit words (and bytes): P(both in the subset) = k (k-1) / (n (n-1)).
    n, k, n_perm = 100, 50, 40_000
    weights = np.zeros(n)
    weights[[3, 97]] = 1.0
    count = _count_by_rejection(weights, k, 1.5, n_perm, np.random.default_rng(7))
    share = k * (k - 1) / (n * (n - 1))
    assert abs(count / n_perm - share) < 5 * math.sqrt(share * (1 - share) / n_perm)


def test_byte_sum_tables_against_a_loop():
    values = np.random.default_rng(3).normal(size=13)
    tables = byte_sum_tables(values)
    assert tables.shape == (2, 256)
    for b in range(2):
        for v in (0, 1, 5, 128, 255):
            expected = sum(values[8 * b + i] for i in range(8) if v >> i & 1 and 8 * b + i < 13)
            assert tables[b, v] == pytest.approx(expected, abs=1e-15)


def test_kernel_choice_depends_on_the_group_sizes_only():
    assert rejection_words_per_subset(120, 60) <= 60  # 60 + 60: rejection
    assert rejection_words_per_subset(120, 20) > 60  # 20 + 100: selection sampling
    rng = np.random.default_rng(5)
    s_x, s_y = rng.normal(0.2, 1, 60), rng.normal(0, 1, 60)
    pooled = np.concatenate([s_x, s_y])
    centred = pooled - pooled.mean()
    direct = _count_by_rejection(centred, 60, float(centred[:60].sum()), 3_000, np.random.default_rng(9))
    via_test = permutation_test(s_x, s_y, n_permutations=3_000, seed=9)
    assert via_test.p == (1 + direct) / 3_001


@pytest.mark.parametrize("n_x, n_y", [(30, 30), (12, 48)])
def test_paper_size_p_within_monte_carlo_error_of_a_naive_shuffle(n_x, n_y):
    # Independent naive reference: numpy shuffles of the pooled values, X = the first n_x.
    rng = np.random.default_rng(n_x)
    s_x, s_y = rng.normal(0.15, 1, n_x), rng.normal(0, 1, n_y)
    pooled = np.concatenate([s_x, s_y])
    ref_rng, n_ref = np.random.default_rng(1), 20_000
    hits = sum(ref_rng.permutation(pooled)[:n_x].sum() >= s_x.sum() - 1e-12 for _ in range(n_ref))
    p_ref = (1 + hits) / (1 + n_ref)
    result = permutation_test(s_x, s_y, n_permutations=200_000, seed=3)
    sigma = math.sqrt(p_ref * (1 - p_ref) * (1 / n_ref + 1 / 200_000))
    assert abs(result.p - p_ref) < 5 * sigma


@settings(max_examples=30, deadline=None)
@given(
    n_x=st.integers(2, 9),
    n_y=st.integers(2, 9),
    seed=st.integers(0, 2**32 - 1),
    n_perm=st.integers(1, 300),
)
def test_p_is_in_unit_interval_and_seed_reproducible(n_x, n_y, seed, n_perm):
    rng = np.random.default_rng(seed)
    s_x, s_y = rng.normal(size=n_x), rng.normal(size=n_y)
    first = permutation_test(s_x, s_y, n_permutations=n_perm, seed=seed)
    again = permutation_test(s_x, s_y, n_permutations=n_perm, seed=seed)
    assert 0.0 < first.p <= 1.0
    assert first == again
    if not first.exact:
        assert first.p * (n_perm + 1) == pytest.approx(round(first.p * (n_perm + 1)))


def test_different_seeds_give_different_samples():
    rng = np.random.default_rng(1)
    s_x, s_y = rng.normal(0.2, 1, 30), rng.normal(0, 1, 30)
    ps = {permutation_test(s_x, s_y, n_permutations=5_000, seed=seed).p for seed in range(5)}
    assert len(ps) > 1


def test_seed_none_records_a_reusable_seed():
    rng = np.random.default_rng(2)
    s_x, s_y = rng.normal(size=20), rng.normal(size=20)
    first = permutation_test(s_x, s_y, n_permutations=2_000, seed=None)
    assert isinstance(first.seed, int)
    assert permutation_test(s_x, s_y, n_permutations=2_000, seed=first.seed) == first


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(s_x=[], s_y=[1.0, 2.0]), "s_x: is empty"),
        (dict(s_x=[1.0], s_y=[1.0, 2.0]), "s_x: has 1 value"),
        (dict(s_x=[1.0, 2.0], s_y=[np.nan, 2.0]), "s_y: contains NaN or inf at index 0"),
        (dict(s_x=[1.0, 2.0], s_y=[1.0, 3.0], n_permutations=0), "n_permutations: must be >= 1"),
        (dict(s_x=[1.0, 2.0], s_y=[1.0, 3.0], n_permutations=2.5), "n_permutations: must be an integer"),
        (dict(s_x=[1.0, 2.0, 4.0], s_y=[1.0, 3.0], n_permutations=3, seed=-1), "seed: must be a non-negative"),
    ],
)
def test_bad_input_raises_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        permutation_test(**kwargs)

"""Float64 statistics on MFCC-like features (a dominant first coefficient, so cosines sit near 1).

There s(w) is a small difference of cosines close to 1 and float32 arithmetic cancels: the
formula computed in float32 misses the float64 loop reference (tests/stats/speat_reference.py)
by 1e-5..2e-4 relative, while the engine, which casts its float32 inputs once to float64, matches
it to rounding (below 1e-12).
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speat_reference import d_ref, s_ref  # noqa: E402

from speechbias.stats import bootstrap_se, effect_size, permutation_test, speat  # noqa: E402

SEEDS = range(10)


def mfcc_like(rng: np.random.Generator, n: int, c1_shift: float) -> np.ndarray:
    """n float32 13-dim vectors: c0 ~ 300 +- 15 dominates c1..c12 ~ N(0, 1); c1 shifted by ``c1_shift``.
    Cosines between such vectors are about 0.9999."""
    v = rng.normal(0.0, 1.0, size=(n, 13))
    v[:, 0] = rng.normal(300.0, 15.0, size=n)
    v[:, 1] += c1_shift
    return v.astype(np.float32)


def mfcc_test(seed: int) -> tuple[np.ndarray, ...]:
    """X (16), Y (16), A (16), B (16): X leans towards A and Y towards B on c1, so |d| is about 1."""
    rng = np.random.default_rng(seed)
    return mfcc_like(rng, 16, 1.0), mfcc_like(rng, 16, -1.0), mfcc_like(rng, 16, 2.0), mfcc_like(rng, 16, -2.0)


def as_lists(*arrays: np.ndarray) -> list[list[list[float]]]:
    return [a.astype(np.float64).tolist() for a in arrays]  # float32 -> float64 is exact


def d_in_float32(X, Y, A, B) -> float:
    """The formula as written (mean cosine with A minus mean cosine with B), vectorised, all in float32."""

    def unit(v):
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def s(W):
        return (unit(W) @ unit(A).T).mean(axis=1) - (unit(W) @ unit(B).T).mean(axis=1)

    s_x, s_y = s(X), s(Y)
    pooled = np.concatenate([s_x, s_y])
    assert pooled.dtype == np.float32
    return float((s_x.mean() - s_y.mean()) / pooled.std(ddof=1))


def relative_error(value: float, reference: float) -> float:
    return abs(value - reference) / abs(reference)


def test_cosines_of_the_mfcc_like_inputs_sit_near_one():
    X, _, A, _ = as_lists(*mfcc_test(0))
    cosines = [math.fsum(a * b for a, b in zip(x, y)) / math.hypot(*x) / math.hypot(*y) for x in X for y in A]
    assert 0.999 < min(cosines) and max(cosines) < 1.0


def test_float32_statistics_lose_the_effect_size_on_mfcc_like_inputs():
    errors = []
    for seed in SEEDS:
        X, Y, A, B = mfcc_test(seed)
        errors.append(relative_error(d_in_float32(X, Y, A, B), d_ref(*as_lists(X, Y, A, B))))
    # measured over these seeds: 1.1e-5 to 2.2e-4 (median 7e-5), OpenBLAS Haswell, Sandybridge, Nehalem kernels
    assert np.median(errors) > 1e-5 and min(errors) > 1e-6


@pytest.mark.parametrize("seed", SEEDS)
def test_engine_matches_the_float64_loop_reference_on_float32_mfcc_like_inputs(seed):
    X, Y, A, B = mfcc_test(seed)
    lists = as_lists(X, Y, A, B)
    expected = d_ref(*lists)
    assert abs(expected) > 0.5  # a real effect, so a relative tolerance means something
    assert effect_size(X, Y, A, B) == pytest.approx(expected, rel=1e-10)
    result = speat(X, Y, A, B, n_permutations=1000, seed=seed)
    assert result.d == pytest.approx(expected, rel=1e-10)
    s_x = [s_ref(x, lists[2], lists[3]) for x in lists[0]]
    spread = float(np.std(s_x))  # about 1e-4: compare s to rounding relative to its spread
    np.testing.assert_allclose(result.s_x, s_x, rtol=0, atol=1e-9 * spread)
    curve = bootstrap_se(X, Y, A, B, sizes=[4], n_resamples=50, seed=seed)
    assert curve.d == pytest.approx(expected, rel=1e-10)


def test_float32_inputs_are_cast_once_to_float64():
    """float32 and float64 copies of the same values give bit-identical results: nothing runs in float32."""
    X, Y, A, B = mfcc_test(3)
    wide = [m.astype(np.float64) for m in (X, Y, A, B)]
    assert effect_size(X, Y, A, B) == effect_size(*wide)
    narrow_result, wide_result = (
        speat(X, Y, A, B, n_permutations=2000, seed=1),
        speat(*wide, n_permutations=2000, seed=1),
    )
    assert narrow_result.p == wide_result.p
    np.testing.assert_array_equal(narrow_result.s_x, wide_result.s_x)
    assert narrow_result.s_x.dtype == np.float64


def test_exact_and_sampled_p_on_mfcc_like_associations_match_enumeration():
    """s values about 1e-4 apart around a common offset: exact p equals a float64 brute-force count,
    and the sampled p is within Monte Carlo error of it."""
    X, Y, A, B = mfcc_test(5)
    lists = as_lists(X[:9], Y[:9], A, B)
    s_x = [s_ref(x, lists[2], lists[3]) for x in lists[0]]
    s_y = [s_ref(y, lists[2], lists[3]) for y in lists[1]]
    pooled = s_x + s_y
    observed = math.fsum(s_x)
    subsets = list(itertools.combinations(range(18), 9))
    tolerance = 1e-9 * float(np.std(pooled))
    expected = sum(math.fsum(pooled[i] for i in c) >= observed - tolerance for c in subsets) / len(subsets)
    assert 0.0 < expected < 0.5
    exact = permutation_test(s_x, s_y, n_permutations=len(subsets), seed=0)
    assert exact.exact and exact.p == pytest.approx(expected, abs=1e-15)
    sampled = permutation_test(s_x, s_y, n_permutations=40_000, seed=0)
    assert not sampled.exact
    assert abs(sampled.p - expected) < 5 * math.sqrt(expected * (1 - expected) / 40_000)

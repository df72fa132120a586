"""speat(): d and p against loop/brute-force references, recorded provenance, properties, bad input."""

from __future__ import annotations

import dataclasses
import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speat_reference import d_ref, s_ref  # noqa: E402

from speechbias.stats import SpeatResult, speat  # noqa: E402


def reference_speat(X, Y, A, B):
    """d and the exact one-sided p, written from the formulas with loops and itertools."""
    d = d_ref(X, Y, A, B)
    sx = [s_ref(x, A, B) for x in X]
    pooled = sx + [s_ref(y, A, B) for y in Y]
    observed = sum(sx)
    subsets = list(itertools.combinations(range(len(pooled)), len(sx)))
    p = sum(1 for c in subsets if sum(pooled[i] for i in c) >= observed - 1e-12) / len(subsets)
    return d, p


def embeddings(seed, n_x=6, n_y=5, n_a=4, n_b=4, dim=10, shift=0.0):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n_a, dim)) + 1.0
    B = rng.normal(size=(n_b, dim)) - 1.0
    X = rng.normal(size=(n_x, dim)) + shift
    Y = rng.normal(size=(n_y, dim)) - shift
    return X, Y, A, B


@pytest.mark.parametrize("seed, shift", [(0, 0.0), (1, 0.3), (2, -0.3), (3, 0.8)])
def test_speat_matches_loop_reference_with_exact_p(seed, shift):
    X, Y, A, B = embeddings(seed, shift=shift)
    d_expected, p_expected = reference_speat(*(m.tolist() for m in (X, Y, A, B)))
    result = speat(X, Y, A, B, n_permutations=1_000)
    assert isinstance(result, SpeatResult)
    assert result.d == pytest.approx(d_expected, rel=1e-11, abs=1e-13)
    assert result.exact and result.n_permutations == math.comb(11, 6)
    assert result.p == pytest.approx(p_expected, abs=1e-15)
    assert (result.n_x, result.n_y, result.n_a, result.n_b) == (6, 5, 4, 4)
    np.testing.assert_allclose(result.s_x, [s_ref(x, A.tolist(), B.tolist()) for x in X.tolist()], rtol=1e-12)
    assert result.statistic == pytest.approx(result.s_x.sum())


def test_sampled_speat_records_its_provenance_and_agrees_with_exact():
    X, Y, A, B = embeddings(4, n_x=9, n_y=9, shift=0.2)
    exact = speat(X, Y, A, B, n_permutations=math.comb(18, 9))
    sampled = speat(X, Y, A, B, n_permutations=20_000, seed=7)
    assert not sampled.exact and sampled.n_permutations == 20_000 and sampled.seed == 7
    assert sampled.d == exact.d
    sigma = math.sqrt(exact.p * (1 - exact.p) / 20_000) + 1 / 20_000
    assert abs(sampled.p - exact.p) < 5 * sigma
    row = sampled.as_dict()
    assert row["n_x"] == 9 and row["seed"] == 7 and row["exact"] is False


def test_result_is_frozen_and_its_arrays_read_only():
    result = speat(*embeddings(5), n_permutations=50)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.d = 0.0
    with pytest.raises(ValueError):
        result.s_x[0] = 1.0


def test_default_is_a_million_permutations_with_seed_zero():
    X, Y, A, B = embeddings(6, n_x=12, n_y=12)  # C(24, 12) = 2.7e6 partitions > 1e6: sampled
    result = speat(X, Y, A, B)
    assert result.n_permutations == 1_000_000 and result.seed == 0 and not result.exact


@settings(max_examples=25, deadline=None)
@given(
    n_x=st.integers(2, 7),
    n_y=st.integers(2, 7),
    seed=st.integers(0, 2**32 - 1),
    n_perm=st.sampled_from([20, 200, 5000]),
)
def test_properties_of_speat(n_x, n_y, seed, n_perm):
    X, Y, A, B = embeddings(seed, n_x=n_x, n_y=n_y)
    result = speat(X, Y, A, B, n_permutations=n_perm, seed=seed)
    assert 0.0 < result.p <= 1.0
    assert speat(X, Y, A, B, n_permutations=n_perm, seed=seed).p == result.p  # reproducible
    assert speat(Y, X, A, B, n_permutations=n_perm, seed=seed).d == pytest.approx(-result.d, rel=1e-12, abs=1e-12)
    assert speat(X, Y, B, A, n_permutations=n_perm, seed=seed).d == pytest.approx(-result.d, rel=1e-12, abs=1e-12)
    scaled = speat(X * 3.5, Y * 0.01, A * 200.0, B, n_permutations=n_perm, seed=seed)
    assert scaled.d == pytest.approx(result.d, rel=1e-9, abs=1e-12)
    assert scaled.p == pytest.approx(result.p)


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda s: s.update(X=np.empty((0, 10))), "X: is empty"),
        (lambda s: s.update(Y=s["Y"][:1]), "Y: has 1 vector"),
        (lambda s: s.update(B=np.empty((0, 10))), "B: is empty"),
        (lambda s: s["A"].__setitem__((0, 1), np.nan), "A: contains NaN or inf"),
        (lambda s: s["Y"].__setitem__((3, 2), -np.inf), "Y: contains NaN or inf"),
        (lambda s: s["X"].__setitem__(1, 0.0), "X: row.*1.*all-zero"),
        (lambda s: s.update(B=s["B"][:, :9]), "dimensions differ.*B has D=9"),
        (lambda s: s.update(n_permutations=0), "n_permutations: must be >= 1"),
        (lambda s: s.update(seed="abc"), "seed: must be a non-negative integer"),
    ],
)
def test_bad_input_raises_value_error(change, match):
    args = dict(zip("XYAB", embeddings(8, n_x=8, n_y=8)))
    args["n_permutations"] = 100
    change(args)
    with pytest.raises(ValueError, match=match):
        speat(**args)

"""SpEAT association s(w) and effect size d against a plain-Python loop written from the formulas."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speat_reference import d_ref, s_ref  # noqa: E402

from speechbias.stats import StatsInputError, association, effect_size, effect_size_from_associations  # noqa: E402


def random_sets(seed, n_x=7, n_y=5, n_a=4, n_b=6, dim=12):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(n, dim)) for n in (n_x, n_y, n_a, n_b)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_association_matches_loop_reference(seed):
    X, _, A, B = random_sets(seed)
    expected = [s_ref(x.tolist(), A.tolist(), B.tolist()) for x in X]
    np.testing.assert_allclose(association(X, A, B), expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("sizes", [(7, 5, 4, 6), (2, 2, 1, 1), (10, 3, 8, 2)])
def test_effect_size_matches_loop_reference_with_unequal_groups(sizes):
    X, Y, A, B = random_sets(sum(sizes), *sizes)
    expected = d_ref(X.tolist(), Y.tolist(), A.tolist(), B.tolist())
    assert effect_size(X, Y, A, B) == pytest.approx(expected, rel=1e-11, abs=1e-13)


def test_effect_size_from_associations_is_the_formula():
    s_x, s_y = [0.3, 0.1, 0.2], [0.0, -0.1]
    pooled = s_x + s_y
    mean = sum(pooled) / 5
    sd = math.sqrt(sum((v - mean) ** 2 for v in pooled) / 4)
    assert effect_size_from_associations(s_x, s_y) == pytest.approx((0.2 - (-0.05)) / sd)


def test_accepts_torch_tensors():
    torch = pytest.importorskip("torch")
    X, Y, A, B = random_sets(5)
    tensors = [torch.from_numpy(m).float() for m in (X, Y, A, B)]
    expected = d_ref(*[t.double().tolist() for t in tensors])
    assert effect_size(*tensors) == pytest.approx(expected, rel=1e-9)


def test_tiny_and_huge_magnitudes_do_not_overflow():
    X, Y, A, B = random_sets(9)
    base = effect_size(X, Y, A, B)
    assert effect_size(X * 1e-300, Y * 1e300, A * 1e-200, B * 1e200) == pytest.approx(base, rel=1e-12)


# --- properties --------------------------------------------------------------------------------

sizes = st.tuples(st.integers(2, 6), st.integers(2, 6), st.integers(1, 5), st.integers(1, 5), st.integers(2, 8))


@settings(max_examples=40, deadline=None)
@given(sizes=sizes, seed=st.integers(0, 2**32 - 1))
def test_swapping_targets_negates_d(sizes, seed):
    X, Y, A, B = random_sets(seed, *sizes)
    assert effect_size(Y, X, A, B) == pytest.approx(-effect_size(X, Y, A, B), rel=1e-12, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(sizes=sizes, seed=st.integers(0, 2**32 - 1))
def test_swapping_attributes_negates_d(sizes, seed):
    X, Y, A, B = random_sets(seed, *sizes)
    assert effect_size(X, Y, B, A) == pytest.approx(-effect_size(X, Y, A, B), rel=1e-12, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    sizes=sizes,
    seed=st.integers(0, 2**32 - 1),
    log_scale=st.floats(-6, 6),
    which=st.sampled_from("XYAB"),
)
def test_d_is_invariant_to_positive_rescaling_of_any_embedding(sizes, seed, log_scale, which):
    sets = dict(zip("XYAB", random_sets(seed, *sizes)))
    before = effect_size(*sets.values())
    row = int(seed % sets[which].shape[0])
    sets[which] = sets[which].copy()
    sets[which][row] *= 10.0**log_scale
    assert effect_size(*sets.values()) == pytest.approx(before, rel=1e-9, abs=1e-9)


# --- bad input ---------------------------------------------------------------------------------


def _good():
    return dict(zip("XYAB", random_sets(3)))


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda s: s.update(X=np.empty((0, 12))), "X: is empty"),
        (lambda s: s.update(Y=s["Y"][:1]), "Y: has 1 vector"),
        (lambda s: s.update(A=np.empty((0, 12))), "A: is empty"),
        (lambda s: s["B"].__setitem__((1, 3), np.nan), r"B: contains NaN or inf at \(row, column\) \(1, 3\)"),
        (lambda s: s["X"].__setitem__((0, 0), np.inf), "X: contains NaN or inf"),
        (lambda s: s["Y"].__setitem__(2, 0.0), "Y: row.*2.*all-zero"),
        (lambda s: s.update(A=s["A"][:, :5]), "dimensions differ: X has D=12, Y has D=12, A has D=5"),
        (lambda s: s.update(X=s["X"][0]), "X: expected a 2-D array"),
        (lambda s: s.update(X=[["a", "b"]]), "X: cannot be read as an array of numbers"),
    ],
)
def test_bad_input_raises_value_error_naming_the_argument(change, match):
    sets = _good()
    change(sets)
    with pytest.raises(ValueError, match=match):
        effect_size(*sets.values())


def test_constant_associations_have_no_effect_size():
    X = np.ones((3, 4))
    A = np.eye(4)[:2]
    B = np.eye(4)[2:]
    with pytest.raises(StatsInputError, match="standard deviation 0"):
        effect_size(X, X.copy(), A, B)


@pytest.mark.parametrize("n_x, n_y, dim", [(3, 5, 80), (6, 7, 768), (12, 5, 1280)])
def test_targets_of_one_embedding_have_no_effect_size_despite_rounding(n_x, n_y, dim):
    """Every target the same vector: every s is the same number, so d = 0 / 0. A matrix product rounds each
    row its own way (s about 1e-17 apart), which must not become a d of rounding noise."""
    from speechbias.stats import speat
    from speechbias.stats.associations import EqualAssociationsError

    rng = np.random.default_rng(dim)
    w, A, B = rng.normal(size=dim), rng.normal(size=(5, dim)), rng.normal(size=(6, dim))
    X, Y = np.tile(w, (n_x, 1)), np.tile(w, (n_y, 1))
    with pytest.raises(EqualAssociationsError, match="all association values are equal"):
        effect_size(X, Y, A, B)
    with pytest.raises(EqualAssociationsError, match="all association values are equal"):
        speat(X, Y, A, B, n_permutations=100)


def test_a_tiny_real_spread_of_associations_keeps_its_effect_size():
    """Targets 1e-7 apart (relative) spread s far above rounding: d is the loop reference's."""
    rng = np.random.default_rng(3)
    dim = 80
    w, A, B = rng.normal(size=dim), rng.normal(size=(4, dim)), rng.normal(size=(5, dim))
    X = w + 1e-7 * rng.normal(size=(3, dim))
    Y = w + 1e-7 * rng.normal(size=(4, dim))
    assert effect_size(X, Y, A, B) == pytest.approx(d_ref(X.tolist(), Y.tolist(), A.tolist(), B.tolist()), rel=1e-4)

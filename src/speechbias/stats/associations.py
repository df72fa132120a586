"""Cosine association of embeddings with two attribute sets, and the SpEAT/WEAT effect size.

For a vector w and attribute sets A, B:

    s(w) = mean_{a in A} cos(w, a) - mean_{b in B} cos(w, b)

Since cos(w, a) = w_hat . a_hat (hats: unit vectors), s(w) = w_hat . (mean(A_hat) - mean(B_hat)):
one matrix-vector product for all targets. The effect size of targets X against Y is

    d = (mean_{x in X} s(x) - mean_{y in Y} s(y)) / std_{w in X u Y} s(w)   (ddof = 1)

d > 0 means X is closer to A (pleasant) than Y is.

Precision: every input is cast once to float64 (features may stay float32 on disk; the cast is
exact) and all of the above runs in float64. float32 is not enough: when one coordinate
dominates (MFCC c0), cosines sit near 1, s(w) is a small difference of such cosines and d lost
about 1e-5 relative in float32 (tests/stats/test_stats_float64.py); in float64 it matches a
float64 loop reference to about 1e-13. Associations that differ by no more than rounding
(:func:`association_noise`; targets of one embedding, s a row of a matrix product each) are equal: d is
undefined, not a ratio of rounding noise.
"""

from __future__ import annotations

import numpy as np

from speechbias.stats.validation import StatsInputError, as_embeddings, as_sample, check_same_dim


class EqualAssociationsError(StatsInputError):
    """Every association value is the same (standard deviation 0): the effect size d is undefined. A task
    names the test, upstream and aggregation that gave them (it is not a user error here)."""


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit Euclidean norm; rows are pre-scaled by their max |value| so the norm
    neither overflows nor underflows. Input must be finite with no zero rows (see validation)."""
    scaled = vectors / np.max(np.abs(vectors), axis=1, keepdims=True)
    return scaled / np.linalg.norm(scaled, axis=1, keepdims=True)


def attribute_direction(A, B) -> np.ndarray:
    """mean(A_hat) - mean(B_hat), shape (D,): the vector whose dot product with w_hat is s(w)."""
    A = as_embeddings(A, "A")
    B = as_embeddings(B, "B")
    check_same_dim(A=A, B=B)
    return unit_rows(A).mean(axis=0) - unit_rows(B).mean(axis=0)


def association(W, A, B) -> np.ndarray:
    """s(w) for each row of ``W`` (n, D) against attributes ``A`` (n_a, D), ``B`` (n_b, D); shape (n,)."""
    W = as_embeddings(W, "W")
    direction = attribute_direction(A, B)
    if W.shape[1] != direction.shape[0]:
        raise StatsInputError(f"embedding dimensions differ: W has D={W.shape[1]}, A and B have D={direction.shape[0]}")
    return unit_rows(W) @ direction


def association_noise(direction: np.ndarray) -> float:
    """How far rounding can move s(w) = w_hat . ``direction`` (D,) in float64: (D + 4) eps |direction| per
    value (a dot product's bound, |w_hat| = 1, plus unit_rows' own rounding), twice that between two values.
    Targets with the same embedding give the same s only up to this: a matrix product rounds each row its
    own way (about 1e-17 apart at D = 80)."""
    return 2.0 * (direction.shape[0] + 4) * float(np.finfo(np.float64).eps) * float(np.linalg.norm(direction))


def effect_size_from_associations(s_x, s_y, noise: float = 0.0) -> float:
    """d from per-target associations ``s_x`` (n_x,), ``s_y`` (n_y,); each group needs >= 2 targets.
    ``noise``: the rounding error the values may carry (:func:`association_noise`); values that spread no
    more than that are all equal (d undefined, :class:`EqualAssociationsError`), not a d of rounding noise."""
    s_x = as_sample(s_x, "s_x", min_size=2)
    s_y = as_sample(s_y, "s_y", min_size=2)
    pooled = np.concatenate([s_x, s_y])
    if np.ptp(pooled) <= noise:  # std would be 0, or rounding noise around 0
        raise EqualAssociationsError(
            "s_x, s_y: all association values are equal (standard deviation 0); the effect size d is undefined"
        )
    return float((s_x.mean() - s_y.mean()) / pooled.std(ddof=1))


def target_associations(X, Y, A, B) -> tuple[np.ndarray, np.ndarray, float]:
    """s(w) of targets ``X`` (n_x, D) and ``Y`` (n_y, D), at least 2 each, on attributes ``A`` (n_a, D) vs
    ``B`` (n_b, D), all checked: (s_x (n_x,), s_y (n_y,), their rounding noise (:func:`association_noise`))."""
    X = as_embeddings(X, "X", min_rows=2)
    Y = as_embeddings(Y, "Y", min_rows=2)
    A = as_embeddings(A, "A")
    B = as_embeddings(B, "B")
    check_same_dim(X=X, Y=Y, A=A, B=B)
    direction = attribute_direction(A, B)
    return unit_rows(X) @ direction, unit_rows(Y) @ direction, association_noise(direction)


def effect_size(X, Y, A, B) -> float:
    """SpEAT effect size d of targets ``X`` (n_x, D) vs ``Y`` (n_y, D) on attributes ``A`` vs ``B``."""
    return effect_size_from_associations(*target_associations(X, Y, A, B))

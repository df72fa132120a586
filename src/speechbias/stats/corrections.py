"""Multiple-comparison corrections over a family of p-values, in numpy (R's ``p.adjust`` formulas).

Methods: ``bonferroni`` (family-wise, one step), ``holm`` (family-wise, step down) and ``bh``
(Benjamini-Hochberg false discovery rate; ``fdr_bh`` is accepted as an alias). Adjusted p-values
are capped at 1 and returned in the input order; a hypothesis is rejected when its adjusted p is at
most ``alpha``. Equal to statsmodels' ``multipletests`` and R's ``p.adjust`` (tested against both). Not
statsmodels itself: its ``multipletests`` runs ``gc.collect()`` on every call, ~0.09 CPU-s each in a
process holding torch, pandas and scipy (issue 41: ~2.7 of a sweep report's 8.5 CPU-s).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from speechbias.stats.validation import StatsInputError, as_sample, check_level, read_only

_METHODS = {"bonferroni": "bonferroni", "holm": "holm", "bh": "bh", "fdr_bh": "bh"}
# the names a config may give (task.corrections of the sweep report)
METHOD_NAMES = tuple(_METHODS)


def _bonferroni(p: np.ndarray) -> np.ndarray:
    """min(1, m p)."""
    return np.minimum(1.0, p.size * p)


def _holm(p: np.ndarray) -> np.ndarray:
    """Step down: the i-th smallest (i from 0) gets max over j <= i of (m - j) p_(j), capped at 1."""
    order = np.argsort(p, kind="stable")
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate((p.size - np.arange(p.size)) * p[order]))
    return adjusted


def _benjamini_hochberg(p: np.ndarray) -> np.ndarray:
    """Step up: the i-th smallest (i from 1) gets min over j >= i of m / j p_(j), capped at 1."""
    order = np.argsort(p, kind="stable")[::-1]  # largest first
    ranks = np.arange(p.size, 0, -1)  # their ranks from the smallest (1-based)
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(1.0, np.minimum.accumulate(p.size / ranks * p[order]))
    return adjusted


_ADJUSTERS = {"bonferroni": _bonferroni, "holm": _holm, "bh": _benjamini_hochberg}


@dataclass(frozen=True, eq=False)  # holds arrays/tables: compare fields, not objects
class CorrectedPValues:
    """Adjusted p-values and rejections at ``alpha``; ``labels`` are the input's keys (or None)."""

    p_adjusted: np.ndarray
    reject: np.ndarray
    p_raw: np.ndarray
    method: str
    alpha: float
    n_tests: int
    labels: tuple | None = None

    def as_dict(self) -> dict:
        """label (or position) -> adjusted p-value."""
        keys = self.labels if self.labels is not None else range(self.n_tests)
        return {k: float(p) for k, p in zip(keys, self.p_adjusted)}


def correct_pvalues(pvalues, method: str = "holm", alpha: float = 0.05) -> CorrectedPValues:
    """Adjust a family of p-values (sequence, array, pandas Series or mapping label -> p)."""
    if method not in _METHODS:
        raise StatsInputError(f"method: must be one of {sorted(_METHODS)}, got {method!r}")
    alpha = check_level(alpha, "alpha")
    labels = None
    if isinstance(pvalues, Mapping):
        labels = tuple(pvalues.keys())
        pvalues = list(pvalues.values())
    elif hasattr(pvalues, "index") and hasattr(pvalues, "to_numpy"):  # pandas Series
        labels = tuple(pvalues.index)
        pvalues = pvalues.to_numpy()
    p = as_sample(pvalues, "pvalues", min_size=1)
    outside = np.flatnonzero((p < 0.0) | (p > 1.0))
    if outside.size:
        raise StatsInputError(
            f"pvalues: must lie in [0, 1]; index {outside[:5].tolist()} has {p[outside[:5]].tolist()}"
        )
    adjusted = _ADJUSTERS[_METHODS[method]](p)
    reject = adjusted <= alpha
    return CorrectedPValues(
        p_adjusted=read_only(np.asarray(adjusted, dtype=np.float64)),
        reject=read_only(np.asarray(reject, dtype=bool)),
        p_raw=read_only(p),
        method=_METHODS[method],
        alpha=alpha,
        n_tests=p.size,
        labels=labels,
    )

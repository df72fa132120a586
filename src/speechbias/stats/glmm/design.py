"""Input checks and the reduction of utterances to speaker x design-row units.

With one scalar random intercept per speaker, the Poisson likelihood depends on the data only
through per-unit sums (errors, reference words) and per-speaker totals, so utterances that share
(speaker, group, covariate row) are collapsed exactly. Labels are coded in sorted string order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special


@dataclass(frozen=True)
class Units:
    """Data reduced to units (distinct speaker x design-row cells) and per-cluster sums."""

    cluster: np.ndarray  # (U,) int cluster (speaker) code of each unit
    group: np.ndarray  # (U,) int group code
    cov: np.ndarray  # (U, p) covariates
    y: np.ndarray  # (U,) errors summed over the unit's utterances
    log_w: np.ndarray  # (U,) log of reference words summed over the unit's utterances
    cluster_y: np.ndarray  # (S,) errors per cluster
    cluster_const: np.ndarray  # (S,) sum_j [y_ij log w_ij - log y_ij!] per cluster
    cluster_group: np.ndarray  # (S,) group code of each cluster (-1 when it spans groups)
    n_clusters: int
    n_groups: int


def label_codes(values, name: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """(n,) int64 codes of 1-D ``values`` and the labels they index, as strings in sorted order."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    labels, codes = np.unique(arr.astype(str), return_inverse=True)
    return codes.astype(np.int64), tuple(str(x) for x in labels)


def validate_counts(errors, words) -> tuple[np.ndarray, np.ndarray]:
    """``errors`` (non-negative integers) and ``words`` (positive) as float64 (n,) arrays."""
    y = np.asarray(errors, dtype=float)
    w = np.asarray(words, dtype=float)
    if y.ndim != 1 or w.shape != y.shape:
        raise ValueError(f"errors and words must be 1-D of equal length, got {y.shape} and {w.shape}")
    if y.size == 0:
        raise ValueError("no observations: errors is empty")
    bad = np.flatnonzero(~np.isfinite(y) | (y < 0) | (y != np.round(y)))
    if bad.size:
        raise ValueError(f"errors must be non-negative integers; bad value(s) at row(s) {bad[:10].tolist()}")
    bad = np.flatnonzero(~np.isfinite(w) | (w <= 0))
    if bad.size:
        raise ValueError(f"words (reference word counts) must be positive; bad value(s) at row(s) {bad[:10].tolist()}")
    return y, w


def covariate_matrix(covariates, n: int) -> tuple[np.ndarray, tuple[str, ...]]:
    """(n, p) float64 covariates and their names (DataFrame columns, else x0, x1, ...); p = 0 for None."""
    if covariates is None:
        return np.zeros((n, 0)), ()
    if isinstance(covariates, pd.DataFrame):
        names = tuple(str(c) for c in covariates.columns)
        cov = covariates.to_numpy(dtype=float)
    else:
        cov = np.asarray(covariates, dtype=float)
        if cov.ndim == 1:
            cov = cov[:, None]
        names = tuple(f"x{k}" for k in range(cov.shape[1]))
    if cov.shape[0] != n:
        raise ValueError(f"covariates have {cov.shape[0]} rows, expected {n}")
    if not np.all(np.isfinite(cov)):
        raise ValueError("covariates contain NaN or infinite values")
    return cov, names


def reduce_to_units(y, w, group_codes, n_groups, cluster_codes, cov) -> Units:
    """Collapse utterances sharing (cluster, group, covariate row): exact for the Poisson likelihood."""
    n_clusters = int(cluster_codes.max()) + 1
    const_obs = y * np.log(w) - special.gammaln(y + 1.0)
    cluster_const = np.bincount(cluster_codes, const_obs, minlength=n_clusters)
    cluster_y = np.bincount(cluster_codes, y, minlength=n_clusters)
    key = np.column_stack([cluster_codes.astype(float), group_codes.astype(float), cov])
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    n_units = first.size
    uy = np.bincount(inverse, y, minlength=n_units)
    uw = np.bincount(inverse, w, minlength=n_units)
    cg = np.full(n_clusters, -1, dtype=np.int64)
    gmin = np.full(n_clusters, np.iinfo(np.int64).max)
    gmax = np.full(n_clusters, -1)
    np.minimum.at(gmin, cluster_codes, group_codes)
    np.maximum.at(gmax, cluster_codes, group_codes)
    single = gmin == gmax
    cg[single] = gmin[single]
    return Units(
        cluster=cluster_codes[first],
        group=group_codes[first],
        cov=cov[first],
        y=uy,
        log_w=np.log(uw),
        cluster_y=cluster_y,
        cluster_const=cluster_const,
        cluster_group=cg,
        n_clusters=n_clusters,
        n_groups=n_groups,
    )


def check_design_rank(units: Units, cov_names) -> None:
    """Raise if the group indicators and covariates are not linearly independent."""
    p = units.cov.shape[1]
    if p == 0:
        return
    X = np.column_stack([np.eye(units.n_groups)[units.group], units.cov])
    rank = np.linalg.matrix_rank(X)
    if rank < X.shape[1]:
        raise ValueError(
            f"design is rank deficient (rank {rank} < {X.shape[1]} columns): covariate(s) {list(cov_names)} "
            "are collinear with the groups or with each other"
        )


def check_no_empty_groups(y, group_codes, groups) -> None:
    """Raise if a group has zero errors in total (its log WER would be -infinity)."""
    tot = np.bincount(group_codes, y, minlength=len(groups))
    zero = [groups[g] for g in np.flatnonzero(tot == 0)]
    if zero:
        raise ValueError(f"group(s) {zero} have zero errors in total: their log WER is -infinity (not estimable)")

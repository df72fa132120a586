"""Seeded selection and matching primitives on clip tables (pandas DataFrames with a unique index).

All randomness comes from the ``numpy.random.Generator`` passed in, so a selection is a pure
function of its input table and seed. Pairs are returned as a DataFrame with columns ``x``
and ``y`` holding index labels of the two input tables.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


class SelectionError(ValueError):
    """A selection that cannot be made from the given clips; the message names the test and the shortfall."""


def shuffled(df: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """``df`` in a random row order (used to break ties at random but reproducibly)."""
    return df.iloc[rng.permutation(len(df))]


def _cells(df: pd.DataFrame, on: list[str]):
    if not on:
        yield (), df
        return
    for key, cell in df.groupby(on, sort=True):
        yield (key if isinstance(key, tuple) else (key,)), cell


def exact_pairs(x: pd.DataFrame, y: pd.DataFrame, on: list[str], rng: np.random.Generator) -> pd.DataFrame:
    """All disjoint pairs with equal values in ``on``: within each cell, random order, zipped.

    A cell with ``n_x`` and ``n_y`` clips yields ``min(n_x, n_y)`` pairs; no clip is used twice.
    """
    pairs = []
    y_cells = {k: c for k, c in _cells(y, on)}
    for key, xc in _cells(x, on):
        yc = y_cells.get(key)
        if yc is None:
            continue
        xs, ys = shuffled(xc, rng).index, shuffled(yc, rng).index
        k = min(len(xs), len(ys))
        pairs += list(zip(xs[:k], ys[:k]))
    return pd.DataFrame(pairs, columns=["x", "y"])


def greedy_nearest(x: np.ndarray, y: np.ndarray, caliper: float) -> list[tuple[int, int]]:
    """Positions ``(i, j)``: each ``x[i]`` in turn takes the unused ``y[j]`` nearest to it, if within
    ``caliper`` (absolute difference, inclusive); of equally near ones, the first."""
    free = np.ones(len(y), dtype=bool)
    pairs = []
    for i, value in enumerate(x):
        dist = np.where(free, np.abs(y - value), np.inf)
        j = int(np.argmin(dist)) if len(dist) else -1
        if j >= 0 and dist[j] <= caliper:
            free[j] = False
            pairs.append((i, j))
    return pairs


def nearest_pairs(
    x: pd.DataFrame,
    y: pd.DataFrame,
    exact_on: list[str],
    distance_on: str,
    caliper: float,
    rng: np.random.Generator,
) -> pd.DataFrame:
    """Greedy nearest-neighbour matching without replacement.

    ``x`` clips are visited in random order; each takes the unused ``y`` clip of the same
    ``exact_on`` cell whose ``distance_on`` value is closest, if within ``caliper`` (absolute
    difference, inclusive). Ties go to the earlier clip of a random ordering of ``y``.
    """
    pairs = []
    y_cells = {k: shuffled(c, rng) for k, c in _cells(y, exact_on)}
    for key, xc in _cells(x, exact_on):
        yc = y_cells.get(key)
        if yc is None:
            continue
        order = shuffled(xc, rng)
        near = greedy_nearest(order[distance_on].to_numpy(dtype=float), yc[distance_on].to_numpy(dtype=float), caliper)
        pairs += [(order.index[i], yc.index[j]) for i, j in near]
    return pd.DataFrame(pairs, columns=["x", "y"])


def sample_rows(df: pd.DataFrame, n: int, rng: np.random.Generator, what: str) -> pd.DataFrame:
    """``n`` rows drawn without replacement (all rows if ``n`` is None); error naming ``what`` if too few."""
    if n is None:
        return df
    if len(df) < n:
        raise SelectionError(f"{what}: need {n}, only {len(df)} available")
    return df.iloc[np.sort(rng.choice(len(df), size=n, replace=False))]


def sample_per_cell(df: pd.DataFrame, by: list[str], n: int, rng: np.random.Generator, what: str) -> pd.DataFrame:
    """``n`` rows from every cell of ``by`` (cells missing entirely are an error too)."""
    parts = [sample_rows(cell, n, rng, f"{what}, cell {dict(zip(by, key))}") for key, cell in _cells(df, by)]
    return pd.concat(parts) if parts else df.iloc[:0]


def rank_extremes(df: pd.DataFrame, column: str, n: int) -> tuple[pd.Index, pd.Index]:
    """Index labels of the rows among the ``n`` lowest and the ``n`` highest ``column`` values, by mean rank.

    Tied values share the mean of their ranks (``rank(method="average")``), and a row is in when
    that rank is <= ``n``: a tie straddling the cut is kept whole when at least half of it fits,
    dropped whole otherwise. No randomness; a side may hold a few more or fewer than ``n`` rows.
    """
    if len(df) < 2 * n:
        raise SelectionError(f"need {2 * n} clips with {column} to take the {n} lowest and {n} highest, have {len(df)}")
    low = df[column].rank(ascending=True, method="average") <= n
    high = df[column].rank(ascending=False, method="average") <= n
    if (low & high).any():
        raise SelectionError(f"the {n} lowest and {n} highest {column} values overlap; lower n")
    return df.index[low.to_numpy()], df.index[high.to_numpy()]


def balance(df: pd.DataFrame, by: list[str], rng: np.random.Generator) -> pd.DataFrame:
    """The same number of rows (the smallest cell's size) drawn from every cell of ``by``."""
    cells = list(_cells(df, by))
    n = min(len(c) for _, c in cells)
    return pd.concat([sample_rows(c, n, rng, "balance") for _, c in cells])


def poles_within(
    df: pd.DataFrame, by: str, column: str, n: int, order: pd.DataFrame | None = None
) -> tuple[pd.Index, pd.Index]:
    """Per group of ``by``: index labels of the ``n`` lowest and ``n`` highest ``column`` values.

    Rows are sorted stably by (``by``, ``column``) starting from ``order`` (a permutation of ``df``
    that decides ties; ``df`` itself if None). A group with fewer than ``2 n`` rows is an error.
    """
    base = df if order is None else order
    small = base.groupby(by).size()
    small = small[small < 2 * n]
    if len(small):
        raise SelectionError(f"{by} {dict(small)} have fewer than {2 * n} rated clips")
    ranked = base.sort_values([by, column], kind="stable")
    return ranked.groupby(by).head(n).index, ranked.groupby(by).tail(n).index

"""Input checks shared by the statistics functions.

Every check converts its input (numpy array, list, CPU torch tensor, ...) to a float64 numpy array
or raises :class:`StatsInputError` (a ``ValueError``) whose message names the argument and says
what is wrong. Nothing downstream has to guard against NaN, inf, empty or mis-shaped input.
"""

from __future__ import annotations

import numbers

import numpy as np


class StatsInputError(ValueError):
    """Input a statistics function cannot use; the message names the argument and the problem."""


def _to_float_array(values, name: str) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise StatsInputError(f"{name}: cannot be read as an array of numbers ({err})") from None
    return arr


def _first_bad(mask: np.ndarray) -> str:
    bad = np.argwhere(mask)
    shown = ", ".join(str(tuple(int(i) for i in row)) if len(row) > 1 else str(int(row[0])) for row in bad[:5])
    more = f" (+{len(bad) - 5} more)" if len(bad) > 5 else ""
    return shown + more


def as_embeddings(values, name: str, min_rows: int = 1) -> np.ndarray:
    """A finite (n, D) float64 matrix with ``n >= min_rows``, ``D >= 1`` and no all-zero row.

    Zero rows are rejected because the cosine similarity of a zero vector is undefined.
    """
    arr = _to_float_array(values, name)
    if arr.ndim != 2:
        raise StatsInputError(f"{name}: expected a 2-D array (n_vectors, dim), got shape {arr.shape}")
    n, dim = arr.shape
    if n < min_rows:
        if n == 0:
            raise StatsInputError(f"{name}: is empty (0 vectors); need at least {min_rows}")
        raise StatsInputError(f"{name}: has {n} vector(s); need at least {min_rows}")
    if dim == 0:
        raise StatsInputError(f"{name}: vectors have dimension 0")
    finite = np.isfinite(arr)
    if not finite.all():
        raise StatsInputError(f"{name}: contains NaN or inf at (row, column) {_first_bad(~finite)}")
    zero_rows = ~np.any(arr != 0.0, axis=1)
    if zero_rows.any():
        raise StatsInputError(
            f"{name}: row(s) {_first_bad(zero_rows)} are all-zero vectors; cosine similarity is undefined"
        )
    return arr


def check_same_dim(**named: np.ndarray) -> None:
    """An error listing each argument's dimension unless the 2-D arrays share one."""
    dims = {name: arr.shape[1] for name, arr in named.items()}
    if len(set(dims.values())) > 1:
        listed = ", ".join(f"{name} has D={dim}" for name, dim in dims.items())
        raise StatsInputError(f"embedding dimensions differ: {listed}")


def as_sample(values, name: str, min_size: int = 1) -> np.ndarray:
    """A finite 1-D float64 array with at least ``min_size`` values."""
    arr = _to_float_array(values, name)
    if arr.ndim != 1:
        raise StatsInputError(f"{name}: expected a 1-D array of values, got shape {arr.shape}")
    if arr.size < min_size:
        if arr.size == 0:
            raise StatsInputError(f"{name}: is empty; need at least {min_size} value(s)")
        raise StatsInputError(f"{name}: has {arr.size} value(s); need at least {min_size}")
    finite = np.isfinite(arr)
    if not finite.all():
        raise StatsInputError(f"{name}: contains NaN or inf at index {_first_bad(~finite)}")
    return arr


def as_labels(values, name: str, length: int) -> np.ndarray:
    """A 1-D array of ``length`` hashable labels (ids, strata) with no missing entries."""
    if values is None:
        raise StatsInputError(f"{name}: is required here but was not given")
    arr = np.asarray(values, dtype=object)
    if arr.ndim != 1:
        raise StatsInputError(f"{name}: expected a 1-D sequence of labels, got shape {arr.shape}")
    if arr.size != length:
        raise StatsInputError(f"{name}: has {arr.size} labels but the group has {length} items")
    missing = np.array([v is None or v == "" or (isinstance(v, float) and np.isnan(v)) for v in arr], dtype=bool)
    if missing.any():
        raise StatsInputError(f"{name}: missing (None/NaN/empty) label at index {_first_bad(missing)}")
    return arr


def check_count(value, name: str, minimum: int = 1) -> int:
    """A Python int ``>= minimum`` (bools are rejected)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise StatsInputError(f"{name}: must be an integer, got {value!r}")
    if value < minimum:
        raise StatsInputError(f"{name}: must be >= {minimum}, got {value}")
    return int(value)


def check_level(value, name: str) -> float:
    """A confidence level or alpha strictly between 0 and 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 < float(value) < 1.0:
        raise StatsInputError(f"{name}: must be a number strictly between 0 and 1, got {value!r}")
    return float(value)


def resolve_seed(seed) -> int:
    """The seed that will be recorded: ``seed`` itself, or fresh OS entropy when ``seed`` is None.

    Random numbers come from ``np.random.default_rng(seed)`` (PCG64), so recording the returned
    int makes every result reproducible.
    """
    if seed is None:
        return int(np.random.SeedSequence().entropy)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise StatsInputError(f"seed: must be a non-negative integer or None, got {seed!r}")
    return int(seed)


def read_only(arr: np.ndarray) -> np.ndarray:
    """``arr`` flagged read-only, so arrays stored in frozen result objects cannot be changed in place."""
    arr.setflags(write=False)
    return arr

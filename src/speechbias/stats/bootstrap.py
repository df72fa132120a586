"""Bootstrap standard error of the SpEAT effect size d as a function of the number of targets.

Attributes A and B stay fixed, so each target's association s(w) is computed once; a bootstrap
resample only picks which targets' s values enter d (see :mod:`speechbias.stats.associations`).
At each size n of a grid, ``n_resamples`` resamples are drawn with replacement and
SE(n) = std(ddof=1) of their d values. Designs:

* ``iid``: n targets from X and, independently, n from Y.
* ``paired``: n pair ids; each brings its X member and its Y member (``pair_ids_x``,
  ``pair_ids_y``: every id exactly once in each group).
* ``stratified``: within each group, n split over its strata (``strata_x``, ``strata_y``) as evenly
  as possible: every stratum gets n // K draws and n % K randomly chosen strata (fresh choice per
  resample) get one more; draws within a stratum are with replacement from its members.

At the full sample size the resamples mirror the data (iid: n_x and n_y; paired: all pairs;
stratified: each stratum's own count) and give a percentile confidence interval for d.

A resample whose pooled s values are all equal has no defined d; it is left out and counted in
``n_valid`` (reported, never silently NaN). Fewer than 2 valid resamples at a size is an error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from speechbias.roles import ROLES
from speechbias.stats.associations import effect_size_from_associations, target_associations
from speechbias.stats.kernel_choice import use_compiled_kernels
from speechbias.stats.random_integers import MAX_HIGH_16BIT, TableIntegers, UniformIntegers
from speechbias.stats.validation import (
    StatsInputError,
    as_labels,
    as_sample,
    check_count,
    check_level,
    read_only,
    resolve_seed,
)

DESIGNS = ("iid", "paired", "stratified")
# Resamples per block: bounds the temporaries to about _BLOCK_ELEMENTS values each.
_BLOCK_ELEMENTS = 1 << 17
# numpy CPU-s per drawn index of the iid / paired curve, and how much faster the compiled kernel is (60 + 60,
# 10^4 resamples per size, 2-core development machine: 0.12 vs 0.055 CPU-s for 3.8e7 indices)
_NUMPY_SECONDS_PER_DRAW = 3.2e-9
_COMPILED_SPEED_UP = 2.2


@dataclass(frozen=True, eq=False)  # holds arrays/tables: compare fields, not objects
class BootstrapSEResult:
    """SE of d per sample size, the full-size percentile CI, and what produced them.

    ``sizes`` (k,): targets drawn per group at each grid point (pairs for ``paired``).
    ``se`` (k,): std(ddof=1) of the bootstrapped d. ``n_valid`` (k,): resamples with a defined d.
    ``d``: effect size of the full sample; ``ci_low``/``ci_high``: percentile interval at level
    ``ci_level`` from ``n_valid_full`` full-size resamples. Arrays are read-only.
    """

    sizes: np.ndarray
    se: np.ndarray
    n_valid: np.ndarray
    d: float
    ci_low: float
    ci_high: float
    ci_level: float
    n_valid_full: int
    n_x: int
    n_y: int
    n_resamples: int
    design: str
    seed: int


@dataclass
class _Moments:
    """Per-resample sum, sum of squares and count of the drawn (centred) s values of one group."""

    total: np.ndarray
    squares: np.ndarray | float  # 0.0 for a column whose squares another column carries
    count: np.ndarray | int


def _effect_sizes(x: _Moments, y: _Moments) -> np.ndarray:
    """d per resample from group moments; NaN where the pooled values have no spread."""
    count = x.count + y.count
    total = x.total + y.total
    squares = x.squares + y.squares
    spread = (squares - total * total / count) / (count - 1)
    diff = x.total / x.count - y.total / y.count
    # Values are centred on the pooled mean, so a spread this small relative to the squares means
    # every drawn value is the same (up to rounding): d is undefined.
    degenerate = spread <= 1e-12 * squares / (count - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return diff / np.sqrt(np.where(degenerate, np.nan, spread))


class _GroupDraws:
    """Per-resample moments of n draws with replacement from m items, each item carrying one value per
    column (one column: a group; two aligned columns: the X and Y members of a pair).

    Draws come two at a time when m * m <= MAX_HIGH_16BIT (m <= 64): one 16-bit draw picks an
    ordered pair of items (:class:`TableIntegers`), and tables of every pair's sums and sums of
    squares replace two gathers and two multiply-adds per draw by one look-up per table. Two
    independent uniform draws and one uniform draw of an ordered pair are the same distribution, so
    the resamples are those of the textbook loop (an odd n adds one single draw). Draws are laid out
    (draws, resamples) so each resample's sums add whole rows in draw order (vectorised, the same
    rounding on every machine). Written here because no library offers it;
    benchmarks/stats_bench.py measures the SE curve against the loop reference in one run.
    """

    def __init__(self, *columns: np.ndarray):
        self.m = columns[0].size
        self.pair_draws = TableIntegers(self.m * self.m) if self.m * self.m <= MAX_HIGH_16BIT else None
        self.single_draws = TableIntegers(self.m) if self.m <= 1 << 16 else None
        self.column_matrix = np.stack(columns)  # (C, m)
        self.compiles = self.single_draws is not None  # the compiled kernel serves this group
        if self.pair_draws is not None:
            first, second = np.divmod(np.arange(self.m * self.m), self.m)
            # (m * m, columns + 1): each ordered pair's total per column, then its sum of squares
            # over all columns; one row look-up fetches them together.
            self.pair_table = np.stack(
                [c[first] + c[second] for c in columns]
                + [sum(c[first] * c[first] + c[second] * c[second] for c in columns)],
                axis=1,
            )

    def moments(self, rng, draws: UniformIntegers, r: int, n: int) -> list[_Moments]:
        """One :class:`_Moments` per column for ``r`` resamples of ``n`` draws; the squares of all
        columns are summed into the first (``_effect_sizes`` only uses their total)."""
        n_pairs, n_single = divmod(n, 2) if self.pair_draws is not None else (0, n)
        sums = np.zeros((r, len(self.column_matrix) + 1))
        if n_pairs:
            idx = self.pair_draws.draw(rng, (n_pairs, r))
            sums += self.pair_table.take(idx, axis=0).sum(axis=0)
        totals = [sums[:, i] for i in range(len(self.column_matrix))]
        squares = sums[:, -1]
        if n_single:
            if self.single_draws is not None:
                idx = self.single_draws.draw(rng, (n_single, r))
            else:
                idx = draws.draw(rng, self.m, (n_single, r))
            for total, column in zip(totals, self.column_matrix):
                drawn = column.take(idx)
                total += drawn.sum(axis=0)
                squares += (drawn * drawn).sum(axis=0)
        return [_Moments(total, squares if i == 0 else 0.0, n) for i, total in enumerate(totals)]


class _Unstratified:
    """The iid design, ``_GroupDraws(cx), _GroupDraws(cy)``: n draws from X and, independently, n from Y; or
    the paired one, ``_GroupDraws(px, py)``: n pair ids, each bringing its X and its Y member."""

    def __init__(self, *groups: _GroupDraws):
        self.groups = groups
        self.max_size = min(group.m for group in groups)
        self.compiles = all(group.compiles for group in groups)

    def draw(self, rng, draws: UniformIntegers, n: int | None, r: int) -> np.ndarray:
        # X's moments, then Y's (iid: drawn after X's; paired: from the same draws)
        moments = [m for g in self.groups for m in g.moments(rng, draws, r, g.m if n is None else n)]
        return _effect_sizes(*moments)

    def compiled_effect_sizes(self, rng, grid: np.ndarray, n_resamples: int) -> np.ndarray:
        """(len(grid) + 1, n_resamples): what :meth:`draw` gives size by size and block by block, in one
        compiled call (bit-identical)."""
        from speechbias.stats.compiled_kernels import resampled_effect_sizes

        return resampled_effect_sizes(rng, grid, n_resamples, _BLOCK_ELEMENTS, *self.groups)


class _Stratified:
    """Within each group, n split evenly over its strata (remainder to random strata)."""

    def __init__(self, cx: np.ndarray, strata_x: np.ndarray, cy: np.ndarray, strata_y: np.ndarray):
        self.members_x = self._split(cx, strata_x)
        self.members_y = self._split(cy, strata_y)
        self.max_size = min(cx.size, cy.size)
        self.compiles = False

    @staticmethod
    def _split(values: np.ndarray, strata: np.ndarray) -> list[np.ndarray]:
        _, codes = np.unique(strata.astype(str), return_inverse=True)
        return [values[codes == k] for k in range(codes.max() + 1)]

    @staticmethod
    def _balanced_counts(rng, n: int, n_strata: int, r: int) -> list[np.ndarray | int]:
        """Per stratum, the draw count: n // K, plus one in the resamples (r,) where the stratum is
        among the n % K chosen at random."""
        base, extra = divmod(n, n_strata)
        if extra == 0:
            return [base] * n_strata
        rank = np.argsort(rng.random((r, n_strata)), axis=1).argsort(axis=1)
        return [base + (rank[:, k] < extra) for k in range(n_strata)]

    @staticmethod
    def _group(rng, draws: UniformIntegers, members: list[np.ndarray], counts, r: int) -> _Moments:
        total, squares, count = np.zeros(r), np.zeros(r), 0
        for values, per_stratum in zip(members, counts):
            width = int(np.max(per_stratum))
            if width == 0:
                continue
            drawn = values[draws.draw(rng, values.size, (r, width))]
            if not np.isscalar(per_stratum):  # zero the draws beyond this resample's count
                drawn *= np.arange(width)[None, :] < per_stratum[:, None]
            total += drawn.sum(axis=1)
            squares += np.einsum("ij,ij->i", drawn, drawn)
            count = count + per_stratum
        return _Moments(total, squares, count)

    def draw(self, rng, draws: UniformIntegers, n: int | None, r: int) -> np.ndarray:
        moments = []
        for members in (self.members_x, self.members_y):
            if n is None:  # full size: each stratum's own count
                counts = [m.size for m in members]
            else:
                counts = self._balanced_counts(rng, n, len(members), r)
            moments.append(self._group(rng, draws, members, counts, r))
        return _effect_sizes(*moments)


def _check_pairs(pair_ids_x, pair_ids_y, n_x: int, n_y: int) -> tuple[np.ndarray, np.ndarray]:
    """Index arrays (P,) into X and into Y, aligned by pair id."""
    ids_x = as_labels(pair_ids_x, "pair_ids_x", n_x)
    ids_y = as_labels(pair_ids_y, "pair_ids_y", n_y)
    for name, ids in (("pair_ids_x", ids_x), ("pair_ids_y", ids_y)):
        uniq, counts = np.unique(ids.astype(str), return_counts=True)
        if (counts > 1).any():
            repeated = [str(v) for v in uniq[counts > 1][:5]]
            raise StatsInputError(f"{name}: pair id(s) {repeated} occur more than once in the group")
    pos_y = {str(v): i for i, v in enumerate(ids_y)}
    only_x = [str(v) for v in ids_x if str(v) not in pos_y]
    only_y = sorted(set(pos_y) - {str(v) for v in ids_x})
    if only_x or only_y:
        raise StatsInputError(
            f"pair_ids_x, pair_ids_y: every pair needs one X and one Y member; ids only in X: {only_x[:5]}, "
            f"only in Y: {only_y[:5]}"
        )
    return np.arange(n_x), np.array([pos_y[str(v)] for v in ids_x])


def _check_sizes(sizes, default_max: int) -> np.ndarray:
    if sizes is None:
        if default_max < 2:
            raise StatsInputError(f"sizes: the full sample has {default_max} target(s) per group; need at least 2")
        return np.arange(2, default_max + 1)
    arr = np.asarray(sizes)
    if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise StatsInputError(f"sizes: expected a non-empty 1-D sequence of integers, got {sizes!r}")
    if (arr < 2).any():
        raise StatsInputError(f"sizes: every size must be >= 2 (d needs two targets per group), got {arr[arr < 2][:5]}")
    return np.unique(arr)


def _associations(X, Y, A, B, s_x, s_y) -> tuple[np.ndarray, np.ndarray]:
    embeddings = (X, Y, A, B)
    if s_x is not None or s_y is not None:
        if any(e is not None for e in embeddings):
            raise StatsInputError(
                "X, Y, A, B / s_x, s_y: give either the four embedding arrays or s_x and s_y, not both"
            )
        if s_x is None or s_y is None:
            raise StatsInputError("s_x, s_y: both are needed when associations are given directly")
        return as_sample(s_x, "s_x", min_size=2), as_sample(s_y, "s_y", min_size=2)
    missing = [name for name, e in zip(ROLES, embeddings) if e is None]
    if missing:
        raise StatsInputError(
            f"{', '.join(missing)}: missing; give X, Y, A, B (embeddings) or s_x and s_y (associations)"
        )
    return target_associations(X, Y, A, B)[:2]


def bootstrap_se(
    X=None,
    Y=None,
    A=None,
    B=None,
    *,
    s_x=None,
    s_y=None,
    design: str = "iid",
    pair_ids_x=None,
    pair_ids_y=None,
    strata_x=None,
    strata_y=None,
    sizes=None,
    n_resamples: int = 10_000,
    ci: float = 0.95,
    seed: int | None = 0,
) -> BootstrapSEResult:
    """Bootstrap SE of d at each sample size in ``sizes`` and a percentile CI at the full size.

    Give embeddings ``X`` (n_x, D), ``Y`` (n_y, D), ``A``, ``B`` or precomputed associations
    ``s_x`` (n_x,), ``s_y`` (n_y,). ``design``: ``iid`` | ``paired`` (needs ``pair_ids_x``,
    ``pair_ids_y``) | ``stratified`` (needs ``strata_x``, ``strata_y``); see the module docstring.
    ``sizes``: targets (pairs) per group per resample; default every n from 2 to the smaller
    group. Random numbers: ``np.random.default_rng(seed)`` (PCG64); ``seed=None`` draws and
    records one.
    """
    if design not in DESIGNS:
        raise StatsInputError(f"design: must be one of {DESIGNS}, got {design!r}")
    s_x, s_y = _associations(X, Y, A, B, s_x, s_y)
    n_resamples = check_count(n_resamples, "n_resamples", minimum=2)
    ci = check_level(ci, "ci")
    seed = resolve_seed(seed)
    n_x, n_y = s_x.size, s_y.size
    d_full = effect_size_from_associations(s_x, s_y)
    # d is invariant to a common shift of all s; centring keeps the sums of squares well conditioned.
    shift = np.concatenate([s_x, s_y]).mean()
    cx, cy = s_x - shift, s_y - shift

    if design == "iid":
        if any(v is not None for v in (pair_ids_x, pair_ids_y, strata_x, strata_y)):
            raise StatsInputError(
                "design='iid' takes no pair_ids_x/pair_ids_y/strata_x/strata_y; choose the design that uses them"
            )
        sampler = _Unstratified(_GroupDraws(cx), _GroupDraws(cy))
    elif design == "paired":
        if strata_x is not None or strata_y is not None:
            raise StatsInputError("design='paired' takes no strata_x/strata_y; use design='stratified' for strata")
        if pair_ids_x is None or pair_ids_y is None:
            raise StatsInputError(
                "pair_ids_x, pair_ids_y: design='paired' needs the pair id of every target in X and in Y"
            )
        ix, iy = _check_pairs(pair_ids_x, pair_ids_y, n_x, n_y)
        sampler = _Unstratified(_GroupDraws(cx[ix], cy[iy]))
    else:
        if pair_ids_x is not None or pair_ids_y is not None:
            raise StatsInputError("design='stratified' takes no pair_ids_x/pair_ids_y; use design='paired' for pairs")
        if strata_x is None or strata_y is None:
            raise StatsInputError(
                "strata_x, strata_y: design='stratified' needs the stratum of every target in X and in Y"
            )
        sampler = _Stratified(cx, as_labels(strata_x, "strata_x", n_x), cy, as_labels(strata_y, "strata_y", n_y))
    grid = _check_sizes(sizes, sampler.max_size)

    rng = np.random.default_rng(seed)
    draws = UniformIntegers()

    def resample_d(n: int | None) -> np.ndarray:
        width = n_x + n_y if n is None else 2 * n
        block = max(1, _BLOCK_ELEMENTS // width)
        return np.concatenate(
            [sampler.draw(rng, draws, n, min(block, n_resamples - start)) for start in range(0, n_resamples, block)]
        )

    # indices drawn: every size of the grid, then the full size (n_x + n_y; paired n_x = n_y), n_resamples each
    numpy_seconds = _NUMPY_SECONDS_PER_DRAW * n_resamples * (2 * int(grid.sum()) + n_x + n_y)
    if sampler.compiles and use_compiled_kernels(numpy_seconds, _COMPILED_SPEED_UP):
        # every size and the full size in one compiled call: the same draws, bit-identical d
        by_size = list(sampler.compiled_effect_sizes(rng, grid, n_resamples))
    else:
        by_size = [resample_d(int(n)) for n in grid] + [resample_d(None)]
    se = np.empty(grid.size)
    n_valid = np.empty(grid.size, dtype=np.int64)
    for i, n in enumerate(grid):
        se[i], n_valid[i] = _se(by_size[i], f"size {n}")
    d_full_resamples = by_size[-1]
    _, n_valid_full = _se(d_full_resamples, "the full sample size")
    valid_full = d_full_resamples[np.isfinite(d_full_resamples)]
    ci_low, ci_high = np.quantile(valid_full, [(1.0 - ci) / 2.0, (1.0 + ci) / 2.0])
    return BootstrapSEResult(
        sizes=read_only(grid.astype(np.int64)),
        se=read_only(se),
        n_valid=read_only(n_valid),
        d=d_full,
        ci_low=float(ci_low),
        ci_high=float(ci_high),
        ci_level=ci,
        n_valid_full=int(n_valid_full),
        n_x=n_x,
        n_y=n_y,
        n_resamples=n_resamples,
        design=design,
        seed=seed,
    )


def _se(d: np.ndarray, where: str) -> tuple[float, int]:
    valid = d[np.isfinite(d)]
    if valid.size < 2:
        raise StatsInputError(
            f"s_x, s_y: at {where} fewer than 2 bootstrap resamples have a defined d "
            f"({valid.size} of {d.size}); the drawn association values are all equal"
        )
    return float(valid.std(ddof=1)), int(valid.size)

"""One-sided permutation test of the SpEAT statistic over re-partitions of the targets.

Statistic: T = sum_{x in X} s(x). Null distribution: T over every way of splitting the pooled
targets X u Y into a group of |X| and a group of |Y| (equivalent to permuting group labels).
Alternative: X is more associated with A than Y is (large T).

* Exact, when the number of partitions C(n_x + n_y, n_x) is at most ``n_permutations``: every
  partition is enumerated (the observed one included) and
  p = #{T_perm >= T_obs} / C(n_x + n_y, n_x).
* Sampled, otherwise: ``n_permutations`` partitions drawn uniformly and independently (with
  replacement) and p = (1 + #{T_perm >= T_obs}) / (1 + n_permutations), which counts the observed
  partition once and so is never 0 (Phipson & Smyth 2010).

In both cases p is in (0, 1]. Sums that differ from T_obs only by floating-point rounding (e.g. a
partition that swaps two targets with equal s) count as ties, i.e. as >= T_obs.

Cost of the sampled test: O(n_permutations * (n_x + n_y)) simple array operations, about 0.4 s
per 1,000,000 permutations of 60 + 60 targets on one core of the development machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from speechbias.stats.random_integers import UniformIntegers
from speechbias.stats.validation import as_sample, check_count, resolve_seed

# Target working-set size of one chunk of sampled partitions (elements of the (n, chunk) arrays):
# small enough to stay in the L2/L3 cache, large enough that Python overhead per step is negligible.
_CHUNK_ELEMENTS = 1 << 19
_MAX_CHUNK = 8192
_MIN_CHUNK = 64


@dataclass(frozen=True)
class PermutationTestResult:
    """p-value of the one-sided permutation test and what produced it.

    ``statistic`` is T_obs = sum of s over X; ``n_permutations`` is the number of partitions
    evaluated (all of them when ``exact``); ``seed`` is None for exact tests (no randomness).
    """

    p: float
    statistic: float
    n_x: int
    n_y: int
    n_permutations: int
    exact: bool
    seed: int | None
    alternative: str = "greater"


def _tie_tolerance(centred: np.ndarray) -> float:
    # Float64 sums of <= n terms differ from the exact sum by at most about n * eps * sum|s|.
    return 8.0 * centred.size * np.finfo(np.float64).eps * float(np.abs(centred).sum())


def exact_null_sums(s: np.ndarray, k: int) -> np.ndarray:
    """Sum of ``s`` over every k-subset of its entries, shape (C(len(s), k),), in no particular order.

    Built item by item: ``by_size[j]`` holds the sums of all j-subsets of the items seen so far,
    keeping only sizes that can still be completed to k. Never holds more than C(n, k) partial sums.
    """
    n = s.size
    by_size = {0: np.zeros(1)}
    for m, value in enumerate(s):
        remaining_after = n - m - 1
        new = {}
        for j in range(min(m + 1, k), -1, -1):
            if j + remaining_after < k:
                continue  # cannot reach k any more
            parts = []
            if j in by_size:
                parts.append(by_size[j])
            if j - 1 in by_size:
                parts.append(by_size[j - 1] + value)
            if parts:
                new[j] = np.concatenate(parts) if len(parts) > 1 else parts[0]
        by_size = new
    return by_size[k]


def _count_sampled_at_least(
    centred: np.ndarray, k: int, t_obs: float, n_permutations: int, rng: np.random.Generator
) -> int:
    """How many of ``n_permutations`` uniformly random k-subsets have sum >= ``t_obs`` (ties included).

    Vectorised selection sampling (Knuth's Algorithm S) over a chunk of partitions at once: item i
    is taken with probability (still needed) / (items left), decided exactly as ``j < still needed``
    with j uniform on [0, items left). Subset sums come from one float64 matrix-vector product and
    are compared with the tie tolerance. (A float32 product with a float64 recheck near ``t_obs``
    gives the same counts; the float64 sums cost a few percent of the test, benchmarks/stats_bench.py.)
    Hand-written because it is 4-5x faster than sorting random keys (argpartition), measured in
    benchmarks/stats_bench.py.
    """
    n = centred.size
    chunk = int(min(_MAX_CHUNK, max(_MIN_CHUNK, _CHUNK_ELEMENTS // n)))
    items_left = np.arange(n, 0, -1)[:, None]  # items still to visit at step i: n - i
    at_least = t_obs - _tie_tolerance(centred)
    need_dtype = np.uint16 if k < (1 << 16) else np.int64
    draws = UniformIntegers()
    taken = np.empty((n, chunk), dtype=bool)
    sums64 = np.empty(chunk, dtype=np.float64)
    still_needed = np.empty(chunk, dtype=need_dtype)
    count = 0
    done = 0
    while done < n_permutations:
        size = min(chunk, n_permutations - done)
        j = draws.draw(rng, items_left, (n, size))
        need = still_needed[:size]
        need.fill(k)
        take = taken[:, :size]
        for i in range(n):
            np.less(j[i], need, out=take[i])
            need -= take[i]
        # einsum, not matmul: a multi-threaded BLAS call per block slowed the whole loop down 2-3x
        # on a busy 2-core machine (idle BLAS threads spinning against the main thread). einsum
        # casts the bool matrix block by block, faster than a float64 copy of it first.
        sums = np.einsum("i,ij->j", centred, take, out=sums64[:size])
        count += int(np.count_nonzero(sums >= at_least))
        done += size
    return count


def permutation_test(s_x, s_y, n_permutations: int = 1_000_000, seed: int | None = 0) -> PermutationTestResult:
    """One-sided permutation test that targets with associations ``s_x`` outrank those with ``s_y``.

    ``s_x`` (n_x,), ``s_y`` (n_y,): per-target associations s(w). Exact when C(n_x + n_y, n_x)
    <= ``n_permutations``, else sampled with ``np.random.default_rng(seed)`` (PCG64); see the
    module docstring for the p-value conventions.
    """
    s_x = as_sample(s_x, "s_x", min_size=2)
    s_y = as_sample(s_y, "s_y", min_size=2)
    n_permutations = check_count(n_permutations, "n_permutations")
    seed = resolve_seed(seed)
    n_x, n_y = s_x.size, s_y.size
    pooled = np.concatenate([s_x, s_y])
    # Shifting every s by a constant adds n_x * constant to every T: centring changes no comparison
    # and keeps the sums small relative to their spread.
    centred = pooled - pooled.mean()
    t_obs = float(centred[:n_x].sum())
    statistic = float(s_x.sum())
    n_partitions = math.comb(n_x + n_y, n_x)
    if n_partitions <= n_permutations:
        sums = exact_null_sums(centred, n_x)
        count = int(np.count_nonzero(sums >= t_obs - _tie_tolerance(centred)))
        return PermutationTestResult(
            p=count / n_partitions, statistic=statistic, n_x=n_x, n_y=n_y,
            n_permutations=n_partitions, exact=True, seed=None,
        )
    rng = np.random.default_rng(seed)
    count = _count_sampled_at_least(centred, n_x, t_obs, n_permutations, rng)
    return PermutationTestResult(
        p=(1 + count) / (1 + n_permutations), statistic=statistic, n_x=n_x, n_y=n_y,
        n_permutations=n_permutations, exact=False, seed=seed,
    )

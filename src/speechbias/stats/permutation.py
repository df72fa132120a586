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

Sampled partitions of balanced groups (n_x = n_y) come in pairs: each drawn subset and its complement
(layout 2, :data:`STATISTICS_LAYOUT`, recorded with every sampled p): half the random draws, and a p that
is unbiased with no more variance than independent partitions (tested against exact p over many seeds).

Sampled partitions: balanced groups up to 652 targets use rejection of random bit masks, other groups
selection sampling, O(n_permutations * (n_x + n_y)); each has a numba-compiled twin (the same random words,
the same count) that serves when :mod:`speechbias.stats.kernel_choice` says so. Their costs, measured with
benchmarks/stats_bench.py, are given where they are used (the constants below).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from speechbias.stats.kernel_choice import use_compiled_kernels
from speechbias.stats.random_integers import MAX_HIGH_16BIT, UniformIntegers
from speechbias.stats.validation import as_sample, check_count, resolve_seed

# How sampled partitions are laid out on the random stream, recorded with every sampled p (``layout``; results'
# ``statistics_layout``): 1 (before issue 41) each drawn subset is one partition; 2 balanced groups (n_x = n_y) count
# each drawn subset and its complement as two partitions (:func:`complement_counts`). The same seed gives another p
# under each layout, within Monte Carlo error of each other.
STATISTICS_LAYOUT = 2

# Target working-set size of one chunk of sampled partitions (elements of the (n, chunk) arrays):
# small enough to stay in the L2/L3 cache, large enough that Python overhead per step is negligible.
_CHUNK_ELEMENTS = 1 << 19
_MAX_CHUNK = 8192
_MIN_CHUNK = 64
# Random words drawn per block by the rejection kernel (1 MiB): the block's temporaries stay in cache.
_RAW_WORDS_PER_BLOCK = 1 << 17
# Selection sampling: numpy CPU-s per target and permutation (2-core development machine: 4 ns at 20 + 100
# targets, 8-9 ns at 1000 + 1000), and how much faster the compiled twin is at least (1.9x at 20 + 100,
# 4-4.6x at 1000 + 1000: benchmarks/stats_bench.py section 2).
_SELECTION_NUMPY_SECONDS = 8e-9
_SELECTION_SPEED_UP = 2.0
# Rejection of bit masks: numpy CPU-s per step (a random word or a byte look-up; 60 + 60: 27.5 + 15 steps per
# kept subset, ~0.075 CPU-s per 10^6 permutations, i.e. 0.5 * 10^6 subsets), and how much faster the compiled twin
# is at least (1.68-1.79x at 60 + 60: benchmarks/stats_bench.py section 2).
_REJECTION_NUMPY_SECONDS = 3.6e-9
_REJECTION_SPEED_UP = 1.6


@dataclass(frozen=True)
class PermutationTestResult:
    """p-value of the one-sided permutation test and what produced it.

    ``statistic`` is T_obs = sum of s over X; ``n_permutations`` is the number of partitions
    evaluated (all of them when ``exact``); ``seed`` is None for exact tests (no randomness); ``layout``
    is :data:`STATISTICS_LAYOUT` of a sampled test (None when exact).
    """

    p: float
    statistic: float
    n_x: int
    n_y: int
    n_permutations: int
    exact: bool
    seed: int | None
    alternative: str = "greater"
    layout: int | None = None


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


def _selection_chunk(n: int) -> int:
    """Partitions per chunk of selection sampling for ``n`` targets (its (n, chunk) arrays stay in cache)."""
    return int(min(_MAX_CHUNK, max(_MIN_CHUNK, _CHUNK_ELEMENTS // n)))


def _count_by_selection_sampling(
    centred: np.ndarray, k: int, t_obs: float, n_permutations: int, rng: np.random.Generator, chunk: int | None = None
) -> int:
    """How many of ``n_permutations`` uniformly random k-subsets have sum >= ``t_obs`` (ties included).

    The kernel for unbalanced groups (see :func:`_count_sampled_at_least`). Vectorised selection sampling (Knuth's Algorithm S) over a chunk of partitions at once: item i
    is taken with probability (still needed) / (items left), decided exactly as ``j < still needed``
    with j uniform on [0, items left). Subset sums come from one float64 matrix-vector product and
    are compared with the tie tolerance. (A float32 product with a float64 recheck near ``t_obs``
    gives the same counts; the float64 sums cost a few percent of the test, benchmarks/stats_bench.py.)
    Hand-written because it is 4-5x faster than sorting random keys (argpartition), measured in
    benchmarks/stats_bench.py.
    """
    n = centred.size
    chunk = chunk or _selection_chunk(n)
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


def byte_sum_tables(values: np.ndarray) -> np.ndarray:
    """``(ceil(n / 8), 256)`` float64: entry [b, v] is the sum of ``values[8 b + i]`` over the set bits i of v
    (bit 0 = least significant; items past the end count 0)."""
    n_bytes = (values.size + 7) // 8
    padded = np.zeros(n_bytes * 8)
    padded[: values.size] = values
    bits = (np.arange(256)[:, None] >> np.arange(8)[None, :]) & 1  # (256, 8)
    # Each entry adds its <= 8 values one by one in bit order: no BLAS, the same rounding everywhere.
    tables = np.zeros((n_bytes, 256))
    for i in range(8):
        tables += bits[None, :, i] * padded.reshape(n_bytes, 8)[:, i, None]
    return tables


def rejection_words_per_subset(n: int, k: int) -> float:
    """Expected 64-bit random words that :func:`_count_by_rejection` spends per accepted k-subset of n
    (exact integer arithmetic, correctly rounded; inf past the float range)."""
    try:
        return ((n + 63) // 64) * (1 << n) / math.comb(n, k)
    except OverflowError:
        return math.inf


def complement_counts(n: int, k: int, n_permutations: int) -> tuple[int, int]:
    """(subsets drawn, of which the first this many also count their complement) for ``n_permutations``
    partitions of n items into k and n - k: balanced groups (n = 2k) count each drawn k-subset and its
    complement (also a uniformly random k-subset) as two partitions, the last subset alone when
    ``n_permutations`` is odd (layout 2, :data:`STATISTICS_LAYOUT`); other groups count each subset once."""
    if n != 2 * k:
        return n_permutations, 0
    drawn = (n_permutations + 1) // 2
    return drawn, n_permutations - drawn


def _count_by_rejection(
    centred: np.ndarray, k: int, t_obs: float, n_permutations: int, rng: np.random.Generator
) -> int:
    """How many of ``n_permutations`` uniformly random k-subsets have sum >= ``t_obs`` (ties included).

    The kernel for balanced groups. Each candidate is n fair random bits (raw PCG64 output), i.e. a
    uniformly random subset of any size; the candidates with exactly k bits set are kept, in the
    order drawn (:func:`complement_counts` of them). Conditioning a uniform subset on its size
    leaves it uniform, so each kept subset is a uniformly random k-subset, independent of the
    others (the same distribution as selection sampling). About 1 candidate in 14 is kept for
    60 + 60 targets; the subset sum T of a kept one is ceil(n / 8) look-ups in per-byte sum tables
    (:func:`byte_sum_tables`) instead of n multiply-adds. When n = 2k its complement, whose sum is
    total - T, is counted too (T <= total - at_least): half the random words per partition, and the two
    counts of a pair are never positively correlated (antithetic: T and total - T), so the variance of p
    is at most that of independent partitions (tested). Written here (no library draws k-subsets
    as bit masks); benchmarks/stats_bench.py measures it against selection sampling in one run.
    """
    n = centred.size
    n_words = (n + 63) // 64
    n_bytes = (n + 7) // 8
    tail_bits = n - 64 * (n_words - 1)
    tail_mask = np.uint64((1 << tail_bits) - 1) if tail_bits < 64 else None
    tables = byte_sum_tables(centred)
    at_least = t_obs - _tie_tolerance(centred)
    at_most = float(centred.sum()) - at_least  # a complement's sum total - T is >= at_least
    n_subsets, n_complements = complement_counts(n, k, n_permutations)
    block = max(1024, _RAW_WORDS_PER_BLOCK // n_words)
    count = 0
    done = 0
    while done < n_subsets:
        words = rng.bit_generator.random_raw(block * n_words).reshape(block, n_words)
        if tail_mask is not None:
            words[:, -1] &= tail_mask
        size = np.bitwise_count(words[:, 0]).astype(np.int32)
        for w in range(1, n_words):
            size += np.bitwise_count(words[:, w])
        kept = words[size == k][: n_subsets - done]
        subset_bytes = np.ascontiguousarray(
            kept.astype("<u8", copy=False).view(np.uint8)[:, :n_bytes].T
        )  # (n_bytes, kept)
        # ('<u8': byte b holds items 8b..8b+7 on any machine's byte order)
        sums = tables[0].take(subset_bytes[0])
        for b in range(1, n_bytes):
            sums += tables[b].take(subset_bytes[b])
        count += int(np.count_nonzero(sums >= at_least))
        if done < n_complements:
            count += int(np.count_nonzero(sums[: n_complements - done] <= at_most))
        done += kept.shape[0]
    return count


def _count_sampled_at_least(
    centred: np.ndarray, k: int, t_obs: float, n_permutations: int, rng: np.random.Generator
) -> int:
    """How many of ``n_permutations`` uniformly random k-subsets of ``centred`` have sum >= ``t_obs``.

    Chooses the kernel by (n, k) alone, so a seed gives the same p on every machine: rejection of
    random bit masks when it spends fewer random words per subset than n / 2 (balanced groups,
    e.g. 60 + 60: 27.5 words), else selection sampling (O(n) per subset). Both draw exactly
    uniform subsets; their random streams differ, so their p differ by Monte Carlo error only.
    Selection sampling runs compiled when :func:`~speechbias.stats.kernel_choice.use_compiled_kernels`
    says so (groups up to ``MAX_HIGH_16BIT`` targets): the same count, bit for bit.
    """
    n = centred.size
    at_least = t_obs - _tie_tolerance(centred)  # as the numpy kernels compute it
    words_per_subset = rejection_words_per_subset(n, k)
    if words_per_subset <= n / 2:
        n_subsets, n_complements = complement_counts(n, k, n_permutations)
        steps = words_per_subset + (n + 7) // 8  # random words and byte look-ups per kept subset
        if use_compiled_kernels(_REJECTION_NUMPY_SECONDS * steps * n_subsets, _REJECTION_SPEED_UP):
            from speechbias.stats import compiled_kernels

            at_most = float(centred.sum()) - at_least
            return compiled_kernels.count_by_rejection(
                centred, k, byte_sum_tables(centred), at_least, at_most, n_subsets, n_complements, steps, rng
            )
        return _count_by_rejection(centred, k, t_obs, n_permutations, rng)
    chunk = _selection_chunk(n)
    if n <= MAX_HIGH_16BIT and use_compiled_kernels(_SELECTION_NUMPY_SECONDS * n * n_permutations, _SELECTION_SPEED_UP):
        from speechbias.stats import compiled_kernels

        return compiled_kernels.count_by_selection(centred, k, at_least, n_permutations, chunk, rng)
    return _count_by_selection_sampling(centred, k, t_obs, n_permutations, rng, chunk)


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
    n_partitions = math.comb(n_x + n_y, n_x)
    exact = n_partitions <= n_permutations
    if exact:
        sums = exact_null_sums(centred, n_x)
        count = int(np.count_nonzero(sums >= t_obs - _tie_tolerance(centred)))
        p = count / n_partitions
    else:
        count = _count_sampled_at_least(centred, n_x, t_obs, n_permutations, np.random.default_rng(seed))
        p = (1 + count) / (1 + n_permutations)
    return PermutationTestResult(
        p=p,
        statistic=float(s_x.sum()),
        n_x=n_x,
        n_y=n_y,
        n_permutations=n_partitions if exact else n_permutations,
        exact=exact,
        seed=None if exact else seed,
        layout=None if exact else STATISTICS_LAYOUT,
    )

"""numba-compiled inner loops of the permutation test and the bootstrap SE curve.

Each kernel computes exactly what its numpy counterpart computes, from the same random words in the
same order, with the float64 additions in the same order: the results are bit-identical (tested
against the numpy kernels in tests/stats/test_stats_compiled_kernels.py, and under another CPU
target in CI's rounding pass). They are faster because the random words are made in registers
(:mod:`speechbias.stats.compiled_pcg64`) instead of in memory blocks, and because a rejected
candidate or a drawn pair costs a few instructions instead of a pass over a temporary array:
benchmarks/stats_bench.py measures both paths side by side.

numba (a well-kept LLVM JIT for numpy code, BSD licence, wheels for every platform torch has) was
chosen over a C extension: no compiler at install time, and the kernels read as the numpy code they
mirror. Compiled code is cached on disk (``cache=True``): the first call on a machine compiles
(a few seconds), later processes load it (~0.3-0.6 s). Importing this module imports numba
(~0.3 s), so a process turns to it only after about a second of numpy work
(:mod:`speechbias.stats.kernel_choice`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from speechbias.stats.compiled_pcg64 import next_two_words, next_word, popcount64, read_state, write_state

_BYTE = np.uint64(255)
_MAGIC_SHIFT = np.uint64(48)


def division_magic(divisor: int) -> np.uint64:
    """``magic`` with ``(v * magic) >> 48 == v // divisor`` for every 16-bit v (1 <= divisor <= 2**16):
    magic = ceil(2**48 / divisor) exceeds 2**48 / divisor by e < 1, and v * e / 2**48 < 1 / divisor
    never carries the product past the next multiple. It replaces ``TableIntegers``'s 128 KiB
    look-up table, which does not fit in the L1 cache (pair moments 0.30 -> 0.20 ms per 65,520
    draws, measured; tested exhaustively against the table)."""
    if not 1 <= divisor <= 1 << 16:
        raise ValueError(f"divisor: must be in [1, 65536], got {divisor}")
    return np.uint64(-(-(1 << 48) // divisor))


@njit(cache=True)
def _count_at_least(kept_words, n_kept, tables, at_least):
    """How many of the first ``n_kept`` kept masks (rows of ``kept_words``) have a byte-table sum >=
    ``at_least``; each sum adds ``tables[b, byte b]`` for b = 0, 1, ... in that order. Summing a
    batch of kept masks together, not each as it is kept, lets the CPU overlap the rows' independent
    chains of additions."""
    n_bytes = tables.shape[0]
    count = 0
    for row in range(n_kept):
        words = kept_words[row]
        total = tables[0, words[0] & _BYTE]
        for b in range(1, n_bytes):
            total += tables[b, (words[b >> 3] >> np.uint64(8 * (b & 7))) & _BYTE]
        if total >= at_least:
            count += 1
    return count


@njit(cache=True)
def _count_by_rejection(state, n, k, tables, at_least, n_permutations):
    """Kept candidates with byte-table sum >= ``at_least``; the loop of ``permutation._count_by_rejection``.

    A candidate is ``ceil(n / 64)`` words (the last one masked to its ``n % 64`` low bits); it is
    kept when exactly ``k`` bits are set. Stops after ``n_permutations`` kept candidates.
    """
    n_words = (n + 63) // 64
    tail_bits = n - 64 * (n_words - 1)
    tail_mask = np.uint64(0xFFFFFFFFFFFFFFFF)
    if tail_bits < 64:
        tail_mask = (np.uint64(1) << np.uint64(tail_bits)) - np.uint64(1)
    batch = 256
    kept_words = np.empty((batch, n_words), dtype=np.uint64)
    n_kept = 0
    kept = 0
    count = 0
    while kept < n_permutations:
        words = kept_words[n_kept]
        if n_words == 2:  # 65 to 128 items (the paper's 60 + 60): two words from one double step
            first, second = next_two_words(state)
            second &= tail_mask
            words[0] = first
            words[1] = second
            size = popcount64(first) + popcount64(second)
        else:
            size = np.uint64(0)
            for w in range(n_words):
                word = next_word(state)
                if w == n_words - 1:
                    word &= tail_mask
                words[w] = word
                size += popcount64(word)
        if size != k:
            continue
        kept += 1
        n_kept += 1
        if n_kept == batch:
            count += _count_at_least(kept_words, n_kept, tables, at_least)
            n_kept = 0
    return count + _count_at_least(kept_words, n_kept, tables, at_least)


def count_by_rejection(centred: np.ndarray, k: int, tables: np.ndarray, at_least: float, n_permutations: int,
                       rng: np.random.Generator) -> int:
    """How many of ``n_permutations`` random k-subsets (rejection of bit masks) have a sum >= ``at_least``.

    ``tables``: :func:`speechbias.stats.permutation.byte_sum_tables` of ``centred``. Consumes ``rng``'s
    words as the numpy kernel does (its state afterwards is not the numpy kernel's: that one draws
    whole blocks). Bit-identical count.
    """
    state = read_state(rng)
    count = _count_by_rejection(state, centred.size, k, tables, float(at_least), int(n_permutations))
    write_state(rng, state)
    return int(count)


@njit(cache=True)
def _table_draws(state, n, limit):
    """The raw 16-bit values behind ``TableIntegers.draw`` of ``n`` values (map them with its table):
    16-bit lanes of the words, low lane first; values at or above ``limit`` are redrawn afterwards in
    position order, round after round, from fresh words."""
    raw = np.empty(n, dtype=np.uint16)
    todo = np.empty(n, dtype=np.int64)
    n_todo = 0
    for start in range(0, n - 3, 4):
        word = next_word(state)
        for lane in range(4):
            value = np.uint16((word >> np.uint64(16 * lane)) & np.uint64(0xFFFF))
            raw[start + lane] = value
            if value >= limit:
                todo[n_todo] = start + lane
                n_todo += 1
    tail = n & 3
    if tail:
        word = next_word(state)
        for lane in range(tail):
            value = np.uint16((word >> np.uint64(16 * lane)) & np.uint64(0xFFFF))
            raw[n - tail + lane] = value
            if value >= limit:
                todo[n_todo] = n - tail + lane
                n_todo += 1
    if n_todo:
        word = np.uint64(0)
        while n_todo > 0:
            still = 0
            for j in range(n_todo):
                lane = j & 3
                if lane == 0:
                    word = next_word(state)
                value = (word >> np.uint64(16 * lane)) & np.uint64(0xFFFF)
                raw[todo[j]] = value
                if value >= limit:
                    todo[still] = todo[j]
                    still += 1
            n_todo = still
    return raw


@njit(cache=True)
def _group_moments(state, r, n_pairs, n_single, pair_limit, pair_magic, pair_table, single_limit, single_magic,
                   columns):
    """Per resample, each column's total and the sum of squares over all columns: the loop of
    ``bootstrap._GroupDraws.moments``. Returns (r, C + 1) float64: columns' totals, then squares.

    A raw value v maps to ``(v * magic) >> 48`` (:func:`division_magic`: ``v // repeats`` of ``TableIntegers``).
    Pairs: ``n_pairs`` x ``r`` pair indices drawn row by row (draw i of resample j is value i * r + j),
    the rows of ``pair_table`` (m * m, C + 1) added in draw order. Singles: ``n_single`` x ``r`` item
    indices likewise; per column, the drawn values added over the draws and then to the total, and
    their squares likewise.
    """
    n_values = columns.shape[0] + 1
    # Laid out (value, resample): the additions of one draw run along contiguous resamples,
    # independent of each other (a per-resample chain of dependent additions ran 3x slower).
    sums = np.zeros((n_values, r))
    if n_pairs > 0:
        raw = _table_draws(state, n_pairs * r, pair_limit)
        by_value = np.ascontiguousarray(pair_table.T)  # (C + 1, m * m)
        for c in range(n_values):
            table = by_value[c]
            out = sums[c]
            for j in range(r):
                out[j] = table[(np.uint64(raw[j]) * pair_magic) >> _MAGIC_SHIFT]
            for i in range(1, n_pairs):
                drawn = raw[i * r:(i + 1) * r]
                for j in range(r):
                    out[j] += table[(np.uint64(drawn[j]) * pair_magic) >> _MAGIC_SHIFT]
    if n_single > 0:
        raw = _table_draws(state, n_single * r, single_limit)
        total = np.empty(r)
        squares = np.empty(r)
        for c in range(n_values - 1):
            values = columns[c]
            for j in range(r):
                value = values[(np.uint64(raw[j]) * single_magic) >> _MAGIC_SHIFT]
                total[j] = value
                squares[j] = value * value
            for i in range(1, n_single):
                drawn = raw[i * r:(i + 1) * r]
                for j in range(r):
                    value = values[(np.uint64(drawn[j]) * single_magic) >> _MAGIC_SHIFT]
                    total[j] += value
                    squares[j] += value * value
            for j in range(r):
                sums[c, j] += total[j]
                sums[n_values - 1, j] += squares[j]
    return sums.T.copy()


def group_moments(state: np.ndarray, r: int, n_pairs: int, n_single: int, pair_draws, pair_table: np.ndarray,
                  single_draws, columns: np.ndarray) -> np.ndarray:
    """(r, C + 1): the sums ``_GroupDraws.moments`` builds, bit-identical, from the same random words.

    ``state``: the PCG64 state (:func:`~speechbias.stats.compiled_pcg64.read_state`), advanced in
    place; ``pair_draws`` / ``single_draws``: the group's
    :class:`~speechbias.stats.random_integers.TableIntegers` (``pair_draws`` may be None when
    ``n_pairs`` is 0); ``pair_table`` (m * m, C + 1); ``columns``: (C, m) float64.
    """
    pair_limit, pair_magic = (pair_draws.limit, division_magic(pair_draws.repeats)) if n_pairs else (1 << 16, 0)
    return _group_moments(state, int(r), int(n_pairs), int(n_single), int(pair_limit), np.uint64(pair_magic),
                          pair_table, int(single_draws.limit), division_magic(single_draws.repeats), columns)

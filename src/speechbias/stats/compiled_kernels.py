"""numba-compiled inner loops of the permutation test and the bootstrap SE curve.

Each kernel computes exactly what its numpy counterpart computes, from the same random words in the
same order, with the float64 additions in the same order: the results are bit-identical (tested
against the numpy kernels in tests/stats/test_stats_compiled_kernels.py, and under another CPU
target in CI's rounding pass). They are faster because the random words are made in registers
(:mod:`speechbias.stats.compiled_pcg64`) instead of in memory blocks, and because a rejected
candidate or a drawn pair costs a few instructions instead of a pass over a temporary array:
benchmarks/stats_bench.py measures both paths side by side.

numba (a well-kept LLVM JIT for numpy code, BSD licence, wheels for Linux, macOS and Windows) was
chosen over a C extension: no compiler at install time, and the kernels read as the numpy code they
mirror. Compiled code is cached on disk (``cache=True``): the first call on a machine compiles
(a few seconds), later processes load it (~0.3-0.6 s). Importing this module imports numba
(~0.3 s), so a process turns to it only when its declared workload, or the work it has done,
repays that (:mod:`speechbias.stats.kernel_choice`).
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


def count_by_rejection(
    centred: np.ndarray, k: int, tables: np.ndarray, at_least: float, n_permutations: int, rng: np.random.Generator
) -> int:
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
def _group_moments(
    state, r, n_pairs, n_single, pair_limit, pair_magic, pair_table, single_limit, single_magic, columns
):
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
                drawn = raw[i * r : (i + 1) * r]
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
                drawn = raw[i * r : (i + 1) * r]
                for j in range(r):
                    value = values[(np.uint64(drawn[j]) * single_magic) >> _MAGIC_SHIFT]
                    total[j] += value
                    squares[j] += value * value
            for j in range(r):
                sums[c, j] += total[j]
                sums[n_values - 1, j] += squares[j]
    return sums.T.copy()


@njit(cache=True)
def _effect_sizes(x_total, x_count, y_total, y_count, squares):
    """d per resample from the groups' sums: ``bootstrap._effect_sizes``, operation for operation
    (the same IEEE operations in the same order give the same bits); NaN where there is no spread."""
    r = x_total.size
    count = x_count + y_count
    d = np.empty(r)
    for j in range(r):
        total = x_total[j] + y_total[j]
        spread = (squares[j] - total * total / count) / (count - 1)
        diff = x_total[j] / x_count - y_total[j] / y_count
        if spread <= 1e-12 * squares[j] / (count - 1):
            d[j] = np.nan
        else:
            d[j] = diff / np.sqrt(spread)
    return d


@njit(cache=True)
def _resampled_effect_sizes(
    state,
    grid,
    full_x,
    full_y,
    n_resamples,
    block_elements,
    paired,
    x_limits,
    x_magics,
    x_pair_table,
    x_columns,
    y_limits,
    y_magics,
    y_pair_table,
    y_columns,
):
    """(len(grid) + 1, n_resamples) bootstrapped d: one row per size of ``grid``, then the full size
    (``full_x`` / ``full_y`` draws). The loop of ``bootstrap.bootstrap_se`` for the iid and paired
    designs: the same blocks of resamples (``block_elements // width`` each), each group's draws in
    the same order. A group: limits / magics (pairs, singles) of its two ``TableIntegers``,
    ``pair_table`` (m * m, C + 1; a 1-row dummy when m * m > 4096) and ``columns`` (C, m). iid: group
    x then group y, one column each; ``paired``: group x alone, two columns (its X and Y members).
    """
    n_rows = grid.size + 1
    out = np.empty((n_rows, n_resamples))
    x_pairs_possible = x_pair_table.shape[0] > 1
    y_pairs_possible = y_pair_table.shape[0] > 1
    for row in range(n_rows):
        if row < grid.size:
            nx = grid[row]
            ny = grid[row]
        else:
            nx = full_x
            ny = full_y
        width = 2 * nx if row < grid.size else full_x + full_y
        block = max(1, block_elements // width)
        for start in range(0, n_resamples, block):
            r = min(block, n_resamples - start)
            x_pairs, x_single = (nx // 2, nx % 2) if x_pairs_possible else (0, nx)
            x_sums = _group_moments(
                state, r, x_pairs, x_single, x_limits[0], x_magics[0], x_pair_table, x_limits[1], x_magics[1], x_columns
            )
            if paired:
                d = _effect_sizes(x_sums[:, 0], nx, x_sums[:, 1], nx, x_sums[:, 2])
            else:
                y_pairs, y_single = (ny // 2, ny % 2) if y_pairs_possible else (0, ny)
                y_sums = _group_moments(
                    state,
                    r,
                    y_pairs,
                    y_single,
                    y_limits[0],
                    y_magics[0],
                    y_pair_table,
                    y_limits[1],
                    y_magics[1],
                    y_columns,
                )
                squares = x_sums[:, 1] + y_sums[:, 1]
                d = _effect_sizes(x_sums[:, 0], nx, y_sums[:, 0], ny, squares)
            out[row, start : start + r] = d
    return out


def _group_arguments(group) -> tuple:
    """(limits, magics, pair_table, columns) of a ``bootstrap._GroupDraws`` for the kernel."""
    if group.pair_draws is not None:
        limits = np.array([group.pair_draws.limit, group.single_draws.limit], dtype=np.int64)
        magics = np.array([division_magic(group.pair_draws.repeats), division_magic(group.single_draws.repeats)])
        pair_table = group.pair_table
    else:
        limits = np.array([1 << 16, group.single_draws.limit], dtype=np.int64)
        magics = np.array([np.uint64(0), division_magic(group.single_draws.repeats)])
        pair_table = np.zeros((1, group.column_matrix.shape[0] + 1))
    return limits, magics.astype(np.uint64), pair_table, group.column_matrix


def resampled_effect_sizes(
    rng: np.random.Generator,
    grid: np.ndarray,
    n_resamples: int,
    block_elements: int,
    x_group,
    y_group=None,
    full_sizes: tuple[int, int] | None = None,
) -> np.ndarray:
    """(len(grid) + 1, n_resamples) bootstrapped d, bit-identical to ``bootstrap_se``'s numpy loop from
    the same ``rng``: iid when ``y_group`` is given (``full_sizes`` = (n_x, n_y)), else paired
    (``x_group`` holds both members of each pair; the full size is every pair)."""
    paired = y_group is None
    x_args = _group_arguments(x_group)
    y_args = x_args if paired else _group_arguments(y_group)
    full_x, full_y = (x_group.m, x_group.m) if paired else full_sizes
    state = read_state(rng)
    d = _resampled_effect_sizes(
        state,
        np.asarray(grid, dtype=np.int64),
        int(full_x),
        int(full_y),
        int(n_resamples),
        int(block_elements),
        paired,
        *x_args,
        *y_args,
    )
    write_state(rng, state)
    return d

"""numba-compiled inner loops of the permutation test (rejection of bit masks, selection sampling) and the
bootstrap SE curve.

Each kernel computes exactly what its numpy counterpart computes, from the same random words in the
same order, with the float64 additions in the same order: the results are bit-identical (tested
against the numpy kernels in tests/stats/test_stats_compiled_kernels.py, and under another CPU
target in CI's rounding pass). They are faster because a rejected draw, a drawn pair or a selection
step costs a few instructions instead of a pass over a temporary array: rejection of bit masks 1.7x
(60 + 60, each subset with its complement: 74.5 vs 44.4 CPU-ms per 10^6 permutations, numba's draws of the
random words ~27 of it; a tight kernel on a second, hand-written RNG, xoshiro256+, counting each subset
once: 48.1), selection sampling 4x (1000 + 1000 targets: 16 vs 4 CPU-s per 10^6
permutations), the SE curve 2.2x (60 + 60, 10^4 resamples per size: 0.12 vs 0.055 CPU-s), measured side
by side in benchmarks/stats_bench.py.

Random numbers: the kernels take the caller's ``np.random.Generator`` itself (numba's own Generator
support) and draw raw 64-bit words with ``integers(0, 2**64 - 1, endpoint=True, dtype=np.uint64)``,
which numba, like numpy, serves straight from the bit generator's next 64-bit output: the words of
``bit_generator.random_raw`` (tested), the stream the numpy kernels use. (A hand-written PCG64
stepped in registers drew them 1.4x faster, short of 1.5x: gone.)

numba (a well-kept LLVM JIT for numpy code, BSD licence, wheels for Linux, macOS and Windows) was
chosen over a C extension: no compiler at install time, and the kernels read as the numpy code they
mirror. Compiled code is cached on disk (``cache=True``): the first call on a machine compiles
(seconds), later processes load it. Importing this module imports numba, so a process turns to it
only when the call's work, or the work done so far, repays that (:mod:`speechbias.stats.kernel_choice`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

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
def raw_words(rng, n):
    """``n`` raw 64-bit words of ``rng``: ``rng.bit_generator.random_raw(n)``, drawn through numba's
    Generator (the full 64-bit range is the bit generator's output as it is, in numpy and numba alike)."""
    return rng.integers(0, 0xFFFFFFFFFFFFFFFF, size=n, dtype=np.uint64, endpoint=True)


@njit(cache=True)
def _raw_uint16(rng, n):
    """``n`` 16-bit values from ``(n + 3) // 4`` raw words: ``random_integers._raw_uint16``."""
    return raw_words(rng, (n + 3) // 4).view(np.uint16)[:n]


@njit(cache=True)
def _selection_steps(rng, n, size):
    """(n, size) uint16: ``UniformIntegers.draw(rng, items_left, (n, size))`` with ``items_left[i] = n - i``
    (n <= ``MAX_HIGH_16BIT``): Lemire's multiply-shift of 16-bit values, the rejected ones redrawn
    afterwards in position order, round after round."""
    total = n * size
    values = _raw_uint16(rng, total)
    steps = np.empty((n, size), dtype=np.uint16)
    flat = steps.reshape(total)
    todo = np.empty(total, dtype=np.int64)
    n_todo = 0
    for i in range(n):
        high = np.uint32(n - i)
        reject_below = (np.uint32(65536) - high) % high
        for at in range(i * size, (i + 1) * size):
            value = np.uint32(values[at]) * high
            flat[at] = np.uint16(value >> np.uint32(16))
            if (value & np.uint32(0xFFFF)) < reject_below:
                todo[n_todo] = at
                n_todo += 1
    while n_todo > 0:
        redraw = _raw_uint16(rng, n_todo)
        still = 0
        for j in range(n_todo):
            at = todo[j]
            high = np.uint32(n - at // size)
            value = np.uint32(redraw[j]) * high
            if (value & np.uint32(0xFFFF)) >= (np.uint32(65536) - high) % high:
                flat[at] = np.uint16(value >> np.uint32(16))
            else:
                todo[still] = at
                still += 1
        n_todo = still
    return steps


@njit(cache=True)
def _count_by_selection(rng, centred, k, at_least, n_permutations, chunk):
    """The loop of ``permutation._count_by_selection_sampling``: chunks of ``chunk`` partitions, each
    item i taken when its draw is below the items still needed; a partition's sum adds the taken
    items in item order from 0.0 (einsum's order: the sums are equal to the bit, tested)."""
    n = centred.size
    count = 0
    done = 0
    sums = np.empty(chunk)
    need = np.empty(chunk, dtype=np.int64)
    while done < n_permutations:
        size = min(chunk, n_permutations - done)
        steps = _selection_steps(rng, n, size)
        for j in range(size):
            need[j] = k
            sums[j] = 0.0
        for i in range(n):
            row = steps[i]
            value = centred[i]
            for j in range(size):
                if row[j] < need[j]:
                    need[j] -= 1
                    sums[j] += value
        for j in range(size):
            if sums[j] >= at_least:
                count += 1
        done += size
    return count


# Work of one compiled call, in element x partition (or draw) steps: ~2.3 ns each on the 2-core development
# machine, so a call returns to Python every ~0.1 s, where a stop signal (SIGTERM, Ctrl-C) is handled
# (launch.signals); a whole 10^6-permutation test of 4,096 targets in one call took 9.6 s. The rng is
# numpy's Generator, whose state the calls share, so the split gives the same draws, bit for bit.
CALL_STEPS = 40_000_000


def count_by_selection(
    centred: np.ndarray, k: int, at_least: float, n_permutations: int, chunk: int, rng: np.random.Generator
) -> int:
    """How many of ``n_permutations`` selection-sampled k-subsets of ``centred`` have a sum >= ``at_least``:
    ``permutation._count_by_selection_sampling``'s count, bit-identical (``centred.size <= MAX_HIGH_16BIT``).
    Calls of whole chunks of about :data:`CALL_STEPS` steps each."""
    chunk = int(chunk)
    per_call = max(1, CALL_STEPS // (max(1, centred.size) * chunk)) * chunk
    count, done = 0, 0
    while done < n_permutations:
        size = min(per_call, int(n_permutations) - done)
        count += int(_count_by_selection(rng, centred, int(k), float(at_least), size, chunk))
        done += size
    return count


_BYTE = np.uint64(0xFF)
# Raw words drawn at a time by the rejection kernel (a multiple of a mask's words is used of it).
_REJECTION_BUFFER_WORDS = 4096


@njit(cache=True)
def _popcount(word):
    """Set bits of a uint64 (the SWAR sum; LLVM turns it into one popcnt instruction where the CPU has one)."""
    word = word - ((word >> np.uint64(1)) & np.uint64(0x5555555555555555))
    word = (word & np.uint64(0x3333333333333333)) + ((word >> np.uint64(2)) & np.uint64(0x3333333333333333))
    word = (word + (word >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (word * np.uint64(0x0101010101010101)) >> np.uint64(56)


@njit(cache=True)
def _count_kept(buffer, starts, n_kept, n_words, tail_mask, tables, at_least, at_most, first, n_complements):
    """Count of the kept masks at ``buffer[starts[i]:starts[i] + n_words]``, i < ``n_kept`` (kept subsets
    ``first``, ``first + 1``, ...; the last word masked with ``tail_mask``): each one whose byte-table sum
    (``tables[b, byte b]`` added for b = 0, 1, ... in that order) is >= ``at_least``, and each complement, of
    the subsets numbered below ``n_complements``, whose subset's sum is <= ``at_most``."""
    n_bytes = tables.shape[0]
    sums = np.empty(n_kept)
    # byte by byte across the kept masks: their additions are independent of each other
    for row in range(n_kept):
        sums[row] = tables[0, buffer[starts[row]] & _BYTE]
    for b in range(1, n_bytes):
        table = tables[b]
        word, shift = b >> 3, np.uint64(8 * (b & 7))
        mask = tail_mask if word == n_words - 1 else np.uint64(0xFFFFFFFFFFFFFFFF)
        for row in range(n_kept):
            sums[row] += table[((buffer[starts[row] + word] & mask) >> shift) & _BYTE]
    count = 0
    for row in range(n_kept):
        if sums[row] >= at_least:
            count += 1
        if first + row < n_complements and sums[row] <= at_most:
            count += 1
    return count


@njit(cache=True)
def _count_by_rejection(rng, buffer, position, n, k, tables, at_least, at_most, first, stop, n_complements):
    """Kept subsets ``first``..``stop - 1`` of ``permutation._count_by_rejection`` and their count.

    A candidate is the next ``ceil(n / 64)`` words of the stream (the last one masked to its low bits);
    it is kept when exactly ``k`` bits are set. The words come from ``buffer`` until ``position[0]`` reaches
    its end, then from blocks of as many fresh words from ``rng`` (a multiple of a candidate's words); the
    last block is left in ``buffer`` for the next call of the test, so the calls read the stream word after
    word, as the numpy kernel does.
    """
    n_words = (n + 63) // 64
    tail_bits = n - 64 * (n_words - 1)
    tail_mask = np.uint64(0xFFFFFFFFFFFFFFFF)
    if tail_bits < 64:
        tail_mask = (np.uint64(1) << np.uint64(tail_bits)) - np.uint64(1)
    starts = np.empty(buffer.size // n_words, dtype=np.int64)
    words = buffer  # the words being read: the shared buffer's, then fresh ones (copied back once, at the end)
    fresh = False
    pos = position[0]
    count = 0
    kept = first
    while kept < stop:
        if pos == words.size:
            words = raw_words(rng, buffer.size)
            fresh = True
            pos = 0
        # the kept masks of the rest of the words, up to the subsets still wanted
        wanted = stop - kept
        n_kept = 0
        while pos < words.size and n_kept < wanted:
            size = _popcount(words[pos + n_words - 1] & tail_mask)
            for w in range(n_words - 1):
                size += _popcount(words[pos + w])
            starts[n_kept] = pos
            n_kept += size == k
            pos += n_words
        count += _count_kept(words, starts, n_kept, n_words, tail_mask, tables, at_least, at_most, kept, n_complements)
        kept += n_kept
    if fresh:
        buffer[:] = words
    position[0] = pos
    return count


def count_by_rejection(
    centred: np.ndarray,
    k: int,
    tables: np.ndarray,
    at_least: float,
    at_most: float,
    n_subsets: int,
    n_complements: int,
    steps_per_subset: float,
    rng: np.random.Generator,
) -> int:
    """``permutation._count_by_rejection``'s count, bit-identical: ``n_subsets`` kept k-subsets (rejection of
    random bit masks) counted when their sum is >= ``at_least``, and the complements of the first
    ``n_complements`` when the subset's sum is <= ``at_most``. ``tables``:
    :func:`speechbias.stats.permutation.byte_sum_tables` of ``centred``. Calls of about :data:`CALL_STEPS`
    steps (``steps_per_subset`` each: random words plus byte look-ups) reading one stream of words."""
    n_words = (centred.size + 63) // 64
    buffer = np.empty((_REJECTION_BUFFER_WORDS // n_words) * n_words, dtype=np.uint64)
    position = np.array([buffer.size], dtype=np.int64)  # empty: the first call fills it
    per_call = max(1, int(CALL_STEPS // max(1.0, steps_per_subset)))
    count, done = 0, 0
    while done < n_subsets:
        stop = min(done + per_call, int(n_subsets))
        count += int(
            _count_by_rejection(
                rng,
                buffer,
                position,
                centred.size,
                int(k),
                tables,
                float(at_least),
                float(at_most),
                done,
                stop,
                int(n_complements),
            )
        )
        done = stop
    return count


@njit(cache=True)
def _table_draws(rng, n, limit):
    """The raw 16-bit values behind ``TableIntegers.draw`` of ``n`` values (map them with its table):
    values at or above ``limit`` are redrawn afterwards in position order, round after round."""
    raw = _raw_uint16(rng, n)
    todo = np.empty(n, dtype=np.int64)
    n_todo = 0
    for at in range(n):
        if raw[at] >= limit:
            todo[n_todo] = at
            n_todo += 1
    while n_todo > 0:
        redraw = _raw_uint16(rng, n_todo)
        still = 0
        for j in range(n_todo):
            raw[todo[j]] = redraw[j]
            if redraw[j] >= limit:
                todo[still] = todo[j]
                still += 1
        n_todo = still
    return raw


@njit(cache=True)
def _group_moments(rng, r, n_pairs, n_single, pair_limit, pair_magic, pair_table, single_limit, single_magic, columns):
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
        raw = _table_draws(rng, n_pairs * r, pair_limit)
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
        raw = _table_draws(rng, n_single * r, single_limit)
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
    rng,
    first_row,
    stop_row,
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
    """Rows ``first_row``..``stop_row - 1`` of the (len(grid) + 1, n_resamples) bootstrapped d: one row per
    size of ``grid``, then the full size (``full_x`` / ``full_y`` draws); rows in order draw what one call of
    all rows draws. The loop of ``bootstrap.bootstrap_se`` for the iid and paired
    designs: the same blocks of resamples (``block_elements // width`` each), each group's draws in
    the same order. A group: limits / magics (pairs, singles) of its two ``TableIntegers``,
    ``pair_table`` (m * m, C + 1; a 1-row dummy when m * m > 4096) and ``columns`` (C, m). iid: group
    x then group y, one column each; ``paired``: group x alone, two columns (its X and Y members).
    """
    out = np.empty((stop_row - first_row, n_resamples))
    x_pairs_possible = x_pair_table.shape[0] > 1
    y_pairs_possible = y_pair_table.shape[0] > 1
    for row in range(first_row, stop_row):
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
                rng, r, x_pairs, x_single, x_limits[0], x_magics[0], x_pair_table, x_limits[1], x_magics[1], x_columns
            )
            if paired:
                d = _effect_sizes(x_sums[:, 0], nx, x_sums[:, 1], nx, x_sums[:, 2])
            else:
                y_pairs, y_single = (ny // 2, ny % 2) if y_pairs_possible else (0, ny)
                y_sums = _group_moments(
                    rng,
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
            out[row - first_row, start : start + r] = d
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
) -> np.ndarray:
    """(len(grid) + 1, n_resamples) bootstrapped d, bit-identical to ``bootstrap_se``'s numpy loop from
    the same ``rng``: iid when ``y_group`` is given (the full size: each group's own), else paired
    (``x_group`` holds both members of each pair; the full size is every pair)."""
    paired = y_group is None
    x_args = _group_arguments(x_group)
    y_args = x_args if paired else _group_arguments(y_group)
    full_x, full_y = x_group.m, (x_group if paired else y_group).m
    grid = np.asarray(grid, dtype=np.int64)
    widths = [2 * int(n) for n in grid] + [int(full_x) + int(full_y)]
    rows, first = [], 0
    while first < len(widths):  # calls of about CALL_STEPS draws (at least one row each), in row order
        stop, steps = first, 0
        while stop < len(widths) and (stop == first or steps + widths[stop] * n_resamples <= CALL_STEPS):
            steps += widths[stop] * n_resamples
            stop += 1
        rows.append(
            _resampled_effect_sizes(
                rng,
                first,
                stop,
                grid,
                int(full_x),
                int(full_y),
                int(n_resamples),
                int(block_elements),
                paired,
                *x_args,
                *y_args,
            )
        )
        first = stop
    return np.concatenate(rows)

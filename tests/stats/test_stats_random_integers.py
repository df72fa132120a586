"""UniformIntegers.draw(): exactly uniform on [0, high) (chi-square), per-row ranges, reproducible."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from speechbias.stats.random_integers import MAX_HIGH_16BIT, UniformIntegers


@pytest.mark.parametrize("high", [1, 2, 3, 7, 120, 2731, MAX_HIGH_16BIT])
def test_values_are_uniform_on_the_range(high):
    n = max(200_000, 150 * high)
    values = UniformIntegers().draw(np.random.default_rng(high), high, (n,))
    assert values.dtype == np.uint16
    assert values.min() >= 0 and values.max() < high
    counts = np.bincount(values, minlength=high)
    if high > 1:
        assert stats.chisquare(counts).pvalue > 1e-4


def test_rejection_removes_the_multiply_shift_bias():
    # 2**16 = 26 * 2500 + 536: plain multiply-shift makes 536 values 1/26 more likely than the
    # other 1964. With 3e6 draws a chi-square test sees that (shown on the biased map), so it
    # would also see it in UniformIntegers.draw if the rejection step were missing.
    high, n = 2500, 3_000_000
    raw = np.random.default_rng(0).integers(0, 1 << 16, n, dtype=np.uint32)
    biased = (raw * high) >> 16
    assert stats.chisquare(np.bincount(biased, minlength=high)).pvalue < 1e-6
    values = UniformIntegers().draw(np.random.default_rng(1), high, (n,))
    assert stats.chisquare(np.bincount(values, minlength=high)).pvalue > 1e-4


def test_one_range_per_row():
    highs = np.array([1, 2, 5, 60, 61, 120])[:, None]
    drawer = UniformIntegers()
    rng = np.random.default_rng(1)
    values = np.concatenate([drawer.draw(rng, highs, (6, 5_000)) for _ in range(6)], axis=1)
    for row, high in enumerate(highs[:, 0]):
        counts = np.bincount(values[row], minlength=high)
        assert counts.size == high  # nothing at or above the row's range
        if high > 1:
            assert stats.chisquare(counts).pvalue > 1e-4


def test_large_ranges_fall_back_to_generator_integers():
    values = UniformIntegers().draw(np.random.default_rng(2), 100_000, (50_000,))
    assert values.dtype == np.int64
    assert values.min() >= 0 and values.max() < 100_000
    assert abs(values.mean() - 49_999.5) < 5 * 28_868 / np.sqrt(50_000)


def test_seeded_draws_are_reproducible_and_reuse_is_safe():
    drawer = UniformIntegers()
    a = drawer.draw(np.random.default_rng(3), 97, (40, 30))
    big = drawer.draw(np.random.default_rng(4), 97, (400, 30))  # grows the workspace
    b = drawer.draw(np.random.default_rng(3), 97, (40, 30))
    np.testing.assert_array_equal(a, b)
    assert not np.shares_memory(a, b) and not np.shares_memory(big, b)


@pytest.mark.parametrize("high", [0, -3, [2, 0]])
def test_bad_range_raises(high):
    with pytest.raises(ValueError, match="high: every range must be >= 1"):
        UniformIntegers().draw(np.random.default_rng(0), high, (2,))


@pytest.mark.parametrize("high", [1, 3, 60, 2500, 3600, 1 << 16])
def test_table_integers_map_every_value_the_same_number_of_times(high):
    from speechbias.stats.random_integers import TableIntegers

    drawer = TableIntegers(high)
    # The accepted 16-bit values, counted by what they map to: each result from exactly 2**16 // high.
    mapped = drawer.table[: drawer.limit]
    assert np.array_equal(np.bincount(mapped, minlength=high), np.full(high, (1 << 16) // high))
    values = drawer.draw(np.random.default_rng(high), (max(200_000, 50 * high),))
    assert values.max() < high
    if 1 < high <= 3600:
        assert stats.chisquare(np.bincount(values, minlength=high)).pvalue > 1e-4


def test_table_integers_redraw_the_rejected_values():
    # 2**16 = 26 * 2500 + 536: without the redraw the results 0..20 would come 1/26 more often (536 / 26 = 20.6).
    from speechbias.stats.random_integers import TableIntegers

    high, n = 2500, 3_000_000
    values = TableIntegers(high).draw(np.random.default_rng(3), (n,))
    assert stats.chisquare(np.bincount(values, minlength=high)).pvalue > 1e-4
    first = TableIntegers(high).draw(np.random.default_rng(4), (1000,))
    assert np.array_equal(first, TableIntegers(high).draw(np.random.default_rng(4), (1000,)))

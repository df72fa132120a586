"""Exact uniform random integers in ``[0, high)`` from few random bits, with reusable buffers.

The permutation test and the bootstrap draw hundreds of millions of small indices (ranges of at
most a few thousand). ``Generator.integers`` spends a 32- or 64-bit draw and a function call per
value. Here four 16-bit values are cut from each raw 64-bit PCG64 output and mapped to
``[0, high)`` with Lemire's multiply-shift method; its rare biased cases (probability below
high / 2**16) are rejected and redrawn, so every value is exactly uniform. Work buffers are kept
between calls: re-allocating megabyte temporaries on every block made glibc hand pages back to
the OS and fault them in again, which cost more than the arithmetic. benchmarks/stats_bench.py
measures this against ``Generator.integers`` (4-7x faster on the busy 2-core development
machine). Ranges above ``MAX_HIGH_16BIT`` fall back to ``Generator.integers``. Every path
consumes only ``rng``, so a seed reproduces every draw.
"""

from __future__ import annotations

import numpy as np

# Largest range served from 16-bit draws; keeps the rejection rate below high / 2**16 <= 6.25 %.
MAX_HIGH_16BIT = 4096
_LOW16 = np.uint32(0xFFFF)


class UniformIntegers:
    """Draws blocks of independent uniform integers; reuse one instance for many blocks."""

    def __init__(self) -> None:
        self._product = np.empty(0, dtype=np.uint32)
        self._low = np.empty(0, dtype=np.uint32)
        self._bad = np.empty(0, dtype=bool)

    def _workspace(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._product.size < n:
            self._product = np.empty(n, dtype=np.uint32)
            self._low = np.empty(n, dtype=np.uint32)
            self._bad = np.empty(n, dtype=bool)
        return self._product[:n], self._low[:n], self._bad[:n]

    def draw(self, rng: np.random.Generator, high, shape: tuple[int, ...]) -> np.ndarray:
        """Integers in ``[0, high)`` of the given ``shape``; ``high`` is an int >= 1 or an integer
        array broadcastable to ``shape`` (e.g. one range per row). Returns a new array: uint16 when
        every range is at most ``MAX_HIGH_16BIT``, else int64."""
        high_arr = np.asarray(high)
        if high_arr.size == 0 or np.any(high_arr < 1):
            raise ValueError(f"high: every range must be >= 1, got {high!r}")
        if int(high_arr.max()) > MAX_HIGH_16BIT:
            return rng.integers(0, high_arr.astype(np.int64), size=shape)
        n = int(np.prod(shape, dtype=np.int64))
        high32 = high_arr.astype(np.uint32)
        # Lemire: x * high = j * 2**16 + low with x uniform 16-bit; reject when low < 2**16 mod high.
        reject_below = (np.uint32(1 << 16) - high32) % high32
        values = _raw_uint16(rng, n).reshape(shape)
        product, low, bad = (buf.reshape(shape) for buf in self._workspace(n))
        np.multiply(values, high32, out=product)
        np.bitwise_and(product, _LOW16, out=low)
        np.less(low, reject_below, out=bad)
        if bad.any():
            flat = product.reshape(-1)
            todo = np.flatnonzero(bad)
            high_b = np.broadcast_to(high32, shape)
            reject_b = np.broadcast_to(reject_below, shape)
            while todo.size:
                redraw = np.multiply(_raw_uint16(rng, todo.size), high_b.flat[todo], dtype=np.uint32)
                ok = (redraw & _LOW16) >= reject_b.flat[todo]
                flat[todo[ok]] = redraw[ok]
                todo = todo[~ok]
        np.right_shift(product, 16, out=values, casting="unsafe")
        return values


def _raw_uint16(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.bit_generator.random_raw((n + 3) // 4).view(np.uint16)[:n]


class TableIntegers:
    """Exact uniform integers in ``[0, high)`` for one fixed ``high <= 2**16``: each raw 16-bit value v
    below ``limit = (2**16 // high) * high`` maps to ``v // (2**16 // high)`` through a 128 KiB uint16
    table (every result from exactly 2**16 // high values of v); values at or above ``limit``
    (probability below high / 2**16) are redrawn. One table look-up per value instead of the
    multiply-shift passes of :class:`UniformIntegers` (which serves one range per row); measured in
    benchmarks/stats_bench.py. Consumes only ``rng``'s raw output, so a seed reproduces every draw.
    """

    def __init__(self, high: int):
        high = int(high)
        if not 1 <= high <= 1 << 16:
            raise ValueError(f"high: must be in [1, 65536], got {high}")
        repeats = (1 << 16) // high
        self.high = high
        self.repeats = repeats  # raw values per result
        self.limit = repeats * high  # raw 16-bit values at or above it are redrawn
        self.table = np.minimum(np.arange(1 << 16) // repeats, high - 1).astype(np.uint16)

    def draw(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        """uint16 array of ``shape`` with independent uniform values in ``[0, high)``."""
        n = int(np.prod(shape, dtype=np.int64))
        raw = _raw_uint16(rng, n)
        if self.limit < 1 << 16:
            todo = np.flatnonzero(raw >= self.limit)
            while todo.size:
                raw[todo] = _raw_uint16(rng, todo.size)
                todo = todo[raw[todo] >= self.limit]
        return self.table.take(raw).reshape(shape)

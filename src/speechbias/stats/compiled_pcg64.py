"""numpy's PCG64 bit generator inside numba-compiled kernels: the same 64-bit words, in the same order.

The compiled statistics kernels (:mod:`speechbias.stats.compiled_kernels`) draw hundreds of
millions of random words per bias test. Fetching them through ``Generator.bit_generator.random_raw``
costs a Python call and a memory round trip per block (2.4 ns per word on the development machine,
as much as the rest of the permutation test); stepping the generator in registers inside the kernel
costs a fraction of that. So the kernels take the generator's 128-bit state out of the numpy
``Generator`` (:func:`read_state`), step it themselves (:func:`next_word`: PCG-XSL-RR 128/64, the
algorithm of ``numpy.random.PCG64``), and hand the advanced state back (:func:`write_state`). The
words are bit-identical to ``random_raw`` (tests/stats/test_stats_compiled_kernels.py checks it
against numpy itself), so a seed gives the same draws on either path and on every machine: the
arithmetic is integer only.

State layout: ``uint64[4]`` = (state high, state low, increment high, increment low).
Importing this module imports numba (~0.3 s): callers import it only when the work is large.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

# numpy/random/src/pcg64/pcg64.h: PCG_DEFAULT_MULTIPLIER_HIGH, PCG_DEFAULT_MULTIPLIER_LOW
_MULTIPLIER = (2549297995355413924 << 64) | 4865540595714422341
_MASK64 = (1 << 64) - 1


def _affine_intrinsic(multiplier: int, offset_from_increment):
    """An intrinsic (state_hi, state_lo, inc_hi, inc_lo) -> (high, low) of
    (state * ``multiplier`` + increment * ``offset_from_increment``) mod 2**128, in native i128
    arithmetic (numba has no 128-bit integer type; LLVM lowers a product to three 64-bit multiplies)."""

    @intrinsic
    def affine(typingctx, state_hi, state_lo, inc_hi, inc_lo):
        signature = types.UniTuple(types.uint64, 2)(types.uint64, types.uint64, types.uint64, types.uint64)

        def codegen(context, builder, sig, args):
            i128, i64 = ir.IntType(128), ir.IntType(64)
            shift = ir.Constant(i128, 64)

            def join(high, low):
                return builder.or_(builder.shl(builder.zext(high, i128), shift), builder.zext(low, i128))

            state = join(args[0], args[1])
            increment = join(args[2], args[3])
            if offset_from_increment != 1:
                increment = builder.mul(increment, ir.Constant(i128, offset_from_increment))
            new = builder.add(builder.mul(state, ir.Constant(i128, multiplier)), increment)
            return context.make_tuple(
                builder, sig.return_type, [builder.trunc(builder.lshr(new, shift), i64), builder.trunc(new, i64)]
            )

        return signature, codegen

    return affine


# One LCG step: s' = a s + c. Two steps at once: s'' = a^2 s + (a + 1) c, computed from s in parallel
# with s' (two independent multiplies instead of a chain of two: the step's latency bounds a chain).
_step_128 = _affine_intrinsic(_MULTIPLIER, 1)
_double_step_128 = _affine_intrinsic(_MULTIPLIER * _MULTIPLIER % (1 << 128), _MULTIPLIER + 1)


@intrinsic
def popcount64(typingctx, x):
    """Number of set bits of a uint64 (LLVM ctpop: one POPCNT instruction where the CPU has it)."""
    signature = types.uint64(types.uint64)

    def codegen(context, builder, sig, args):
        return builder.ctpop(args[0])

    return signature, codegen


@njit(inline="always")
def _output(high, low):
    """PCG's XSL-RR output of a 128-bit state: (high ^ low) rotated right by the top 6 bits of high."""
    value = high ^ low
    rotation = high >> np.uint64(58)
    return (value >> rotation) | (value << ((np.uint64(64) - rotation) & np.uint64(63)))


@njit(inline="always")
def next_word(state):
    """Advance ``state`` (uint64[4], in place) one step and return the next 64-bit output word."""
    high, low = _step_128(state[0], state[1], state[2], state[3])
    state[0] = high
    state[1] = low
    return _output(high, low)


@njit(inline="always")
def next_two_words(state):
    """The next two output words, advancing ``state`` by two steps: equal to two :func:`next_word`
    calls, about 1.7x faster (measured in benchmarks/stats_bench.py's rejection kernel)."""
    high1, low1 = _step_128(state[0], state[1], state[2], state[3])
    high2, low2 = _double_step_128(state[0], state[1], state[2], state[3])
    state[0] = high2
    state[1] = low2
    return _output(high1, low1), _output(high2, low2)


def read_state(rng: np.random.Generator) -> np.ndarray:
    """The PCG64 state of ``rng`` as uint64[4] (see the module docstring); other generators are refused."""
    bit_state = rng.bit_generator.state
    if bit_state.get("bit_generator") != "PCG64":
        raise TypeError(f"rng: the compiled kernels step PCG64 only, got {bit_state.get('bit_generator')!r}")
    state, increment = int(bit_state["state"]["state"]), int(bit_state["state"]["inc"])
    return np.array([state >> 64, state & _MASK64, increment >> 64, increment & _MASK64], dtype=np.uint64)


def write_state(rng: np.random.Generator, words: np.ndarray) -> None:
    """Store the advanced ``words`` (uint64[4]) back into ``rng``; its buffered 32-bit half-word is kept."""
    bit_state = rng.bit_generator.state
    high, low, inc_high, inc_low = (int(v) for v in words)
    bit_state["state"] = {"state": (high << 64) | low, "inc": (inc_high << 64) | inc_low}
    rng.bit_generator.state = bit_state


@njit(cache=True)
def raw_words(state, n, in_pairs=False):
    """``n`` output words, advancing ``state``: equal to ``random_raw(n)`` of the same generator
    (``in_pairs``: made two at a time by :func:`next_two_words`, the last one alone when n is odd)."""
    out = np.empty(n, dtype=np.uint64)
    i = 0
    if in_pairs:
        while i + 1 < n:
            out[i], out[i + 1] = next_two_words(state)
            i += 2
    while i < n:
        out[i] = next_word(state)
        i += 1
    return out

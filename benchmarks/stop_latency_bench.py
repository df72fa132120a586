"""How soon a stop signal is handled inside the compiled statistics kernels, and what splitting their calls
costs, measured side by side in one run (wall seconds; the machine's load shifts both alike).

A signal is handled when a compiled call returns to Python. ``compiled_kernels`` splits a permutation test into
calls of whole chunks and an SE curve into calls of whole rows, about ``CALL_STEPS`` steps each. For each
kernel: the work in one call (as before the split) vs. split, alternating, best of --rounds; printed: both
totals, their ratio (the split's overhead) and the longest single call of the split run (the latency bound).
Reduced sizes: a permutation test of 4,096 targets with 2 * 10^5 permutations (a 10^6 one is 5x longer, in
calls of the same length), an SE curve of 2,000 + 2,000 targets with 3,000 resamples.

Usage: python benchmarks/stop_latency_bench.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from speechbias.stats import compiled_kernels
from speechbias.stats.bootstrap import bootstrap_se
from speechbias.stats.permutation import _selection_chunk


class _Timed:
    """Wraps a compiled kernel: the duration of each call."""

    def __init__(self, kernel):
        self.kernel, self.calls = kernel, []

    def __call__(self, *args):
        start = time.perf_counter()
        out = self.kernel(*args)
        self.calls.append(time.perf_counter() - start)
        return out


def _selection(call_steps: int) -> list[float]:
    n, k = 4096, 2048
    centred = np.random.default_rng(0).normal(size=n)
    centred -= centred.mean()
    compiled_kernels.CALL_STEPS = call_steps
    timed = _Timed(compiled_kernels._count_by_selection)
    compiled_kernels._count_by_selection = timed
    try:
        compiled_kernels.count_by_selection(centred, k, 1.0, 200_000, _selection_chunk(n), np.random.default_rng(1))
    finally:
        compiled_kernels._count_by_selection = timed.kernel
    return timed.calls


def _bootstrap(call_steps: int) -> list[float]:
    rng = np.random.default_rng(2)
    s_x, s_y = rng.normal(0.1, 1, 2000), rng.normal(0, 1, 2000)
    compiled_kernels.CALL_STEPS = call_steps
    timed = _Timed(compiled_kernels._resampled_effect_sizes)
    compiled_kernels._resampled_effect_sizes = timed
    try:
        bootstrap_se(s_x=s_x, s_y=s_y, sizes=[250, 500, 1000, 1500, 2000], n_resamples=3_000, seed=3)
    finally:
        compiled_kernels._resampled_effect_sizes = timed.kernel
    return timed.calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ["SPEECHBIAS_STATS_KERNELS"] = "compiled"
    split = compiled_kernels.CALL_STEPS
    print(f"load average {os.getloadavg()[0]:.2f}")
    for name, run in (("permutation test, 4096 targets, 2e5 permutations", _selection), ("SE curve", _bootstrap)):
        run(split)  # compile / warm
        whole, parts = [], []
        for _ in range(args.rounds):
            whole.append(sum(run(1 << 62)))
            calls = run(split)
            parts.append((sum(calls), max(calls), len(calls)))
        best_whole = min(whole)
        total, longest, n_calls = min(parts)
        print(
            f"{name}: one call {best_whole:.3f} s | split {total:.3f} s in {n_calls} calls, longest call "
            f"{longest:.3f} s | split / one call = {total / best_whole:.3f}"
        )
    compiled_kernels.CALL_STEPS = split
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

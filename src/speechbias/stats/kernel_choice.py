"""Which kernels serve a statistics call: the numpy ones or the numba-compiled ones (same results, bit for bit).

Setting up the compiled kernels costs a fresh process about a second (importing numba ~0.3 s, then
loading the cached machine code ~0.5 s, most of it numba's own start-up; compiling it, the first time
on a machine, a few seconds more), which one paper-sized test (0.15-0.25 s of numpy permutations,
0.1-0.2 s of SE curve: benchmarks/stats_bench.py) never repays. ``SPEECHBIAS_STATS_KERNELS=auto``
(the default) decides per process:

* A caller that knows its whole workload declares it with :func:`plan_draws` (a sweep's job with the
  number of jobs its process runs: :class:`speechbias.callbacks.speat_results.SpeatResults`;
  benchmarks/stats_bench.py's workers likewise). A plan that reaches :data:`BREAK_EVEN_DRAWS` random
  draws (counting those already run) buys the compiled kernels at once: numba is set up then, and
  every later call runs compiled. A smaller plan changes nothing.
* Otherwise, the rent-or-buy rule: the numpy kernels until the process's statistics have asked for
  :data:`BREAK_EVEN_DRAWS` draws (counting the current call; about a second of numpy work), then the
  compiled ones: never more than about twice the better choice's time when the future is unknown.

So one evaluate.py run of one bias test stays on numpy (its plan is ~7e7 draws), and a process of
many tests (a multirun's jobs, a batch) runs compiled from its first test, ~2x faster than numpy
(benchmarks/stats_bench.py). ``numpy`` / ``compiled`` force one path (benchmarks and tests compare
the two side by side). The choice never changes a number: both paths draw the same random words and
add in the same order. When the compiled kernels cannot be set up (numba missing, or no writable
place for its cache), ``auto`` warns once and stays on numpy; ``compiled`` raises.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

ENVIRONMENT_VARIABLE = "SPEECHBIAS_STATS_KERNELS"
CHOICES = ("auto", "numpy", "compiled")
# Random draws of about one second of numpy kernels (5.5 ns per permutation-test word, 2.6 ns per
# bootstrap index on the 2-core development machine): one paper-sized permutation test draws ~2.8e7
# words, one SE curve ~3.8e7 indices.
BREAK_EVEN_DRAWS = 200_000_000

_numba_missing: str | None = None
_numpy_draws = 0  # draws this process has run on the numpy kernels under ``auto`` (BREAK_EVEN_DRAWS: bought)


def _choice() -> str:
    choice = os.environ.get(ENVIRONMENT_VARIABLE, "auto").strip().lower() or "auto"
    if choice not in CHOICES:
        raise ValueError(f"{ENVIRONMENT_VARIABLE}: must be one of {CHOICES}, got {choice!r}")
    return choice


def _buy(why: str) -> bool:
    """Under ``auto``: the compiled kernels from now on, set up here (once); False when they cannot be."""
    global _numba_missing, _numpy_draws
    _numpy_draws = BREAK_EVEN_DRAWS  # bought: every later call runs compiled too
    if _numba_missing is None:
        log.info("statistics: the compiled kernels serve this process from now on (%s)", why)
        try:  # numba itself, and a place to cache the compiled code (numba refuses cache=True without one)
            import speechbias.stats.compiled_kernels  # noqa: F401
        except Exception as error:  # noqa: BLE001 - any failure to set up numba means: stay on numpy
            _numba_missing = f"{type(error).__name__}: {error}"
            log.warning(
                "the compiled statistics kernels are unavailable (%s); the statistics run on the numpy "
                "kernels (same results, ~2x slower)",
                _numba_missing,
            )
        else:
            _numba_missing = ""
    return not _numba_missing


def plan_draws(n_draws: int) -> bool:
    """Declare that this process is about to run about ``n_draws`` random draws of statistics (the
    sum of the ``n_draws`` its calls will pass to :func:`use_compiled_kernels`; see
    ``permutation.permutation_draws`` and ``bootstrap.resample_draws``). Under ``auto``, a plan that
    reaches :data:`BREAK_EVEN_DRAWS` with the draws already run buys the compiled kernels now; a
    smaller one changes nothing. Returns whether the next calls run the compiled kernels."""
    choice = _choice()
    if choice != "auto":
        return choice == "compiled"
    if _numpy_draws + int(n_draws) < BREAK_EVEN_DRAWS:
        return False
    return _buy(f"{int(n_draws):.3g} random draws planned")


def use_compiled_kernels(n_draws: int) -> bool:
    """True when a call that draws ``n_draws`` random values should run the compiled kernels."""
    global _numpy_draws
    choice = _choice()
    if choice != "auto":
        return choice == "compiled"
    if _numpy_draws + n_draws < BREAK_EVEN_DRAWS:
        _numpy_draws += n_draws
        return False
    return _buy(f"{_numpy_draws + n_draws:.3g} random draws asked for")

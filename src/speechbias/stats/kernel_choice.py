"""Which kernels serve a statistics call: the numpy ones or the numba-compiled ones (same results, bit for bit).

Setting up the compiled kernels costs a fresh process about a second (importing numba ~0.3 s, then
loading the cached machine code; compiling it, the first time on a machine, a few seconds more),
which one paper-sized test (0.15 s of numpy permutations, 0.1 s of SE curve) never repays. So,
with ``SPEECHBIAS_STATS_KERNELS=auto`` (the default), a process runs the numpy kernels until its
statistics have asked for :data:`BREAK_EVEN_DRAWS` random draws (counting the current call; about
a second of numpy work), then the compiled ones: the rent-or-buy rule, never more than about twice
the better choice's time, and ~2x faster than numpy for the batches that matter (a process running
many tests: benchmarks/stats_bench.py). One evaluate.py run of one bias test stays on numpy.
``numpy`` / ``compiled`` force one path (benchmarks and tests compare the two side by side). The
choice never changes a number: both paths draw the same random words and add in the same order.
When the compiled kernels cannot be set up (numba missing, or no writable place for its cache),
``auto`` warns once and stays on numpy; ``compiled`` raises.
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
_numpy_draws = 0  # draws this process has run on the numpy kernels under ``auto``


def use_compiled_kernels(n_draws: int) -> bool:
    """True when a call that draws ``n_draws`` random values should run the compiled kernels."""
    global _numba_missing, _numpy_draws
    choice = os.environ.get(ENVIRONMENT_VARIABLE, "auto").strip().lower() or "auto"
    if choice not in CHOICES:
        raise ValueError(f"{ENVIRONMENT_VARIABLE}: must be one of {CHOICES}, got {choice!r}")
    if choice == "numpy":
        return False
    if choice == "compiled":
        return True
    if _numpy_draws + n_draws < BREAK_EVEN_DRAWS:
        _numpy_draws += n_draws
        return False
    _numpy_draws = BREAK_EVEN_DRAWS  # bought: every later call runs compiled too
    if _numba_missing is None:
        try:  # numba itself, and a place to cache the compiled code (numba refuses cache=True without one)
            import speechbias.stats.compiled_kernels  # noqa: F401
        except Exception as error:  # noqa: BLE001 - any failure to set up numba means: stay on numpy
            _numba_missing = f"{type(error).__name__}: {error}"
            log.warning("the compiled statistics kernels are unavailable (%s); the statistics run on the numpy "
                        "kernels (same results, ~2x slower)", _numba_missing)
        else:
            _numba_missing = ""
    return not _numba_missing

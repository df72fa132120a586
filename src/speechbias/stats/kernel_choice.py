"""Which kernels serve a statistics call: the numpy ones or the numba-compiled ones (same results, bit for bit).

``SPEECHBIAS_STATS_KERNELS`` (read at every call): ``auto`` (default) runs the compiled kernels for
calls that draw at least :data:`MIN_COMPILED_DRAWS` random values, where they repay importing numba
(~0.3 s in a fresh process), and the numpy kernels below that; ``numpy`` / ``compiled`` force one
path (benchmarks and tests compare the two side by side). When the compiled kernels cannot be set up
(numba missing, or no writable place for its cache), ``auto`` warns once and stays on numpy, whose
results are the same; ``compiled`` raises.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

ENVIRONMENT_VARIABLE = "SPEECHBIAS_STATS_KERNELS"
CHOICES = ("auto", "numpy", "compiled")
# One paper-sized permutation test (10^6 partitions of 60 + 60) draws ~2.8e7 random words, one SE
# curve ~3.8e7 indices; below 10^7 draws the numpy kernels take under ~30 ms.
MIN_COMPILED_DRAWS = 10_000_000

_numba_missing: str | None = None


def use_compiled_kernels(n_draws: int) -> bool:
    """True when a call that draws ``n_draws`` random values should run the compiled kernels."""
    global _numba_missing
    choice = os.environ.get(ENVIRONMENT_VARIABLE, "auto").strip().lower() or "auto"
    if choice not in CHOICES:
        raise ValueError(f"{ENVIRONMENT_VARIABLE}: must be one of {CHOICES}, got {choice!r}")
    if choice == "numpy" or (choice == "auto" and n_draws < MIN_COMPILED_DRAWS):
        return False
    if choice == "compiled":
        return True
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

"""Which kernels serve a statistics call: the numpy ones or the numba-compiled ones (same results, bit for bit).

The choice is made here, per call, from what the call knows: its kernel's estimated numpy time (from
the group sizes and the number of permutations or resamples; the dimensionality is spent before, on
the associations, the same on either path) and how much of it the compiled kernel saves, and from
whether the compiled kernels are already set up in this process. No caller declares a workload.

Setting the compiled kernels up costs a process :data:`SET_UP_SECONDS` (importing numba, then loading
its cached machine code; measured warm on the 2-core development machine in a process that has imported
hydra, omegaconf, numpy and speechbias.stats, as evaluate.py has before its first statistics: 0.13-0.15 +
0.35-0.42 CPU-s, 0.48-0.56 in all, median 0.50, load ~6, issue 41; 0.3 + 0.4 before; the first process on a
machine also compiles them, ~8 CPU-s, once). ``SPEECHBIAS_STATS_KERNELS=auto``
(the default) decides with the rent-or-buy rule:

* set up already: compiled (the set-up is paid; the compiled kernel is faster);
* the call's own saving (its numpy time minus the compiled time) repays the set-up: buy now
  (e.g. a permutation test of 1000 + 1000 targets: 16 CPU-s of numpy, 4 compiled);
* otherwise numpy, adding the saving forgone to the process's tally, and buy once the tally reaches
  the set-up cost: never more than about twice the better choice's time when the future is unknown.

So one evaluate.py run of one paper-sized test stays on numpy and never imports numba, and a process
of many tests (a multirun's jobs, a batch) turns compiled after a few tests. ``numpy`` / ``compiled``
force one path (benchmarks and tests compare the two side by side). The choice never changes a
number. When the compiled kernels cannot be set up (numba missing, or no writable place for its
cache), ``auto`` warns once and stays on numpy; ``compiled`` raises.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys

log = logging.getLogger(__name__)

ENVIRONMENT_VARIABLE = "SPEECHBIAS_STATS_KERNELS"
CHOICES = ("auto", "numpy", "compiled")
# CPU-s to set the compiled kernels up in a process that has not imported numba (import 0.14, loading the
# cached kernels of a paper test's permutation test and SE curve 0.37), and in one that has (something else
# imported numba: loading only). Measured: see the module docstring.
SET_UP_SECONDS = 0.5
SET_UP_SECONDS_NUMBA_IMPORTED = 0.37

_COMPILED_MODULE = "speechbias.stats.compiled_kernels"
_numba_missing: str | None = None  # None: not tried; "": set up; else why it failed
_forgone = 0.0  # CPU-s the compiled kernels would have saved this process so far under ``auto``


def _set_up(why: str) -> bool:
    """The compiled kernels imported (once); False when they cannot be (warned once)."""
    global _numba_missing
    if _numba_missing is None:
        log.info("statistics: the compiled kernels serve this process from now on (%s)", why)
        try:  # numba itself, and a place to cache the compiled code (numba refuses cache=True without one)
            importlib.import_module(_COMPILED_MODULE)
        except Exception as error:  # noqa: BLE001 - any failure to set up numba means: stay on numpy
            _numba_missing = f"{type(error).__name__}: {error}"
            log.warning(
                "the compiled statistics kernels are unavailable (%s); the statistics run on the numpy "
                "kernels (same results, slower)",
                _numba_missing,
            )
        else:
            _numba_missing = ""
    return not _numba_missing


def set_up_seconds() -> float:
    """CPU-s this process would spend setting the compiled kernels up now (0 once they are)."""
    if _COMPILED_MODULE in sys.modules:
        return 0.0
    return SET_UP_SECONDS_NUMBA_IMPORTED if "numba" in sys.modules else SET_UP_SECONDS


def use_compiled_kernels(numpy_seconds: float, speed_up: float) -> bool:
    """True when a call whose numpy kernel would take about ``numpy_seconds`` CPU-s, and whose compiled
    kernel is ``speed_up`` times faster, should run the compiled kernel (see the module docstring)."""
    global _forgone
    choice = os.environ.get(ENVIRONMENT_VARIABLE, "auto").strip().lower() or "auto"
    if choice not in CHOICES:
        raise ValueError(f"{ENVIRONMENT_VARIABLE}: must be one of {CHOICES}, got {choice!r}")
    if choice != "auto":
        return choice == "compiled"  # compiled: the caller's import raises when numba is unavailable
    if _numba_missing:
        return False
    if _COMPILED_MODULE in sys.modules:  # set up already
        return True
    set_up = set_up_seconds()
    saving = float(numpy_seconds) * (1.0 - 1.0 / float(speed_up))
    if saving >= set_up:
        return _set_up(f"one call saves {saving:.2g} CPU-s")
    _forgone += saving
    if _forgone >= set_up:
        return _set_up(f"{_forgone:.2g} CPU-s of savings forgone so far")
    return False

"""The demo caveat: one sentence, written on every console summary, report.md and figure of a demo run.

Runs on the shipped synthetic data (espeak-ng voices, made-up labels) and tiny random or weight-free
models check the plumbing only. Every task that can run on such data says so in the same words.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from speechbias.run_context import SWEEP_ID_ENV

DEMO_CAVEAT = (
    "DEMO: synthetic stimuli (espeak-ng voices) and tiny or weight-free models - "
    "these numbers check the plumbing and are not findings about any model or group."
)


def demo_data_caveat(model: str) -> str:
    """The caveat of a real pre-trained model run on the shipped synthetic data (e.g. ``python train.py
    upstream=hubert_xl``, whose defaults train on the demo valence set and test the demo bias tests)."""
    return (
        f"DEMO DATA: {model} ran on the shipped synthetic stimuli (espeak-ng voices) - these numbers check the "
        "plumbing and are not findings about the model or any group; train on MESS with the paper's tests "
        "(ser_data=mess bias_tests=[...], README) for findings."
    )


def is_demo_test(test: str) -> bool:
    """The shipped synthetic demo tests (``demo_voice``, ``demo_accent``, any ``demo_*``)."""
    return str(test).startswith("demo")


def demo_tests_caveat(tests) -> str:
    """The caveat of a sweep that mixes the synthetic demo tests with real ones: it names the demo tests."""
    names = ", ".join(sorted({str(t) for t in tests if is_demo_test(t)}))
    return (
        f"DEMO TESTS ({names}): synthetic stimuli (espeak-ng voices) - their numbers check the plumbing and "
        "are not findings about any model or group."
    )


def markdown_caveat(caveat: str = DEMO_CAVEAT) -> str:
    """The caveat as a bold report.md paragraph."""
    return f"**{caveat}**"


def warn_once_per_sweep(log: logging.Logger, caveat: str, run_dir: str | Path) -> None:
    """Log ``caveat`` as a warning on the console of a single run, and once for a whole multirun: the first
    job of the sweep to get here creates the empty marker ``<sweep dir>/.caveat_shown-<sweep id>`` (an
    exclusive create, so parallel workers and SLURM jobs agree; no content, so not through atomic_file,
    whose rename would let two jobs both win), the others log it at debug level (their report.md and
    figures still carry it)."""
    sweep_id = os.environ.get(SWEEP_ID_ENV)
    if sweep_id:
        try:
            os.close(os.open(Path(run_dir).parent / f".caveat_shown-{sweep_id}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            log.debug(caveat)
            return
        except OSError:
            pass  # no marker possible: say it
    log.warning(caveat)

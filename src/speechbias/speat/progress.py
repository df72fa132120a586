"""The progress of a SpEAT run's statistics on a terminal: the permutation test, d at every layer and the
bootstrap SE curve (up to minutes each at the paper's 10^6 permutations and 10^4 resamples under load).

One line per step, drawn by rich on stderr and removed when the step ends; nothing at all when stderr is
not a terminal (a log or a file gets no bar; rich is then not even imported, ~0.02 CPU-s of a warm job, nor
a console built per step, ~0.3 ms each of a list job's pairs). The statistics themselves stay pure functions: a step is
timed from outside them, and a loop (d at every layer) advances its bar per item.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def surely_no_terminal() -> bool:
    """Whether rich's ``Console(stderr=True).is_terminal`` is surely False: stderr is no terminal and
    neither ``TTY_COMPATIBLE`` nor ``FORCE_COLOR`` (rich's overrides) is set. False where rich must decide."""
    if "TTY_COMPATIBLE" in os.environ or "FORCE_COLOR" in os.environ:
        return False
    isatty = getattr(sys.stderr, "isatty", None)
    try:
        return isatty is None or not isatty()
    except ValueError:  # a closed stream: rich decides
        return False


@contextmanager
def step(description: str, total: int | None = None) -> Iterator[Callable[[], None]]:
    """A transient progress line for ``description`` (a spinner, or a bar of ``total`` items); yields the
    function that advances it by one item."""
    if surely_no_terminal():
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    columns = [SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn()]
    if total is not None:
        columns[2:2] = [BarColumn(), MofNCompleteColumn()]
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task(description, total=total)
        yield lambda: bar.advance(task)

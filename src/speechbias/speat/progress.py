"""The progress of a SpEAT run's statistics on a terminal: the permutation test, d at every layer and the
bootstrap SE curve (up to minutes each at the paper's 10^6 permutations and 10^4 resamples under load).

One line per step, drawn by rich on stderr and removed when the step ends; nothing at all when stderr is
not a terminal (a log or a file gets no bar). The statistics themselves stay pure functions: a step is
timed from outside them, and a loop (d at every layer) advances its bar per item.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn


@contextmanager
def step(description: str, total: int | None = None) -> Iterator[Callable[[], None]]:
    """A transient progress line for ``description`` (a spinner, or a bar of ``total`` items); yields the
    function that advances it by one item."""
    console = Console(stderr=True)
    columns = [SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn()]
    if total is not None:
        columns[2:2] = [BarColumn(), MofNCompleteColumn()]
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task(description, total=total)
        yield lambda: bar.advance(task)

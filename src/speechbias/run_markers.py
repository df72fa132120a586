"""Whether a run folder already holds a finished run: the one skip-if-finished check of every task.

Every task writes its marker files last, so their presence means the run completed; sweeps rerun
into the same folders and skip finished jobs this way. Light on purpose (no pandas, torch): the entry
points call it before anything heavy is imported, so a resumed sweep skips in milliseconds.
"""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)

# the files of a finished run per task (a task writes the first one last); results.json unless listed
FINISHED_MARKERS = {"spoken_stereoset": ("summary.json", "results.csv")}
# tasks that always run (the sweep report is rewritten from whatever the sweep holds now)
NEVER_SKIPPED = {"report"}


def finished_marker(task: str, output_dir: str | Path, force: bool = False) -> Path | None:
    """The first marker file of a finished ``task`` run in ``output_dir`` when all its markers exist
    and ``force`` is off, else None (the check a task object makes with its own name and folder)."""
    if task in NEVER_SKIPPED or force:
        return None
    markers = [Path(output_dir) / m for m in FINISHED_MARKERS.get(task, ("results.json",))]
    if not all(m.is_file() for m in markers):
        return None
    log.info("results already exist in %s; skipping (force=true reruns)", output_dir)
    return markers[0]


def finished_results(cfg: DictConfig, output_dir: Path) -> Path | None:
    """:func:`finished_marker` of the task named in ``cfg`` (``task.name``, ``force``)."""
    return finished_marker(str(OmegaConf.select(cfg, "task.name", default="")), output_dir,
                           bool(cfg.get("force", False)))

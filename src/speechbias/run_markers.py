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


def finished_results(cfg: DictConfig, output_dir: Path) -> Path | None:
    """The run's first marker file when all its task's markers exist and ``force`` is off, else None."""
    task = str(OmegaConf.select(cfg, "task.name", default=""))
    if task in NEVER_SKIPPED or cfg.get("force", False):
        return None
    markers = [Path(output_dir) / m for m in FINISHED_MARKERS.get(task, ("results.json",))]
    if not all(m.is_file() for m in markers):
        return None
    log.info("results already exist in %s; skipping (force=true reruns)", output_dir)
    return markers[0]

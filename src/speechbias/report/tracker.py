"""The experiment tracker of a run (``conf/logger/*.yaml``): W&B, Lightning's CSV logger, or none.

A task hands its :class:`~speechbias.report.run_writer.RunWriter` to :meth:`Tracker.publish` once the
run's files are written: with ``kind: wandb`` that starts one W&B run (grouped by the sweep folder),
logs everything the writer recorded (metrics, tables, figures) and finishes it. ``kind: csv`` gives
train.py a Lightning ``CSVLogger`` (``metrics.csv`` in the run folder); ``kind: none`` logs nothing.
The results files are the same whichever tracker is chosen. A W&B failure never fails the job
(:mod:`speechbias.report.wandb_run`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from speechbias.report import wandb_run
from speechbias.report.run_writer import RunWriter, launching_process

log = logging.getLogger(__name__)

KINDS = ("wandb", "csv", "none")


class Tracker:
    """Where a run's metrics, tables and figures are logged besides its folder.

    Args:
        kind: ``wandb`` | ``csv`` | ``none``.
        project / entity / mode / group / tags: the W&B run's (``mode``: auto | online | offline |
            disabled; ``group`` defaults to the name of the run folder's parent, i.e. the sweep).
        files_dir: W&B's cache and data folders (its service log, artifact staging), instead of
            ~/.cache/wandb and ~/.local/share/wandb, unless WANDB_CACHE_DIR / WANDB_DATA_DIR are set.
    """

    def __init__(
        self,
        kind: str = "none",
        project: str = "speechbias",
        entity: str | None = None,
        mode: str = "auto",
        group: str | None = None,
        tags: Sequence[str] = (),
        files_dir: str | Path | None = None,
    ):
        if kind not in KINDS:
            raise ValueError(f"logger.kind must be one of {KINDS}, got {kind!r}")
        self.kind = kind
        self.project = project
        self.entity = entity
        self.mode = mode
        self.group = group
        self.tags = list(tags or [])
        self.files_dir = files_dir
        self._live = None  # the W&B run a Lightning Trainer logs to (lightning_logger), until publish
        self._live_logger = None  # its Lightning logger (LiveRunLogger)

    def __repr__(self) -> str:
        return f"Tracker(kind={self.kind!r})"

    def __getstate__(self) -> dict:
        # a live W&B run (and its logger) stays in the process that started it
        return {**self.__dict__, "_live": None, "_live_logger": None}

    def lightning_logger(self, output_dir: str | Path, job_type: str | None = None) -> dict:
        """Keyword arguments for a Lightning Trainer: ``{"logger": CSVLogger}`` for ``kind: csv``
        (every logged metric in ``<run>/metrics.csv``); for ``kind: wandb``, in the launching process,
        ``{"logger": LiveRunLogger}`` on a W&B run started now, so that the losses reach W&B while the
        model trains (:mod:`~speechbias.report.live_logger`); :meth:`publish` then logs the run's files into the same run. The run's id is kept
        in the job folder (:func:`~speechbias.report.wandb_run.job_run_id`): a resumed or requeued job
        continues it. Else, or when W&B cannot start, ``{}``."""
        if self.kind == "csv":
            from pytorch_lightning.loggers import CSVLogger

            return {"logger": CSVLogger(save_dir=str(output_dir), name="", version="")}
        if self.kind != "wandb" or not launching_process() or wandb_run.resolve_mode(self.mode) == "disabled":
            return {}
        run = wandb_run.start_run(
            project=self.project,
            entity=self.entity,
            group=self.group or Path(output_dir).parent.name,
            tags=self.tags,
            mode=self.mode,
            save_dir=output_dir,
            files_dir=self.files_dir,
            run_id=wandb_run.job_run_id(output_dir),
            job_type=job_type,
        )
        if run is None:
            return {}
        from speechbias.report.live_logger import LiveRunLogger

        self._live, self._live_logger = run, LiveRunLogger(run)
        return {"logger": self._live_logger}

    def publish(
        self,
        writer: RunWriter,
        *,
        job_type: str,
        name: str,
        tags: Sequence[str] = (),
        config: dict | None = None,
        group: str | None = None,
        on_run: Callable | None = None,
    ) -> None:
        """Log what ``writer`` recorded to W&B (``kind: wandb``; otherwise nothing).

        ``config``: the run's resolved config (the W&B run config). ``group``: the W&B group when
        ``logger.group`` is unset (default: the run folder's parent folder name). ``on_run(run)`` is
        called with the live W&B run before it finishes (the sweep report builds its W&B report there).
        """
        if self.kind != "wandb":
            return
        # the training's history reached the live run only when its logger logged in this process (not
        # under ddp_spawn, whose workers train with a copy that holds no run): else it is replayed
        watched = self._live is not None and getattr(self._live_logger, "logged", False)
        if self._live is not None:  # the run the Trainer logged its losses to: named and completed here
            run, self._live, self._live_logger = self._live, None, None
            wandb_run.describe(run, name=name, tags=[*tags, *self.tags], config=config)
        else:
            run = wandb_run.start_run(
                project=self.project,
                entity=self.entity,
                name=name,
                config=config,
                group=self.group or group or writer.output_dir.parent.name,
                tags=[*tags, *self.tags],
                job_type=job_type,
                mode=self.mode,
                save_dir=writer.output_dir,
                files_dir=self.files_dir,
            )
        if run is None:
            return
        try:
            log_recorded(run, writer, history=not watched)
            if on_run is not None:
                on_run(run)
        finally:
            wandb_run.finish(run)


def log_recorded(run, writer: RunWriter, history: bool = True) -> None:
    """Log a writer's recorded metrics, tables (read back from their CSV) and figures to ``run``.
    ``history=False``: leave out the training-history points (the dev curve), which ``run`` got live."""
    for entry in writer.tracker_log():
        kind = entry.get("kind")
        if kind == "metrics":
            if history or not entry.get("history"):
                wandb_run.log_metrics(run, entry["values"], step=entry.get("step"))
            continue
        path = writer.path(entry["file"])
        if not path.is_file():
            log.warning("%s: recorded for the tracker but missing; not logged", path)
        elif kind == "table":
            table = recorded_table(path)
            if table.columns.empty:  # e.g. the results of an empty sweep
                log.info("%s: empty table, not logged to W&B", path)
                continue
            wandb_run.log_table(run, entry["key"], table)
        elif kind == "image":
            wandb_run.log_images(run, {entry["key"]: path})


def recorded_table(csv_path: Path):
    """A table the writer wrote, with its values' JSON types (strings such as ``"0.0"`` stay strings):
    from ``<stem>.json`` (a list of row records) beside the CSV, else from the CSV."""
    import pandas as pd

    records = csv_path.with_suffix(".json")
    if records.is_file():
        rows = json.loads(records.read_text(encoding="utf-8"))
        return pd.DataFrame.from_records(rows) if rows else pd.DataFrame()
    try:
        return pd.read_csv(csv_path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()

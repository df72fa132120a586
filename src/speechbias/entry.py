"""Shared body of the entry points: check the config, seed, instantiate and run a task, record how it went.

:func:`run_entry` is what ``evaluate.py`` and ``train.py`` run under ``@hydra.main``: it checks the
config before anything heavy is imported, records the job's status in its folder
(:mod:`speechbias.sweep_status`), prints a user input error as one line and exits 1 (inside a multirun
it records the failure and returns, so the other jobs run), and ends a single run with one line
saying where the results are (and the ``wandb sync`` command of an offline W&B run).
:func:`run_task` runs the task only (tests call it in-process).
"""

from __future__ import annotations

import logging
import os
import sys
import time
import traceback
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from speechbias.aggregation_configs import register_aggregation_configs
from speechbias.config_checks import check_config
from speechbias.project_paths import user_path
from speechbias.run_context import register_choice_resolver
from speechbias.run_markers import finished_results, record_run_digest
from speechbias.sweep_status import JobStatus, current_sweep_id
from speechbias.user_errors import (error_line, error_message, find_user_error, full_error_requested,
                                    log_traceback_to_files)

log = logging.getLogger("speechbias")

PROJECT_ROOT_RESOLVER = "speechbias.project_root"


def register_project_root(root: str | Path | None = None) -> None:
    """Register ``${speechbias.project_root:}``, the default of ``paths.root_dir``: ``root`` (the
    entry scripts' folder), or the current folder when none is given. Entry scripts call it before
    ``@hydra.main`` so that runs and sweeps find ``conf/``, the demo data and ``multirun/`` from any
    working directory."""
    value = str(Path(root).resolve()) if root is not None else None
    OmegaConf.register_new_resolver(PROJECT_ROOT_RESOLVER, lambda: value or os.getcwd(), replace=True)


register_project_root()
register_choice_resolver()
register_aggregation_configs()  # options of config group aggregation, before @hydra.main composes
# ${speechbias.user_path:<path>,<project root>}: a typed relative path, from the cwd when it exists there
OmegaConf.register_new_resolver("speechbias.user_path", lambda value, root: str(user_path(value, root)),
                                replace=True)


def job_trainer_config(trainer_cfg: DictConfig) -> DictConfig:
    """The trainer config to use in this job: under a Hydra multirun, ``strategy: ddp`` becomes ``ddp_spawn``.

    Plain ``ddp`` starts its extra processes by re-running the command line; inside a multirun
    that command line is the whole sweep (``-m ...``), so every child would start the sweep again.
    ``ddp_spawn`` starts workers with ``torch.multiprocessing`` and never re-reads the command line.
    """
    strategy = OmegaConf.select(trainer_cfg, "strategy", default=None)
    if not (isinstance(strategy, str) and strategy == "ddp" and hydra_multirun()):
        return trainer_cfg
    log.warning("trainer.strategy=ddp inside a Hydra multirun re-launches the whole sweep in every child "
                "process; using strategy=ddp_spawn for this job instead")
    cfg = OmegaConf.create(OmegaConf.to_container(trainer_cfg, resolve=False))
    cfg.strategy = "ddp_spawn"
    return cfg


def hydra_multirun() -> bool:
    """True inside a job of a Hydra multirun (``-m``)."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    except (ImportError, ValueError):
        return False


def job_overrides() -> list[str]:
    """This job's command-line overrides (empty outside Hydra)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    except ValueError:
        return []


def offline_wandb_runs(output_dir: Path, since: float) -> list[Path]:
    """Offline W&B run folders this run wrote below ``output_dir`` (to sync later)."""
    runs = [p for p in sorted(Path(output_dir).glob("wandb/offline-run-*")) if p.is_dir()]
    return [p for p in runs if p.stat().st_mtime >= since - 1]


def results_line(output_dir: Path, since: float) -> str:
    """``results in <folder>`` and, for each offline W&B run, ``; W&B offline: wandb sync <dir>``."""
    line = f"results in {output_dir}"
    for run in offline_wandb_runs(output_dir, since):
        line += f"; W&B offline: wandb sync {run}"
    return line


def run_entry(cfg: DictConfig) -> dict | None:
    """The body of the entry points (see the module docstring); returns the task's summary metrics
    ({} for a run that found its results), or None for a failed job of a multirun."""
    multirun = hydra_multirun()
    output_dir = Path(cfg.paths.output_dir)
    started = time.time()
    status = JobStatus("running", overrides=job_overrides(), sweep_id=current_sweep_id(), started=started)
    status.write(output_dir)
    try:
        check_config(cfg)
        skipped = finished_results(cfg, output_dir) is not None
        if skipped:  # the task would skip itself too; this way a resumed sweep skips without importing torch
            summary = {}
        else:
            summary = run_task(cfg)
    except Exception as exc:
        status.status, status.seconds = "failed", time.time() - started
        status.error = error_message(exc)
        log_traceback_to_files(exc)
        status.traceback = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        status.write(output_dir)
        if multirun:
            job = " ".join(status.overrides) or str(output_dir)
            print(status.traceback if full_error_requested() else f"job failed ({job}): {error_line(exc)}",
                  file=sys.stderr)
            return None
        if find_user_error(exc) is not None and not full_error_requested():
            print(error_line(exc), file=sys.stderr)
            sys.exit(1)
        raise
    status.status = "skipped" if skipped else "ok"
    status.seconds = time.time() - started
    status.write(output_dir)
    if not multirun:
        print(results_line(output_dir, started))
    return summary


def run_task(cfg: DictConfig) -> dict:
    """Build the task of ``cfg.task.run`` (its ``_target_`` receives the built collaborators its
    config names: upstream, bias tests, cache, writer, tracker, trainer factory) and run it with the
    resolved config (the tracker's record of the run); returns the task's summary metrics."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import pytorch_lightning as pl

    pl.seed_everything(int(cfg.get("seed", 0)), workers=True, verbose=False)
    output_dir = Path(cfg.paths.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(cfg, output_dir / "config.yaml", resolve=False)
    if "trainer" in cfg:
        cfg.trainer = job_trainer_config(cfg.trainer)
    task = hydra.utils.instantiate(cfg.task.run)
    if not callable(getattr(task, "run", None)):
        raise TypeError(f"task.run._target_ must build a task object with a run(config) method, got {task!r}")
    summary = task.run(config=resolved_config(cfg)) or {}
    record_run_digest(cfg, output_dir)  # the folder now holds this config's results
    return summary


def resolved_config(cfg: DictConfig) -> dict:
    """The job's config resolved, for the tracker. Hydra's own node is left out: a running job's config
    has none, and a config composed with ``return_hydra_config=True`` (tests) has one whose values only
    a running app fills in."""
    job = OmegaConf.masked_copy(cfg, [k for k in cfg.keys() if k != "hydra"]) if "hydra" in cfg else cfg
    return OmegaConf.to_container(job, resolve=True, throw_on_missing=False)

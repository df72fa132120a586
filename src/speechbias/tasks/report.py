"""Task ``report``: collect every run of a sweep and write the paper's tables and figures.

``python evaluate.py task=report sweep_dir=multirun/<date>/<time> [paper_results=<csv>]`` writes into
``<sweep_dir>/report/`` (results.csv/json/parquet, figures, report.md) and, with ``logger=wandb``, a
W&B summary run in the sweep's group (plus a W&B report when online with an account).
"""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from speechbias.report import collect, sweep_report, wandb_report, wandb_run
from speechbias.project_paths import user_path
from speechbias.report.paper_results import load_paper_results
from speechbias.run_context import start_logger_run
from speechbias.user_errors import ConfigError

log = logging.getLogger(__name__)


def _sweep_dirs(cfg: DictConfig) -> list[Path]:
    main = OmegaConf.select(cfg, "sweep_dir", default=None)
    if not main:
        raise ConfigError("sweep_dir: required, e.g. "
                         "python evaluate.py task=report sweep_dir=multirun/2024-05-01/12-00-00")
    extra = OmegaConf.select(cfg, "task.extra_sweep_dirs", default=None) or []
    return [user_path(d, OmegaConf.select(cfg, "paths.root_dir", default=None)) for d in [main, *extra]]


def options_from_config(task: DictConfig) -> sweep_report.ReportOptions:
    return sweep_report.ReportOptions(
        title=str(task.get("title", "SpEAT sweep report")), alpha=float(task.alpha),
        corrections=tuple(task.corrections), main_aggregation=str(task.main_aggregation),
        paper_equivalent_aggregations=tuple(task.paper_equivalent_aggregations))


def run(cfg: DictConfig, output_dir: Path) -> dict:
    output_dir = Path(output_dir)
    dirs = _sweep_dirs(cfg)
    results = collect.collect(dirs, exclude=[output_dir])
    paper = None
    if OmegaConf.select(cfg, "paper_results", default=None):
        paper = load_paper_results(user_path(cfg.paper_results, OmegaConf.select(cfg, "paths.root_dir", default=None)), models=dict(cfg.task.paper_models),
                                   tests=dict(cfg.task.paper_tests))
    group = cfg.logger.get("group") or dirs[0].resolve().name
    run_ = start_logger_run(cfg, output_dir, job_type="report", name=f"report/{group}",
                            tags=["report", *sorted(set(results.speat.get("test", [])))][:32])
    options = options_from_config(cfg.task)
    try:
        written = sweep_report.write_sweep_report(results, output_dir, options, paper=paper, run=run_)
        if run_ is not None and cfg.task.get("wandb_report", True):
            wandb_report.create_report(
                run_, group=group, title=f"{options.title}: {group}",
                description=f"SpEAT sweep {', '.join(map(str, dirs))}",
                image_keys=[f"report/{k}" for k in written.figures],
                table_keys=["report/results"], sections=written.sections)
    finally:
        wandb_run.finish(run_)
    log.info("sweep report of %d SpEAT run(s) in %s", len(results.speat), output_dir / "report.md")
    return written.summary

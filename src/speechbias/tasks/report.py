"""Task ``report``: collect every run of a sweep and write the paper's tables and figures.

``python evaluate.py task=report sweep_dir=multirun/paper_speat [paper_results=<csv>]`` writes into
``<sweep_dir>/report/`` (results.csv/json/parquet, figures, report.md) and, with ``logger=wandb``, a
W&B summary run in the sweep's group (plus a W&B report when online with an account).

One way through: the run folders (:mod:`speechbias.results.sweep_results`) and the paper's table
(:mod:`speechbias.results.paper_results`) -> the statistics (:mod:`speechbias.stats.sweep_analysis`, pooling
over SER heads in :mod:`speechbias.ser.sweep_propagation`) -> tables, figures and report.md through
the run's writer (:mod:`speechbias.report.sweep_report`) -> the tracker.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from speechbias.results.paper_results import load_paper_results
from speechbias.project_paths import user_path
from speechbias.report import wandb_report
from speechbias.report.run_writer import RunWriter
from speechbias.report.sweep_report import SweepReport, SweepTables, sweep_caveat, write_sweep_report
from speechbias.report.tracker import Tracker
from speechbias.ser.sweep_propagation import agreement_counts, propagation_table
from speechbias.stats import sweep_analysis
from speechbias.results.sweep_results import SweepResults, collect, no_job_folders_message
from speechbias.tasks.report_checks import ReportFolders, ReportSettings
from speechbias.tasks.report_collisions import check_one_run_per_key
from speechbias.errors import ConfigError

log = logging.getLogger(__name__)

LAYER_KEY = ("upstream", "test", "temporal", "layer")


def analyse_sweep(results: SweepResults, settings: ReportSettings, paper: pd.DataFrame | None) -> SweepTables:
    """Every table of the report from the collected runs (and the paper's table, when not None); no I/O."""
    speat = sweep_analysis.add_significance(results.speat, settings.alpha, settings.corrections)
    main = sweep_analysis.main_table(speat, settings.main_aggregation)
    anova, anova_note = sweep_analysis.family_anova(main)
    congruence, totals = sweep_analysis.human_congruence(main)
    prop = propagation_table(results.propagation, results.predictions)
    layers = results.layers  # a run of each aggregation repeats its upstream's per-layer d: keep one
    if all(c in layers.columns for c in LAYER_KEY):
        layers = layers.drop_duplicates(list(LAYER_KEY)).reset_index(drop=True)
    comparison = None
    if paper is not None:
        comparison = sweep_analysis.compare_with_paper(speat, paper, settings.paper_equivalent_aggregations)
        if not comparison.empty and "family" in speat.columns:
            family = speat.drop_duplicates("upstream").set_index("upstream")["family"]
            comparison.insert(1, "family", comparison["upstream"].map(family))
    return SweepTables(
        results=speat,
        main=main,
        aggregation=str(main["aggregation"].iloc[0]) if len(main) else settings.main_aggregation,
        alpha=settings.alpha,
        correction=settings.corrections[0],
        appendix_d=sweep_analysis.positive_by_aggregation(speat),
        anova=anova if anova is not None else pd.DataFrame(),
        anova_note=anova_note,
        congruence=congruence,
        congruence_totals=totals,
        congruence_by_aggregation=sweep_analysis.aggregation_congruence(speat),
        propagation=prop,
        propagation_agreement=agreement_counts(prop),
        layers=layers,
        se_curves=results.se_curves,
        paper_comparison=comparison,
    )


def nothing_collected_message(sweep_dirs: Sequence[Path], results: SweepResults, report: Path) -> str:
    """The one error line of a report over sweep folders whose jobs (one at least) all failed or did not finish."""
    where = ", ".join(map(str, sweep_dirs))
    first = results.incomplete_reasons.get(results.incomplete[0], "") if results.incomplete else ""
    return (
        f"sweep_dir {where}: {results.completion()}, nothing to report"
        + (f"; first error: {first}" if first else "")
        + f"; every job's reason is in {report}. Fix it and rerun the sweep command (finished jobs are skipped)"
    )


class ReportTask:
    """The sweep report of ``sweep_dir`` (plus ``extra_sweep_dirs``, e.g. the SER sweep beside the
    SpEAT sweep for Figure 2).

    Args:
        folders: ``sweep_dir``, the sweep folder to report on, and ``paper_results``, the paper's published
            table (CSV, layout of its all_mean_mean_results.csv) or None.
        writer: writes the report folder (``<sweep_dir>/report``, conf/task/report.yaml).
        tracker: the summary run's tracker (W&B group: ``logger.group``, else the sweep folder's name).
        settings: ``task.*``: title, significance level, corrections, main aggregation, paper-equivalent
            aggregations, ``extra_sweep_dirs`` (more sweep folders to read), ``paper_models`` /
            ``paper_tests`` (the paper's model and test names -> hub ids and bias tests), ``wandb_report``
            (also build a W&B report from the summary run: online, with an account).
        root_dir: the project folder: a relative ``sweep_dir`` or ``paper_results`` is taken from the
            working directory when it exists there, else from here.
    """

    # The entry point leaves torch's generator to the task (seeding.seed_run(torch=False)), and this task
    # draws nothing from torch: a report never imports torch (~1.5 CPU-s).
    seeds_torch_when_needed = True

    def __init__(
        self,
        folders: ReportFolders,
        writer: RunWriter,
        tracker: Tracker,
        settings: ReportSettings = ReportSettings(),
        root_dir: str | Path | None = None,
    ):
        self.sweep_dirs = [user_path(d, root_dir) for d in [folders.sweep_dir, *settings.extra_sweep_dirs]]
        self.paper_results = user_path(folders.paper_results, root_dir) if folders.paper_results else None
        self.writer = writer
        self.tracker = tracker
        self.settings = settings

    def run(self, config: dict | None = None) -> dict:
        """Collect, compute, write the report folder and publish it; returns the summary metrics
        (``report/n_speat_runs``, ``report/n_propagation_rows``, ``report/n_incomplete``, ``report/n_jobs``,
        ``report/n_finished``, ``report/human_congruent``, ``report/human_total``). ``config``: the W&B
        run's config. When no job of the sweep finished, the report (with every job's reason) is still
        written and published, then a ``ConfigError`` says so in one line (exit 1); when the sweep folders
        hold no job folder at all, or two SpEAT runs of one model, test and aggregation that differ
        (:mod:`speechbias.tasks.report_collisions`), that line comes first and nothing is written
        (config_checks refuses such a ``sweep_dir`` before the run starts)."""
        writer = self.writer
        results = collect(self.sweep_dirs, exclude=[writer.output_dir])
        if not results.n_jobs:
            raise ConfigError(no_job_folders_message(self.sweep_dirs))
        check_one_run_per_key(results)  # the config check refused them before; runs may have finished since
        paper = None
        if self.paper_results is not None:
            paper = load_paper_results(self.paper_results, self.settings.paper_models, self.settings.paper_tests)
        tables = analyse_sweep(results, self.settings, paper)
        writer.caveat = sweep_caveat(tables)
        written = write_sweep_report(results, tables, writer, self.settings.title)
        group = self.tracker.group or self.sweep_dirs[0].resolve().name
        self.tracker.publish(
            writer,
            job_type="report",
            name=f"report/{group}",
            tags=["report", *sorted(set(results.speat.get("test", [])))][:32],
            config=config,
            on_run=self._wandb_report(group, written) if self.settings.wandb_report else None,
        )
        if not results.finished:  # written and published first: the report lists every job's reason
            raise ConfigError(nothing_collected_message(self.sweep_dirs, results, writer.path("report.md")))
        log.info("sweep report of %d SpEAT run(s) in %s", len(results.speat), writer.path("report.md"))
        return written.summary

    def _wandb_report(self, group: str, written: SweepReport):
        """``on_run`` of the summary run: a W&B report of its figures, results table and report sections."""
        return lambda run: wandb_report.create_report(
            run,
            group=group,
            title=f"{self.settings.title}: {group}",
            description=f"SpEAT sweep {', '.join(map(str, self.sweep_dirs))}",
            image_keys=[f"report/{k}" for k in written.figures],
            table_keys=["report/results"],
            sections=written.sections,
        )

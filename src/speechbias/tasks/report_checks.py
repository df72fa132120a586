"""The sweep report's config checks (``task=report``): its settings' values (``task.*``, ``sweep_dir``,
``paper_results``), then the sweep folders it reads exist and hold one SpEAT run per model, test and
aggregation (:mod:`speechbias.tasks.report_collisions`), all before Hydra makes the report folder."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from itertools import product
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from speechbias.aggregation import LAYER_CHOICES, TEMPORAL, Aggregation
from speechbias.checked_settings import Accepts, Settings, boolean, choice, number, setting, text, texts
from speechbias.errors import ConfigError
from speechbias.project_paths import user_path


# stats.corrections.METHOD_NAMES, written out so that the check (and --help) imports no numpy; a test holds
# them equal
CORRECTION_METHODS = ("bonferroni", "holm", "bh", "fdr_bh")
AGGREGATIONS = tuple(Aggregation(t, layer).name for t, layer in product(TEMPORAL, LAYER_CHOICES))
MAPPING = Accepts("mapping")


@dataclass(frozen=True)
class ReportSettings(Settings):
    """``task.*`` of task=report (the report's options and what it compares with the paper)."""

    NODE = "task"

    title: str = setting(text(), "SpEAT sweep report", "report.md's title")
    alpha: float = setting(number(0, 1, low_open=True, high_open=True), 0.05, "the significance level")
    corrections: tuple[str, ...] = setting(
        texts(*CORRECTION_METHODS, nonempty=True), ["bonferroni", "holm"], "multiple-comparison corrections"
    )
    main_aggregation: str = setting(choice(*AGGREGATIONS), "mean_sum", "the aggregation of the main figures")
    paper_equivalent_aggregations: tuple[str, ...] = setting(
        texts(*AGGREGATIONS), ["mean_mean", "mean_sum"], "aggregations compared with the paper's table"
    )
    wandb_report: bool = setting(boolean(), True, "save a W&B report")
    extra_sweep_dirs: tuple[str, ...] = setting(texts(), [], "more sweep folders to read")
    paper_models: dict = setting(MAPPING, {}, "the paper's model names -> hub ids")
    paper_tests: dict = setting(MAPPING, {}, "the paper's test names -> bias_test names")


@dataclass(frozen=True)
class ReportFolders(Settings):
    """``sweep_dir`` (the sweep to report on) and ``paper_results`` (the paper's table, optional)."""

    sweep_dir: str = setting(text(), ".", "task=report: the sweep folder to report on, e.g. multirun/paper_speat")
    paper_results: str | None = setting(text(optional=True), None, "the paper's all_mean_mean_results.csv")


# the settings groups the task object receives (constructor keyword -> class), built by launch.entry.build_task
TASK_SETTINGS = {"settings": ReportSettings, "folders": ReportFolders}
# the report's settings groups (their values: types and ranges), checked before any folder
SETTINGS = tuple(TASK_SETTINGS.values())


def check_config(cfg: DictConfig) -> None:
    """:func:`check_report_arguments` (the report's ``SETTINGS`` are built before, by the config checks; the
    report writes no cache: the cache folder is not checked)."""
    check_report_arguments(cfg)


def _folder(key: str, value, project_root) -> Path:
    path = user_path(value, project_root)
    if not path.is_dir():
        from speechbias.results.sweep_results import missing_sweep_folder_hint  # pandas: only on this error

        hint = missing_sweep_folder_hint(Path.cwd() / Path(str(value)).expanduser(), path)
        raise ConfigError(f"{key}={value}: no such folder; {hint}")
    return path


def check_report_arguments(cfg: DictConfig) -> None:
    """``sweep_dir`` and ``task.extra_sweep_dirs`` are folders, at least one with a job folder below it (a
    report of no job would be empty); ``paper_results`` (if given) a file; the runs below them hold one
    SpEAT run per model, test and aggregation (read once here, ~0.11 CPU-s over 180 runs, and again by the
    report: a refusal then writes nothing, not even the report folder)."""
    root = OmegaConf.select(cfg, "paths.root_dir", default=None)
    folders = [_folder("sweep_dir", cfg.sweep_dir, root)]
    for extra in OmegaConf.select(cfg, "task.extra_sweep_dirs", default=None) or []:
        folders.append(_folder("task.extra_sweep_dirs", extra, root))
    from speechbias.results.sweep_results import has_job_folders, no_job_folders_message  # pandas: report only

    if not any(has_job_folders(folder) for folder in folders):
        raise ConfigError(no_job_folders_message(folders))
    paper = OmegaConf.select(cfg, "paper_results", default=None)
    if paper and not user_path(paper, root).is_file():
        raise ConfigError(
            f"paper_results={paper}: no such file; give the paper's all_mean_mean_results.csv "
            "or leave paper_results out"
        )
    from speechbias.results.sweep_results import collect
    from speechbias.tasks.report_collisions import check_one_run_per_key

    collecting = logging.getLogger(collect.__module__)
    level = collecting.level
    collecting.setLevel(logging.ERROR)  # its warnings (repeats, skipped folders) are the report's to give, once
    try:
        collected = collect(folders, exclude=[folders[0] / "report"])
    finally:
        collecting.setLevel(level)
    check_one_run_per_key(collected)

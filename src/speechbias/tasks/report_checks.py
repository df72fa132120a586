"""The sweep report's config checks (``task=report``): the sweep folders it reads exist."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from speechbias.errors import ConfigError
from speechbias.project_paths import user_path


def check_config(cfg: DictConfig) -> None:
    """See :func:`check_report_arguments` (the report writes no cache: the cache folder is not checked)."""
    check_report_arguments(cfg)


def _folder(key: str, value, project_root) -> Path:
    path = user_path(value, project_root)
    if not path.is_dir():
        from speechbias.results.sweep_results import missing_sweep_folder_hint  # pandas: only on this error

        hint = missing_sweep_folder_hint(Path.cwd() / Path(str(value)).expanduser(), path)
        raise ConfigError(f"{key}={value}: no such folder; {hint}")
    return path


def check_report_arguments(cfg: DictConfig) -> None:
    """``sweep_dir`` and ``task.extra_sweep_dirs`` are folders; ``paper_results`` (if given) a file."""
    root = OmegaConf.select(cfg, "paths.root_dir", default=None)
    _folder("sweep_dir", cfg.sweep_dir, root)
    for extra in OmegaConf.select(cfg, "task.extra_sweep_dirs", default=None) or []:
        _folder("task.extra_sweep_dirs", extra, root)
    paper = OmegaConf.select(cfg, "paper_results", default=None)
    if paper and not user_path(paper, root).is_file():
        raise ConfigError(
            f"paper_results={paper}: no such file; give the paper's all_mean_mean_results.csv "
            "or leave paper_results out"
        )

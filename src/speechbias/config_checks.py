"""Check a run's config before anything heavy is imported or any model is touched.

:func:`check_config` raises :class:`~speechbias.user_errors.ConfigError` (one line naming the key, the
value and the fix) for values a run cannot use: a required value not given (``???``), a learning rate
that is not a number > 0, a task's missing arguments, folders and files that must exist (the report's
sweep folders, the bias test's manifest and every clip it lists, a valence ratings file).
Standard library and OmegaConf only: the checks finish in milliseconds, before torch is imported.
"""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, ListConfig, OmegaConf

from speechbias.bias_test_configs import bias_test_config
from speechbias.project_paths import user_path
from speechbias.run_context import primary_config_dir
from speechbias.user_errors import ConfigError, error_line, full_error_requested

# a command line that sets a required key, shown in the error line
REQUIRED_EXAMPLES = {
    "sweep_dir": "python evaluate.py task=report sweep_dir=multirun/<date>/<time>",
    "corpus.load.manifest": "python evaluate.py task=wer_disparity corpus=asr_manifest corpus.load.manifest=<csv>",
}
MAX_LISTED = 3


def check_config(cfg: DictConfig) -> None:
    """Every check that applies to ``cfg`` (a job config, with or without its ``hydra`` node)."""
    check_required_values(cfg)
    if "lr" in cfg:
        check_learning_rates(cfg.lr)
    task = str(OmegaConf.select(cfg, "task.name", default="") or "")
    if task == "report":
        check_report_arguments(cfg)
    elif task == "speat" and OmegaConf.select(cfg, "bias_test", default=None) is not None:
        check_bias_test(cfg.bias_test, "bias_test")
    elif task == "wer_disparity":
        for group in ("asr", "corpus"):
            if OmegaConf.select(cfg, group, default=None) is None:
                raise ConfigError(f"{group}: required by task=wer_disparity, e.g. python evaluate.py "
                                  "task=wer_disparity asr=whisper_small corpus=fair_speech")
    elif task == "train_ser":
        check_valence_source(cfg)
        check_propagation_tests(cfg)


def check_required_values(cfg: DictConfig) -> None:
    """No ``???`` left outside the ``hydra`` node."""
    missing = sorted(_missing_keys(cfg))
    if missing:
        key = missing[0]
        example = REQUIRED_EXAMPLES.get(key, f"{key}=...")
        raise ConfigError(f"{key}: required, give it on the command line, e.g. {example}")


def _missing_keys(node, prefix: str = "") -> list[str]:
    """Keys whose value is literally ``???`` (interpolations are not resolved; ``hydra`` is skipped)."""
    found = []
    if isinstance(node, DictConfig):
        items = [(str(k), k) for k in node.keys() if not (prefix == "" and k == "hydra")]
    elif isinstance(node, ListConfig):
        items = [(f"[{i}]", i) for i in range(len(node))]
    else:
        return found
    for name, key in items:
        child = node._get_node(key)
        full = f"{prefix}.{name}" if prefix and not name.startswith("[") else f"{prefix}{name}"
        if child is None or child._is_interpolation():
            continue
        if child._is_missing():
            found.append(full)
        elif isinstance(child, (DictConfig, ListConfig)):
            found.extend(_missing_keys(child, full))
    return found


def learning_rates(value) -> list[float]:
    """``lr`` as a list of floats: a number, a numeric string or a list of them."""
    items = list(value) if isinstance(value, (list, tuple, ListConfig)) else [value]
    if not items:
        raise ConfigError("lr=[]: give at least one learning rate, e.g. lr=1e-4 or 'lr=[1e-3,1e-4,1e-5]'")
    rates = []
    for item in items:
        if isinstance(item, bool):
            rate = math.nan
        else:
            try:
                rate = float(item)
            except (TypeError, ValueError):
                rate = math.nan
        if not (math.isfinite(rate) and rate > 0):
            shown = value if not isinstance(value, ListConfig) else OmegaConf.to_container(value)
            raise ConfigError(f"lr={shown}: {item!r} is not a number > 0; give a learning rate such as lr=1e-4 "
                              "or a list, 'lr=[1e-3,1e-4,1e-5]'")
        rates.append(rate)
    return rates


def check_learning_rates(value) -> None:
    learning_rates(value)


def _folder(key: str, value, project_root) -> Path:
    path = user_path(value, project_root)
    if not path.is_dir():
        raise ConfigError(f"{key}={value}: no such folder; give the multirun folder of a sweep, "
                          "e.g. sweep_dir=multirun/<date>/<time>")
    return path


def check_report_arguments(cfg: DictConfig) -> None:
    """``sweep_dir`` and ``task.extra_sweep_dirs`` are folders; ``paper_results`` (if given) a file."""
    root = OmegaConf.select(cfg, "paths.root_dir", default=None)
    _folder("sweep_dir", cfg.sweep_dir, root)
    for extra in OmegaConf.select(cfg, "task.extra_sweep_dirs", default=None) or []:
        _folder("task.extra_sweep_dirs", extra, root)
    paper = OmegaConf.select(cfg, "paper_results", default=None)
    if paper and not user_path(paper, root).is_file():
        raise ConfigError(f"paper_results={paper}: no such file; give the paper's all_mean_mean_results.csv "
                          "or leave paper_results out")


def check_bias_test(node: DictConfig, key: str) -> None:
    """The bias test's manifest exists (or a builder will write it) and every clip it lists exists."""
    manifest = OmegaConf.select(node, "manifest", default=None)
    has_builder = OmegaConf.select(node, "builder", default=None) is not None
    if manifest is None:
        return
    path = Path(str(manifest)).expanduser()
    if not path.is_file():
        if has_builder:
            return
        raise ConfigError(f"{key}.manifest={manifest}: no such file and no builder configured; give an existing "
                          "manifest CSV (columns clip_id, path, role)")
    root = OmegaConf.select(node, "root", default=None)
    check_manifest_files(path, Path(str(root)) if root else path.parent, f"{key}.manifest")


def check_manifest_files(path: Path, root: Path, key: str = "manifest") -> None:
    """Every row's ``path`` (relative ones against ``root``) is an existing file; names the rows."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            if "path" not in (reader.fieldnames or []):
                raise ConfigError(f"{key}={path}: no 'path' column (has {reader.fieldnames}); a manifest needs "
                                  "columns clip_id, path, role")
            missing = [(i, row["path"]) for i, row in enumerate(reader, start=2)
                       if not (root / (row["path"] or "").strip()).is_file()]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"{key}={path}: not a readable CSV ({exc})") from exc
    if missing:
        rows = ", ".join(str(i) for i, _ in missing[:MAX_LISTED]) + (" ..." if len(missing) > MAX_LISTED else "")
        raise ConfigError(f"{key}={path}: {len(missing)} audio file(s) not found, e.g. {missing[0][1]} "
                          f"(row(s) {rows}); fix the path column or the files")


def check_valence_source(cfg: DictConfig) -> None:
    """A valence set read from one ratings CSV: that file exists."""
    ratings = OmegaConf.select(cfg, "ser_data.source.ratings", default=None)
    if ratings and not Path(str(ratings)).expanduser().is_file():
        raise ConfigError(f"ser_data.source.ratings={ratings}: no such file; give the valence ratings CSV "
                          "(clip_id, path, speaker, valence) or choose another ser_data")


def check_propagation_tests(cfg: DictConfig) -> None:
    """``bias_tests`` of train.py name existing ``conf/bias_test/*.yaml`` files whose manifests check out."""
    entries = cfg.get("bias_tests") or []
    if not isinstance(entries, (list, ListConfig)):
        raise ConfigError(f"bias_tests={entries}: give a list of bias test names, e.g. "
                          "'bias_tests=[demo_voice,demo_accent]'")
    primary = primary_config_dir(cfg)
    folder = Path(primary) if primary else None
    for entry in entries:
        if not isinstance(entry, str):
            continue
        if folder is None:
            return
        try:
            node = bias_test_config(entry, folder)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        scoped = OmegaConf.merge({"paths": cfg.paths, "seed": cfg.get("seed", 0)}, {"bias_test": node})
        check_bias_test(scoped.bias_test, f"bias_tests[{entry}]")


class ConfigCheckCallback(Callback):
    """Hydra callback (``hydra.callbacks`` of the entry configs): checks a single run's config before
    Hydra creates its output folder; a bad value prints one line and exits 1."""

    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        try:
            check_config(config)
        except ConfigError as exc:
            if full_error_requested():
                raise
            print(error_line(exc), file=sys.stderr)
            sys.exit(1)

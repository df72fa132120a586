"""The SER training task's config checks (train.py, ``task=train_ser``): its settings groups
(speechbias.ser.training_settings: ``lr`` and the other training keys, ``ser_data.*``, ``downstream.*``,
``propagation.*``), the valence data and the bias tests whose propagation it measures."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, ListConfig, OmegaConf

from speechbias.config_composition import bias_test_config
from speechbias.checked_settings import shown
from speechbias.errors import ConfigError
from speechbias.features.extraction_settings import ExtractionSettings
from speechbias.run_context import primary_config_dir
from speechbias.ser.training_settings import (
    SPEAT_RESULTS_COLUMNS,
    HeadSettings,
    PropagationSettings,
    TrainingSettings,
    ValenceDataSettings,
    ValenceSourceSettings,
)
from speechbias.tasks.input_checks import CORPUS_LAYOUT, check_bias_test, check_cache_folder, csv_header


# the settings groups the task object receives (constructor keyword -> class), built by launch.entry.build_task
TASK_SETTINGS = {
    "valence_data": ValenceDataSettings,
    "training": TrainingSettings,
    "propagation": PropagationSettings,
    "extraction": ExtractionSettings,
}
# train.py's settings groups (types and ranges), built by the config checks before check_config: the task's, then
# those only checked; ser_data first: the top-level max_steps and torch_threads default to its values, so a wrong
# one is named where it was typed
SETTINGS = (*TASK_SETTINGS.values(), ValenceSourceSettings, HeadSettings)


def check_config(cfg: DictConfig) -> None:
    """After its settings (``SETTINGS``), built by the config checks: the bias test names (before any folder
    is made), then the cache folder, the valence data and the manifests of the bias tests (``bias_tests``:
    existing ``conf/bias_test/*.yaml`` files)."""
    tests = propagation_test_nodes(cfg)
    check_speat_results(cfg)
    check_cache_folder(cfg)
    check_valence_source(cfg)
    for entry, node in tests:
        check_bias_test(node, f"bias_tests[{entry}]", cfg)


def check_valence_source(cfg: DictConfig) -> None:
    """A valence set read from a corpus folder (``ser_data.source.root``, e.g. MESS under ``paths.data_root``):
    that folder exists; one read from one ratings CSV: that file exists."""
    root = OmegaConf.select(cfg, "ser_data.source.root", default=None)
    if root and not Path(str(root)).expanduser().is_dir():
        raise ConfigError(
            f"ser_data.source.root={root}: no such folder; set paths.data_root=... (or SPEECHBIAS_DATA) "
            f"to the folder that holds the {OmegaConf.select(cfg, 'ser_data.name', default='valence')} "
            f"corpus (layout: {CORPUS_LAYOUT})"
        )
    ratings = OmegaConf.select(cfg, "ser_data.source.ratings", default=None)
    if ratings and not Path(str(ratings)).expanduser().is_file():
        raise ConfigError(
            f"ser_data.source.ratings={ratings}: no such file; give the valence ratings CSV "
            "(clip_id, path, speaker, valence) or choose another ser_data"
        )


def check_speat_results(cfg: DictConfig) -> None:
    """``propagation.speat_results`` (optional) is a results.csv of a SpEAT run, read after training."""
    path = OmegaConf.select(cfg, "propagation.speat_results", default=None)
    if not path:
        return
    header = csv_header(
        Path(str(path)).expanduser(),
        f"propagation.speat_results={path}",
        "give the results.csv of a `python evaluate.py task=speat` run, or null to compute d",
    )
    missing = [c for c in SPEAT_RESULTS_COLUMNS if c not in header]
    if missing:
        raise ConfigError(f"propagation.speat_results={path}: no column {', '.join(missing)}; not a SpEAT results.csv")


def propagation_test_nodes(cfg: DictConfig) -> list[tuple[str, DictConfig]]:
    """(name, bias test node with the run's paths and seed) of each of train.py's ``bias_tests``; a
    ConfigError for a value that is not a list of known names."""
    entries = cfg.get("bias_tests")
    if not isinstance(entries, (list, ListConfig)) or not entries:  # none: nothing to measure propagation on
        raise ConfigError(
            f"bias_tests={shown(entries)}: give a list of one or more bias test names, "
            "e.g. 'bias_tests=[demo_voice,demo_accent]'"
        )
    primary = primary_config_dir(cfg)
    folder = Path(primary) if primary else None
    nodes = []
    for entry in entries:
        if not isinstance(entry, str):
            continue
        if folder is None:
            break
        try:
            node = bias_test_config(entry, folder)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        scoped = OmegaConf.merge({"paths": cfg.paths, "seed": cfg.get("seed", 0)}, {"bias_test": node})
        nodes.append((entry, scoped.bias_test))
    return nodes

"""The SER training task's config checks (train.py, ``task=train_ser``): learning rates, the training step,
the valence data and the bias tests whose propagation it measures."""

from __future__ import annotations

import math
from pathlib import Path

from omegaconf import DictConfig, ListConfig, OmegaConf

from speechbias.config_composition import bias_test_config
from speechbias.errors import ConfigError
from speechbias.run_context import primary_config_dir
from speechbias.tasks.input_checks import CORPUS_LAYOUT, check_audio_settings, check_bias_test, check_cache_folder


def check_config(cfg: DictConfig) -> None:
    """Every check of a train.py run, in the order a user meets the keys."""
    if "lr" in cfg:
        check_learning_rates(cfg.lr)
    check_cache_folder(cfg)
    check_audio_settings(cfg)
    check_step_kernel(OmegaConf.select(cfg, "downstream.step_kernel", default="auto"))
    check_valence_source(cfg)
    check_propagation_tests(cfg)


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
            raise ConfigError(
                f"lr={shown}: {item!r} is not a number > 0; give a learning rate such as lr=1e-4 "
                "or a list, 'lr=[1e-3,1e-4,1e-5]'"
            )
        rates.append(rate)
    return rates


def check_learning_rates(value) -> None:
    learning_rates(value)


# the SER heads' training step (speechbias.ser.heads_adam.STEP_KERNELS; kept here so that the check
# imports no torch)
STEP_KERNELS = ("auto", "compiled", "torch")


def check_step_kernel(value) -> None:
    """``downstream.step_kernel``: one of auto, compiled, torch."""
    if value not in STEP_KERNELS:
        raise ConfigError(
            f"downstream.step_kernel={value}: must be one of {', '.join(STEP_KERNELS)} (auto: the "
            "numba-compiled step where numba can be set up, else torch)"
        )


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


def check_propagation_tests(cfg: DictConfig) -> None:
    """``bias_tests`` of train.py name existing ``conf/bias_test/*.yaml`` files whose manifests check out."""
    entries = cfg.get("bias_tests") or []
    if not isinstance(entries, (list, ListConfig)):
        raise ConfigError(
            f"bias_tests={entries}: give a list of bias test names, e.g. 'bias_tests=[demo_voice,demo_accent]'"
        )
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
        check_bias_test(
            scoped.bias_test, f"bias_tests[{entry}]", OmegaConf.select(cfg, "paths.cache_dir", default=None), cfg
        )

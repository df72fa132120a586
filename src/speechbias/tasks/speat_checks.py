"""The SpEAT task's config checks (``task=speat``): a writable cache and a usable bias test (its settings,
``speat.*`` and ``extraction.*``, are in every evaluate.py config: launch.config_checks checks them)."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from speechbias.tasks.input_checks import check_bias_test, check_cache_folder


def check_config(cfg: DictConfig) -> None:
    """The cache folder takes files; the bias test's manifest (or its corpus folders) checks out."""
    check_cache_folder(cfg)
    if OmegaConf.select(cfg, "bias_test", default=None) is not None:
        check_bias_test(cfg.bias_test, "bias_test", OmegaConf.select(cfg, "paths.cache_dir", default=None), cfg)

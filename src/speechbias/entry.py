"""Shared body of the entry points: seed, resolve the output folder, instantiate and run a task."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger("speechbias")


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


def run_task(cfg: DictConfig) -> dict:
    """Run ``cfg.task.run(cfg=cfg, output_dir=...)`` and return its summary metrics.

    The task runner is a ``_partial_`` callable named by ``cfg.task.run._target_``.
    """
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import pytorch_lightning as pl

    pl.seed_everything(int(cfg.get("seed", 0)), workers=True, verbose=False)
    output_dir = Path(cfg.paths.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(cfg, output_dir / "config.yaml", resolve=False)
    if "trainer" in cfg:
        cfg.trainer = job_trainer_config(cfg.trainer)
    runner = hydra.utils.instantiate(cfg.task.run)
    summary = runner(cfg=cfg, output_dir=output_dir) or {}
    log.info("results in %s", output_dir)
    return summary

"""Shared body of the entry points: seed, resolve the output folder, instantiate and run a task."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger("speechbias")


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
    runner = hydra.utils.instantiate(cfg.task.run)
    summary = runner(cfg=cfg, output_dir=output_dir) or {}
    log.info("results in %s", output_dir)
    return summary

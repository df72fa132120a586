"""What a run is called and how it is tagged: upstream/test names from the Hydra config, logger start."""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from speechbias.report import wandb_run

log = logging.getLogger(__name__)


def config_choice(cfg: DictConfig, group: str, fallback: str = "") -> str:
    """The option chosen for a config group (e.g. ``hubert_xl`` for ``upstream``), when Hydra knows it."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return str(HydraConfig.get().runtime.choices.get(group) or fallback)
    except (ValueError, AttributeError):
        choices = OmegaConf.select(cfg, "hydra.runtime.choices", default=None)
        if choices is not None and choices.get(group):
            return str(choices.get(group))
        return fallback


def upstream_info(cfg: DictConfig, upstream) -> dict:
    """Run identity columns: upstream name, family, model id and fingerprint."""
    fields = upstream.fingerprint_fields()
    name = OmegaConf.select(cfg, "upstream.display_name", default=None) or config_choice(cfg, "upstream") \
        or fields.get("name") or type(upstream).__name__
    family = (OmegaConf.select(cfg, "upstream.family", default=None) or fields.get("family")
              or getattr(upstream, "family", None) or "other")
    return {"upstream": str(name), "family": str(family), "model_id": str(fields.get("model_id", name)),
            "fingerprint": upstream.fingerprint}


def start_logger_run(cfg: DictConfig, output_dir: Path, job_type: str, name: str, tags: list[str]):
    """A W&B run when ``logger.kind == wandb`` (grouped by the sweep folder), else None."""
    if cfg.logger.get("kind") != "wandb":
        return None
    group = cfg.logger.get("group") or Path(output_dir).parent.name
    return wandb_run.start_run(
        project=cfg.logger.project, entity=cfg.logger.get("entity"), name=name,
        config=OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False), group=group,
        tags=list(tags) + list(cfg.logger.get("tags") or []), job_type=job_type, mode=cfg.logger.mode,
        save_dir=output_dir)

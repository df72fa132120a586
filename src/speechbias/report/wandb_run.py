"""Weights & Biases logging that never hangs or fails a job for lack of network.

Mode: ``online`` when an API key is configured (``WANDB_API_KEY`` or a netrc entry) and the
user did not ask otherwise, else ``offline`` (runs sync later with ``wandb sync``). ``disabled``
turns it off. Any W&B failure is logged as a warning and the job goes on without W&B.
"""

from __future__ import annotations

import logging
import netrc
import os
from pathlib import Path

import pandas as pd

log = logging.getLogger(__name__)


def has_wandb_credentials() -> bool:
    """True when an API key is available without prompting (env var or ~/.netrc)."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        auth = netrc.netrc().authenticators(os.environ.get("WANDB_BASE_URL", "api.wandb.ai").split("//")[-1])
        return auth is not None
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False


def resolve_mode(mode: str = "auto") -> str:
    """``auto`` -> online with credentials, offline without; other values pass through."""
    env_mode = os.environ.get("WANDB_MODE")
    if mode == "auto":
        if env_mode:
            return env_mode
        return "online" if has_wandb_credentials() else "offline"
    if mode not in ("online", "offline", "disabled"):
        raise ValueError(f"wandb mode must be auto|online|offline|disabled, got {mode!r}")
    return mode


def start_run(
    project: str = "speechbias",
    name: str | None = None,
    config: dict | None = None,
    group: str | None = None,
    tags: list[str] | None = None,
    job_type: str | None = None,
    mode: str = "auto",
    save_dir: str | Path | None = None,
    entity: str | None = None,
):
    """Start a W&B run; returns the run, or ``None`` if W&B is disabled or could not start."""
    resolved = resolve_mode(mode)
    if resolved == "disabled":
        return None
    try:
        import wandb

        settings = wandb.Settings(init_timeout=60, silent=True, x_disable_stats=True)
        run = wandb.init(
            project=project,
            entity=entity,
            name=name,
            config=config,
            group=group,
            tags=[t for t in (tags or []) if t][:64],
            job_type=job_type,
            mode=resolved,
            dir=str(save_dir) if save_dir else None,
            settings=settings,
            reinit="finish_previous",
        )
        return run
    except Exception as exc:  # never fail the job for W&B
        log.warning("W&B could not start (%s: %s); continuing without W&B", type(exc).__name__, exc)
        return None


def log_metrics(run, metrics: dict, step: int | None = None) -> None:
    if run is None:
        return
    try:
        run.log(metrics, step=step)
        for k, v in metrics.items():
            run.summary[k] = v
    except Exception as exc:
        log.warning("W&B log failed: %s", exc)


def log_table(run, key: str, df: pd.DataFrame) -> None:
    if run is None:
        return
    try:
        import wandb

        run.log({key: wandb.Table(dataframe=df.reset_index(drop=True))})
    except Exception as exc:
        log.warning("W&B table %s failed: %s", key, exc)


def log_images(run, images: dict[str, str | Path]) -> None:
    if run is None:
        return
    try:
        import wandb

        run.log({k: wandb.Image(str(p)) for k, p in images.items()})
    except Exception as exc:
        log.warning("W&B image log failed: %s", exc)


def finish(run) -> None:
    if run is None:
        return
    try:
        run.finish()
    except Exception as exc:
        log.warning("W&B finish failed: %s", exc)

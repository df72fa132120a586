"""Weights & Biases logging that never hangs or fails a job for lack of network.

Mode: ``online`` when an API key is configured (``WANDB_API_KEY`` or a netrc entry) and the
user did not ask otherwise, else ``offline`` (runs sync later with ``wandb sync``). ``disabled``
turns it off. Any W&B failure is logged as a warning and the job goes on without W&B.
"""

from __future__ import annotations

import logging
import netrc
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from speechbias.fileio.atomic_file import atomic_write

if TYPE_CHECKING:
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


#: logger.mode: auto (online with credentials, offline without) or W&B's own modes
MODES = ("auto", "online", "offline", "disabled")


def resolve_mode(mode: str = "auto") -> str:
    """``auto`` -> online with credentials, offline without; other values pass through."""
    env_mode = os.environ.get("WANDB_MODE")
    if mode == "auto":
        if env_mode:
            return env_mode
        return "online" if has_wandb_credentials() else "offline"
    if mode not in MODES:
        raise ValueError(f"wandb mode must be auto|online|offline|disabled, got {mode!r}")
    return mode


#: W&B's folders outside a run's own (its service log and cache; artifact staging), kept in ``files_dir``
#: unless the user set the variable: W&B would otherwise write ~/.cache/wandb and ~/.local/share/wandb
FILES_VARIABLES = {"WANDB_CACHE_DIR": "cache", "WANDB_DATA_DIR": "data"}
_set_here: dict[str, str] = {}  # the variables this module set, and to what


def keep_files_in(files_dir: str | Path | None) -> None:
    """Point W&B's cache and data folders into ``files_dir`` (``<files_dir>/cache``, ``<files_dir>/data``),
    leaving any the user set in the environment as they are. Nothing for None."""
    if files_dir is None:
        return
    for variable, sub in FILES_VARIABLES.items():
        if variable in os.environ and os.environ[variable] != _set_here.get(variable):
            continue  # the user's
        os.environ[variable] = _set_here[variable] = str(Path(files_dir) / sub)


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
    files_dir: str | Path | None = None,
    run_id: str | None = None,
):
    """Start a W&B run; returns the run, or ``None`` if W&B is disabled or could not start.
    ``files_dir``: where W&B's cache and data folders go (:func:`keep_files_in`); ``run_id``: continue
    the W&B run of that id where it exists (a resumed or requeued job, :func:`job_run_id`)."""
    resolved = resolve_mode(mode)
    if resolved == "disabled":
        return None
    try:
        keep_files_in(files_dir)
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
            id=run_id,
            resume="allow" if run_id else None,
        )
        return run
    except Exception as exc:  # never fail the job for W&B
        log.warning("W&B could not start (%s: %s); continuing without W&B", type(exc).__name__, exc)
        return None


RUN_ID_FILE = "wandb_run_id"  # in a job's folder: the id of its W&B run, kept across resumes and requeues


def job_run_id(output_dir: str | Path) -> str:
    """The W&B run id of the job whose folder is ``output_dir``: the one its ``wandb_run_id`` file holds,
    else a new random one, written there (atomically) for the job's next attempt."""
    path = Path(output_dir) / RUN_ID_FILE
    try:
        kept = path.read_text(encoding="utf-8").strip()
    except OSError:
        kept = ""
    if kept.isalnum() and kept.islower():
        return kept
    run_id = secrets.token_hex(8)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: tmp.write_text(run_id + "\n", encoding="utf-8"))
    return run_id


def describe(run, name: str, tags: list[str], config: dict | None) -> None:
    """Give a run started before its job knew them (train.py's live run) its name, more tags and the
    job's config; a failure is a warning, the job goes on."""
    try:
        run.name = name
        run.tags = tuple(dict.fromkeys([*run.tags, *(t for t in tags if t)]))[:64]
        run.config.update(config or {}, allow_val_change=True)
    except Exception as exc:
        log.warning("W&B run not described (%s: %s)", type(exc).__name__, exc)


def log_metrics(run, metrics: dict, step: int | None = None) -> None:
    try:
        run.log(metrics, step=step)
        for k, v in metrics.items():
            run.summary[k] = v
    except Exception as exc:
        log.warning("W&B log failed: %s", exc)


def log_table(run, key: str, df: pd.DataFrame) -> None:
    try:
        import wandb

        run.log({key: wandb.Table(dataframe=df.reset_index(drop=True))})
    except Exception as exc:
        log.warning("W&B table %s failed: %s", key, exc)


def log_images(run, images: dict[str, str | Path]) -> None:
    try:
        import wandb

        run.log({k: wandb.Image(str(p)) for k, p in images.items()})
    except Exception as exc:
        log.warning("W&B image log failed: %s", exc)


def finish(run) -> None:
    try:
        run.finish()
    except Exception as exc:
        log.warning("W&B finish failed: %s", exc)

"""Loading Hugging Face files: the local cache first, the hub only when a quick probe reaches it,
and one clear error naming the model id when neither has the files."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

import huggingface_hub

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


class MissingWeightsError(FileNotFoundError):
    """Config or weights of a hub model are neither in the local cache nor downloadable."""


def hub_offline() -> bool:
    """True when HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE is set now (read at call time, not import)."""
    flags = (os.environ.get("HF_HUB_OFFLINE", ""), os.environ.get("TRANSFORMERS_OFFLINE", ""))
    return any(f.strip().upper() in {"1", "ON", "YES", "TRUE"} for f in flags) or bool(
        huggingface_hub.constants.HF_HUB_OFFLINE
    )


def hub_reachable(timeout_s: float = 3.0) -> bool:
    """One TCP connect to the hub endpoint (port 443) within ``timeout_s``. With a proxy configured
    the direct probe means nothing, so the hub is assumed reachable."""
    if any(os.environ.get(name) for name in PROXY_VARIABLES):
        return True
    host = urlparse(huggingface_hub.constants.ENDPOINT).hostname or "huggingface.co"
    try:
        with socket.create_connection((host, 443), timeout=timeout_s):
            return True
    except OSError:
        return False


def cache_first(load: Callable, model_id: str, **kwargs):
    """``load(model_id, local_files_only=..., **kwargs)``: the local cache first (no network), then
    the hub only if a quick probe reaches it. huggingface_hub otherwise retries an unreachable hub
    for ~25 s per file; offline mode (HF_HUB_OFFLINE=1) never leaves the cache. A cached copy of a
    branch is used as is: `huggingface-cli download <id>` refreshes it."""
    try:
        return load(model_id, local_files_only=True, **kwargs)
    except OSError:
        if hub_offline() or Path(model_id).expanduser().is_dir():
            raise
    if not hub_reachable():
        host = urlparse(huggingface_hub.constants.ENDPOINT).hostname
        raise OSError(f"not in the local cache and the hub ({host}:443) is unreachable")
    return load(model_id, local_files_only=False, **kwargs)


def missing_weights_message(model_id: str, what: str, cause: BaseException) -> str:
    """One line naming the model id and the three ways to make its weights available."""
    where = "offline (HF_HUB_OFFLINE=1)" if hub_offline() else "from the hub or the local cache"
    reason = str(cause).strip().splitlines()[0][:200] if str(cause).strip() else type(cause).__name__
    return (
        f"cannot load the {what} of model '{model_id}' {where}: download it once while online "
        f"(`huggingface-cli download {model_id}`), or point HF_HOME at a Hugging Face cache that holds it, "
        f"or pass a local directory with config.json and the weights as model_id. [{reason}]"
    )


def local_dir(model_id: str) -> Path | None:
    """An existing local model directory as a Path; None for a hub id; MissingWeightsError for a
    path-like id (starting with /, ./, ../ or ~) that does not exist."""
    path = Path(model_id).expanduser()
    if path.is_dir():
        return path
    if model_id.startswith(("/", "./", "../", "~")):
        raise MissingWeightsError(
            f"model_id '{model_id}' looks like a local directory but does not exist; pass an existing "
            "directory with config.json and the weights, or a hub id such as facebook/wav2vec2-base"
        )
    return None


def local_files_signature(path: Path) -> list[list]:
    """(name, bytes, mtime_ns) of the weight files of a local model directory: cheap change detector."""
    files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES))
    return [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in files]

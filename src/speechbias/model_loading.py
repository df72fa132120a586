"""Loading pretrained models and naming what was loaded: one way for upstreams, ASR models and speech LLMs.

* :func:`load_pretrained`: any ``from_pretrained``-style loader, the local Hugging Face cache first,
  the hub only when a quick probe reaches it; :class:`MissingWeightsError` (one line naming the model
  id and the three ways to make its files available) when neither has them.
* :func:`check_weights_available`: the same error before any weights are read (lazy upstreams): a local
  folder, the cache, or (online) a reachable hub; nothing loaded. :func:`check_model_files`: the config and
  the weights (a random control: the config only), for a run's checks and a sweep's pre-flight, before torch
  and transformers are imported.
* :func:`hub_offline`: HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE, read at call time.
* :func:`local_dir`: a model id that is a local directory.
* :class:`ModelFingerprint`: the identity fields of a model (id, revision, layer convention or decoding,
  dtype, library versions, local weight digest) and their digest, the namespace of every cache;
  :class:`FingerprintedModel` gives a class with ``fingerprint_fields()`` its two fingerprint properties.

Imports nothing heavy at module level except ``huggingface_hub`` (no torch, no transformers).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import huggingface_hub

PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
#: files of a local model directory that hold weights (the upstream change detector's selection)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")
#: the selection the ASR weights digest has always hashed (a Trainer checkpoint's optimizer.pt is left out)
HF_WEIGHT_SUFFIXES = (".safetensors", ".bin")


class MissingWeightsError(FileNotFoundError):
    """Config, weights or processor of a model are neither in the local cache nor downloadable; the
    message names the model id and how to make the files available."""


# --- where files come from ---------------------------------------------------------------------------


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


def missing_weights_message(
    model_id: str, what: str, cause: BaseException, revision: str | None = None, files: Sequence[str] = ()
) -> str:
    """One line naming the model id and the three ways to make its files available. ``files``: when only
    those files of the repository are needed (a random control needs the config, not the weights), the
    download names them and the line says the weights are not needed."""
    where = "offline (HF_HUB_OFFLINE=1)" if hub_offline() else "from the hub or the local cache"
    at = f" at revision '{revision}'" if revision else ""
    reason = str(cause).strip().splitlines()[0][:200] if str(cause).strip() else type(cause).__name__
    if files:
        return (
            f"cannot load the {what} of model '{model_id}'{at} {where}: only {' and '.join(files)} are needed "
            f"(not the weights): download them once while online (`hf download {model_id} {' '.join(files)}`), "
            f"or point HF_HOME at a Hugging Face cache that holds them, or pass a local directory with "
            f"{files[0]} as model_id. [{reason}]"
        )
    return (
        f"cannot load the {what} of model '{model_id}'{at} {where}: download it once while online "
        f"(`hf download {model_id}`), or point HF_HOME at a Hugging Face cache that holds it, "
        f"or pass a local directory with config.json and the weights as model_id. [{reason}]"
    )


@contextmanager
def quiet_transformers_progress() -> Iterator[None]:
    """transformers' own tqdm bars off for the block ("Loading weights" of a model read from the local
    cache, "Writing model shards" of a saved one: a fraction of a second each, noise on the console);
    restored after. Downloads from the hub run outside it and keep their bars."""
    try:
        from transformers.utils import logging as transformers_logging
    except ImportError:
        yield
        return
    was_on = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            transformers_logging.enable_progress_bar()


def _cache_first(loader: Callable, model_id: str, **kwargs):
    """``loader(model_id, local_files_only=..., **kwargs)``: the local cache first (no network), then
    the hub only if a quick probe reaches it. huggingface_hub otherwise retries an unreachable hub for
    ~25 s per file; offline mode never leaves the cache. A cached copy of a branch is used as is:
    ``hf download <id>`` refreshes it."""
    try:
        with quiet_transformers_progress():
            return loader(model_id, local_files_only=True, **kwargs)
    except OSError:
        if hub_offline() or Path(model_id).expanduser().is_dir():
            raise
    if not hub_reachable():
        host = urlparse(huggingface_hub.constants.ENDPOINT).hostname
        raise OSError(f"not in the local cache and the hub ({host}:443) is unreachable")
    return loader(model_id, local_files_only=False, **kwargs)


def load_pretrained(
    loader: Callable,
    model_id: str,
    revision: str | None = None,
    what: str = "model",
    only_files: Sequence[str] = (),
    **kwargs,
):
    """``loader(model_id, revision=revision, local_files_only=..., **kwargs)`` (any ``from_pretrained``),
    cache first, then the hub if reachable and not offline.

    ``what`` names the part in the error ("config", "weights", "processor", "tokenizer", ...);
    ``only_files``, where the caller needs no weights, the files the error tells the user to download. A
    missing local directory, files in neither place, or a directory transformers cannot read
    (OSError / ValueError) raise :class:`MissingWeightsError`.
    """
    local_dir(model_id)
    try:
        return _cache_first(loader, model_id, revision=revision, **kwargs)
    except (OSError, ValueError) as err:
        raise MissingWeightsError(missing_weights_message(model_id, what, err, revision, only_files)) from err


#: the files transformers' ``from_pretrained`` reads the weights from (one of them, or an index)
HF_WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


#: what a random control (an architecture built from its config with fresh weights) reads of a model: its
#: architecture and its input normalisation, never the weights
RANDOM_CONTROL_FILES = ("config.json", "preprocessor_config.json")


def _hub_unusable() -> BaseException | None:
    """Why files not in the local cache cannot be downloaded at the load (offline: None is returned only
    online, with the hub reachable)."""
    if hub_offline():
        return FileNotFoundError("offline")
    if not hub_reachable():
        host = urlparse(huggingface_hub.constants.ENDPOINT).hostname
        return OSError(f"not in the local cache and the hub ({host}:443) is unreachable")
    return None


def _has_file(model_id: str, folder: Path | None, names: Sequence[str], revision: str | None, cache_dir: str | None):
    """Whether one of ``names`` is in the local ``folder`` of ``model_id``, or (``folder`` None: a hub id)
    in the local Hugging Face cache at ``revision`` (a file read: huggingface_hub's public
    ``try_to_load_from_cache``; ValueError for an id that is no valid hub id)."""
    if folder is not None:
        return any((folder / name).is_file() for name in names)
    return any(
        isinstance(huggingface_hub.try_to_load_from_cache(model_id, name, cache_dir=cache_dir, revision=revision), str)
        for name in names
    )


def check_weights_available(model_id: str, revision: str | None = None, cache_dir: str | None = None) -> None:
    """Fail now, without reading any weights, when the weights of ``model_id`` cannot be had later.

    For a model whose weights are loaded only at its first forward (a lazy upstream): a local
    directory must hold one of :data:`HF_WEIGHT_FILES`; a hub id must have one in the local cache,
    or the hub must be usable (not offline, reachable). Raises :class:`MissingWeightsError`
    with the same one line as :func:`load_pretrained`.
    """
    _check_files(model_id, revision, cache_dir, config=False, weights=True)


def check_model_files(
    model_id: str, revision: str | None = None, cache_dir: str | None = None, only_files: Sequence[str] = ()
) -> None:
    """Fail now, reading no model and importing neither torch nor transformers, when a ``from_pretrained``
    load of ``model_id`` will not find its ``config.json`` or (unless ``only_files``) its weights: a local
    folder must hold them; a hub id must have them in the local Hugging Face cache, or the hub must be usable
    (not offline, reachable: the load downloads them). ``only_files``: what a caller that needs no weights
    reads (:data:`RANDOM_CONTROL_FILES`: config.json required), named by the error. Raises
    :class:`MissingWeightsError` with the one line of :func:`load_pretrained` naming what is missing (the
    config, the weights, or both)."""
    _check_files(model_id, revision, cache_dir, config=True, weights=not only_files, only_files=only_files)


def _check_files(
    model_id: str, revision: str | None, cache_dir: str | None, config: bool, weights: bool, only_files=()
) -> None:
    """:func:`check_model_files` of the config and/or the weights."""
    folder = local_dir(model_id)
    wanted = [("config", ("config.json",))] * config + [("weights", HF_WEIGHT_FILES)] * weights
    try:
        missing = [part for part, names in wanted if not _has_file(model_id, folder, names, revision, cache_dir)]
    except ValueError as exc:  # not a valid hub id (huggingface_hub's validation)
        raise MissingWeightsError(missing_weights_message(model_id, "config", exc, revision, only_files)) from exc
    if not missing:
        return
    cause = None if folder is not None else _hub_unusable()
    if folder is None and cause is None:
        return  # online, the hub reachable: the load downloads them
    if folder is not None or isinstance(cause, FileNotFoundError):
        files = {"config": "config.json", "weights": f"weights file ({' / '.join(HF_WEIGHT_FILES[::2])})"}
        where = f"in {folder}" if folder is not None else "in the local cache"
        cause = FileNotFoundError(f"no {' and no '.join(files[part] for part in missing)} {where}")
    what = " and ".join(missing)
    raise MissingWeightsError(
        missing_weights_message(model_id, what, cause, revision, only_files if what == "config" else ())
    )


# --- what was loaded ---------------------------------------------------------------------------------


def sha256_json(obj) -> str:
    """sha256 hex of ``obj`` as canonical JSON (sorted keys; non-JSON values by ``str``)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True, eq=False)
class ModelFingerprint:
    """What determines a model's outputs, and its digest (the namespace of the feature cache, the ASR
    hypothesis cache and the speech-LLM answer signatures).

    ``fields``: JSON-able identity fields (model id, revision, layer convention or decoding settings,
    dtype, library versions, local weight digest, seed...). ``digest``: the first 32 hex digits of
    :func:`sha256_json` of ``fields``; equal fields give equal digests on every machine.
    """

    fields: Mapping

    def __post_init__(self):
        object.__setattr__(self, "fields", dict(self.fields))

    @property
    def digest(self) -> str:
        return sha256_json(self.fields)[:32]

    def __eq__(self, other) -> bool:
        return isinstance(other, ModelFingerprint) and self.digest == other.digest

    def __hash__(self) -> int:
        return hash(self.digest)


class FingerprintedModel:
    """Mixin: ``model_fingerprint`` and its digest ``fingerprint`` (a cache namespace) from the class's
    ``fingerprint_fields()`` (upstreams, deferred upstreams, ASR models, speech LLMs)."""

    @property
    def model_fingerprint(self) -> ModelFingerprint:
        """``fingerprint_fields()`` and their digest."""
        return ModelFingerprint(self.fingerprint_fields())

    @property
    def fingerprint(self) -> str:
        """Stable hex digest of ``fingerprint_fields()``: equal fields, equal digest on every machine."""
        return self.model_fingerprint.digest


def local_weights_digest(folder: Path, contents: bool = False) -> list[list] | str:
    """Identity of a local model directory's weights, as the two caches have always keyed it.

    ``contents=False`` (upstreams): ``[[name, bytes, mtime_ns], ...]`` of the files whose name ends
    with one of :data:`WEIGHT_SUFFIXES`, a cheap change detector. ``contents=True`` (ASR models):
    sha256 hex over the names and bytes of the files whose suffix is one of
    :data:`HF_WEIGHT_SUFFIXES` (a copied folder keeps its cache). Files in name order.
    """
    files = sorted(p for p in Path(folder).iterdir() if p.is_file())
    if not contents:
        return [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in files if p.name.endswith(WEIGHT_SUFFIXES)]
    h = hashlib.sha256()
    for p in (p for p in files if p.suffix in HF_WEIGHT_SUFFIXES):
        h.update(p.name.encode())
        with p.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def cached_snapshot(model_id: str, revision: str | None = None, cache_dir: str | None = None) -> Path | None:
    """The snapshot folder of the local Hugging Face cache that ``revision`` of hub id ``model_id``
    resolves to (the one holding its config.json; a file read, no network), or None when it is not cached,
    ``model_id`` is a local folder or no valid hub id."""
    if Path(model_id).expanduser().is_dir():
        return None  # a local folder has no snapshot
    try:
        found = huggingface_hub.try_to_load_from_cache(
            model_id, "config.json", cache_dir=cache_dir, revision=revision or None
        )
    except ValueError:  # not a valid hub id
        return None
    return Path(found).parent if isinstance(found, str) else None


def cached_commit(model_id: str, revision: str | None = None, cache_dir: str | None = None) -> str | None:
    """The commit ``revision`` of hub id ``model_id`` resolves to in the local Hugging Face cache (the name
    of its :func:`cached_snapshot`), or None when it is not cached.

    Loading is cache-first (:func:`load_pretrained`), so after a load this is the commit that was loaded.
    transformers 5 no longer records it on the config (``_commit_hash``, None there): it is read from
    the cache, for the upstreams' fingerprints, the run digest and the speech-LLM adapters alike.
    """
    snapshot = cached_snapshot(model_id, revision, cache_dir)
    return snapshot.name if snapshot is not None else None


def resolve_device(device: str = "auto") -> str:
    """``auto`` -> ``cuda`` when a GPU is visible, else ``cpu``; any other value as given."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"

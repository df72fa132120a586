"""The model files a job's config needs, checked before torch, transformers or Lightning is imported.

A job's pretrained models are the ``model_id`` of its model nodes (:data:`MODEL_NODES`: the upstream, the ASR
model, the speech LLM); a random control (``<node>.randomize=true``) reads its config only
(:data:`~speechbias.model_loading.RANDOM_CONTROL_FILES`), never the weights. Each is checked by
:func:`speechbias.model_loading.check_model_files`: the local folder, or the local Hugging Face cache through
huggingface_hub's public API (no network offline; online, one probe of the hub), nothing loaded. A single
run's config checks (:func:`speechbias.launch.config_checks.check_config`) and a sweep's pre-flight
(:mod:`speechbias.launch.sweep_preflight`, one line for every missing model of the sweep) both use it.
"""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from speechbias.model_loading import RANDOM_CONTROL_FILES, MissingWeightsError, check_model_files

# config nodes that may name a pretrained model (model_id, revision, cache_dir, randomize)
MODEL_NODES = ("upstream", "asr", "sllm")


@dataclass(frozen=True)
class NeededModel:
    """A pretrained model a job loads: its config node, hub id or local folder, revision, Hugging Face cache
    folder (None: HF_HOME's), and ``only_files``: the files it reads instead of the weights (a random control)."""

    node: str
    model_id: str
    revision: str | None = None
    cache_dir: str | None = None
    only_files: tuple[str, ...] = ()

    def check(self) -> None:
        """:class:`~speechbias.model_loading.MissingWeightsError` when its files cannot be had."""
        check_model_files(self.model_id, self.revision, self.cache_dir, self.only_files)


def _value(cfg: DictConfig, key: str):
    """``cfg``'s value at ``key`` resolved; None when absent or when it does not resolve (the build says why)."""
    try:
        return OmegaConf.select(cfg, key, default=None)
    except OmegaConfBaseException:
        return None


def needed_models(cfg: DictConfig) -> list[NeededModel]:
    """The pretrained models of ``cfg`` (a job config): one per model node that names a ``model_id``."""
    found = []
    for node in MODEL_NODES:
        model_id = _value(cfg, f"{node}.model_id")
        if not isinstance(model_id, str) or not model_id:
            continue
        revision, cache_dir = _value(cfg, f"{node}.revision"), _value(cfg, f"{node}.cache_dir")
        only_files = RANDOM_CONTROL_FILES if _value(cfg, f"{node}.randomize") is True else ()
        found.append(NeededModel(node, model_id, revision or None, cache_dir or None, only_files))
    return found


def missing_model_files(cfg: DictConfig) -> list[MissingWeightsError]:
    """The error of each model of ``cfg`` whose files cannot be had (empty: all can)."""
    missing = []
    for model in needed_models(cfg):
        try:
            model.check()
        except MissingWeightsError as exc:
            missing.append(exc)
    return missing

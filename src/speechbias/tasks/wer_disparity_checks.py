"""The ASR disparity task's config checks (``task=wer_disparity``): its settings, an ASR model and a corpus
are chosen."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from speechbias.errors import ConfigError
from speechbias.tasks.input_checks import check_cache_folder
from speechbias.tasks.wer_disparity_settings import SETTINGS


def check_config(cfg: DictConfig) -> None:
    """The task's settings (``task.*``, ``task.glmm.*``, ``corpus.*``: wer_disparity_settings); the cache
    folder takes files; ``asr`` and ``corpus`` are given."""
    for group in SETTINGS:
        group.from_config(cfg)
    check_cache_folder(cfg)
    for group in ("asr", "corpus"):
        if OmegaConf.select(cfg, group, default=None) is None:
            raise ConfigError(
                f"{group}: required by task=wer_disparity, e.g. python evaluate.py "
                "task=wer_disparity asr=whisper_small corpus=fair_speech"
            )

"""The ASR disparity task's config checks (``task=wer_disparity``): an ASR model and a corpus are chosen."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from speechbias.errors import ConfigError
from speechbias.tasks.input_checks import check_cache_folder


def check_config(cfg: DictConfig) -> None:
    """The cache folder takes files; ``asr`` and ``corpus`` are given."""
    check_cache_folder(cfg)
    for group in ("asr", "corpus"):
        if OmegaConf.select(cfg, group, default=None) is None:
            raise ConfigError(
                f"{group}: required by task=wer_disparity, e.g. python evaluate.py "
                "task=wer_disparity asr=whisper_small corpus=fair_speech"
            )

"""Family adapters of :class:`~speechbias.upstream.hf.HFUpstream` (contract in :mod:`.base`), by model_type."""

from __future__ import annotations

from speechbias.upstream.families.base import EncoderFamily
from speechbias.upstream.families.wav2vec2_like import Wav2Vec2LikeFamily
from speechbias.upstream.families.whisper_encoder import WhisperEncoderFamily

#: config.model_type -> the adapter of its family
FAMILIES: dict[str, type[EncoderFamily]] = {
    model_type: adapter
    for adapter in (Wav2Vec2LikeFamily, WhisperEncoderFamily)
    for model_type in adapter.model_classes
}

__all__ = ["FAMILIES", "EncoderFamily", "Wav2Vec2LikeFamily", "WhisperEncoderFamily"]

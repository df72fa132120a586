"""wav2vec2, HuBERT and WavLM: a conv feature encoder on the raw 16 kHz waveform, then transformer blocks.

* Input: the waveform, optionally per-clip zero-mean unit-variance (``normalize``: the argument,
  else the checkpoint's preprocessor_config.json ``do_normalize``, else True for layer-norm feature
  encoders and False for group-norm ones, the fairseq pre-training setting).
* Padding: layer-norm feature encoders (``feat_extract_norm == "layer"``) get an attention mask and
  are pad-invariant; group-norm ones (base-style) normalise each channel over the whole input, so
  zero padding changes every frame: ``pad_invariant = False`` (the upstream then runs a
  mixed-length batch one length at a time).
* Valid frames: the conv stack's length formula (an adapter, which runs after the blocks, is not
  counted); 50 frames per second for the usual 320x downsampling; ``min_samples`` is the receptive
  field (400 samples).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence

import torch
from torch import nn
from transformers import (
    HubertConfig,
    HubertModel,
    PretrainedConfig,
    Wav2Vec2Config,
    Wav2Vec2FeatureExtractor,
    Wav2Vec2Model,
    WavLMConfig,
    WavLMModel,
)

from speechbias.fileio.audio import SAMPLE_RATE
from speechbias.model_loading import MissingWeightsError, load_pretrained
from speechbias.upstream.families.base import EncoderFamily

log = logging.getLogger(__name__)


def receptive_field(kernels: Sequence[int], strides: Sequence[int]) -> int:
    """Samples seen by one output frame of a stack of unpadded 1-D convolutions."""
    field = 1
    for kernel, stride in zip(reversed(list(kernels)), reversed(list(strides))):
        field = (field - 1) * stride + kernel
    return field


def conv_frames(lengths: torch.Tensor, kernels: Sequence[int], strides: Sequence[int]) -> torch.Tensor:
    """Output frames of a stack of unpadded 1-D convolutions for inputs of ``lengths`` samples: the
    Conv1d formula ``(n - kernel) // stride + 1`` layer by layer (what the models compute inside)."""
    for kernel, stride in zip(kernels, strides):
        lengths = torch.div(lengths - kernel, stride, rounding_mode="floor") + 1
    return lengths


def zero_mean_unit_variance(wavs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Per-clip normalisation over valid samples, as Wav2Vec2FeatureExtractor(do_normalize=True):
    (x - mean) / sqrt(var + 1e-7), population variance, padding left at 0. wavs (B, S)."""
    valid = (torch.arange(wavs.shape[1], device=wavs.device)[None, :] < lengths[:, None]).to(wavs.dtype)
    count = lengths[:, None].to(wavs.dtype)
    mean = (wavs * valid).sum(dim=1, keepdim=True) / count
    var = (((wavs - mean) * valid) ** 2).sum(dim=1, keepdim=True) / count
    return (wavs - mean) / torch.sqrt(var + 1e-7) * valid


def checkpoint_normalize(model_id: str, load_kwargs: Mapping) -> bool | None:
    """``do_normalize`` of the checkpoint's preprocessor_config.json; None when it has none."""
    try:
        extractor = load_pretrained(
            Wav2Vec2FeatureExtractor.from_pretrained, model_id, what="feature extractor", **load_kwargs
        )
    except MissingWeightsError:
        log.warning("%s has no preprocessor_config.json; normalize follows feat_extract_norm", model_id)
        return None
    return bool(extractor.do_normalize)


class Wav2Vec2LikeFamily(EncoderFamily):
    """wav2vec2 / HuBERT / WavLM: the whole model is the encoder; blocks are ``encoder.layers``."""

    model_classes = {
        "wav2vec2": (Wav2Vec2Config, Wav2Vec2Model),
        "hubert": (HubertConfig, HubertModel),
        "wavlm": (WavLMConfig, WavLMModel),
    }

    def __init__(
        self,
        config: PretrainedConfig,
        normalize: bool | None = None,
        model_id: str | None = None,
        load_kwargs: Mapping | None = None,
    ):
        super().__init__()
        self.conv_kernel = tuple(config.conv_kernel)
        self.conv_stride = tuple(config.conv_stride)
        self.hidden_size = int(config.hidden_size)
        self.frame_rate = SAMPLE_RATE / math.prod(self.conv_stride)
        self.min_samples = receptive_field(self.conv_kernel, self.conv_stride)
        self.max_samples = None
        self.uses_attention_mask = config.feat_extract_norm == "layer"
        self.pad_invariant = self.uses_attention_mask
        if normalize is not None:
            self.normalize, self.normalize_source = bool(normalize), "argument"
            return
        from_checkpoint = checkpoint_normalize(model_id, load_kwargs or {}) if model_id is not None else None
        if from_checkpoint is not None:
            self.normalize, self.normalize_source = from_checkpoint, "preprocessor_config"
        else:
            self.normalize, self.normalize_source = self.uses_attention_mask, "feat_extract_norm"

    @staticmethod
    def encoder_of(model: nn.Module) -> nn.Module:
        return model

    @staticmethod
    def num_blocks(config: PretrainedConfig) -> int:
        return int(config.num_hidden_layers)

    def blocks(self, encoder: nn.Module) -> nn.ModuleList:
        return encoder.encoder.layers

    def encoder_inputs(self, wavs: torch.Tensor, lengths: torch.Tensor, dtype: torch.dtype) -> dict:
        if self.normalize:
            wavs = zero_mean_unit_variance(wavs, lengths)
        attention_mask = None
        if self.uses_attention_mask:
            attention_mask = (torch.arange(wavs.shape[1], device=wavs.device)[None, :] < lengths[:, None]).long()
        return {"input_values": wavs.to(dtype), "attention_mask": attention_mask}

    def frame_lengths(self, lengths: torch.Tensor) -> torch.Tensor:
        return conv_frames(lengths, self.conv_kernel, self.conv_stride).long()

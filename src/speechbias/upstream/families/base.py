"""The family adapter contract: what differs between the transformers speech encoders behind HFUpstream.

:class:`~speechbias.upstream.hf.HFUpstream` owns the loading, the encoder's weights, the block
recording (layer convention ``block-io-v1``), batching and the fingerprint. A family adapter says,
for one family, how a padded waveform batch becomes the encoder's inputs, which frames are valid,
which modules are the transformer blocks and which clip lengths the encoder takes. It holds no
weights; buffers of its front end (Whisper's mel filters) move with the upstream.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import ClassVar

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel


class EncoderFamily(nn.Module, ABC):
    """One family of encoders (e.g. wav2vec2/HuBERT/WavLM, or Whisper).

    Built with ``(config, normalize, model_id, load_kwargs)``: the model's config, the ``normalize``
    argument of HFUpstream (None = the family's default), and where the model came from (None for
    a config-dict model) for families that read a preprocessor config. Everything it states is
    read from the config, so an upstream knows its shape and fingerprint before (or without)
    building its model; :meth:`check_encoder` checks that against the built encoder.
    """

    #: model_type -> (config class, model class) of every model type of the family
    model_classes: ClassVar[Mapping[str, tuple[type[PretrainedConfig], type[PreTrainedModel]]]]

    hidden_size: int  # width D of every state
    frame_rate: float  # frames per second of the states
    min_samples: int  # shortest clip (samples) giving one frame
    max_samples: int | None  # longest clip the encoder takes (None = no limit)
    pad_invariant: bool  # zero padding within a batch leaves each clip's states unchanged
    normalize: bool  # per-clip zero-mean unit-variance of the waveform
    normalize_source: str  # what decided ``normalize``

    @staticmethod
    @abstractmethod
    def encoder_of(model: PreTrainedModel) -> nn.Module:
        """The module HFUpstream runs: the loaded model, or its encoder part."""

    @staticmethod
    @abstractmethod
    def num_blocks(config: PretrainedConfig) -> int:
        """Transformer blocks of the encoder the config describes (len of :meth:`blocks`)."""

    def check_encoder(self, encoder: nn.Module) -> None:
        """Raise RuntimeError when the built encoder contradicts what was read from the config."""

    @abstractmethod
    def blocks(self, encoder: nn.Module) -> nn.ModuleList:
        """The encoder's transformer blocks, in order (the layers of block-io-v1)."""

    @abstractmethod
    def encoder_inputs(self, wavs: torch.Tensor, lengths: torch.Tensor, dtype: torch.dtype) -> dict:
        """Keyword arguments of ``encoder(...)`` for float32 ``wavs`` (B, S), zero past each clip's
        ``lengths`` (B,), S = the longest length; floating inputs in the compute ``dtype``."""

    @abstractmethod
    def frame_lengths(self, lengths: torch.Tensor) -> torch.Tensor:
        """Valid frames (B,) int64 of clips of ``lengths`` samples; the states are cut to the largest."""

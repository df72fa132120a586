"""Whisper, encoder only: every clip in its own 30 s log-mel window, only the frames of real audio kept.

* Input: the log-mel of :mod:`speechbias.upstream.whisper_frontend` (the feature extractor's
  computation, batched in torch), each clip padded with zeros to 30 s, so a clip never sees its
  batch neighbours (pad-invariant). Clips over 30 s raise ValueError (no chunking); ``normalize``
  is not defined (the log-mel front end has its own scaling).
* Valid frames: the ``(mel_frames - 1)//2 + 1`` encoder frames that cover real audio
  (mel_frames = ceil(samples / 160)); 50 frames per second.
* Blocks: ``encoder.layers``; the decoder is never run.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import PretrainedConfig, WhisperConfig, WhisperModel

from speechbias.upstream import whisper_frontend
from speechbias.upstream.families.base import EncoderFamily


class WhisperEncoderFamily(EncoderFamily):
    model_classes = {"whisper": (WhisperConfig, WhisperModel)}

    #: strides of WhisperEncoder's conv1 and conv2 (fixed by the architecture, not in the config)
    conv_strides = (1, 2)

    def __init__(
        self, config: PretrainedConfig, normalize: bool | None = None, model_id: str | None = None, load_kwargs=None
    ):
        super().__init__()
        if normalize:
            raise ValueError("normalize=true is not defined for Whisper (its log-mel front end has its own scaling)")
        self.normalize, self.normalize_source = False, "whisper"
        self.hidden_size = int(config.d_model)
        extractor = whisper_frontend.feature_extractor_for(config)
        self.register_buffer("mel_filters", torch.from_numpy(extractor.mel_filters).float(), persistent=False)
        samples_per_frame = whisper_frontend.HOP_LENGTH * self.conv_strides[0] * self.conv_strides[1]
        self.frame_rate = whisper_frontend.SAMPLE_RATE / samples_per_frame
        self.min_samples = 1
        self.max_samples = whisper_frontend.WINDOW_SAMPLES
        self.pad_invariant = True  # each clip is padded to its own 30 s window

    @staticmethod
    def encoder_of(model: nn.Module) -> nn.Module:
        return model.get_encoder()

    @staticmethod
    def num_blocks(config: PretrainedConfig) -> int:
        return int(config.encoder_layers)

    def check_encoder(self, encoder: nn.Module) -> None:
        strides = (encoder.conv1.stride[0], encoder.conv2.stride[0])
        if strides != self.conv_strides:
            raise RuntimeError(f"Whisper encoder conv strides {strides}, expected {self.conv_strides}")

    def blocks(self, encoder: nn.Module) -> nn.ModuleList:
        return encoder.layers

    def encoder_inputs(self, wavs: torch.Tensor, lengths: torch.Tensor, dtype: torch.dtype) -> dict:
        return {"input_features": whisper_frontend.log_mel_window(wavs, self.mel_filters).to(dtype)}

    def frame_lengths(self, lengths: torch.Tensor) -> torch.Tensor:
        return whisper_frontend.encoder_frames(lengths)

"""Whisper's input side: the 30 s log-mel window and how many encoder frames cover real audio.

The log-mel follows ``WhisperFeatureExtractor`` (same mel filters, constants and clamping) but runs
batched on the tensors' own device, so a GPU batch needs no numpy round trip; it is checked against
the feature extractor in tests/upstream/test_whisper.py.
"""

from __future__ import annotations

import torch
from transformers import WhisperConfig, WhisperFeatureExtractor

from speechbias.fileio.audio import SAMPLE_RATE

WINDOW_SECONDS = 30
HOP_LENGTH = 160  # samples per mel frame
N_FFT = 400
WINDOW_SAMPLES = WINDOW_SECONDS * SAMPLE_RATE  # 480 000


def feature_extractor_for(config: WhisperConfig) -> WhisperFeatureExtractor:
    """The feature extractor of a Whisper model, built from its config (no hub access)."""
    return WhisperFeatureExtractor(
        feature_size=config.num_mel_bins,
        sampling_rate=SAMPLE_RATE,
        hop_length=HOP_LENGTH,
        chunk_length=WINDOW_SECONDS,
        n_fft=N_FFT,
    )


def log_mel_window(wavs: torch.Tensor, mel_filters: torch.Tensor) -> torch.Tensor:
    """Whisper log-mel of each clip padded with zeros to 30 s.

    wavs: (B, S) float, S <= 480 000, zero after each clip's end. mel_filters: (N_FFT//2+1, n_mels).
    Returns (B, n_mels, 3000) float32. Each row depends on its own clip only (the clamp at
    max - 8 is per clip).
    """
    wavs = wavs.float()
    if wavs.shape[1] < WINDOW_SAMPLES:
        wavs = torch.nn.functional.pad(wavs, (0, WINDOW_SAMPLES - wavs.shape[1]))
    window = torch.hann_window(N_FFT, device=wavs.device)
    stft = torch.stft(wavs, N_FFT, HOP_LENGTH, window=window, return_complex=True)
    power = (stft[..., :-1].abs() ** 2).contiguous()  # (B, freq, 3000)
    mel = mel_filters.to(device=wavs.device, dtype=torch.float32).T @ power
    log_spec = torch.clamp(mel, min=1e-10).log10()
    peak = log_spec.amax(dim=(1, 2), keepdim=True)
    log_spec = torch.maximum(log_spec, peak - 8.0)
    return (log_spec + 4.0) / 4.0


def mel_frames(lengths: torch.Tensor) -> torch.Tensor:
    """Mel frames that cover real audio: ceil(n / 160), as the feature extractor's attention mask."""
    return torch.div(lengths + HOP_LENGTH - 1, HOP_LENGTH, rounding_mode="floor")


def encoder_frames(lengths: torch.Tensor) -> torch.Tensor:
    """Encoder frames that cover real audio: (mel_frames - 1)//2 + 1 (conv2 has stride 2, pad 1)."""
    return torch.div(mel_frames(lengths) - 1, 2, rounding_mode="floor") + 1

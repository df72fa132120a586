"""Weight-free baselines: log-mel filterbank and MFCC, one layer each (layer 0).

Frames: 25 ms Hann window (400 samples at 16 kHz), 10 ms hop (160), FFT size 512, power spectrum,
HTK-scale triangular mel filters (``transformers.audio_utils.mel_filter_bank``) from 20 Hz to
Nyquist, natural log floored at 1e-10. Only frames lying wholly inside the clip are made
(``1 + (n - 400)//160``; no centring, no padding), so a clip's frames never see its batch
neighbours. MFCC = orthonormal DCT-II of the log-mels (``scipy.fft.dct``), first ``n_mfcc``.
"""

from __future__ import annotations

import numpy as np
import scipy.fft
import torch
from transformers.audio_utils import mel_filter_bank

from speechbias.upstream.base import Upstream
from speechbias.upstream.batching import check_batch, mask_frames
from speechbias.upstream.classical_fingerprint import FAMILY, FbankConfig, MfccConfig, constructor_signature


class FbankUpstream(Upstream):
    """Log-mel filterbank energies: states [(B, T, n_mels)] at 1000/hop_ms frames per second."""

    family = FAMILY
    config_class = FbankConfig  # the constructor's parameters, defaults and checks

    def __init__(self, **arguments):
        """The fields of :attr:`config_class`, checked first (its ValueErrors)."""
        config = self.config_class(**arguments)
        super().__init__()
        self.config, fields = config, config.fingerprint_fields()  # sizes in samples, f_max resolved
        self.sample_rate, self.n_fft, self.n_mels = fields["sample_rate"], fields["n_fft"], fields["n_mels"]
        self.win_length, self.hop_length = fields["win_length"], fields["hop_length"]
        self.f_min, self.f_max, self.display_name = fields["f_min"], fields["f_max"], config.display_name
        filters = mel_filter_bank(
            num_frequency_bins=self.n_fft // 2 + 1,
            num_mel_filters=self.n_mels,
            min_frequency=self.f_min,
            max_frequency=self.f_max,
            sampling_rate=self.sample_rate,
            norm=None,
            mel_scale="htk",
        )
        self.register_buffer("mel_filters", torch.from_numpy(filters).float(), persistent=False)  # (freq, mels)
        self.register_buffer("window", torch.hann_window(self.win_length), persistent=False)
        self.num_layers = 1
        self.hidden_size = self.n_mels
        self.frame_rate = self.sample_rate / self.hop_length
        self.min_samples = self.win_length
        self.pad_invariant = True

    # what inspect.signature shows (Hydra's target checks, users): each field of the config with its default
    __init__.__signature__ = constructor_signature(FbankConfig)

    def frame_count(self, lengths: torch.Tensor) -> torch.Tensor:
        """Frames wholly inside each clip: 1 + (n - win) // hop."""
        return torch.div(lengths - self.win_length, self.hop_length, rounding_mode="floor") + 1

    def log_mel(self, wavs: torch.Tensor) -> torch.Tensor:
        """(B, S) waveform -> (B, T, n_mels) log-mel energies of every whole frame."""
        frames = wavs.float().unfold(-1, self.win_length, self.hop_length) * self.window
        power = torch.fft.rfft(frames, n=self.n_fft).abs() ** 2
        return torch.log(torch.clamp(power @ self.mel_filters, min=1e-10))

    def features(self, wavs: torch.Tensor) -> torch.Tensor:
        return self.log_mel(wavs)

    def forward(self, wavs: torch.Tensor, lengths: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        lengths = check_batch(wavs, lengths, min_samples=self.min_samples, upstream=self.name)
        frame_lengths = self.frame_count(lengths)
        with torch.no_grad():
            states = self.features(wavs[:, : int(lengths.max())])
            return mask_frames([states[:, : int(frame_lengths.max())]], frame_lengths), frame_lengths

    @property
    def name(self) -> str:
        return self.display_name or type(self).__name__

    def fingerprint_fields(self) -> dict:
        """The config's (``classical_fingerprint``: a config gives them without building the upstream)."""
        return self.config.fingerprint_fields()


class MfccUpstream(FbankUpstream):
    """MFCCs: orthonormal DCT-II over the log-mel axis, first ``n_mfcc`` coefficients (c0 kept)."""

    config_class = MfccConfig

    def __init__(self, **arguments):
        super().__init__(**arguments)
        self.n_mfcc = int(self.config.n_mfcc)
        # row k of dct(I) along axis 0 is the k-th DCT-II basis vector over the mel axis
        basis = scipy.fft.dct(np.eye(self.n_mels), type=2, norm="ortho", axis=0)[: self.n_mfcc]
        self.register_buffer("dct_basis", torch.from_numpy(basis).float(), persistent=False)  # (mfcc, mels)
        self.hidden_size = self.n_mfcc

    __init__.__signature__ = constructor_signature(MfccConfig)

    def features(self, wavs: torch.Tensor) -> torch.Tensor:
        return self.log_mel(wavs) @ self.dct_basis.T

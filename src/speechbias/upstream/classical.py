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

from speechbias.fileio.audio import SAMPLE_RATE
from speechbias.upstream.base import Upstream
from speechbias.upstream.batching import check_batch, mask_frames
from speechbias.upstream.classical_fingerprint import FAMILY, fbank_config_fingerprint, mfcc_config_fingerprint


class FbankUpstream(Upstream):
    """Log-mel filterbank energies: states [(B, T, n_mels)] at 1000/hop_ms frames per second."""

    family = FAMILY

    def __init__(
        self,
        n_mels: int = 80,
        win_ms: float = 25.0,
        hop_ms: float = 10.0,
        n_fft: int = 512,
        f_min: float = 20.0,
        f_max: float | None = None,
        sample_rate: int = SAMPLE_RATE,
        randomize: bool = False,
        display_name: str | None = None,
        seed: int | None = None,
    ):
        """``randomize`` must stay false (nothing to randomise); ``seed`` is accepted so every upstream
        config has the same keys, and is unused. The sizes and the checks are those of
        :func:`~speechbias.upstream.classical_fingerprint.fbank_config_fingerprint` (its fingerprint)."""
        super().__init__()
        fields = fbank_config_fingerprint(
            n_mels, win_ms, hop_ms, n_fft, f_min, f_max, sample_rate, randomize, display_name, seed
        )
        self._fingerprint_fields = fields
        self.sample_rate, self.win_length, self.hop_length = (
            fields["sample_rate"],
            fields["win_length"],
            fields["hop_length"],
        )
        self.n_fft, self.n_mels, self.f_min, self.f_max = (
            fields["n_fft"],
            fields["n_mels"],
            fields["f_min"],
            fields["f_max"],
        )
        self.display_name = display_name
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
        """The ``classical_fingerprint`` function of the constructor's arguments (a config gives the same
        fields without building it)."""
        return dict(self._fingerprint_fields)


class MfccUpstream(FbankUpstream):
    """MFCCs: orthonormal DCT-II over the log-mel axis, first ``n_mfcc`` coefficients (c0 kept)."""

    def __init__(self, n_mfcc: int = 40, n_mels: int = 80, **kwargs):
        fields = mfcc_config_fingerprint(n_mfcc, n_mels, **kwargs)  # its checks first (n_mfcc, randomize)
        super().__init__(n_mels=n_mels, **kwargs)
        self._fingerprint_fields = fields
        self.n_mfcc = int(n_mfcc)
        # row k of dct(I) along axis 0 is the k-th DCT-II basis vector over the mel axis
        basis = scipy.fft.dct(np.eye(n_mels), type=2, norm="ortho", axis=0)[:n_mfcc]
        self.register_buffer("dct_basis", torch.from_numpy(basis).float(), persistent=False)  # (mfcc, mels)
        self.hidden_size = self.n_mfcc

    def features(self, wavs: torch.Tensor) -> torch.Tensor:
        return self.log_mel(wavs) @ self.dct_basis.T

"""The weight-free baselines' parameters (fbank, mfcc), declared once, and their fingerprint; no torch.

:class:`FbankConfig` / :class:`MfccConfig` hold the fields, defaults and checks of the constructors of
:mod:`speechbias.upstream.classical` (which take these fields) and the fingerprint (the feature-cache
namespace: no weights), read before any build by :mod:`speechbias.upstream.deferred` (a run whose clips are
all cached then imports no torch). Sizes are in samples at ``sample_rate`` Hz; frequencies in Hz.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import ClassVar

from speechbias.fileio.audio import SAMPLE_RATE

IMPLEMENTATION = "speechbias-classical-v1"
FAMILY = "classical"


@dataclass(frozen=True, kw_only=True)
class FbankConfig:
    """``FbankUpstream``'s arguments; ValueError if ``randomize`` (no weights), a window not in 1..n_fft samples
    or a hop <= 0. ``seed`` is unused (every upstream config has the key)."""

    n_mels: int = 80
    win_ms: float = 25.0
    hop_ms: float = 10.0
    n_fft: int = 512
    f_min: float = 20.0
    f_max: float | None = None  # None: Nyquist
    sample_rate: int = SAMPLE_RATE
    randomize: bool = False
    display_name: str | None = None
    seed: int | None = None

    upstream: ClassVar[str] = "fbank"  # the fingerprint's "upstream"
    class_name: ClassVar[str] = "FbankUpstream"

    def __post_init__(self):
        if self.randomize:
            raise ValueError(f"{self.class_name} has no weights: randomize=true is not defined for it")
        win, hop = self.samples(self.win_ms), self.samples(self.hop_ms)
        if not 0 < win <= self.n_fft:
            raise ValueError(f"win_ms={self.win_ms} gives {win} samples; need 0 < window <= n_fft={self.n_fft}")
        if hop <= 0:
            raise ValueError(f"hop_ms={self.hop_ms} gives a hop of {hop} samples")

    def samples(self, ms: float) -> int:
        """``ms`` milliseconds in samples at ``sample_rate``, rounded (the window and the hop)."""
        return round(ms * self.sample_rate / 1000)

    def fingerprint_fields(self) -> dict:
        """What determines the outputs (sizes in samples, ``f_max`` resolved; not display_name nor seed)."""
        return {
            "upstream": self.upstream,
            "implementation": IMPLEMENTATION,
            "n_mels": int(self.n_mels),
            "win_length": self.samples(self.win_ms),
            "hop_length": self.samples(self.hop_ms),
            "n_fft": int(self.n_fft),
            "f_min": float(self.f_min),
            "f_max": float(self.f_max if self.f_max is not None else self.sample_rate / 2),
            "sample_rate": int(self.sample_rate),
            "layer_convention": "single-layer",
        }


@dataclass(frozen=True, kw_only=True)
class MfccConfig(FbankConfig):
    """``MfccUpstream``'s arguments: :class:`FbankConfig`'s and ``n_mfcc`` in 1..n_mels (checked last)."""

    n_mfcc: int = 40

    upstream: ClassVar[str] = "mfcc"
    class_name: ClassVar[str] = "MfccUpstream"

    def __post_init__(self):
        super().__post_init__()
        if not 0 < self.n_mfcc <= self.n_mels:
            raise ValueError(f"n_mfcc={self.n_mfcc} must be in 1..n_mels={self.n_mels}")

    def fingerprint_fields(self) -> dict:
        return {**super().fingerprint_fields(), "n_mfcc": int(self.n_mfcc)}


def constructor_signature(config_class: type[FbankConfig]) -> inspect.Signature:
    """``(self, *, <config_class's fields, defaults>)``: a constructor's that passes ``**arguments`` to it."""
    fields = inspect.signature(config_class).parameters.values()
    return inspect.Signature([inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD), *fields])

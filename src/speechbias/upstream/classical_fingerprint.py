"""What determines a weight-free baseline's outputs (fbank, mfcc), from its config alone; no torch.

The baselines of :mod:`speechbias.upstream.classical` have no weights: their fingerprint (the feature
cache namespace) is a function of their constructor arguments. These functions are that function and the
constructors' checks, called by the classes themselves (with their arguments: the signatures are the
classes', tested) and, before any upstream is built, by
:class:`speechbias.upstream.deferred.DeferredUpstream` (a run whose clips are all cached then imports
no torch). Sizes are in samples at ``sample_rate`` Hz; frequencies in Hz.
"""

from __future__ import annotations

from speechbias.fileio.audio import SAMPLE_RATE

IMPLEMENTATION = "speechbias-classical-v1"
FAMILY = "classical"


def frame_geometry(win_ms: float, hop_ms: float, n_fft: int, sample_rate: int) -> tuple[int, int]:
    """(window, hop) in samples of ``win_ms`` / ``hop_ms`` at ``sample_rate``; ValueError when the window
    is not in 1..n_fft or the hop is not positive."""
    win_length = round(win_ms * sample_rate / 1000)
    hop_length = round(hop_ms * sample_rate / 1000)
    if not 0 < win_length <= n_fft:
        raise ValueError(f"win_ms={win_ms} gives {win_length} samples; need 0 < window <= n_fft={n_fft}")
    if hop_length <= 0:
        raise ValueError(f"hop_ms={hop_ms} gives a hop of {hop_length} samples")
    return win_length, hop_length


def fbank_config_fingerprint(
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
) -> dict:
    """The fingerprint fields of ``FbankUpstream(**config)``: its sizes (window and hop in samples); the
    constructor's errors (ValueError)."""
    if randomize:
        raise ValueError("FbankUpstream has no weights: randomize=true is not defined for it")
    win_length, hop_length = frame_geometry(win_ms, hop_ms, n_fft, sample_rate)
    return {
        "upstream": "fbank",
        "implementation": IMPLEMENTATION,
        "n_mels": int(n_mels),
        "win_length": win_length,
        "hop_length": hop_length,
        "n_fft": int(n_fft),
        "f_min": float(f_min),
        "f_max": float(f_max if f_max is not None else sample_rate / 2),
        "sample_rate": int(sample_rate),
        "layer_convention": "single-layer",
    }


def mfcc_config_fingerprint(n_mfcc: int = 40, n_mels: int = 80, **kwargs) -> dict:
    """The fingerprint fields of ``MfccUpstream(**config)``; the constructor's errors (ValueError)."""
    if kwargs.get("randomize"):
        raise ValueError("MfccUpstream has no weights: randomize=true is not defined for it")
    fields = fbank_config_fingerprint(n_mels=n_mels, **kwargs)
    if not 0 < n_mfcc <= n_mels:
        raise ValueError(f"n_mfcc={n_mfcc} must be in 1..n_mels={n_mels}")
    return {**fields, "upstream": "mfcc", "n_mfcc": int(n_mfcc)}

"""Load any audio file as float32 mono at 16 kHz, with one clear error per bad file.

Conventions: waveforms are 1-D ``numpy.float32`` arrays in [-1, 1] at ``SAMPLE_RATE`` Hz.
Multi-channel audio is averaged to mono. Resampling uses soxr (high-quality polyphase),
not a hand-written interpolator.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

SAMPLE_RATE = 16_000
SUPPORTED_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg", ".oga", ".opus")
SILENCE_PEAK = 1e-5  # a clip whose absolute peak is below this is "silent only"


class AudioError(ValueError):
    """A file that cannot be used as a stimulus; the message names the file and the problem."""

    def __init__(self, path: str | Path, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{path}: {problem}")


def load_audio(
    path: str | Path,
    sample_rate: int = SAMPLE_RATE,
    min_samples: int = 1,
    pad_short: bool = False,
) -> np.ndarray:
    """Decode ``path`` to a float32 mono waveform at ``sample_rate`` Hz.

    ``min_samples`` is the shortest clip the caller can use (e.g. an upstream's receptive field,
    400 samples for wav2vec2's feature encoder). Shorter clips raise :class:`AudioError`, or are
    zero-padded at the end to ``min_samples`` when ``pad_short`` is true.

    Raises :class:`AudioError` for a missing, unreadable, truncated, empty, silent-only or
    non-finite file.
    """
    p = Path(path)
    if not p.exists():
        raise AudioError(p, "file does not exist")
    if p.is_dir():
        raise AudioError(p, "is a directory, expected an audio file")
    try:
        data, sr = sf.read(str(p), dtype="float32", always_2d=True)
    except Exception as exc:  # libsndfile raises LibsndfileError / RuntimeError subclasses
        raise AudioError(p, f"unreadable or truncated audio ({type(exc).__name__}: {exc})") from exc
    if data.size == 0 or data.shape[0] == 0:
        raise AudioError(p, "contains no samples")
    wav = data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]
    if not np.all(np.isfinite(wav)):
        raise AudioError(p, "contains NaN or infinite samples")
    if float(np.max(np.abs(wav))) < SILENCE_PEAK:
        raise AudioError(p, f"is silent (peak amplitude below {SILENCE_PEAK:g})")
    if sr != sample_rate:
        wav = soxr.resample(wav, sr, sample_rate, quality="HQ")
    wav = np.ascontiguousarray(wav, dtype=np.float32)
    if wav.shape[0] < min_samples:
        if not pad_short:
            raise AudioError(
                p,
                f"too short: {wav.shape[0]} samples at {sample_rate} Hz, the model needs at least "
                f"{min_samples} (pass pad_short=True to zero-pad)",
            )
        wav = np.pad(wav, (0, min_samples - wav.shape[0]))
    return wav


def audio_sha256(wav: np.ndarray, sample_rate: int = SAMPLE_RATE) -> str:
    """Content hash of a decoded waveform (float32 bytes + sample rate), hex digest.

    Hashing decoded audio, not file bytes, makes the key independent of container and tags.
    """
    h = hashlib.sha256()
    h.update(str(int(sample_rate)).encode())
    h.update(np.ascontiguousarray(wav, dtype=np.float32).tobytes())
    return h.hexdigest()

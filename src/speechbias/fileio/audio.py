"""Load any audio file as float32 mono at 16 kHz, with one clear error per bad file.

Conventions: waveforms are 1-D ``numpy.float32`` arrays in [-1, 1] at ``SAMPLE_RATE`` Hz.
Multi-channel audio is averaged to mono. Resampling uses soxr (high-quality polyphase),
not a hand-written interpolator.

Truncation. libsndfile decodes a cut file silently up to the cut, so each file is decoded once and
its decoded length is held against what the container itself declares, read from its bytes:
the WAV/RF64 ``data`` chunk size, the FLAC STREAMINFO total, an MP3 Xing/Info/VBRI frame count
(untagged MP3s: a walk over the MPEG frame headers), and for Ogg (Vorbis, Opus) a walk over the
pages (a page cut off, or no end-of-stream page). "Samples" in messages are per channel, at the
file's own sample rate. libsndfile (soundfile) and soxr are imported at the first decode: a run whose
clips are all cached needs only ``SAMPLE_RATE`` from here.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from typing import TYPE_CHECKING

import numpy as np

from speechbias.fileio.audio_container import ContainerFinding, inspect_container, truncation

if TYPE_CHECKING:
    import soundfile as sf

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
    data, sr = _decode_checked(p)
    if data.size == 0 or data.shape[0] == 0:
        raise AudioError(p, "contains no samples")
    wav = data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]
    if not np.all(np.isfinite(wav)):
        raise AudioError(p, "contains NaN or infinite samples")
    if float(np.max(np.abs(wav))) < SILENCE_PEAK:
        raise AudioError(p, f"is silent (peak amplitude below {SILENCE_PEAK:g})")
    if sr != sample_rate:
        import soxr

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


# --- decoding once, with the container's declared length held against it -------------------------

_UNKNOWN_FRAMES = 2**62  # libsndfile reports SF_COUNT_MAX frames when a header declares no length
_FIX = "re-copy or re-export the file"


def _decode_checked(p: Path) -> tuple[np.ndarray, int]:
    """Decode all of ``p`` once -> ((frames, channels) float32, sample rate in Hz).

    Raises :class:`AudioError` when libsndfile cannot open or decode it, or when it decodes
    fewer samples than the container declares (a truncated file).
    """
    import soundfile as sf

    try:
        f = sf.SoundFile(str(p))
    except Exception as exc:  # libsndfile raises LibsndfileError / RuntimeError subclasses
        raise _decoder_failure(p, None, "libsndfile could not open it", exc) from exc
    with f:
        if f.frames >= _UNKNOWN_FRAMES:
            raise AudioError(
                p,
                "declares no length (a streamed file, e.g. a FLAC STREAMINFO total of 0), which libsndfile "
                "cannot decode to its end; re-encode it (e.g. `ffmpeg -i in.flac out.flac`)",
            )
        reported = int(f.frames)
        try:
            data = f.read(dtype="float32", always_2d=True)
        except Exception as exc:
            raise _decoder_failure(p, reported, _failure_point(f), exc) from exc
        sr = int(f.samplerate)
    finding = inspect_container(p, reported)
    problem = truncation(finding, data.shape[0])
    if problem is not None:
        raise AudioError(p, f"{problem}; {_FIX}")
    if finding.stream_samples is not None and finding.stream_samples > data.shape[0] + finding.frame_samples:
        raise AudioError(
            p,
            f"MP3 without a Xing/Info/VBRI header: libsndfile decodes only {data.shape[0]} of the "
            f"{finding.stream_samples} samples its MPEG frames hold; re-encode it with a header "
            "(e.g. `ffmpeg -i in.mp3 out.flac`)",
        )
    return data, sr


def _failure_point(f: sf.SoundFile) -> str:
    """Where a read failed, in words: after how many frames, when libsndfile can still tell."""
    try:
        position = int(f.tell())
    except Exception:
        position = -1
    return f"the decoder failed after {position} samples" if position >= 0 else "the decoder failed mid-stream"


def _decoder_failure(p: Path, reported: int | None, failure: str, exc: Exception) -> AudioError:
    """The error for a file libsndfile could not open or decode to the end (``failure``: where, in words)."""
    reason = f"{type(exc).__name__}: {exc}"
    try:
        finding = inspect_container(p, reported)
    except OSError:
        finding = ContainerFinding()
    if finding.declared is None and finding.defect is None:
        return AudioError(p, f"unreadable or truncated audio ({reason})")
    declared = f"declared {finding.declared} samples ({finding.source}), " if finding.declared is not None else ""
    defect = f"; {finding.defect}" if finding.defect else ""
    return AudioError(p, f"looks truncated or corrupt: {declared}{failure} ({reason}){defect}; {_FIX}")

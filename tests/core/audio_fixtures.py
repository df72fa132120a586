"""Generate small audio files for tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf


def tone(seconds: float, sr: int = 16_000, freq: float = 220.0, seed: int = 0, channels: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    x = 0.3 * np.sin(2 * np.pi * freq * t) + 0.05 * rng.standard_normal(t.shape)
    if channels > 1:
        x = np.stack([x * (c + 1) / channels for c in range(channels)], axis=1)
    return x.astype(np.float32)


def write_clip(
    path: Path,
    seconds: float = 0.5,
    sr: int = 16_000,
    freq: float = 220.0,
    seed: int = 0,
    fmt: str | None = None,
    channels: int = 1,
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), tone(seconds, sr, freq, seed, channels), sr, format=fmt)
    return path


def write_manifest_tree(root: Path, n_per_role: int = 4, seed: int = 0) -> Path:
    """A bias-test folder: clips for X, Y, A, B with varied lengths and a manifest.csv."""
    import pandas as pd

    rows = []
    rng = np.random.default_rng(seed)
    for r_i, role in enumerate("XYAB"):
        for i in range(n_per_role):
            rel = f"clips/{role}_{i}.wav"
            secs = float(rng.uniform(0.2, 0.6))
            write_clip(root / rel, seconds=secs, freq=150 + 60 * r_i + 7 * i, seed=seed + 10 * r_i + i)
            rows.append(
                {
                    "clip_id": f"{role}{i}",
                    "path": rel,
                    "role": role,
                    "group": role,
                    "speaker": f"s{i}",
                    "pair_id": f"p{i}" if role in "XY" else "",
                    "stratum": "",
                }
            )
    pd.DataFrame(rows).to_csv(root / "manifest.csv", index=False)
    return root / "manifest.csv"


# --- truncated and header-edited copies (independent of speechbias.fileio.audio's parsers) ---------------


def write_cut(
    path: Path,
    keep: int | float,
    fmt: str,
    seconds: float = 2.0,
    sr: int = 16_000,
    channels: int = 1,
    subtype: str | None = None,
) -> tuple[Path, bytes]:
    """Write a valid clip to ``path``, then keep only its first ``keep`` bytes (a float: that fraction;
    a negative int: all but that many). Returns (path, the valid file's bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), tone(seconds, sr, channels=channels), sr, format=fmt, subtype=subtype)
    blob = path.read_bytes()
    n = int(len(blob) * keep) if isinstance(keep, float) else (len(blob) + keep if keep < 0 else keep)
    path.write_bytes(blob[:n])
    return path, blob


def plain_decoded_frames(path: Path) -> int:
    """Frames soundfile's own sf.read returns for ``path`` (what the loader accepted before truncation checks)."""
    return sf.read(str(path), dtype="float32", always_2d=True)[0].shape[0]


def clean_cut_points(blob: bytes, marker: bytes, suffix: str, tmp: Path) -> list[tuple[int, int]]:
    """Cut points at a frame/page start (offsets of ``marker``) where plain soundfile decodes the prefix
    without any error: (offset, frames decoded). These cuts are invisible to the decoder."""
    points, at = [], blob.find(marker, 1)
    while at > 0:
        probe = tmp / f"probe{suffix}"
        probe.write_bytes(blob[:at])
        try:
            frames = plain_decoded_frames(probe)
        except Exception:  # a false hit of the marker inside a frame, or the headers are not complete yet
            frames = 0
        if frames > 0:
            points.append((at, frames))
        at = blob.find(marker, at + 1)
    return points


def xing_frame_count(blob: bytes) -> int:
    """The frame count in an MP3's Xing/Info tag (4 big-endian bytes after the tag id and 4 flag bytes)."""
    at = max(blob.find(b"Xing"), blob.find(b"Info"))
    return int.from_bytes(blob[at + 8 : at + 12], "big")


def without_first_mp3_frame(blob: bytes) -> bytes:
    """Drop an MP3's first frame (the zero-filled Xing/Info tag frame libsndfile's LAME writes): the next
    frame starts at the next copy of the first two header bytes."""
    return blob[blob.find(blob[:2], 4) :]


def with_unknown_flac_length(blob: bytes) -> bytes:
    """Zero the 36-bit total-samples field of STREAMINFO (bytes 21-25 of the file, low nibble of 21 on),
    as a streaming FLAC encoder leaves it."""
    out = bytearray(blob)
    out[21] &= 0xF0
    out[22:26] = bytes(4)
    return bytes(out)


def with_streamed_wav_size(blob: bytes) -> bytes:
    """Set the RIFF and data chunk sizes of a canonical 44-byte-header WAV to 0xFFFFFFFF, as a writer
    that never seeks back (a pipe) leaves them."""
    assert blob[36:40] == b"data", "expects the canonical 44-byte WAV header"
    return blob[:4] + b"\xff\xff\xff\xff" + blob[8:40] + b"\xff\xff\xff\xff" + blob[44:]

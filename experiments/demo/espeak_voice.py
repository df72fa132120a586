"""Synthesize one utterance with espeak-ng into a 16 kHz mono FLAC (used by the demo scripts)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

SR = 16_000


def speak(text: str, voice: str, out: Path, ssml: bool = False) -> None:
    """``text`` (an SSML body when ``ssml``) in espeak-ng ``voice`` -> ``out``: 16 kHz mono
    16-bit FLAC, peak-normalised to 0.8."""
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "out.wav"
        body = f"<speak>{text}</speak>" if ssml else text
        cmd = ["espeak-ng", "-v", voice, "-w", str(wav)] + (["-m"] if ssml else []) + [body]
        subprocess.run(cmd, check=True, capture_output=True)
        data, sr = sf.read(str(wav), dtype="float32")
    if data.ndim > 1:
        data = data.mean(axis=1)
    data = soxr.resample(data, sr, SR)
    data = data / max(1e-6, float(np.max(np.abs(data)))) * 0.8
    out.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(out), data, SR, format="FLAC", subtype="PCM_16")

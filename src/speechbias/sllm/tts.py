"""Text-to-speech backends for building Spoken-StereoSet-style data.

A backend turns ``(text, Voice)`` into ``(waveform float32 mono, sample_rate Hz)``. The builder
(:mod:`speechbias.sllm.builder`) only uses that method, so any TTS (a neural model, a cloud API
wrapper) plugs in by implementing :class:`TTSBackend`. :class:`EspeakNgBackend` is the offline one.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import soundfile as sf


class TTSError(RuntimeError):
    """Synthesis failed; the message names the backend, voice and text."""


@dataclass(frozen=True)
class Voice:
    """One synthetic speaker.

    ``speaker``: file-name-safe name written to the CSV and the WAV name; ``group``: the speaker
    group value written to the domain's group column (e.g. ``female``, ``elderly``); ``voice``:
    backend voice id (espeak-ng: ``<language>+<variant>``, e.g. ``en-us+f3``); ``pitch``: espeak-ng
    base pitch 0-99 (50 = default); ``speed``: words per minute.
    """

    speaker: str
    group: str
    voice: str
    pitch: int = 50
    speed: int = 175

    def __post_init__(self):
        if not self.speaker or any(c in self.speaker for c in "/\\ ") or self.speaker in (".", ".."):
            raise ValueError(f"Voice.speaker must be a file-name-safe name without spaces, got {self.speaker!r}")
        if not 0 <= int(self.pitch) <= 99:
            raise ValueError(f"Voice {self.speaker}: pitch must be in 0..99, got {self.pitch}")
        if not 80 <= int(self.speed) <= 450:
            raise ValueError(f"Voice {self.speaker}: speed must be in 80..450 words/min, got {self.speed}")


@runtime_checkable
class TTSBackend(Protocol):
    name: str

    def synthesize(self, text: str, voice: Voice) -> tuple[np.ndarray, int]:
        """Return ``(waveform, sample_rate)``: float32 mono in [-1, 1]."""
        ...


#: Offline voice sets: gender by espeak-ng variant (f = female, m = male), age groups by pitch and
#: speed (child: high and quick, young: default, elderly: low and slow). Synthetic, so the voices
#: are cues of the attribute only as far as a listener (or model) reads pitch/timbre that way.
ESPEAK_VOICES = {
    "gender": [
        Voice("espeak_f1", "female", "en-us+f1", pitch=60),
        Voice("espeak_f3", "female", "en-us+f3", pitch=60),
        Voice("espeak_f4", "female", "en-us+f4", pitch=65),
        Voice("espeak_m1", "male", "en-us+m1", pitch=40),
        Voice("espeak_m3", "male", "en-us+m3", pitch=40),
        Voice("espeak_m7", "male", "en-us+m7", pitch=35),
    ],
    "age": [
        Voice("espeak_child_f1", "child", "en-us+f4", pitch=95, speed=185),
        Voice("espeak_child_f2", "child", "en-us+f2", pitch=90, speed=185),
        Voice("espeak_child_m1", "child", "en-us+m3", pitch=85, speed=185),
        Voice("espeak_young_f1", "young", "en-us+f3", pitch=60, speed=175),
        Voice("espeak_young_f2", "young", "en-us+f1", pitch=55, speed=175),
        Voice("espeak_young_m1", "young", "en-us+m3", pitch=45, speed=175),
        Voice("espeak_elderly_f1", "elderly", "en-us+f2", pitch=30, speed=130),
        Voice("espeak_elderly_m1", "elderly", "en-us+m2", pitch=15, speed=125),
        Voice("espeak_elderly_m2", "elderly", "en-us+m7", pitch=20, speed=120),
    ],
}


class EspeakNgBackend:
    """espeak-ng through its command line (``apt-get install espeak-ng``); 22.05 kHz output."""

    name = "espeak-ng"

    def __init__(self, executable: str = "espeak-ng", timeout_s: float = 60.0):
        found = shutil.which(executable)
        if found is None:
            raise TTSError(
                f"espeak-ng executable {executable!r} not found on PATH (install it: apt-get install espeak-ng)"
            )
        self.executable = found
        self.timeout_s = float(timeout_s)

    def synthesize(self, text: str, voice: Voice) -> tuple[np.ndarray, int]:
        if not text.strip():
            raise ValueError(f"espeak-ng: empty text for voice {voice.speaker}")
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "speech.wav"
            # text through stdin: never parsed as an option, no shell quoting
            cmd = [
                self.executable,
                "-v",
                voice.voice,
                "-p",
                str(int(voice.pitch)),
                "-s",
                str(int(voice.speed)),
                "-w",
                str(out),
                "--stdin",
            ]
            try:
                proc = subprocess.run(cmd, input=text, text=True, capture_output=True, timeout=self.timeout_s)
            except subprocess.TimeoutExpired as exc:
                raise TTSError(
                    f"espeak-ng timed out after {self.timeout_s:g} s (voice {voice.voice}, text {text[:60]!r})"
                ) from exc
            if proc.returncode != 0 or not out.is_file():
                raise TTSError(
                    f"espeak-ng failed (rc={proc.returncode}, voice {voice.voice}): {proc.stderr.strip()[:200]}"
                )
            wav, sr = sf.read(str(out), dtype="float32", always_2d=True)
        wav = wav.mean(axis=1)
        if wav.size == 0 or float(np.max(np.abs(wav))) == 0.0:
            raise TTSError(f"espeak-ng produced no sound for voice {voice.voice!r} and text {text[:60]!r}")
        return wav, int(sr)

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from speechbias.sllm.builder import build_dataset
from speechbias.sllm.data import load_spoken_stereoset
from speechbias.sllm.tts import EspeakNgBackend, Voice

ITEMS = pd.DataFrame(
    [
        {
            "id": 1,
            "domain": "gender",
            "group": "female",
            "context": "I spent the evening in the kitchen.",
            "stereotypical": "I baked a cake.",
            "anti-stereotypical": "I fixed the car.",
            "irrelevant": "Fish swim.",
            "labels": {"gold": "stereotype"},
        },
        {
            "id": 2,
            "domain": "gender",
            "group": "male",
            "context": "I went to the garage after work.",
            "stereotypical": "I changed the oil.",
            "anti-stereotypical": "I knitted a scarf.",
            "irrelevant": "Snow is cold.",
        },
        {
            "id": 7,
            "domain": "age",
            "group": "elderly",
            "context": "My grandchildren visited me.",
            "stereotypical": "I told them old stories.",
            "anti-stereotypical": "We played video games online.",
            "irrelevant": "Rivers flow.",
        },
    ]
)
VOICES = {
    "gender": [
        Voice("f_a", "female", "en-us+f3", pitch=70),
        Voice("f_b", "female", "en-us+f4", pitch=75),
        Voice("m_a", "male", "en-us+m3", pitch=30),
        Voice("m_b", "male", "en-us+m1", pitch=25),
    ],
    "age": [Voice("old_a", "elderly", "en-us+m2", pitch=15, speed=125)],
}


class ToneBackend:
    """Fake TTS: a tone whose frequency is the voice pitch x 4 Hz and whose length grows with the text."""

    name = "tone"

    def __init__(self):
        self.calls = 0

    def synthesize(self, text, voice):
        self.calls += 1
        sr = 22_050
        t = np.arange(int(0.02 * len(text) * sr)) / sr
        return (0.2 * np.sin(2 * np.pi * 4 * voice.pitch * t)).astype(np.float32), sr


def test_builds_released_layout_and_resumes(tmp_path):
    with pytest.raises(ValueError, match="voices_per_item=2 but group 'elderly'"):
        build_dataset(ITEMS, tmp_path, ToneBackend(), voices=VOICES, voices_per_item=2, progress=False)
    backend = ToneBackend()
    build_dataset(ITEMS, tmp_path, backend, voices=VOICES, voices_per_item=None, progress=False)
    assert backend.calls == 5
    ds = load_spoken_stereoset(tmp_path)
    t = ds.table
    assert sorted(zip(t.domain, t.id, t.speaker, t.group)) == [
        ("age", 7, "old_a", "elderly"),
        ("gender", 1, "f_a", "female"),
        ("gender", 1, "f_b", "female"),
        ("gender", 2, "m_a", "male"),
        ("gender", 2, "m_b", "male"),
    ]
    row = t[t.id == 1].iloc[0]
    assert row["labels"] == {"gold": "stereotype"} and row["irrelevant"] == "Fish swim."
    info = sf.info(row["audio_path"])
    assert info.samplerate == 16_000 and info.subtype == "PCM_16"
    assert info.duration == pytest.approx(0.02 * len(ITEMS.context[0]), abs=0.01)
    # a rerun keeps existing WAVs
    again = ToneBackend()
    build_dataset(ITEMS, tmp_path, again, voices=VOICES, voices_per_item=None, progress=False)
    assert again.calls == 0


def test_bad_items_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="missing columns"):
        build_dataset(ITEMS.drop(columns="irrelevant"), tmp_path, ToneBackend(), voices=VOICES, progress=False)
    with pytest.raises(ValueError, match="no voice for domain 'gender' group 'nonbinary'"):
        build_dataset(ITEMS.assign(group="nonbinary"), tmp_path, ToneBackend(), voices=VOICES, progress=False)


def _median_f0(wav: np.ndarray, sr: int) -> float:
    """Median autocorrelation pitch (60-400 Hz) over loud 40 ms frames."""
    frame = int(0.04 * sr)
    lo, hi = int(sr / 400), int(sr / 60)
    f0s = []
    energy = [np.mean(wav[i : i + frame] ** 2) for i in range(0, len(wav) - frame, frame)]
    threshold = 0.3 * max(energy)
    for k, i in enumerate(range(0, len(wav) - frame, frame)):
        if energy[k] < threshold:
            continue
        x = wav[i : i + frame] - wav[i : i + frame].mean()
        ac = np.correlate(x, x, "full")[frame - 1 :]
        lag = lo + int(np.argmax(ac[lo:hi]))
        f0s.append(sr / lag)
    return float(np.median(f0s))


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")
def test_espeak_ng_voices(tmp_path):
    build_dataset(
        ITEMS[ITEMS.domain == "gender"], tmp_path, EspeakNgBackend(), voices=VOICES, voices_per_item=2, progress=False
    )
    t = load_spoken_stereoset(tmp_path, domains=["gender"]).table
    assert len(t) == 4
    f0 = {}
    for r in t.itertuples():
        wav, sr = sf.read(r.audio_path)
        assert sr == 16_000 and 0.8 < len(wav) / sr < 6.0
        f0[r.speaker] = _median_f0(wav, sr)
    assert min(f0["f_a"], f0["f_b"]) > 1.3 * max(f0["m_a"], f0["m_b"]), f0

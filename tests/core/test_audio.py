"""audio.load_audio: formats, channels, resampling, and one clear error per bad file."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from core.audio_fixtures import tone, write_clip
from speechbias.audio import AudioError, audio_sha256, load_audio


@pytest.mark.parametrize("suffix,fmt", [(".wav", "WAV"), (".flac", "FLAC"), (".mp3", "MP3"), (".ogg", "OGG")])
def test_formats_decode_to_float32_mono_16k(tmp_path, suffix, fmt):
    path = write_clip(tmp_path / f"a{suffix}", seconds=0.5, sr=16_000, fmt=fmt)
    wav = load_audio(path)
    assert wav.dtype == np.float32 and wav.ndim == 1
    # mp3/ogg codecs add priming/padding samples; the duration stays within 60 ms
    assert abs(wav.shape[0] - 8000) <= 960
    assert np.max(np.abs(wav)) > 0.1


def test_stereo_is_averaged(tmp_path):
    data = tone(0.25, channels=2)
    sf.write(str(tmp_path / "s.wav"), data, 16_000, subtype="FLOAT")
    wav = load_audio(tmp_path / "s.wav")
    np.testing.assert_allclose(wav, data.mean(axis=1), atol=1e-7)


def test_resampling_keeps_duration_and_pitch(tmp_path):
    sr, freq = 44_100, 440.0
    t = np.arange(sr) / sr
    sf.write(str(tmp_path / "r.wav"), (0.5 * np.sin(2 * np.pi * freq * t)).astype(np.float32), sr, subtype="FLOAT")
    wav = load_audio(tmp_path / "r.wav")
    assert abs(wav.shape[0] - 16_000) <= 1
    spectrum = np.abs(np.fft.rfft(wav))
    peak_hz = np.argmax(spectrum) * 16_000 / wav.shape[0]
    assert abs(peak_hz - freq) < 2.0


def test_missing_file(tmp_path):
    with pytest.raises(AudioError, match="does not exist") as e:
        load_audio(tmp_path / "nope.wav")
    assert "nope.wav" in str(e.value)


def test_unreadable_file(tmp_path):
    p = tmp_path / "garbage.wav"
    p.write_bytes(b"this is not audio at all" * 10)
    with pytest.raises(AudioError, match="unreadable") as e:
        load_audio(p)
    assert "garbage.wav" in str(e.value)


def test_truncated_file(tmp_path):
    p = write_clip(tmp_path / "t.flac", seconds=1.0, fmt="FLAC")
    blob = p.read_bytes()
    p.write_bytes(blob[:60])  # header cut mid-way
    with pytest.raises(AudioError, match="t.flac"):
        load_audio(p)


def test_empty_file(tmp_path):
    p = tmp_path / "empty.wav"
    sf.write(str(p), np.zeros(0, dtype=np.float32), 16_000)
    with pytest.raises(AudioError, match="no samples"):
        load_audio(p)


def test_silent_file(tmp_path):
    p = tmp_path / "silent.wav"
    sf.write(str(p), np.zeros(4000, dtype=np.float32), 16_000)
    with pytest.raises(AudioError, match="silent"):
        load_audio(p)


def test_nan_file(tmp_path):
    x = tone(0.1)
    x[10] = np.nan
    p = tmp_path / "nan.wav"
    sf.write(str(p), x, 16_000, subtype="FLOAT")
    with pytest.raises(AudioError, match="NaN"):
        load_audio(p)


def test_short_clip_error_or_pad(tmp_path):
    p = write_clip(tmp_path / "short.wav", seconds=0.01)  # 160 samples
    with pytest.raises(AudioError, match="too short"):
        load_audio(p, min_samples=400)
    padded = load_audio(p, min_samples=400, pad_short=True)
    assert padded.shape == (400,) and np.all(padded[160:] == 0)


def test_sha_depends_on_samples_not_container(tmp_path):
    a = write_clip(tmp_path / "a.wav", seconds=0.2, fmt="WAV")
    b = tmp_path / "b.flac"
    sf.write(str(b), load_audio(a), 16_000, format="FLAC", subtype="PCM_16")
    assert audio_sha256(load_audio(a)) == audio_sha256(load_audio(b))
    assert audio_sha256(load_audio(a)) != audio_sha256(load_audio(a)[:-1])

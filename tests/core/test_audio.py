"""audio.load_audio: formats, channels, resampling, and one clear error per bad file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from core.audio_fixtures import (
    clean_cut_points,
    plain_decoded_frames,
    tone,
    with_streamed_wav_size,
    with_unknown_flac_length,
    without_first_mp3_frame,
    write_clip,
    write_cut,
    xing_frame_count,
)
from speechbias.fileio.audio import AudioError, audio_sha256, load_audio

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
FORMATS = [
    (".wav", "WAV", None),
    (".flac", "FLAC", None),
    (".mp3", "MP3", None),
    (".ogg", "OGG", "VORBIS"),
    (".opus", "OGG", "OPUS"),
]


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


# --- truncation ----------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix,fmt,subtype", FORMATS)
@pytest.mark.parametrize("sr,channels,seconds", [(16_000, 1, 2.0), (48_000, 2, 0.5), (8_000, 1, 0.05)])
def test_valid_files_load_with_the_exact_sample_count(tmp_path, suffix, fmt, subtype, sr, channels, seconds):
    path = tmp_path / f"ok{suffix}"
    sf.write(str(path), tone(seconds, sr, channels=channels), sr, format=fmt, subtype=subtype)
    assert load_audio(path, sample_rate=sr).shape == (round(seconds * sr),)


@pytest.mark.parametrize("suffix,fmt,subtype", FORMATS)
@pytest.mark.parametrize("keep", [0.5, 0.25, 0.9, -1], ids=["half", "quarter", "90pct", "last_byte_off"])
def test_truncated_file_raises_naming_the_file(tmp_path, suffix, fmt, subtype, keep):
    path, _ = write_cut(tmp_path / f"cut{suffix}", keep, fmt, subtype=subtype)
    with pytest.raises(AudioError, match="looks truncated") as e:
        load_audio(path)
    assert f"cut{suffix}" in str(e.value) and e.value.path == str(path)


def test_half_wav_names_declared_and_decoded_samples(tmp_path):
    path, blob = write_cut(tmp_path / "half.wav", 0.5, "WAV", seconds=2.0)
    assert len(blob) == 44 + 2 * 32_000  # canonical header + 16-bit mono samples
    decoded = (len(blob) // 2 - 44) // 2
    assert plain_decoded_frames(path) == decoded  # what soundfile alone accepts silently
    with pytest.raises(AudioError, match=f"declared 32000 samples .*, decoded {decoded};"):
        load_audio(path)


def test_half_mp3_names_declared_and_decoded_samples(tmp_path):
    path, _ = write_cut(tmp_path / "half.mp3", 0.5, "MP3", seconds=2.0)
    decoded = plain_decoded_frames(path)
    assert 0 < decoded < 32_000
    with pytest.raises(AudioError, match=f"declared 32000 samples \\(MP3 Xing/Info header\\), decoded {decoded};"):
        load_audio(path)


def test_flac_cut_at_a_frame_boundary_raises_with_the_declared_count(tmp_path):
    path, blob = write_cut(tmp_path / "f.flac", 1.0, "FLAC", seconds=2.0)
    second_frame = blob.find(b"\xff\xf8", blob.find(b"\xff\xf8", 1) + 1)  # frame sync codes
    path.write_bytes(blob[:second_frame])
    with pytest.raises(AudioError, match="looks truncated or corrupt: declared 32000 samples \\(FLAC STREAMINFO\\)"):
        load_audio(path)


def test_ogg_cut_at_a_page_boundary_decodes_cleanly_but_raises(tmp_path):
    path, blob = write_cut(tmp_path / "o.ogg", 1.0, "OGG", seconds=2.0)
    points = clean_cut_points(blob, b"OggS", ".ogg", tmp_path)
    assert points and all(frames < 32_000 for _, frames in points)
    for offset, frames in (points[0], points[-1]):
        path.write_bytes(blob[:offset])
        with pytest.raises(AudioError, match=f"decoded {frames} samples; .*without its end-of-stream page"):
            load_audio(path)


def test_flac_decoder_error_reports_the_samples_before_it(tmp_path):
    path, _ = write_cut(tmp_path / "f.flac", 0.5, "FLAC", seconds=2.0)
    with pytest.raises(sf.LibsndfileError):
        plain_decoded_frames(path)
    with pytest.raises(AudioError, match=r"declared 32000 samples .*, the decoder failed after (\d+) samples") as e:
        load_audio(path)
    block = int.from_bytes(path.read_bytes()[8:10], "big")  # STREAMINFO minimum block size
    failed_after = int(e.value.problem.split("failed after ")[1].split()[0])
    assert 0 < failed_after < 32_000 and failed_after % block == 0  # whole frames before the cut


def test_untagged_mp3_that_libsndfile_would_cut_short_raises(tmp_path):
    _, blob = write_cut(tmp_path / "tagged.mp3", 1.0, "MP3", seconds=2.0)
    path = tmp_path / "untagged.mp3"
    path.write_bytes(without_first_mp3_frame(blob))
    decoded = plain_decoded_frames(path)
    held = xing_frame_count(blob) * 576  # MPEG-2 layer III: 576 samples per frame
    assert decoded < 32_000 < held
    with pytest.raises(
        AudioError, match=f"without a Xing/Info/VBRI header: libsndfile decodes only {decoded} of the {held} samples"
    ):
        load_audio(path)


def test_untagged_mp3_cut_inside_a_frame_raises(tmp_path):
    _, blob = write_cut(tmp_path / "tagged.mp3", 1.0, "MP3", seconds=2.0)
    path = tmp_path / "untagged_cut.mp3"
    path.write_bytes(without_first_mp3_frame(blob)[:-50])
    with pytest.raises(AudioError, match="looks truncated: .*its last MPEG frame at byte"):
        load_audio(path)


def test_flac_without_a_declared_length_raises_one_clear_line(tmp_path):
    _, blob = write_cut(tmp_path / "f.flac", 1.0, "FLAC", seconds=2.0)
    path = tmp_path / "streamed.flac"
    path.write_bytes(with_unknown_flac_length(blob))
    assert sf.info(str(path)).frames > 2**62  # libsndfile reports "unknown" as SF_COUNT_MAX
    with pytest.raises(AudioError, match="streamed.flac: declares no length .* re-encode it"):
        load_audio(path)


def test_wav_with_streamed_size_placeholders_loads_whole(tmp_path):
    _, blob = write_cut(tmp_path / "a.wav", 1.0, "WAV", seconds=2.0)
    path = tmp_path / "streamed.wav"
    path.write_bytes(with_streamed_wav_size(blob))
    assert load_audio(path).shape == (32_000,)


@pytest.mark.parametrize("suffix,fmt,subtype", FORMATS)
def test_a_valid_file_is_decoded_once(tmp_path, monkeypatch, suffix, fmt, subtype):
    path = tmp_path / f"once{suffix}"
    sf.write(str(path), tone(1.0), 16_000, format=fmt, subtype=subtype)
    calls = []
    real_read = sf.SoundFile.read
    monkeypatch.setattr(sf.SoundFile, "read", lambda self, *a, **k: calls.append(1) or real_read(self, *a, **k))
    load_audio(path)
    assert len(calls) == 1


def test_every_shipped_demo_flac_loads():
    paths = sorted(EXPERIMENTS.rglob("*.flac"))
    assert len(paths) >= 100
    for path in paths:
        assert load_audio(path).shape[0] > 0

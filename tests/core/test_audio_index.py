"""The audio index: an unchanged file is never decoded again (neither by the clip check nor by the cache
lookup), a changed one is, ``full`` decodes every file and repairs the index, and a corrupt record is
ignored with a warning and rebuilt. Decodes are counted with a spy on ``speechbias.fileio.audio.load_audio``;
sha256s are derived here from soundfile's samples, independently of the index."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from core.audio_fixtures import write_clip
from speechbias.features.cache import FeatureCache
from speechbias.fileio import audio
from speechbias.fileio.audio_index import AudioFacts, AudioIndex, forget_verified_records
from speechbias.stimuli.manifest import ManifestError, check_manifest_audio


@pytest.fixture
def decoded(monkeypatch) -> list[str]:
    """The files ``load_audio`` decodes, in order (every decode of the index goes through it)."""
    calls: list[str] = []
    real = audio.load_audio

    def spy(path, *args, **kwargs):
        calls.append(os.path.basename(str(path)))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(audio, "load_audio", spy)
    return calls


def _clips(folder, n=4) -> list[str]:
    return [str(write_clip(folder / f"c{i}.wav", seconds=0.2 + 0.05 * i, freq=200 + 40 * i, seed=i)) for i in range(n)]


def _expected_facts(path: str) -> AudioFacts:
    """sha256 of '16000' + the float32 samples, from soundfile directly (the clips are mono 16 kHz)."""
    samples, sr = sf.read(path, dtype="float32")
    assert sr == 16_000
    return AudioFacts(hashlib.sha256(b"16000" + samples.tobytes()).hexdigest(), samples.shape[0])


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_known_files_are_not_decoded_and_their_facts_are_the_decoded_audio(tmp_path, decoded):
    clips = _clips(tmp_path / "data")
    index = AudioIndex(tmp_path / "cache")
    first = index.facts(clips)
    assert sorted(decoded) == ["c0.wav", "c1.wav", "c2.wav", "c3.wav"]
    assert first == {c: _expected_facts(c) for c in clips}
    decoded.clear()
    again = AudioIndex(tmp_path / "cache").facts(clips)  # a new process's index: reads the records
    assert decoded == [] and again == first
    # the feature cache's lookup reads the same records
    cache = FeatureCache(tmp_path / "cache")
    assert [cache.lookup_audio(c) for c in clips] == [first[c] for c in clips] and decoded == []


def test_a_changed_file_is_decoded_again_and_only_it(tmp_path, decoded):
    clips = _clips(tmp_path / "data")
    AudioIndex(tmp_path / "cache").facts(clips)
    decoded.clear()
    st = os.stat(clips[1])
    os.utime(clips[1], ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # touched: mtime only
    time.sleep(0.02)
    write_clip(tmp_path / "data" / "c2.wav", seconds=0.3, freq=999, seed=9)  # new content
    facts = AudioIndex(tmp_path / "cache").facts(clips)
    assert sorted(decoded) == ["c1.wav", "c2.wav"]
    assert facts[clips[2]] == _expected_facts(clips[2])
    decoded.clear()
    AudioIndex(tmp_path / "cache").facts(clips)
    assert decoded == []


def test_full_decodes_every_file_and_repairs_a_wrong_record(tmp_path, decoded, caplog):
    clips = _clips(tmp_path / "data")
    index = AudioIndex(tmp_path / "cache")
    index.facts(clips)
    index.remember(clips[0], AudioFacts("ab" * 32, 7))  # a valid record that says the wrong thing
    decoded.clear()
    caplog.clear()
    facts = AudioIndex(tmp_path / "cache").facts(clips, full=True)
    assert sorted(decoded) == ["c0.wav", "c1.wav", "c2.wav", "c3.wav"]
    assert facts[clips[0]] == _expected_facts(clips[0])
    assert any("said sha256 abababababab" in w and "record repaired" in w for w in _warnings(caplog))
    assert AudioIndex(tmp_path / "cache").lookup(clips[0]) == _expected_facts(clips[0])


def test_a_record_verified_in_this_process_is_not_read_again_until_the_file_changes(tmp_path, decoded):
    clips = _clips(tmp_path / "data", n=2)
    AudioIndex(tmp_path / "cache").facts(clips)
    records = sorted((tmp_path / "cache" / "audio_index").rglob("*.json"))
    for record in records:  # gone from disk: this process answers from what it verified
        record.unlink()
    assert AudioIndex(tmp_path / "cache").facts(clips) == {c: _expected_facts(c) for c in clips}
    assert sorted(decoded) == ["c0.wav", "c1.wav"]  # by the first call only
    forget_verified_records()  # a new process reads the (missing) records: both decoded again
    assert AudioIndex(tmp_path / "cache").lookup(clips[0]) is None
    decoded.clear()
    AudioIndex(tmp_path / "cache").facts(clips)
    assert sorted(decoded) == ["c0.wav", "c1.wav"]
    decoded.clear()
    time.sleep(0.02)  # beyond the kernel's coarse timestamp tick
    write_clip(Path(clips[1]), seconds=0.3, freq=500, seed=9)  # changed: another identity, decoded again
    assert AudioIndex(tmp_path / "cache").facts(clips)[clips[1]] == _expected_facts(clips[1])
    assert decoded == ["c1.wav"]


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[: len(text) // 2],  # cut
        lambda text: text.replace('"n_samples": ', '"n_samples": 1'),  # a digit added: checksum fails
        lambda text: "",
    ],
)
def test_a_corrupt_record_is_ignored_with_a_warning_and_rebuilt(tmp_path, decoded, caplog, damage):
    clips = _clips(tmp_path / "data", n=2)
    AudioIndex(tmp_path / "cache").facts(clips)
    records = sorted((tmp_path / "cache" / "audio_index").rglob("*.json"))
    record = next(r for r in records if json.loads(r.read_text())["file"]["path"] == os.path.realpath(clips[0]))
    record.write_text(damage(record.read_text()))
    forget_verified_records()  # the next lookups are a new process's (this one trusts what it has verified)
    decoded.clear()
    caplog.clear()
    facts = AudioIndex(tmp_path / "cache").facts(clips)
    assert decoded == ["c0.wav"] and facts[clips[0]] == _expected_facts(clips[0])
    warnings = _warnings(caplog)
    assert len(warnings) == 1 and str(record) in warnings[0] and "decoded again" in warnings[0]
    decoded.clear()
    caplog.clear()
    assert AudioIndex(tmp_path / "cache").facts(clips)[clips[0]] == _expected_facts(clips[0])
    assert decoded == [] and _warnings(caplog) == []  # rebuilt


def _manifest(paths: list[str]) -> list[dict[str, str]]:
    return [{"clip_id": f"c{i}", "path": p, "role": "XYAB"[i]} for i, p in enumerate(paths)]


def test_the_manifest_check_decodes_only_new_or_changed_clips(tmp_path, decoded):
    clips = _clips(tmp_path / "data")
    cache = tmp_path / "cache"
    check_manifest_audio(_manifest(clips), "m.csv", cache)
    assert len(decoded) == 4
    decoded.clear()
    check_manifest_audio(_manifest(clips), "m.csv", cache)
    check_manifest_audio(_manifest(clips[::-1]), "other.csv", cache)  # another manifest of the same clips
    assert decoded == []
    check_manifest_audio(_manifest(clips), "m.csv", cache, full=True)
    assert len(decoded) == 4
    decoded.clear()
    (tmp_path / "data" / "c3.wav").write_bytes(b"")  # changed, and now it fails
    with pytest.raises(ManifestError, match=r"m.csv: 1 of 4 clips cannot be used: .*c3.wav: "):
        check_manifest_audio(_manifest(clips), "m.csv", cache)
    assert decoded == ["c3.wav"]


def test_the_manifest_check_without_a_cache_decodes_every_clip(tmp_path, decoded):
    clips = _clips(tmp_path / "data")
    check_manifest_audio(_manifest(clips), "m.csv", None)
    check_manifest_audio(_manifest(clips), "m.csv", None)
    assert len(decoded) == 8


def test_repeated_audio_is_refused_naming_the_rows_or_warned_about(tmp_path, caplog):
    clips = _clips(tmp_path / "data")
    (tmp_path / "data" / "copy.wav").write_bytes(open(clips[0], "rb").read())  # same audio, another file
    paths = [clips[0], clips[1], clips[2], clips[3], str(tmp_path / "data" / "copy.wav"), clips[1]]
    df = [{"clip_id": c, "path": p, "role": r} for c, p, r in zip("abcdef", paths, "XYABXY")]
    with pytest.raises(ManifestError) as info:
        check_manifest_audio(df, "m.csv", tmp_path / "cache")
    msg = str(info.value)
    assert msg.startswith("m.csv: 2 row(s) repeat audio listed in another row")
    assert f"row(s) 2, 6 (X: {clips[0]} and other files with the same audio)" in msg
    assert f"row(s) 3, 7 (Y: {clips[1]})" in msg
    assert "not independent" in msg and "allow_duplicate_audio=true" in msg and "\n" not in msg
    caplog.clear()
    facts = check_manifest_audio(df, "m.csv", tmp_path / "cache", allow_repeats=True)
    assert len(facts) == 5
    warnings = _warnings(caplog)
    assert len(warnings) == 1 and "row(s) 3, 7" in warnings[0] and "not independent" in warnings[0]


def test_identity_includes_ctime_so_a_restored_mtime_does_not_hide_new_content(tmp_path, decoded):
    (clip,) = _clips(tmp_path / "data", n=1)
    AudioIndex(tmp_path / "cache").facts([clip])
    st = os.stat(clip)
    time.sleep(0.02)
    samples = np.asarray(sf.read(clip, dtype="float32")[0])
    sf.write(clip, samples[::-1].copy(), 16_000)  # same length and size, other audio
    os.utime(clip, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(clip).st_size == st.st_size and os.stat(clip).st_mtime_ns == st.st_mtime_ns
    decoded.clear()
    assert AudioIndex(tmp_path / "cache").facts([clip])[clip] == _expected_facts(clip)
    assert decoded == ["c0.wav"]

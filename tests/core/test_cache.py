"""Feature cache: round trip, no pickle, corruption detection, concurrent writers."""

from __future__ import annotations

import multiprocessing as mp
import time

import numpy as np

from speechbias.features.cache import ClipStatistics, FeatureCache


def _stats(seed: int, layers: int = 3, dim: int = 5) -> ClipStatistics:
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((layers, dim)).astype(np.float32)
    return ClipStatistics(mean=m, min=m - 1, max=m + 1, n_frames=7 + seed)


def test_round_trip(tmp_path):
    cache = FeatureCache(tmp_path)
    cache.put("fp", "ab" * 32, _stats(1))
    got = cache.get("fp", "ab" * 32)
    np.testing.assert_array_equal(got.mean, _stats(1).mean)
    assert got.n_frames == 8
    assert cache.get("other-fp", "ab" * 32) is None
    # safetensors, not pickle: the file starts with an 8-byte header length and JSON
    raw = cache.entry_path("fp", "ab" * 32).read_bytes()
    assert raw[8:9] == b"{"


def test_corrupt_entry_is_detected_and_removed(tmp_path, caplog):
    cache = FeatureCache(tmp_path)
    sha = "cd" * 32
    cache.put("fp", sha, _stats(2))
    path = cache.entry_path("fp", sha)
    path.write_bytes(path.read_bytes()[:40])  # truncated
    assert cache.get("fp", sha) is None
    assert "corrupt" in caplog.text and not path.exists()


def test_audio_index_invalidated_by_file_change(tmp_path):
    cache = FeatureCache(tmp_path / "c")
    f = tmp_path / "a.wav"
    f.write_bytes(b"123")
    cache.remember_audio(f, "ee" * 32, 100)
    assert cache.lookup_audio(f) == ("ee" * 32, 100)
    time.sleep(0.01)
    f.write_bytes(b"1234")
    assert cache.lookup_audio(f) is None


def _writer(root: str, worker: int, n: int) -> None:
    cache = FeatureCache(root)
    for i in range(n):
        cache.put("fp", f"{i:064x}", _stats(i))  # both workers write the same keys and content


def test_two_concurrent_writers_do_not_corrupt(tmp_path):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, 40)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    cache = FeatureCache(tmp_path)
    for i in range(40):
        got = cache.get("fp", f"{i:064x}")
        assert got is not None and got.n_frames == 7 + i
    assert not list(tmp_path.rglob("*.tmp"))

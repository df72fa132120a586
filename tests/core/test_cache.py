"""Feature cache: round trip, no pickle, checksummed entries and index records, concurrent writers."""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
import os
import struct
import time

import numpy as np
from safetensors.numpy import save_file

from speechbias.fileio.audio import load_audio
from speechbias.fileio.audio_index import forget_verified_records
from speechbias.features.cache import ClipStatistics, FeatureCache

# The concurrent-writer test's spawned processes import this module: Lightning, the toy upstream
# and the extraction loop are imported inside the tests that run them, not here.


def _stats(seed: int, layers: int = 3, dim: int = 5) -> ClipStatistics:
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((layers, dim)).astype(np.float32)
    return ClipStatistics(mean=m, min=m - 1, max=m + 1, n_frames=7 + seed)


def _assert_same(got: ClipStatistics, want: ClipStatistics) -> None:
    for name in ("mean", "min", "max"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    assert got.n_frames == want.n_frames


def _data_start(raw: bytes) -> int:
    """Offset of the tensor data in a safetensors file: 8-byte little-endian header length + header."""
    return 8 + struct.unpack("<Q", raw[:8])[0]


def _tensor_start(raw: bytes, name: str) -> int:
    """File offset of tensor ``name``'s first byte (header ``data_offsets`` count from the data start)."""
    header = json.loads(raw[8 : _data_start(raw)])
    return _data_start(raw) + header[name]["data_offsets"][0]


def _cache_warnings(caplog) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name in ("speechbias.features.cache", "speechbias.fileio.audio_index") and r.levelno == logging.WARNING
    ]


def test_round_trip(tmp_path):
    cache = FeatureCache(tmp_path)
    cache.put("fp", "ab" * 32, _stats(1))
    _assert_same(cache.get("fp", "ab" * 32), _stats(1))
    assert cache.get("other-fp", "ab" * 32) is None
    # safetensors, not pickle: the file starts with an 8-byte header length and JSON
    raw = cache.entry_path("fp", "ab" * 32).read_bytes()
    assert raw[8:9] == b"{"
    meta = json.loads(raw[8 : _data_start(raw)])["__metadata__"]
    assert meta["checksum"].startswith("xxh3_128:") and len(meta["checksum"]) == len("xxh3_128:") + 32


def test_truncated_entry_is_a_miss_and_is_replaced(tmp_path, caplog):
    cache = FeatureCache(tmp_path)
    sha = "cd" * 32
    cache.put("fp", sha, _stats(2))
    path = cache.entry_path("fp", sha)
    path.write_bytes(path.read_bytes()[:40])  # truncated
    assert cache.get("fp", sha) is None and not cache.has("fp", sha)
    assert any("corrupt" in w and str(path) in w for w in _cache_warnings(caplog))
    cache.put("fp", sha, _stats(2))  # write-once, yet an invalid entry is replaced
    _assert_same(cache.get("fp", sha), _stats(2))


def test_overwritten_bytes_warn_once_naming_the_entry(tmp_path, caplog):
    cache = FeatureCache(tmp_path)
    sha = "ef" * 32
    cache.put("fp", sha, _stats(3))
    path = cache.entry_path("fp", sha)
    raw = bytearray(path.read_bytes())
    start = _tensor_start(raw, "mean")
    raw[start : start + 64] = b"\x41" * 64  # 16 finite floats (12.08): shape and finiteness checks pass
    path.write_bytes(bytes(raw))
    for _ in range(3):
        assert cache.get("fp", sha) is None
    assert not cache.has("fp", sha)
    warnings = _cache_warnings(caplog)
    assert len(warnings) == 1 and str(path) in warnings[0] and "checksum mismatch" in warnings[0]


def test_every_single_bit_flip_is_detected_or_harmless(tmp_path):
    """Flip each bit of a whole entry file in turn: in the tensor data every flip must be caught;
    in the header a flip must either be caught or leave every value exactly as written."""
    cache = FeatureCache(tmp_path, verify_checksums=True)
    sha = "0a" * 32
    want = _stats(4, layers=2, dim=3)
    cache.put("fp", sha, want)
    path = cache.entry_path("fp", sha)
    clean = path.read_bytes()
    start = _data_start(clean)
    assert len(clean) - start == 3 * 2 * 3 * 4 + 8  # three (2, 3) float32 tensors + one int64
    missed_data_bits, header_changed_values = [], []
    fd = os.open(path, os.O_RDWR)
    try:
        for byte in range(len(clean)):
            for bit in range(8):
                os.pwrite(fd, bytes([clean[byte] ^ (1 << bit)]), byte)
                got = FeatureCache(tmp_path).get("fp", sha)  # a fresh instance: no warn-once memory
                os.pwrite(fd, clean[byte : byte + 1], byte)
                if got is None:
                    continue
                if byte >= start:
                    missed_data_bits.append((byte, bit))
                elif not (
                    all(np.array_equal(getattr(got, n), getattr(want, n)) for n in ("mean", "min", "max"))
                    and got.n_frames == want.n_frames
                ):
                    header_changed_values.append((byte, bit))
    finally:
        os.close(fd)
    assert missed_data_bits == [] and header_changed_values == []


def test_entry_without_checksum_is_recomputed(tmp_path, caplog):
    cache = FeatureCache(tmp_path)
    old, sha = _stats(5), "12" * 32
    path = cache.entry_path("fp", sha)
    path.parent.mkdir(parents=True)
    tensors = {"mean": old.mean, "min": old.min, "max": old.max, "n_frames": np.asarray(old.n_frames, np.int64)}
    save_file(tensors, str(path), metadata={"fingerprint": "fp", "audio_sha256": sha})  # the previous format
    assert FeatureCache(tmp_path, verify_checksums=False).get("fp", sha) is not None  # readable as before
    assert cache.get("fp", sha) is None
    assert any("no checksum" in w and str(path) in w for w in _cache_warnings(caplog))
    cache.put("fp", sha, old)
    _assert_same(cache.get("fp", sha), old)


def _extract(paths, cache_dir):
    """Statistics of ``paths`` through the extraction loop with the toy upstream, and its forwards."""
    import pytorch_lightning as pl

    from core.toy_upstream import ToyUpstream
    from speechbias.features.extraction import extract_statistics

    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        enable_progress_bar=False,
    )
    up = ToyUpstream()
    stats, n_forward = extract_statistics(up, paths, cache_dir, trainer)
    assert up.seen == n_forward
    return stats, n_forward, up.fingerprint


def _clip_paths(root) -> list[str]:
    from core.audio_fixtures import write_manifest_tree
    from speechbias.stimuli import load_manifest

    return list(load_manifest(write_manifest_tree(root, n_per_role=1))["path"])


def test_corrupt_and_outdated_entries_are_recomputed_and_a_clean_warm_run_does_no_forward(tmp_path, caplog):
    paths = _clip_paths(tmp_path / "data")
    cache_dir = tmp_path / "cache"
    clean, n_cold, fp = _extract(paths, cache_dir)
    assert n_cold == len(paths)
    cache = FeatureCache(cache_dir)
    entries = [cache.entry_path(fp, cache.lookup_audio(p)[0]) for p in paths]

    caplog.clear()
    _, n_warm, _ = _extract(paths, cache_dir)
    assert n_warm == 0 and _cache_warnings(caplog) == []

    # 64 data bytes of one entry overwritten: one warning naming it, one forward, the clean values
    raw = bytearray(entries[1].read_bytes())
    start = _tensor_start(raw, "mean")
    raw[start : start + 64] = b"\x41" * 64  # the toy's 12 mean floats (3, 4) and 4 of the next tensor
    entries[1].write_bytes(bytes(raw))
    caplog.clear()
    again, n_fwd, _ = _extract(paths, cache_dir)
    warnings = _cache_warnings(caplog)
    assert n_fwd == 1 and len(warnings) == 1 and str(entries[1]) in warnings[0]
    for name in ("mean", "min", "max", "n_frames"):
        np.testing.assert_array_equal(getattr(again, name), getattr(clean, name))

    # one flipped bit in the tensor data of another entry
    raw = bytearray(entries[2].read_bytes())
    raw[_tensor_start(raw, "max") + 7] ^= 0x10  # an exponent bit of max[0, 1]
    entries[2].write_bytes(bytes(raw))
    caplog.clear()
    again, n_fwd, _ = _extract(paths, cache_dir)
    assert n_fwd == 1 and str(entries[2]) in " ".join(_cache_warnings(caplog))
    np.testing.assert_array_equal(again.mean, clean.mean)

    # every entry rewritten in the format without checksums: all recomputed, one warning for all
    for e in entries:
        old = FeatureCache(cache_dir, verify_checksums=False).get(fp, e.stem)
        e.unlink()
        tensors = {"mean": old.mean, "min": old.min, "max": old.max, "n_frames": np.asarray(old.n_frames, np.int64)}
        save_file(tensors, str(e), metadata={"fingerprint": fp, "audio_sha256": e.stem})
    caplog.clear()
    again, n_fwd, _ = _extract(paths, cache_dir)
    assert n_fwd == len(paths) and len(_cache_warnings(caplog)) == 1
    np.testing.assert_array_equal(again.max, clean.max)

    # the replaced entries are valid: the next run is warm again
    caplog.clear()
    _, n_warm, _ = _extract(paths, cache_dir)
    assert n_warm == 0 and _cache_warnings(caplog) == []


def test_tampered_audio_index_record_cannot_point_at_another_clip(tmp_path, caplog):
    """The dangerous index corruption: a record naming a *different* cached clip's sha256."""
    paths = _clip_paths(tmp_path / "data")
    cache_dir = tmp_path / "cache"
    clean, _, _ = _extract(paths, cache_dir)
    records = sorted((cache_dir / "audio_index").rglob("*.json"))
    assert len(records) == len(paths)
    cache = FeatureCache(cache_dir)
    shas = [cache.lookup_audio(p)[0] for p in paths]
    record = next(r for r in records if json.loads(r.read_text())["sha256"] == shas[0])
    record.write_text(record.read_text().replace(shas[0], shas[1]))  # valid JSON, valid-looking sha
    forget_verified_records()  # as a new process (this one trusts the records it has verified)
    caplog.clear()
    assert FeatureCache(cache_dir).lookup_audio(paths[0]) is None
    again, n_fwd, _ = _extract(paths, cache_dir)
    assert n_fwd == 0  # decoded again, and clip 0's own entry was still there
    np.testing.assert_array_equal(again.mean, clean.mean)
    assert any(str(record) in w and "checksum mismatch" in w for w in _cache_warnings(caplog))
    assert FeatureCache(cache_dir).lookup_audio(paths[0]) == (shas[0], load_audio(paths[0]).shape[0])  # rewritten


def test_audio_index_invalidated_by_file_change(tmp_path):
    cache = FeatureCache(tmp_path / "c")
    f = tmp_path / "a.wav"
    f.write_bytes(b"123")
    cache.remember_audio(f, "ee" * 32, 100)
    assert cache.lookup_audio(f) == ("ee" * 32, 100)
    time.sleep(0.01)
    f.write_bytes(b"1234")
    assert cache.lookup_audio(f) is None


def test_audio_index_invalidated_when_content_changes_under_a_restored_mtime(tmp_path):
    """Same size, mtime set back (as ``cp -p``/``rsync -t``/tar do): the ctime still changes."""
    cache = FeatureCache(tmp_path / "c")
    f = tmp_path / "a.wav"
    f.write_bytes(b"1234")
    st = f.stat()
    cache.remember_audio(f, "ee" * 32, 100)
    time.sleep(0.02)  # beyond the kernel's coarse timestamp tick
    f.write_bytes(b"5678")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert f.stat().st_size == st.st_size and f.stat().st_mtime_ns == st.st_mtime_ns
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


def test_a_stacked_read_equals_the_entries_and_refuses_what_get_refuses(tmp_path):
    """read_stacked (read_into, straight into one preallocated stack) gives exactly the entries get gives,
    a repeated clip once per row, and None for any entry get would not accept (the caller then reads clip
    by clip, and get reports it)."""
    from speechbias.features.cached_statistics import read_stacked

    cache = FeatureCache(tmp_path)
    shas = [f"{k:02x}" * 32 for k in range(4)]
    for k, sha in enumerate(shas):
        cache.put("fp", sha, _stats(k))
    order = [shas[2], shas[0], shas[2], shas[3], shas[1]]
    stacked = read_stacked(order, cache, "fp")
    assert stacked.audio_sha == order and stacked.mean.shape == (5, 3, 5) and stacked.mean.dtype == np.float32
    for row, sha in enumerate(order):
        want = cache.get("fp", sha)
        for name in ("mean", "min", "max"):
            np.testing.assert_array_equal(getattr(stacked, name)[row], getattr(want, name))
        assert stacked.n_frames[row] == want.n_frames
    assert read_stacked(order, cache, "other-fp") is None
    assert read_stacked([shas[0], "ee" * 32], cache, "fp") is None  # no entry

    # one flipped byte in the data of a later entry, an entry without checksum, one of another shape
    path = cache.entry_path("fp", shas[3])
    raw = bytearray(path.read_bytes())
    raw[_tensor_start(bytes(raw), "max") + 3] ^= 0x10
    path.write_bytes(bytes(raw))
    assert cache.get("fp", shas[3]) is None and read_stacked(order, cache, "fp") is None
    m = _stats(5).mean
    save_file(
        {"mean": m, "min": m, "max": m, "n_frames": np.asarray(3, dtype=np.int64)},
        str(cache.entry_path("fp", shas[1])),
        metadata={"fingerprint": "fp", "audio_sha256": shas[1]},
    )
    assert cache.get("fp", shas[1]) is None and read_stacked(shas[:2], cache, "fp") is None
    assert FeatureCache(tmp_path, verify_checksums=False).get("fp", shas[1]) is not None
    assert read_stacked(shas[:2], FeatureCache(tmp_path, verify_checksums=False), "fp") is not None
    cache.put("fp", "ff" * 32, _stats(6, layers=2))
    assert read_stacked([shas[0], "ff" * 32], cache, "fp") is None

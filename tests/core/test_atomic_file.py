"""The one atomic writer under concurrency, and the lock that makes parallel jobs build a manifest once."""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd

from speechbias.fileio.atomic_file import atomic_folder, atomic_write
from speechbias.stimuli.bias_test import BiasTest
from speechbias.stimuli.manifest import load_manifest, write_manifest


def _manifest(tag: int, folder: Path) -> pd.DataFrame:
    rows = [
        {"clip_id": f"{role}{i}", "path": str(folder / "clip.wav"), "role": role, "group": f"g{tag}"}
        for role in "XYAB"
        for i in range(3)
    ]
    return pd.DataFrame(rows)


def test_200_concurrent_manifest_writes_all_succeed_and_leave_one_whole_file(tmp_path):
    (tmp_path / "clip.wav").write_bytes(b"")
    target = tmp_path / "m" / "manifest.csv"
    tables = [_manifest(i, tmp_path) for i in range(200)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        written = list(pool.map(lambda df: write_manifest(df, target), tables))  # raises if any write failed
    assert written == [target] * 200
    final = load_manifest(target, check_files=False)
    assert len(final) == 12 and final["group"].nunique() == 1  # one writer's whole table, never a mix
    assert [p.name for p in target.parent.iterdir()] == ["manifest.csv"]  # no temporary file left


def _write_from_process(args) -> int:
    path, i = args
    atomic_write(path, lambda tmp: Path(tmp).write_text(f"{i}\n" * 1000))
    return i


def test_concurrent_processes_never_share_a_temporary_file(tmp_path):
    target = tmp_path / "value.txt"
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        done = pool.map(_write_from_process, [(target, i) for i in range(200)])
    assert sorted(done) == list(range(200))
    lines = set(target.read_text().splitlines())
    assert len(lines) == 1 and lines.pop() in {str(i) for i in range(200)}
    assert [p.name for p in tmp_path.iterdir()] == ["value.txt"]


def test_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "a.csv"
    target.write_text("old")

    def fail(tmp):
        Path(tmp).write_text("half")
        raise OSError("disk full")

    try:
        atomic_write(target, fail)
    except OSError:
        pass
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.csv"]


def test_temporary_name_keeps_the_suffix_for_format_by_extension_writers(tmp_path):
    seen = []
    atomic_write(tmp_path / "x.wav", lambda tmp: seen.append(tmp) or Path(tmp).write_text("w"))
    assert seen[0].suffix == ".wav" and seen[0].name.startswith(".x.wav.")


def test_atomic_folder_keeps_the_first_finished_folder(tmp_path):
    target = tmp_path / "model"
    atomic_folder(target, lambda tmp: (tmp / "weights").write_text("first"))
    atomic_folder(target, lambda tmp: (tmp / "weights").write_text("second"))
    assert (target / "weights").read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def _counting_builder(log_file: str, clip: str):
    def build() -> pd.DataFrame:
        with open(log_file, "a") as f:
            f.write("built\n")
        time.sleep(0.5)  # long enough that the other jobs arrive while it builds
        return pd.DataFrame([{"clip_id": f"{r}{i}", "path": clip, "role": r} for r in "XYAB" for i in range(2)])

    return build


def _load_test(args) -> int:
    manifest, log_file, clip = args
    test = BiasTest(name="t", manifest=manifest, builder=_counting_builder(log_file, clip))
    return len(test.load())


def test_parallel_jobs_build_one_corpus_tests_manifest_once(tmp_path):
    clip = tmp_path / "clip.wav"
    clip.write_bytes(b"")
    manifest, log_file = tmp_path / "cache" / "manifests" / "t.csv", tmp_path / "builds.log"
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        sizes = pool.map(_load_test, [(str(manifest), str(log_file), str(clip))] * 4)
    assert sizes == [8] * 4
    assert log_file.read_text().splitlines() == ["built"]


def test_a_full_disk_is_one_user_error_naming_the_file(tmp_path):
    import errno

    from speechbias.errors import error_line

    def full(tmp):
        Path(tmp).write_text("part")
        raise OSError(errno.ENOSPC, "No space left on device")

    target = tmp_path / "cache" / "ab" / "entry.safetensors"
    try:
        atomic_write(target, full)
        raise AssertionError("the write should fail")
    except OSError as exc:
        line = error_line(exc)
    assert line.startswith(f"error: {target}: cannot write it (No space left on device)")
    assert "paths.cache_dir" in line and "\n" not in line
    assert list(target.parent.iterdir()) == []  # the partial temporary file is gone


def test_a_bug_inside_the_writer_keeps_its_own_exception(tmp_path):
    import pytest

    with pytest.raises(FileNotFoundError):
        atomic_write(tmp_path / "x.csv", lambda tmp: open(tmp_path / "missing" / "y"))

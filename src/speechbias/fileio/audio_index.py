"""What an audio file decodes to, remembered per file so that an unchanged file is never decoded again.

The one audio index of the project (under the feature cache folder, ``<cache>/audio_index/``): one JSON
record per file state, named by the sha256 of the file's identity (resolved path, size, mtime_ns,
ctime_ns; ctime changes on every write and cannot be set back, unlike mtime), holding the sha256 of the
decoded samples (the feature cache's key), their count at ``SAMPLE_RATE`` and an xxh3-128 checksum of
the record. A record is written only after :func:`speechbias.fileio.audio.load_audio` decoded the file
without error, so a valid record also says that the file passes the clip check (readable, not truncated,
not empty, silent or NaN). A changed file (size, mtime or ctime) has no record and is decoded again.

A record that fails its checksum or names another file is reported once with a warning and ignored: the
file is decoded again and the record rewritten (atomically), which gives the right sha256 whatever the
record said. ``full=True`` (the run's ``check_audio=full``) decodes every file, compares what it gives
with the record and rewrites the record (a disagreeing one is reported as repaired).

Import-light (standard library and xxhash): a run whose clips are all known never imports the decoder.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from speechbias.fileio.atomic_file import atomic_write
from speechbias.fileio.checksummed_record import verified_body, with_checksum

log = logging.getLogger(__name__)

INDEX_FOLDER = "audio_index"
# check_audio settings: decode only files the index does not know (new or changed), or every file
CHECK_AUDIO_MODES = ("changed", "full")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
# decoding releases the GIL: the files the index does not know are decoded this many at a time
DECODE_THREADS = 4


class AudioFacts(NamedTuple):
    """What a file decodes to: ``sha256`` of the float32 samples at ``SAMPLE_RATE`` (the feature cache's
    key, :func:`speechbias.fileio.audio.audio_sha256`) and ``n_samples``, their count at ``SAMPLE_RATE``."""

    sha256: str
    n_samples: int


# records this process has read and verified (or written), by (index folder, file identity): a file looked
# up again (a clip shared by several tests, the run's check and then its cache lookup, the jobs of a -m
# sweep) is answered from here after its stat, without reading and verifying its record again. Sound
# because the key holds the whole identity (a changed file has another) and a record's content is a
# function of it. benchmarks/paper_speat_bench.py's -m sweep looks up 51,200 clips (16 jobs: 3,200 each, of
# 800 files); a lookup answered here costs the stat alone (18 vs 59 us, measured on 800 cached clips).
_verified: dict[tuple, AudioFacts] = {}


def forget_verified_records() -> None:
    """Forget the records this process has verified, as a new process would (tests that alter a record
    on disk between two lookups)."""
    _verified.clear()


def _memo_key(folder: Path, identity: dict) -> tuple:
    return (folder, identity["path"], identity["size"], identity["mtime_ns"], identity["ctime_ns"])


class _BadRecord(Exception):
    """An index record that must not be used (internal: callers see a miss)."""


def file_identity(path: str | Path) -> dict:
    """What must be unchanged for a file's decoded audio to be unchanged: resolved path, size, mtime and
    ctime in ns. Raises OSError when the file cannot be stat'ed."""
    resolved = os.path.realpath(path)
    st = os.stat(resolved)
    return {"path": resolved, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns}


class AudioIndex:
    """The audio index under ``cache_root`` (``<cache_root>/audio_index``); safe for concurrent writers
    (atomic records; writers of one record write the same content). ``cache_root=None``: no index (every
    file is decoded, nothing is recorded)."""

    def __init__(self, cache_root: str | Path | None):
        self.folder = Path(cache_root) / INDEX_FOLDER if cache_root is not None else None
        self._reported: set[Path] = set()  # corrupt records already warned about

    def record_path(self, identity: dict) -> Path:
        key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
        return self.folder / key[:2] / f"{key}.json"

    def lookup(self, path: str | Path) -> AudioFacts | None:
        """The facts of the file at ``path`` as it is now, when an index record says them; else None (a
        new or changed file, no record, or a corrupt one: reported once, then ignored)."""
        try:
            identity = file_identity(path)
        except OSError:
            return None
        return self._read(identity, path)

    def _read(self, identity: dict, path: str | Path, remembered: bool = True) -> AudioFacts | None:
        """The facts the record of ``identity`` says (None: no usable record); ``remembered=False`` reads
        the record on disk even when this process has verified it before (a full check)."""
        if self.folder is None:
            return None
        known = _verified.get(_memo_key(self.folder, identity)) if remembered else None
        if known is not None:
            return known
        record = self.record_path(identity)
        try:
            text = record.read_text()
        except OSError:
            return None
        try:
            rec = verified_body(text)
            if rec.get("file") != identity:
                raise _BadRecord(f"made for {rec.get('file')}, not {identity}")
            sha, n_samples = rec["sha256"], rec["n_samples"]
            if not (isinstance(sha, str) and _SHA256_HEX.fullmatch(sha)) or not isinstance(n_samples, int):
                raise _BadRecord(f"malformed sha256/n_samples {sha!r}/{n_samples!r}")
        except (ValueError, KeyError, _BadRecord) as exc:  # json.JSONDecodeError is a ValueError
            if record not in self._reported:
                self._reported.add(record)
                log.warning(
                    "audio index record %s for %s is corrupt (%s); the file will be decoded again", record, path, exc
                )
            return None
        facts = _verified[_memo_key(self.folder, identity)] = AudioFacts(sha, n_samples)
        return facts

    def remember(self, path: str | Path, facts: AudioFacts) -> None:
        """Record (atomically) that the file at ``path``, as it is now, decodes to ``facts``."""
        self._write(file_identity(path), facts)

    def _write(self, identity: dict, facts: AudioFacts) -> None:
        if self.folder is None:
            return
        record = self.record_path(identity)
        body = {"file": identity, "sha256": facts.sha256, "n_samples": int(facts.n_samples)}
        atomic_write(record, lambda tmp: tmp.write_text(json.dumps(with_checksum(body))))
        self._reported.discard(record)
        _verified[_memo_key(self.folder, identity)] = facts

    def decode(self, path: str | Path) -> AudioFacts:
        """Decode ``path`` (:func:`speechbias.fileio.audio.load_audio`'s checks), record what it gives
        and return it; raises :class:`~speechbias.fileio.audio.AudioError` for a file that cannot be used.
        A record of the same file state that said otherwise is reported and replaced."""
        from speechbias.fileio import audio

        try:
            identity = file_identity(path)
        except OSError:
            identity = None  # load_audio names the problem
        wav = audio.load_audio(path)
        facts = AudioFacts(audio.audio_sha256(wav), int(wav.shape[0]))
        try:
            unchanged = identity is not None and file_identity(path) == identity
        except OSError:
            unchanged = False
        if unchanged:  # a file rewritten while it was decoded is not recorded (its next state is decoded again)
            said = self._read(identity, path, remembered=False)
            if said is not None and said != facts:
                log.warning(
                    "audio index record for %s said sha256 %s (%d samples), the file decodes to %s (%d samples); "
                    "record repaired",
                    path,
                    said.sha256[:12],
                    said.n_samples,
                    facts.sha256[:12],
                    facts.n_samples,
                )
            self._write(identity, facts)
        return facts

    def facts(self, paths: Iterable[str | Path], full: bool = False) -> dict[str, AudioFacts | str]:
        """Each distinct path of ``paths`` -> its :class:`AudioFacts`, or the reason it cannot be used
        (:class:`~speechbias.fileio.audio.AudioError`'s problem). Files the index knows are not decoded
        unless ``full``; the others are decoded :data:`DECODE_THREADS` at a time and recorded."""
        out: dict[str, AudioFacts | str] = {}
        todo = []
        for p in dict.fromkeys(map(str, paths)):
            known = None if full else self.lookup(p)
            if known is None:
                todo.append(p)
            else:
                out[p] = known
        if todo:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=DECODE_THREADS) as pool:
                for p, result in zip(todo, pool.map(self._decode_or_problem, todo)):
                    out[p] = result
        return out

    def _decode_or_problem(self, path: str) -> AudioFacts | str:
        from speechbias.fileio.audio import AudioError

        try:
            return self.decode(path)
        except AudioError as exc:
            return exc.problem

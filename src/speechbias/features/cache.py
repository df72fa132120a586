"""Content-addressed cache of per-layer temporal statistics, with checksummed entries.

Key: upstream fingerprint + sha256 of the decoded audio. Value: one safetensors file holding
``mean``, ``min``, ``max`` (L, D) float32 and ``n_frames`` (scalar int64); its metadata names the
fingerprint and audio sha256 and carries ``checksum`` = ``xxh3_128:<32 hex>`` of the tensors
(:func:`tensor_checksum`). Writes are atomic (temporary file + ``os.replace``) and loading never
unpickles.

Reading verifies the checksum. An entry that fails it (flipped bits, overwritten bytes, a
truncated or misplaced file) or that has no checksum (written by an older version) is a miss:
it is reported once with a warning naming the file, the caller recomputes it, and :meth:`put`
replaces it atomically. Entries are otherwise write-once (a valid entry is never rewritten).

The checksum guards against accidental corruption, not tampering (whoever can rewrite the data
can rewrite its checksum), so it need not be cryptographic: xxh3-128 reads ~10x faster than
sha256 here and misses a random corruption with probability 2**-128
(``benchmarks/cache_bench.py`` measures both).

The audio index (:mod:`speechbias.fileio.audio_index`, under the same root) maps an audio file's
(resolved path, size, mtime, ctime) to the sha256 and length of its decoded samples, so a warm run
neither decodes nor runs the upstream; :meth:`FeatureCache.lookup_audio` and
:meth:`FeatureCache.remember_audio` read and write it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xxhash
from safetensors import safe_open
from safetensors.numpy import save_file

from speechbias.fileio.atomic_file import atomic_write
from speechbias.fileio.audio_index import AudioFacts, AudioIndex

log = logging.getLogger(__name__)

# the per-layer temporal statistics an entry holds, each (L, D) float32 (plus the scalar n_frames)
STAT_NAMES = ("mean", "min", "max")
CHECKSUM_PREFIX = "xxh3_128:"


@dataclass(frozen=True)
class ClipStatistics:
    """Statistics of one clip: ``mean``/``min``/``max`` are (L, D) float32; ``n_frames`` an int."""

    mean: np.ndarray
    min: np.ndarray
    max: np.ndarray
    n_frames: int


class InvalidEntry(Exception):
    """A cache entry that must not be used; ``outdated`` when it merely predates
    checksums. Internal to this module: callers of the cache see a miss."""

    def __init__(self, reason: str, outdated: bool = False):
        super().__init__(reason)
        self.outdated = outdated


def tensor_checksum(tensors: dict[str, np.ndarray]) -> str:
    """``xxh3_128:<hex>`` over every tensor in sorted-name order: name, dtype, shape, then the raw
    C-order bytes. Names, dtypes and shapes are included so a header change is detected too."""
    h = xxhash.xxh3_128()
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name])
        h.update(f"{name}|{arr.dtype.str}|{arr.shape}|".encode())
        h.update(memoryview(arr.reshape(-1)).cast("B"))
    return CHECKSUM_PREFIX + h.hexdigest()


class FeatureCache:
    """Directory-backed cache; safe for concurrent writers (atomic entries, identical content).

    ``verify_checksums=False`` skips checksum verification on read (and accepts entries without a
    checksum); it exists only to measure what verification costs (benchmarks/cache_bench.py).
    """

    def __init__(self, root: str | Path, *, verify_checksums: bool = True):
        self.root = Path(root)
        self.verify_checksums = verify_checksums
        self._reported: set[Path] = set()  # invalid entries already warned about
        self._reported_outdated = False
        self.audio_index = AudioIndex(self.root)

    # -- statistics entries -------------------------------------------------------------
    def entry_path(self, fingerprint: str, audio_sha: str) -> Path:
        return self.root / "stats" / fingerprint / audio_sha[:2] / f"{audio_sha}.safetensors"

    def has_entry_for_any_upstream(self, audio_sha: str) -> bool:
        """Whether some upstream's entry file of the clip ``audio_sha`` exists (any fingerprint; not read)."""
        return any(p.is_file() for p in self.root.glob(str(self.entry_path("*", audio_sha).relative_to(self.root))))

    def has(self, fingerprint: str, audio_sha: str) -> bool:
        """Whether a valid entry exists: reads and verifies it like :meth:`get` (an invalid entry
        counts as absent, so the caller recomputes it, and is reported once)."""
        return self.get(fingerprint, audio_sha) is not None

    def put(self, fingerprint: str, audio_sha: str, stats: ClipStatistics) -> Path:
        """Store ``stats`` unless a valid entry is already there; an invalid one is replaced."""
        path = self.entry_path(fingerprint, audio_sha)
        if path.is_file():
            try:
                self._read(path, fingerprint, audio_sha)
                return path  # write-once: another process already stored the same content
            except InvalidEntry as exc:
                log.info("replacing invalid feature cache entry %s (%s)", path, exc)
        tensors = {name: np.ascontiguousarray(getattr(stats, name), dtype=np.float32) for name in STAT_NAMES}
        tensors["n_frames"] = np.asarray(int(stats.n_frames), dtype=np.int64)
        meta = {"fingerprint": fingerprint, "audio_sha256": audio_sha, "checksum": tensor_checksum(tensors)}
        atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata=meta))
        self._reported.discard(path)
        return path

    def get(self, fingerprint: str, audio_sha: str) -> ClipStatistics | None:
        """The entry, or ``None`` when absent or invalid (an invalid entry is reported once)."""
        path = self.entry_path(fingerprint, audio_sha)
        if not path.is_file():
            return None
        try:
            return self._read(path, fingerprint, audio_sha)
        except InvalidEntry as exc:
            self._report_entry(path, fingerprint, audio_sha, exc)
            return None

    def _read(self, path: Path, fingerprint: str, audio_sha: str) -> ClipStatistics:
        """Load and check one entry; raises :class:`InvalidEntry` saying what is wrong."""
        try:
            with safe_open(str(path), framework="numpy") as f:
                meta = f.metadata() or {}
                data = {name: f.get_tensor(name) for name in f.keys()}
        except Exception as exc:  # truncated file, unreadable header, ...
            raise InvalidEntry(f"unreadable: {exc}") from exc
        n_frames = self._check(meta, data, fingerprint, audio_sha)
        return ClipStatistics(mean=data["mean"], min=data["min"], max=data["max"], n_frames=n_frames)

    def _check(self, meta: dict, data: dict[str, np.ndarray], fingerprint: str, audio_sha: str) -> int:
        """An entry's ``n_frames`` when its metadata and tensors are valid (both readers: :meth:`get`,
        :meth:`read_into`); raises :class:`InvalidEntry` saying what is wrong."""
        if self.verify_checksums:
            stored = meta.get("checksum")
            if not (isinstance(stored, str) and stored.startswith(CHECKSUM_PREFIX)):
                raise InvalidEntry("no checksum (written by an older version)", outdated=True)
            if tensor_checksum(data) != stored:
                raise InvalidEntry("checksum mismatch: the stored values are not the ones written")
        if meta.get("fingerprint") != fingerprint or meta.get("audio_sha256") != audio_sha:
            raise InvalidEntry(f"belongs to upstream {meta.get('fingerprint')} / audio {meta.get('audio_sha256')}")
        missing = [n for n in (*STAT_NAMES, "n_frames") if n not in data]
        if missing:
            raise InvalidEntry(f"missing tensors {missing}")
        shapes = {data[n].shape for n in STAT_NAMES}
        if len(shapes) != 1 or len(next(iter(shapes))) != 2:
            raise InvalidEntry(f"inconsistent shapes {shapes}")
        if not all(np.isfinite(data[n]).all() for n in STAT_NAMES):
            raise InvalidEntry("non-finite values")
        n_frames = int(data["n_frames"])
        if n_frames < 1:
            raise InvalidEntry(f"n_frames={n_frames}")
        return n_frames

    def read_into(
        self, fingerprint: str, audio_sha: str, mean: np.ndarray, minimum: np.ndarray, maximum: np.ndarray
    ) -> int | None:
        """Read a valid entry's statistics straight into ``mean``/``minimum``/``maximum`` (each a
        C-contiguous float32 (L, D) array, e.g. a row of a preallocated (N, L, D) stack) and return its
        ``n_frames``; None when the entry is absent, invalid or of another shape (the arrays may then
        hold part of it). It accepts exactly the entries :meth:`get` accepts, checked by the same
        :meth:`_check`, and reports nothing: a caller that gets None falls back to :meth:`get`, which reports.

        One read of the header and one ``readinto`` per tensor, into the caller's memory: no
        intermediate arrays, no per-entry stacking afterwards (a warm run of 1,800 clips of 25 x 1024
        statistics reads ~570 MB this way)."""
        path = self.entry_path(fingerprint, audio_sha)
        n_frames = np.zeros((), dtype=np.int64)
        targets = {"mean": mean, "min": minimum, "max": maximum, "n_frames": n_frames}
        try:
            with open(path, "rb", buffering=0) as f:
                size = int.from_bytes(f.read(8), "little")
                if not 2 <= size <= 100_000:
                    return None
                header = json.loads(f.read(size))
                meta = header.pop("__metadata__", None) or {}
                if set(header) != set(targets):
                    return None
                for name, info in header.items():
                    out = targets[name]
                    dtype = "I64" if name == "n_frames" else "F32"
                    begin, end = info["data_offsets"]
                    if info["dtype"] != dtype or tuple(info["shape"]) != out.shape or end - begin != out.nbytes:
                        return None
                    f.seek(8 + size + begin)
                    if f.readinto(memoryview(out).cast("B")) != out.nbytes:
                        return None
        except (OSError, ValueError, KeyError, TypeError):  # absent, unreadable or malformed: a miss
            return None
        try:
            return self._check(meta, targets, fingerprint, audio_sha)
        except InvalidEntry:
            return None

    def _report_entry(self, path: Path, fingerprint: str, audio_sha: str, exc: InvalidEntry) -> None:
        if path in self._reported:
            return
        self._reported.add(path)
        if exc.outdated:  # expected after an upgrade, once per entry: one line for all of them
            if not self._reported_outdated:
                self._reported_outdated = True
                log.warning(
                    "feature cache entry %s has no checksum (written by an older speechbias); "
                    "entries like it are recomputed and rewritten",
                    path,
                )
            return
        log.warning(
            "feature cache entry %s (upstream %s, audio %s) is corrupt (%s); it will be recomputed",
            path,
            fingerprint,
            audio_sha[:12],
            exc,
        )

    # -- audio index (speechbias.fileio.audio_index) ----------------------------------
    def lookup_audio(self, path: str | Path) -> tuple[str, int] | None:
        """(sha256 of decoded audio, n_samples) for an unchanged file seen before, else None (a corrupt
        index record is reported once and ignored)."""
        return self.audio_index.lookup(path)

    def remember_audio(self, path: str | Path, audio_sha: str, n_samples: int) -> None:
        """Record (atomically) that the file at ``path``, as it is now, decodes to ``audio_sha``."""
        self.audio_index.remember(path, AudioFacts(audio_sha, int(n_samples)))

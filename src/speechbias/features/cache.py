"""Content-addressed cache of per-layer temporal statistics.

Key: upstream fingerprint + sha256 of the decoded audio. Value: one safetensors file holding
``mean``, ``min``, ``max`` (L, D) float32 and ``n_frames`` (scalar int64). Writes are atomic
(temporary file + ``os.replace``), entries are write-once, and loading never unpickles. A corrupt
or truncated entry is detected on load, reported with a warning, deleted and recomputed.

A second index maps an audio file's (absolute path, size, mtime) to the sha256 and length of its
decoded samples, so a warm run neither decodes nor runs the upstream.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from speechbias.atomic_file import atomic_write
from speechbias.features.statistics import STAT_NAMES

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClipStatistics:
    """Statistics of one clip: ``mean``/``min``/``max`` are (L, D) float32; ``n_frames`` an int."""

    mean: np.ndarray
    min: np.ndarray
    max: np.ndarray
    n_frames: int


class FeatureCache:
    """Directory-backed cache; safe for concurrent writers (write-once atomic entries)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    # -- statistics entries -------------------------------------------------------------
    def entry_path(self, fingerprint: str, audio_sha: str) -> Path:
        return self.root / "stats" / fingerprint / audio_sha[:2] / f"{audio_sha}.safetensors"

    def has(self, fingerprint: str, audio_sha: str) -> bool:
        return self.entry_path(fingerprint, audio_sha).is_file()

    def put(self, fingerprint: str, audio_sha: str, stats: ClipStatistics) -> Path:
        path = self.entry_path(fingerprint, audio_sha)
        if path.is_file():  # write-once: another process already stored the same content
            return path
        tensors = {name: np.ascontiguousarray(getattr(stats, name), dtype=np.float32) for name in STAT_NAMES}
        tensors["n_frames"] = np.asarray(int(stats.n_frames), dtype=np.int64)
        meta = {"fingerprint": fingerprint, "audio_sha256": audio_sha}
        atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata=meta))
        return path

    def get(self, fingerprint: str, audio_sha: str) -> ClipStatistics | None:
        """The entry, or ``None`` when absent or corrupt (a corrupt entry is removed with a warning)."""
        path = self.entry_path(fingerprint, audio_sha)
        if not path.is_file():
            return None
        try:
            data = load_file(str(path))
            shapes = {data[n].shape for n in STAT_NAMES}
            if len(shapes) != 1 or len(next(iter(shapes))) != 2:
                raise ValueError(f"inconsistent shapes {shapes}")
            if not all(np.isfinite(data[n]).all() for n in STAT_NAMES):
                raise ValueError("non-finite values")
            n_frames = int(data["n_frames"])
            if n_frames < 1:
                raise ValueError(f"n_frames={n_frames}")
        except Exception as exc:
            log.warning("feature cache entry %s is corrupt (%s); it will be recomputed", path, exc)
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            return None
        return ClipStatistics(mean=data["mean"], min=data["min"], max=data["max"], n_frames=n_frames)

    # -- audio hash index --------------------------------------------------------------
    @staticmethod
    def _file_key(path: str | Path) -> str:
        p = Path(path).resolve()
        st = p.stat()
        return hashlib.sha256(f"{p}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()

    def _index_path(self, path: str | Path) -> Path:
        key = self._file_key(path)
        return self.root / "audio_index" / key[:2] / f"{key}.json"

    def lookup_audio(self, path: str | Path) -> tuple[str, int] | None:
        """(sha256 of decoded audio, n_samples) for an unchanged file seen before, else None."""
        try:
            ip = self._index_path(path)
            if not ip.is_file():
                return None
            rec = json.loads(ip.read_text())
            return str(rec["sha256"]), int(rec["n_samples"])
        except (OSError, ValueError, KeyError):
            return None

    def remember_audio(self, path: str | Path, audio_sha: str, n_samples: int) -> None:
        ip = self._index_path(path)
        blob = json.dumps({"path": str(Path(path).resolve()), "sha256": audio_sha, "n_samples": int(n_samples)})
        atomic_write(ip, lambda tmp: tmp.write_text(blob))

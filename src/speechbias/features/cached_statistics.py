"""Clips' statistics read from the feature cache, stacked in the clips' order; no torch, no Lightning.

:class:`StackedStatistics` is what every evaluation consumes: per-layer temporal statistics of N clips.
:func:`load_statistics` stacks them from what an extraction loop met and the cache;
:func:`fully_cached_statistics` is the warm path: every clip's audio-index record and entry read and
verified once, or None as soon as one clip would need extraction (so the caller runs the loop).
:func:`read_stacked` reads entries straight into one preallocated stack (both warm paths: this one and a
one-process extraction loop whose clips are all cached). :func:`index_records` and :func:`count_uncached`
read the audio index only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from speechbias.features.cache import STAT_NAMES, ClipStatistics, FeatureCache


@dataclass
class StackedStatistics:
    """Statistics of N clips: ``mean``/``min``/``max`` (N, L, D) float32, ``n_frames`` (N,)."""

    mean: np.ndarray
    min: np.ndarray
    max: np.ndarray
    n_frames: np.ndarray
    audio_sha: list[str]

    def stat(self, name: str) -> np.ndarray:
        if name not in ("mean", "min", "max"):
            raise ValueError(f"temporal statistic must be mean, min or max, got {name!r}")
        return getattr(self, name)

    def rows(self, index: Sequence[int]) -> StackedStatistics:
        """The statistics of the clips at ``index`` (in that order); these, not a copy, when ``index`` is
        every row in order (a job of one test)."""
        idx = np.asarray(index, dtype=np.int64)
        if len(idx) == len(self.n_frames) and np.array_equal(idx, np.arange(len(idx))):
            return self
        return StackedStatistics(
            mean=self.mean[idx],
            min=self.min[idx],
            max=self.max[idx],
            n_frames=self.n_frames[idx],
            audio_sha=[self.audio_sha[i] for i in idx],
        )


def read_stacked(shas: Sequence[str], cache: FeatureCache, fingerprint: str) -> StackedStatistics | None:
    """The valid entries of ``shas`` (audio sha256s, in the clips' order) read straight into one
    preallocated :class:`StackedStatistics`, each entry read and verified once (a repeated sha is
    copied); None as soon as one entry is absent, invalid or of another shape than the first (the
    caller then takes the per-entry path, which reports and recomputes it)."""
    shas = list(shas)
    if not shas:
        return None
    first = cache.get(fingerprint, shas[0])  # its shape is the stack's
    if first is None or any(getattr(first, name).dtype != np.float32 for name in STAT_NAMES):
        return None
    n, (layers, dim) = len(shas), first.mean.shape
    stacked = StackedStatistics(
        mean=np.empty((n, layers, dim), dtype=np.float32),
        min=np.empty((n, layers, dim), dtype=np.float32),
        max=np.empty((n, layers, dim), dtype=np.float32),
        n_frames=np.empty(n, dtype=np.int64),
        audio_sha=shas,
    )
    for name in (*STAT_NAMES, "n_frames"):
        getattr(stacked, name)[0] = getattr(first, name)
    row_of = {shas[0]: 0}
    for row in range(1, n):
        sha = shas[row]
        if sha in row_of:  # a repeated clip: a copy of its first row
            for name in (*STAT_NAMES, "n_frames"):
                getattr(stacked, name)[row] = getattr(stacked, name)[row_of[sha]]
            continue
        n_frames = cache.read_into(fingerprint, sha, stacked.mean[row], stacked.min[row], stacked.max[row])
        if n_frames is None:
            return None
        stacked.n_frames[row] = n_frames
        row_of[sha] = row
    return stacked


def index_records(paths: Sequence[str], cache: FeatureCache) -> dict[str, tuple[str, int] | None]:
    """Each clip's audio-index record ((sha256, n_samples), or None when the file is new or changed),
    read once for the whole loop."""
    return {str(p): cache.lookup_audio(p) for p in dict.fromkeys(map(str, paths))}


def count_uncached(
    paths: Sequence[str], cache: FeatureCache, fingerprint: str, known: dict[str, tuple[str, int] | None] | None = None
) -> int:
    """Clips of ``paths`` that need work (decoding or a forward): no hash-index record, or no cache
    entry file for ``fingerprint``. Reads the index only (``known``: records already read); an entry
    file that turns out to be invalid is counted as cached here (and recomputed by the loop)."""
    records = known if known is not None else index_records(paths, cache)
    n = 0
    for p in paths:
        record = records.get(str(p))
        n += record is None or not cache.entry_path(fingerprint, record[0]).is_file()
    return n


def fully_cached_statistics(paths: Sequence[str], cache: FeatureCache, fingerprint: str) -> StackedStatistics | None:
    """The statistics of ``paths`` in order when every clip has an audio-index record and a valid entry
    for ``fingerprint``; None when any clip needs extraction (no record, no entry file, or an entry that
    fails verification: reported once by the cache, recomputed by the loop). Index records are read
    first and entries only when every entry file exists, so a partly cached run reads no entry here."""
    records = index_records(paths, cache)
    if count_uncached(paths, cache, fingerprint, records):
        return None
    return read_stacked([records[str(p)][0] for p in paths], cache, fingerprint)


def load_statistics(
    paths: Sequence[str],
    cache: FeatureCache,
    fingerprint: str,
    seen: dict[str, ClipStatistics] | None = None,
    audio_sha: dict[str, str] | None = None,
) -> StackedStatistics:
    """Stack the statistics of ``paths`` in order: from ``seen``/``audio_sha`` (what this process's
    extraction loop met) where there, else from the cache; raises if any clip lacks an entry."""
    seen, audio_sha = seen or {}, audio_sha or {}
    entries, shas = [], []
    for p in paths:
        sha = audio_sha.get(str(p))
        if sha is None:
            known = cache.lookup_audio(p)
            sha = known[0] if known is not None else None
        entry = seen.get(sha) if sha is not None else None
        if entry is None and sha is not None:
            entry = cache.get(fingerprint, sha)
        if entry is None:
            raise RuntimeError(f"{p}: no cached statistics for upstream {fingerprint}; run extraction first")
        entries.append(entry)
        shas.append(sha)
    return StackedStatistics(
        mean=np.stack([e.mean for e in entries]),
        min=np.stack([e.min for e in entries]),
        max=np.stack([e.max for e in entries]),
        n_frames=np.array([e.n_frames for e in entries]),
        audio_sha=shas,
    )

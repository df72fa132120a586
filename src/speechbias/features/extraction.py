"""Extraction through Lightning's predict loop into the feature cache.

``extract_statistics`` makes sure every clip has a cache entry for the upstream, running the
upstream only on clips that miss (a warm run performs zero forwards), then returns the stacked
statistics in the clips' order. Under ``trainer=ddp`` the predict loop shards the clips over
processes; each process writes its own entries and the cache is the gather point.

Batching is length-aware: clips are sorted by length so padding stays small. For upstreams that
are not invariant to zero padding (``pad_invariant = False``), a batch is split into sub-batches
of exactly equal length, so no clip is ever padded.
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from contextlib import contextmanager
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytorch_lightning as pl
import soundfile as sf
import torch
from filelock import FileLock, Timeout
from pytorch_lightning.callbacks import BasePredictionWriter
from torch.utils.data import DataLoader, Dataset

from speechbias.audio import SAMPLE_RATE, AudioError, audio_sha256, load_audio
from speechbias.features.cache import ClipStatistics, FeatureCache
from speechbias.features.statistics import temporal_statistics
from speechbias.lightning_trainer import quiet_third_party_console
from speechbias.upstream.base import Upstream

log = logging.getLogger(__name__)

# spawned DDP workers import this module (unpickling it), not the trainer factory: quiet them too
quiet_third_party_console()


@dataclass(frozen=True)
class ExtractionSettings:
    """The extraction predict loop of a task (``extraction.*``): clips per batch, DataLoader workers,
    and whether clips shorter than the upstream's receptive field are zero-padded (else an error)."""

    batch_size: int = 8
    num_workers: int = 0
    pad_short: bool = False

    def kwargs(self) -> dict:
        """As keyword arguments of :func:`extract_statistics`."""
        return {"batch_size": int(self.batch_size), "num_workers": int(self.num_workers),
                "pad_short": bool(self.pad_short)}


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


class ClipDataset(Dataset):
    """Decodes clips that miss the cache; yields ``None`` audio for clips already cached.

    Each item: dict(index, path, sha, wav (1-D float32 tensor or None)).
    """

    def __init__(self, paths: Sequence[str], cache: FeatureCache, fingerprint: str,
                 min_samples: int = 1, pad_short: bool = False):
        self.paths = [str(p) for p in paths]
        self.cache = cache
        self.fingerprint = fingerprint
        self.min_samples = min_samples
        self.pad_short = pad_short

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> dict:
        path = self.paths[i]
        known = self.cache.lookup_audio(path)
        if known is not None and self.cache.get(self.fingerprint, known[0]) is not None:
            return {"index": i, "path": path, "sha": known[0], "wav": None}
        wav = load_audio(path, SAMPLE_RATE, min_samples=1)
        sha = audio_sha256(wav)
        self.cache.remember_audio(path, sha, wav.shape[0])
        if self.cache.has(self.fingerprint, sha):
            return {"index": i, "path": path, "sha": sha, "wav": None}
        if wav.shape[0] < self.min_samples:
            if not self.pad_short:
                raise AudioError(path, f"too short for this upstream: {wav.shape[0]} samples, needs at least "
                                       f"{self.min_samples} (set extraction.pad_short=true to zero-pad)")
            wav = np.pad(wav, (0, self.min_samples - wav.shape[0]))
        return {"index": i, "path": path, "sha": sha, "wav": torch.from_numpy(wav)}


class BatchedClipDataset(Dataset):
    """Items are whole length-sorted batches of a :class:`ClipDataset`.

    Batching inside the dataset (instead of a custom batch sampler) lets Lightning's distributed
    sampler shard batches over DDP processes unchanged.
    """

    def __init__(self, clips: ClipDataset, batches: list[list[int]]):
        self.clips = clips
        self.batches = batches

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, k: int) -> list[dict]:
        return [self.clips[i] for i in self.batches[k]]


def collate_clips(batch: list[list[dict]]) -> dict:
    """Pad the decoded waveforms of one pre-built batch: ``wavs`` (B', S_max), ``lengths`` (B',),
    for the B' <= B clips that still need a forward."""
    (items,) = batch
    todo = [it for it in items if it["wav"] is not None]
    lengths = torch.tensor([it["wav"].shape[0] for it in todo], dtype=torch.long)
    wavs = torch.zeros(len(todo), int(lengths.max()) if len(todo) else 0)
    for row, it in enumerate(todo):
        wavs[row, : it["wav"].shape[0]] = it["wav"]
    return {"sha": [it["sha"] for it in todo], "wavs": wavs, "lengths": lengths,
            "index": [it["index"] for it in items]}


def approximate_lengths(paths: Sequence[str], cache: FeatureCache) -> list[int]:
    """Clip lengths in samples at 16 kHz from the hash index or file headers (no decoding)."""
    out = []
    for p in paths:
        known = cache.lookup_audio(p)
        if known is not None:
            out.append(known[1])
            continue
        try:
            info = sf.info(str(p))
            out.append(int(info.frames * SAMPLE_RATE / max(info.samplerate, 1)))
        except Exception as exc:
            raise AudioError(p, f"unreadable audio header ({exc})") from exc
    return out


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices grouped into batches of similar length (longest first, so OOM shows up at once)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


class ExtractionModule(pl.LightningModule):
    """Runs an upstream on a batch and returns per-layer temporal statistics of each clip."""

    def __init__(self, upstream: Upstream):
        super().__init__()
        self.upstream = upstream.eval()
        self.n_forward_clips = 0

    def _forward_stats(self, wavs: torch.Tensor, lengths: torch.Tensor) -> dict[str, torch.Tensor]:
        hidden, frame_lengths = self.upstream(wavs, lengths)
        self.n_forward_clips += int(wavs.shape[0])
        return temporal_statistics(hidden, frame_lengths)

    def predict_step(self, batch: dict, batch_idx: int, dataloader_idx: int = 0) -> dict:
        if not batch["sha"]:
            return {"sha": [], "stats": None}
        wavs, lengths = batch["wavs"], batch["lengths"]
        if self.upstream.pad_invariant:
            stats = self._forward_stats(wavs, lengths)
            return {"sha": batch["sha"], "stats": {k: v.cpu() for k, v in stats.items()}}
        # never zero-pad clips together for this upstream: forward equal-length groups separately
        groups: dict[int, list[int]] = defaultdict(list)
        for row, n in enumerate(lengths.tolist()):
            groups[n].append(row)
        parts: dict[int, dict[str, torch.Tensor]] = {}
        for n, rows in groups.items():
            st = self._forward_stats(wavs[rows, :n], lengths[rows])
            for j, row in enumerate(rows):
                parts[row] = {k: v[j] for k, v in st.items()}
        stats = {k: torch.stack([parts[r][k] for r in range(len(lengths))]).cpu() for k in parts[0]}
        return {"sha": batch["sha"], "stats": stats}


class FeatureCacheWriter(BasePredictionWriter):
    """Writes each predicted batch's statistics into the feature cache (every process writes its own)."""

    def __init__(self, cache: FeatureCache, fingerprint: str):
        super().__init__(write_interval="batch")
        self.cache = cache
        self.fingerprint = fingerprint
        self.n_written = 0

    def write_on_batch_end(self, trainer, pl_module, prediction, batch_indices, batch, batch_idx, dataloader_idx):
        stats = prediction["stats"]
        for j, sha in enumerate(prediction["sha"]):
            self.cache.put(self.fingerprint, sha, ClipStatistics(
                mean=stats["mean"][j].numpy(), min=stats["min"][j].numpy(), max=stats["max"][j].numpy(),
                n_frames=int(stats["n_frames"][j])))
            self.n_written += 1


def run_extraction(upstream: Upstream, paths: Sequence[str], cache: FeatureCache, trainer: pl.Trainer,
                   batch_size: int = 8, num_workers: int = 0, pad_short: bool = False) -> ExtractionModule:
    """Fill the cache for ``paths`` through ``trainer.predict``; returns the module (``n_forward_clips``).

    Callbacks on ``trainer`` (e.g. the SpEAT callback) run at the end of the predict loop, after the
    cache writer has stored every batch.
    """
    fingerprint = upstream.fingerprint
    module = ExtractionModule(upstream)
    dataset = ClipDataset(paths, cache, fingerprint, min_samples=upstream.min_samples, pad_short=pad_short)
    batches = length_sorted_batches(approximate_lengths(paths, cache), batch_size)
    loader = DataLoader(BatchedClipDataset(dataset, batches), batch_size=1, shuffle=False,
                        collate_fn=collate_clips, num_workers=num_workers)
    writer = FeatureCacheWriter(cache, fingerprint)
    trainer.callbacks.insert(0, writer)
    try:
        with progress_bar_hidden(trainer, hide=count_uncached(paths, cache, fingerprint) == 0):
            trainer.predict(module, dataloaders=loader, return_predictions=False)
    finally:
        trainer.callbacks.remove(writer)
    return module


def count_uncached(paths: Sequence[str], cache: FeatureCache, fingerprint: str) -> int:
    """Clips of ``paths`` that need work (decoding or a forward): no hash-index record, or no cache
    entry file for ``fingerprint``. Reads the index only; an entry file that turns out to be invalid
    is counted as cached here (and recomputed by the loop)."""
    n = 0
    for p in paths:
        known = cache.lookup_audio(p)
        n += known is None or not cache.entry_path(fingerprint, known[0]).is_file()
    return n


@contextmanager
def progress_bar_hidden(trainer: pl.Trainer, hide: bool):
    """Hide the trainer's progress bar inside the block when ``hide`` (a warm run: nothing to show
    progress of); it is shown again afterwards (e.g. for the fit that follows in ``train.py``)."""
    bar = trainer.progress_bar_callback
    if not hide or bar is None or bar.is_disabled:
        yield
        return
    bar.disable()
    try:
        yield
    finally:
        bar.enable()


def load_statistics(paths: Sequence[str], cache: FeatureCache, fingerprint: str) -> StackedStatistics:
    """Stack cached statistics of ``paths`` in order; raises if any clip lacks an entry."""
    entries, shas = [], []
    for p in paths:
        known = cache.lookup_audio(p)
        entry = cache.get(fingerprint, known[0]) if known is not None else None
        if entry is None:
            raise RuntimeError(f"{p}: no cached statistics for upstream {fingerprint}; run extraction first")
        entries.append(entry)
        shas.append(known[0])
    return StackedStatistics(
        mean=np.stack([e.mean for e in entries]), min=np.stack([e.min for e in entries]),
        max=np.stack([e.max for e in entries]), n_frames=np.array([e.n_frames for e in entries]),
        audio_sha=shas)


@contextmanager
def _stimulus_set_lock(cache: FeatureCache, fingerprint: str, paths: Sequence[str], world_size: int):
    """Serialise extraction of one stimulus set by one upstream across concurrent sweep jobs.

    A second job waits, then finds every clip cached (zero forwards). Entries are write-once and
    atomic anyway, so this saves compute, not correctness. Skipped under DDP, whose ranks must all
    enter the predict loop together.
    """
    if world_size > 1:
        yield
        return
    key = hashlib.sha256("\n".join(sorted(map(str, paths))).encode()).hexdigest()[:16]
    lock_path = cache.root / "locks" / f"{fingerprint}-{key}.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(lock_path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log.info("another job is extracting these clips with this upstream; waiting for it (%s)", lock_path)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def extract_statistics(upstream: Upstream, paths: Sequence[str], cache: FeatureCache | str | Path,
                       trainer: pl.Trainer, batch_size: int = 8, num_workers: int = 0,
                       pad_short: bool = False) -> tuple[StackedStatistics, int]:
    """Ensure all clips are cached, then return (statistics in order, number of upstream forwards).

    The predict loop always runs over every clip (cached clips cost an index lookup and no forward),
    so callbacks attached to ``trainer`` see one uniform ``on_predict_end`` on every run.
    """
    cache = cache if isinstance(cache, FeatureCache) else FeatureCache(cache)
    with _stimulus_set_lock(cache, upstream.fingerprint, paths, trainer.world_size):
        module = run_extraction(upstream, paths, cache, trainer, batch_size, num_workers, pad_short)
    log.info("%s: %d of %d clips needed an upstream forward", upstream.name, module.n_forward_clips, len(paths))
    trainer.strategy.barrier()
    return load_statistics(paths, cache, upstream.fingerprint), module.n_forward_clips

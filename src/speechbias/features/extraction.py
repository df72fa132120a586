"""Extraction through Lightning's predict loop into the feature cache.

``extract_statistics`` makes sure every clip has a cache entry for the upstream, running the
upstream only on clips that miss (a warm run performs zero forwards), then returns the stacked
statistics in the clips' order. Under DDP the predict loop is a distributed map: each rank extracts
its shard of the batches into the shared cache, which is the gather point.

Each clip's cache is read once: its audio-index record once per process (:func:`index_records`,
before the loop), its entry once, verified, where the loop meets it (a cached clip's statistics
travel through the loop; an invalid entry is recomputed there). The process keeps what its loop saw
(:attr:`ExtractionModule.seen`); :func:`extract_statistics` stacks it, reading from the cache only
the clips other ranks handled. So a warm one-process run reads each index record and verifies each
entry exactly once (``benchmarks/cache_reads.py`` counts them); when every clip is cached and one process
runs the loop, the entries are read before it straight into one preallocated stack
(:func:`preloaded_statistics`) and the loop's clips carry views of its rows. A task whose clips are all cached
need not run the loop at all: :func:`speechbias.features.cached_statistics.fully_cached_statistics`.
The number of upstream forwards is summed over the ranks at the end of the loop (:class:`FeatureCacheWriter`)
and travels back to the process that called the loop (a ``ddp_spawn`` parent too) in the trainer's
``callback_metrics``, Lightning's way back from spawned workers.

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
from pathlib import Path

import numpy as np
import pytorch_lightning as pl
import soundfile as sf
import torch
from filelock import FileLock, Timeout
from pytorch_lightning.callbacks import BasePredictionWriter
from torch.utils.data import DataLoader, Dataset

from speechbias.fileio.audio import SAMPLE_RATE, AudioError, audio_sha256, load_audio
from speechbias.features.cache import ClipStatistics, FeatureCache
from speechbias.features.cached_statistics import (
    StackedStatistics,
    count_uncached,
    index_records,
    load_statistics,
    read_stacked,
)
from speechbias.features.statistics import temporal_statistics
from speechbias.console_quieting import quiet_third_party_console
from speechbias.upstream.base import Upstream

log = logging.getLogger(__name__)

# spawned DDP workers import this module (unpickling it), not the trainer factory: quiet them too
quiet_third_party_console()


class ClipDataset(Dataset):
    """Decodes clips that miss the cache; yields the cached statistics (and ``None`` audio) of clips
    already cached, verified once here.

    Each item: dict(path, sha, wav (1-D float32 tensor or None), cached (ClipStatistics or None)).
    ``known``: every clip's audio-index record (:func:`index_records`), read before the loop;
    ``preloaded``: statistics already read and verified, by path (nothing is read for those clips), or None.
    """

    def __init__(
        self,
        paths: Sequence[str],
        cache: FeatureCache,
        fingerprint: str,
        min_samples: int,
        pad_short: bool,
        known: dict[str, tuple[str, int] | None],
        preloaded: dict[str, tuple[str, ClipStatistics]] | None,
    ):
        self.paths = [str(p) for p in paths]
        self.cache = cache
        self.fingerprint = fingerprint
        self.min_samples = min_samples
        self.pad_short = pad_short
        self.known = known
        self.preloaded = preloaded or {}

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> dict:
        path = self.paths[i]
        if path in self.preloaded:
            sha, cached = self.preloaded[path]
            return {"path": path, "sha": sha, "wav": None, "cached": cached}
        known = self.known[path]
        if known is not None:
            cached = self.cache.get(self.fingerprint, known[0])
            if cached is not None:
                return {"path": path, "sha": known[0], "wav": None, "cached": cached}
        wav = load_audio(path, SAMPLE_RATE, min_samples=1)
        sha = audio_sha256(wav)
        self.cache.remember_audio(path, sha, wav.shape[0])
        cached = self.cache.get(self.fingerprint, sha)
        if cached is not None:
            return {"path": path, "sha": sha, "wav": None, "cached": cached}
        if wav.shape[0] < self.min_samples:
            if not self.pad_short:
                raise AudioError(
                    path,
                    f"too short for this upstream: {wav.shape[0]} samples, needs at least "
                    f"{self.min_samples} (set extraction.pad_short=true to zero-pad)",
                )
            wav = np.pad(wav, (0, self.min_samples - wav.shape[0]))
        return {"path": path, "sha": sha, "wav": torch.from_numpy(wav), "cached": None}


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
    for the B' <= B clips that still need a forward; ``cached``: (path, sha, statistics) of the others,
    ``paths``: (path, sha) of the B' clips."""
    (items,) = batch
    todo = [it for it in items if it["wav"] is not None]
    lengths = torch.tensor([it["wav"].shape[0] for it in todo], dtype=torch.long)
    wavs = torch.zeros(len(todo), int(lengths.max()) if len(todo) else 0)
    for row, it in enumerate(todo):
        wavs[row, : it["wav"].shape[0]] = it["wav"]
    return {
        "wavs": wavs,
        "lengths": lengths,
        "paths": [(it["path"], it["sha"]) for it in todo],
        "cached": [(it["path"], it["sha"], _as_fields(it["cached"])) for it in items if it["wav"] is None],
    }


def _as_fields(entry: ClipStatistics) -> tuple:
    """A cache entry as a plain tuple (mean, min, max, n_frames): Lightning moves batches with
    ``apply_to_collection``, which refuses frozen dataclasses."""
    return entry.mean, entry.min, entry.max, entry.n_frames


def approximate_lengths(paths: Sequence[str], known: dict[str, tuple[str, int] | None]) -> list[int]:
    """Clip lengths in samples at 16 kHz from the audio-index records already read (``known``) or
    file headers (no decoding)."""
    out = []
    for p in paths:
        record = known.get(str(p))
        if record is not None:
            out.append(record[1])
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
    """Runs an upstream on a batch and returns per-layer temporal statistics of each clip.

    ``seen``: statistics of every clip this process's loop met (cached or computed), by audio sha256;
    ``audio_sha``: path -> sha256 of those clips (filled by :class:`FeatureCacheWriter`)."""

    def __init__(self, upstream: Upstream):
        super().__init__()
        self.upstream = upstream.eval()
        self.n_forward_clips = 0
        self.seen: dict[str, ClipStatistics] = {}
        self.audio_sha: dict[str, str] = {}
        self.stacked: tuple[tuple[str, ...], StackedStatistics] | None = None  # (paths, their statistics)

    def _forward_stats(self, wavs: torch.Tensor, lengths: torch.Tensor) -> dict[str, torch.Tensor]:
        hidden, frame_lengths = self.upstream(wavs, lengths)
        self.n_forward_clips += int(wavs.shape[0])
        return temporal_statistics(hidden, frame_lengths)

    def predict_step(self, batch: dict, batch_idx: int, dataloader_idx: int = 0) -> dict:
        out = {"paths": batch["paths"], "cached": batch["cached"], "stats": None}
        if not batch["paths"]:
            return out
        wavs, lengths = batch["wavs"], batch["lengths"]
        if self.upstream.pad_invariant:
            stats = self._forward_stats(wavs, lengths)
            return {**out, "stats": {k: v.cpu() for k, v in stats.items()}}
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
        return {**out, "stats": stats}


#: the loop's upstream forwards summed over its ranks, in ``trainer.callback_metrics`` after the loop
FORWARDS_METRIC = "extraction/n_upstream_forwards"


class FeatureCacheWriter(BasePredictionWriter):
    """Writes each predicted batch's statistics into the feature cache (every process writes its own)
    and keeps every clip's statistics, computed or cached, in the module's ``seen``; at the loop's end,
    every rank's forwards summed (a collective: every rank has written its entries by then) as
    :data:`FORWARDS_METRIC`."""

    def __init__(self, cache: FeatureCache, fingerprint: str):
        super().__init__(write_interval="batch")
        self.cache = cache
        self.fingerprint = fingerprint

    def write_on_batch_end(self, trainer, pl_module, prediction, batch_indices, batch, batch_idx, dataloader_idx):
        stats = prediction["stats"]
        seen, audio_sha = getattr(pl_module, "seen", {}), getattr(pl_module, "audio_sha", {})
        for j, (path, sha) in enumerate(prediction["paths"]):
            entry = ClipStatistics(
                mean=stats["mean"][j].numpy(),
                min=stats["min"][j].numpy(),
                max=stats["max"][j].numpy(),
                n_frames=int(stats["n_frames"][j]),
            )
            self.cache.put(self.fingerprint, sha, entry)
            seen[sha], audio_sha[path] = entry, sha
        for path, sha, (mean, minimum, maximum, n_frames) in prediction["cached"]:
            seen[sha] = ClipStatistics(mean=mean, min=minimum, max=maximum, n_frames=int(n_frames))
            audio_sha[path] = sha

    def on_predict_end(self, trainer, pl_module):
        n_local = torch.tensor(float(getattr(pl_module, "n_forward_clips", 0)))
        trainer.callback_metrics[FORWARDS_METRIC] = trainer.strategy.reduce(n_local, reduce_op="sum")


def run_extraction(
    upstream: Upstream,
    paths: Sequence[str],
    cache: FeatureCache,
    trainer: pl.Trainer,
    batch_size: int = 8,
    num_workers: int = 0,
    pad_short: bool = False,
) -> ExtractionModule:
    """Fill the cache for ``paths`` through ``trainer.predict``; returns the module (``n_forward_clips``:
    this process's forwards)."""
    fingerprint = upstream.fingerprint
    module = ExtractionModule(upstream)
    known = index_records(paths, cache)
    uncached = count_uncached(paths, cache, fingerprint, known)
    preloaded = (
        preloaded_statistics(module, paths, cache, fingerprint, known)
        if uncached == 0 and trainer.world_size == 1
        else None
    )
    dataset = ClipDataset(
        paths,
        cache,
        fingerprint,
        min_samples=upstream.min_samples,
        pad_short=pad_short,
        known=known,
        preloaded=preloaded,
    )
    batches = length_sorted_batches(approximate_lengths(paths, known), batch_size)
    loader = DataLoader(
        BatchedClipDataset(dataset, batches),
        batch_size=1,
        shuffle=False,
        collate_fn=collate_clips,
        num_workers=num_workers,
    )
    writer = FeatureCacheWriter(cache, fingerprint)
    trainer.callbacks.insert(0, writer)
    try:
        with progress_bar_hidden(trainer, hide=uncached == 0):
            trainer.predict(module, dataloaders=loader, return_predictions=False)
    finally:
        trainer.callbacks.remove(writer)
    return module


def preloaded_statistics(
    module: ExtractionModule,
    paths: Sequence[str],
    cache: FeatureCache,
    fingerprint: str,
    known: dict[str, tuple[str, int] | None],
) -> dict[str, tuple[str, ClipStatistics]] | None:
    """Every clip's statistics read at once into one preallocated stack
    (:func:`~speechbias.features.cached_statistics.read_stacked`), for a one-process loop whose clips
    all have an index record and an entry file; None when one entry fails (the loop then reads
    clip by clip, reporting and recomputing it). The stack becomes the module's stacked statistics
    of ``paths`` (:func:`extract_statistics` returns it without copying) and the loop's clips
    carry views of its rows: the loop still runs over every clip, as on any run."""
    paths = list(map(str, paths))
    shas = [known[p][0] for p in paths]
    stacked = read_stacked(shas, cache, fingerprint)
    if stacked is None:
        return None
    module.stacked = (tuple(paths), stacked)
    return {
        p: (
            sha,
            ClipStatistics(
                mean=stacked.mean[i], min=stacked.min[i], max=stacked.max[i], n_frames=int(stacked.n_frames[i])
            ),
        )
        for i, (p, sha) in enumerate(zip(paths, shas))
    }


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


def extract_statistics(
    upstream: Upstream,
    paths: Sequence[str],
    cache: FeatureCache | str | Path,
    trainer: pl.Trainer,
    batch_size: int = 8,
    num_workers: int = 0,
    pad_short: bool = False,
    every_rank: bool = True,
) -> tuple[StackedStatistics | None, int]:
    """Ensure all clips are cached, then return (statistics in order, upstream forwards of every rank).
    ``every_rank=False``: only global rank zero stacks the statistics (None on the other ranks).

    The predict loop always runs over every clip (cached clips cost an index lookup and no forward):
    under DDP every rank calls this, and the statistics are what this process's loop met plus, from
    the cache, the clips other ranks handled (a ``ddp_spawn`` parent's loop met none).
    """
    cache = cache if isinstance(cache, FeatureCache) else FeatureCache(cache)
    with _stimulus_set_lock(cache, upstream.fingerprint, paths, trainer.world_size):
        module = run_extraction(upstream, paths, cache, trainer, batch_size, num_workers, pad_short)
    n_forwards = int(trainer.callback_metrics.get(FORWARDS_METRIC, module.n_forward_clips))
    log.info("%s: %d of %d clips needed an upstream forward", upstream.name, n_forwards, len(paths))
    trainer.strategy.barrier()
    if not (every_rank or trainer.is_global_zero):
        return None, n_forwards
    key = tuple(map(str, paths))
    if module.stacked is not None and module.stacked[0] == key:  # every clip preloaded (one process)
        return module.stacked[1], n_forwards
    return load_statistics(key, cache, upstream.fingerprint, module.seen, module.audio_sha), n_forwards

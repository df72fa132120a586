"""Transcribe a corpus with a cache per (model fingerprint, decoded-audio sha256).

Each utterance's audio is decoded (``speechbias.fileio.audio.load_audio``) and hashed; cached hypotheses
are reused, the rest are transcribed in batches and written to the cache right after each batch,
so nothing computed is lost and a re-analysis performs no transcription. Sharding
(``shard_index`` of ``shard_count``) lets several processes or SLURM jobs transcribe disjoint
parts of a large corpus into the same cache; a final unsharded run then only reads the cache.
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass

import pandas as pd

from speechbias.asr.cache import HypothesisCache
from speechbias.asr.models import Transcriber
from speechbias.fileio.audio import AudioError, audio_sha256, load_audio

log = logging.getLogger(__name__)


@dataclass
class TranscriptionResult:
    """``hypotheses``: utterance_id, audio_sha256, hypothesis for every utterance that has one.
    ``failed``: utterance_id, path, reason (undecodable audio). Counts of cache hits / new ones."""

    hypotheses: pd.DataFrame
    failed: pd.DataFrame
    n_cached: int
    n_transcribed: int


def in_shard(utterance_id: str, shard_index: int, shard_count: int) -> bool:
    """Stable assignment of an utterance to one of ``shard_count`` shards (crc32 of its id)."""
    return zlib.crc32(str(utterance_id).encode()) % shard_count == shard_index


def transcribe_corpus(
    utterances: pd.DataFrame,
    transcriber: Transcriber,
    cache: HypothesisCache,
    shard_index: int = 0,
    shard_count: int = 1,
    progress: bool = True,
) -> TranscriptionResult:
    """Hypotheses for ``utterances`` (columns utterance_id, path), from the cache or the model."""
    if shard_count < 1 or not 0 <= shard_index < shard_count:
        raise ValueError(f"need 0 <= shard_index < shard_count, got shard {shard_index} of {shard_count}")
    rows, failed = [], []
    pending: list[tuple[str, str, object]] = []
    n_cached = n_new = n_other = 0

    def flush():
        nonlocal n_new
        if not pending:
            return
        texts = transcriber.transcribe([w for _, _, w in pending])
        for (uid, sha, _), text in zip(pending, texts):
            cache.put(sha, text)
            rows.append({"utterance_id": uid, "audio_sha256": sha, "hypothesis": text})
        n_new += len(pending)
        pending.clear()

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (
        TextColumn(f"[bold]transcribing ({transcriber.name})"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, disable=not progress, transient=False) as bar:
        task = bar.add_task("asr", total=len(utterances))
        for uid, path in zip(utterances["utterance_id"], utterances["path"]):
            bar.advance(task)
            if shard_count > 1 and not in_shard(uid, shard_index, shard_count):
                n_other += 1
                continue
            try:
                wav = load_audio(path)
            except AudioError as exc:
                failed.append({"utterance_id": uid, "path": path, "reason": f"audio: {exc.problem}"})
                continue
            sha = audio_sha256(wav)
            text = cache.get(sha)
            if text is not None:
                rows.append({"utterance_id": uid, "audio_sha256": sha, "hypothesis": text})
                n_cached += 1
                continue
            pending.append((uid, sha, wav))
            if len(pending) >= transcriber.batch_size:
                flush()
        flush()
    if failed:
        log.warning(
            "%d utterance(s) with unusable audio, e.g. %s: %s", len(failed), failed[0]["path"], failed[0]["reason"]
        )
    log.info("hypotheses: %d from cache, %d transcribed, %d in other shards", n_cached, n_new, n_other)
    return TranscriptionResult(
        hypotheses=pd.DataFrame(rows, columns=["utterance_id", "audio_sha256", "hypothesis"]),
        failed=pd.DataFrame(failed, columns=["utterance_id", "path", "reason"]),
        n_cached=n_cached,
        n_transcribed=n_new,
    )

"""Ask a speech LLM every request, in batches, keeping each answer as soon as its batch is done.

Answers are appended to a JSON-lines file (one object per request: key, signature, response) and
flushed per batch, so an interrupted run loses at most one batch and a rerun asks only what is
missing. An answer is reused only if its ``signature`` matches: a hash of the adapter fingerprint,
the sampling settings, the seed, the prompt text and the audio path.

Sampling is seeded per batch (torch generator seeded from the run seed and the batch's first key).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import zlib
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from speechbias.sllm import OTHER
from speechbias.sllm.adapters.base import ChatInput, SamplingParams, SpeechLLM
from speechbias.sllm.answers import DEFAULT_CER_THRESHOLD, DEFAULT_MIN_WORD_RECALL, AnswerJudge, map_answer
from speechbias.sllm.prompts import ProbeRequest

log = logging.getLogger(__name__)


def request_signature(request: ProbeRequest, fingerprint: dict, sampling: SamplingParams, seed: int) -> str:
    payload = json.dumps(
        {
            "model": fingerprint,
            "sampling": sampling.as_dict(),
            "seed": int(seed),
            "prompt": request.prompt,
            "audio": request.audio_path,
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


def read_cached(path: Path) -> dict[str, dict]:
    """key -> record from a responses JSON-lines file; unparsable lines (a write cut short) are skipped."""
    cached: dict[str, dict] = {}
    if not path.is_file():
        return cached
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            try:
                rec = json.loads(line)
                cached[rec["key"]] = rec
            except (json.JSONDecodeError, KeyError, TypeError):
                log.warning("%s line %d is not a response record; ignored", path, n)
    return cached


def run_probe(
    requests: Sequence[ProbeRequest],
    adapter: SpeechLLM,
    sampling: SamplingParams,
    cache_path: str | Path,
    batch_size: int = 8,
    seed: int = 0,
    progress: bool = True,
) -> dict[str, str]:
    """Return key -> raw answer for every request, generating only those not in ``cache_path``."""
    import torch
    from rich.console import Console
    from rich.progress import Progress

    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    keys = [r.key for r in requests]
    if len(set(keys)) != len(keys):
        raise ValueError("requests must have unique keys")
    cache_path = Path(cache_path)
    fingerprint = adapter.model_fingerprint.fields
    signatures = {r.key: request_signature(r, fingerprint, sampling, seed) for r in requests}
    cached = read_cached(cache_path)
    answers = {
        k: rec["response"] for k, rec in cached.items() if k in signatures and rec.get("signature") == signatures[k]
    }
    todo = [r for r in requests if r.key not in answers]
    if answers:
        log.info("reusing %d cached answers from %s; %d to generate", len(answers), cache_path, len(todo))
    cache_path.parent.mkdir(parents=True, exist_ok=True)
    # a bar on a terminal only: into a file or a log, rich's stopped bar leaves a blank line
    shown = progress and Console().is_terminal
    with Progress(disable=not shown, transient=True) as bar, cache_path.open("a", encoding="utf-8") as fh:
        task = bar.add_task(f"asking {adapter.name}", total=len(todo))
        for start in range(0, len(todo), int(batch_size)):
            batch = todo[start : start + int(batch_size)]
            torch.manual_seed(zlib.crc32(f"{seed}/{batch[0].key}".encode()))
            inputs = [ChatInput(prompt=r.prompt, audio_path=r.audio_path, answer_key=r.answer_key) for r in batch]
            outputs = adapter.generate(inputs, sampling)
            if len(outputs) != len(batch):
                raise RuntimeError(f"{adapter.name} returned {len(outputs)} answers for {len(batch)} inputs")
            for r, text in zip(batch, outputs):
                answers[r.key] = str(text)
                fh.write(
                    json.dumps(
                        {"key": r.key, "signature": signatures[r.key], "response": str(text)}, ensure_ascii=False
                    )
                    + "\n"
                )
            fh.flush()
            os.fsync(fh.fileno())
            bar.advance(task, len(batch))
    return {k: answers[k] for k in keys}


def answer_table(
    requests: Sequence[ProbeRequest],
    responses: dict[str, str],
    cer_threshold: float = DEFAULT_CER_THRESHOLD,
    judge: AnswerJudge | None = None,
    min_word_recall: float = DEFAULT_MIN_WORD_RECALL,
) -> pd.DataFrame:
    """One row per request: key, domain, id, speaker, group, order, response, letter, choice (continuation
    kind or ``other``), method, rule (the rule of :mod:`~speechbias.sllm.answers` that decided), detail.
    The stored record of every answer and its mapping."""
    rows = []
    for r in requests:
        response = responses[r.key]
        mapping = map_answer(
            response, r.options, cer_threshold=cer_threshold, judge=judge, min_word_recall=min_word_recall
        )
        rows.append(
            {
                "key": r.key,
                "domain": r.domain,
                "id": r.item_id,
                "speaker": r.speaker,
                "group": r.group,
                "order": "|".join(r.order),
                "response": response,
                "letter": mapping.letter or "",
                "choice": r.answer_key[mapping.letter] if mapping.letter else OTHER,
                "method": mapping.method,
                "rule": mapping.rule,
                "detail": mapping.detail,
            }
        )
    return pd.DataFrame(rows)

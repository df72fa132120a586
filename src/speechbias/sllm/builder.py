"""Build a Spoken-StereoSet-style set from text items through a TTS backend.

Input: text items, one per (context, three continuations), each tagged with its ``domain``
(gender | age) and the speaker ``group`` the stereotype refers to (e.g. a StereoSet intersentence
item about women -> ``female``; CrowS-Pairs/BBQ-derived items likewise). Each item is spoken by
``voices_per_item`` voices of that group. Output: the released layout, so
:func:`speechbias.sllm.data.load_spoken_stereoset` reads it unchanged::

    metadata/<domain>_<version>.csv  speech/<domain>/<id:05d>_<speaker>.wav (16 kHz PCM-16)

Existing WAVs are kept (a rerun resumes); every file is written atomically.

Command line: ``python -m speechbias.sllm.builder items.csv out_dir [--voices-per-item 3]``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import soundfile as sf
import soxr

from speechbias.fileio.atomic_file import atomic_write
from speechbias.fileio.audio import SAMPLE_RATE
from speechbias.sllm import CONTINUATION_KINDS
from speechbias.sllm.data import GROUP_COLUMNS, audio_path, metadata_path, parse_labels
from speechbias.sllm.tts import ESPEAK_VOICES, EspeakNgBackend, TTSBackend, Voice

ITEM_COLUMNS = ("id", "domain", "group", "context") + CONTINUATION_KINDS
CSV_COLUMNS = (
    "id",
    "speaker",
    "{group}",
    "context",
    "irrelevant",
    "stereotypical",
    "anti-stereotypical",
    "labels",
    "annotators",
)


def _validate_items(items: pd.DataFrame) -> pd.DataFrame:
    absent = [c for c in ITEM_COLUMNS if c not in items.columns]
    if absent:
        raise ValueError(f"items: missing columns {absent}; need {list(ITEM_COLUMNS)}")
    items = items.copy()
    items["id"] = pd.to_numeric(items["id"], errors="raise").astype(int)
    bad_domain = ~items["domain"].isin(list(GROUP_COLUMNS))
    if bad_domain.any():
        raise ValueError(
            f"items: domain must be one of {sorted(GROUP_COLUMNS)}; bad rows {items.index[bad_domain].tolist()[:10]}"
        )
    dup = items.duplicated(["domain", "id"], keep=False)
    if dup.any():
        raise ValueError(f"items: (domain, id) must be unique; duplicated rows {items.index[dup].tolist()[:10]}")
    for col in ("context",) + CONTINUATION_KINDS:
        empty = items[col].astype(str).str.strip() == ""
        if empty.any():
            raise ValueError(f"items: empty {col!r} in rows {items.index[empty].tolist()[:10]}")
    if "labels" not in items.columns:
        items["labels"] = [{} for _ in range(len(items))]
    if "annotators" not in items.columns:
        items["annotators"] = ""
    return items


def _labels_literal(value, item_id) -> str:
    """The CSV's ``labels`` cell: a Python-literal dict (missing -> ``{}``; strings must parse)."""
    if isinstance(value, str):
        parse_labels(value, f"items id {item_id}")
        return value
    if isinstance(value, Mapping):
        return repr(dict(value))
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "{}"
    raise ValueError(f"items id {item_id}: labels must be a dict or its Python literal, got {type(value).__name__}")


def _write_wav(path: Path, wav: np.ndarray, sample_rate: int) -> None:
    if sample_rate != SAMPLE_RATE:
        wav = soxr.resample(wav, sample_rate, SAMPLE_RATE, quality="HQ")
    peak = float(np.max(np.abs(wav)))
    if peak > 1.0:
        wav = wav / peak
    atomic_write(path, lambda tmp: sf.write(str(tmp), wav.astype(np.float32), SAMPLE_RATE, subtype="PCM_16"))


def _write_csv(path: Path, df: pd.DataFrame) -> None:
    atomic_write(path, lambda tmp: df.to_csv(tmp, index=False))


def build_dataset(
    items: pd.DataFrame | Iterable[Mapping],
    out_dir: str | Path,
    backend: TTSBackend,
    voices: Mapping[str, Sequence[Voice]] | None = None,
    voices_per_item: int | None = 3,
    version: str = "v1.0",
    seed: int = 0,
    overwrite: bool = False,
    progress: bool = True,
) -> dict[str, Path]:
    """Synthesise every item's context with voices of its group; return ``{domain: metadata CSV}``.

    ``voices``: domain -> voices (default :data:`~speechbias.sllm.tts.ESPEAK_VOICES`). An item
    of group g uses ``voices_per_item`` voices drawn (seeded, without replacement) from the domain's
    voices whose ``group == g``; ``None`` uses all of them.
    """
    items = _validate_items(pd.DataFrame(list(items)) if not isinstance(items, pd.DataFrame) else items)
    voices = dict(ESPEAK_VOICES if voices is None else voices)
    out_dir = Path(out_dir)
    rng = np.random.default_rng(seed)
    jobs = []  # (domain, row dict, voice)
    for row in items.to_dict("records"):
        pool = [v for v in voices.get(row["domain"], ()) if v.group == row["group"]]
        if not pool:
            raise ValueError(
                f"items: no voice for domain {row['domain']!r} group {row['group']!r} (item id "
                f"{row['id']}); voices have groups {sorted({v.group for v in voices.get(row['domain'], ())})}"
            )
        if voices_per_item is not None and voices_per_item > len(pool):
            raise ValueError(
                f"voices_per_item={voices_per_item} but group {row['group']!r} of domain "
                f"{row['domain']!r} has only {len(pool)} voices"
            )
        chosen = (
            pool
            if voices_per_item is None
            else [pool[i] for i in sorted(rng.choice(len(pool), voices_per_item, replace=False))]
        )
        jobs += [(row["domain"], row, v) for v in chosen]

    from rich.console import Console
    from rich.progress import Progress

    rows: dict[str, list[dict]] = {}
    # a bar on a terminal only: into a file or a log, rich's stopped bar leaves a blank line
    with Progress(disable=not progress or not Console().is_terminal, transient=True) as bar:
        task = bar.add_task("synthesising contexts", total=len(jobs))
        for domain, row, voice in jobs:
            wav_path = audio_path(out_dir, domain, row["id"], voice.speaker)
            if overwrite or not wav_path.is_file():
                wav, sr = backend.synthesize(str(row["context"]), voice)
                _write_wav(wav_path, np.asarray(wav, dtype=np.float32), int(sr))
            labels = _labels_literal(row["labels"], row["id"])
            annotators = row["annotators"] if isinstance(row["annotators"], str) else ""
            rows.setdefault(domain, []).append(
                {
                    "id": int(row["id"]),
                    "speaker": voice.speaker,
                    GROUP_COLUMNS[domain]: voice.group,
                    "context": row["context"],
                    "irrelevant": row["irrelevant"],
                    "stereotypical": row["stereotypical"],
                    "anti-stereotypical": row["anti-stereotypical"],
                    "labels": labels,
                    "annotators": annotators,
                }
            )
            bar.advance(task)
    written = {}
    for domain, domain_rows in rows.items():
        columns = [c.format(group=GROUP_COLUMNS[domain]) for c in CSV_COLUMNS]
        path = metadata_path(out_dir, domain, version)
        _write_csv(path, pd.DataFrame(domain_rows, columns=columns))
        written[domain] = path
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Build a Spoken-StereoSet-style set with espeak-ng voices.")
    parser.add_argument("items", help=f"CSV with columns {', '.join(ITEM_COLUMNS)} [, labels, annotators]")
    parser.add_argument("out_dir")
    parser.add_argument("--voices-per-item", type=int, default=3)
    parser.add_argument("--version", default="v1.0")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    items = pd.read_csv(args.items, dtype=str, keep_default_na=False)
    written = build_dataset(
        items,
        args.out_dir,
        EspeakNgBackend(),
        voices_per_item=args.voices_per_item,
        version=args.version,
        seed=args.seed,
    )
    for domain, path in written.items():
        print(f"{domain}: {path}")


if __name__ == "__main__":
    main()

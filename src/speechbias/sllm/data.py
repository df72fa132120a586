"""Load Spoken StereoSet in its released layout.

Layout under ``data_dir``::

    metadata/gender_v1.0.csv    columns: id, speaker, gender, context, irrelevant, stereotypical,
    metadata/age_v1.0.csv                anti-stereotypical, labels, annotators   (age: ``age`` for ``gender``)
    speech/<domain>/<id:05d>_<speaker>.wav

One CSV row is one spoken instance: item ``id`` (shared by the voices that speak the same context)
read by ``speaker``, whose group (``gender`` or ``age`` value) decides which continuation is the
stereotypical one. Rows, not WAVs, define the set: WAVs without a row are ignored (and counted).
``labels`` is a Python-literal dict and is parsed with :func:`ast.literal_eval`, never ``eval``.
"""

from __future__ import annotations

import ast
import logging
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from speechbias.sllm import CONTINUATION_KINDS

log = logging.getLogger(__name__)

#: domain -> name of the CSV column that holds the speaker group
GROUP_COLUMNS = {"gender": "gender", "age": "age"}
TEXT_COLUMNS = ("context",) + CONTINUATION_KINDS
META_COLUMNS = ("labels", "annotators")


class SpokenStereoSetError(ValueError):
    """The dataset on disk does not have the released layout; the message names the file and rows."""


class MissingAudioError(SpokenStereoSetError):
    """Rows whose WAV is missing; ``missing`` lists them (domain, id, speaker, audio_path)."""

    def __init__(self, missing: pd.DataFrame):
        self.missing = missing
        super().__init__(describe_missing(missing) + " (set on_missing_audio=skip to evaluate without them)")


def metadata_path(data_dir: str | Path, domain: str, version: str = "v1.0") -> Path:
    return Path(data_dir) / "metadata" / f"{domain}_{version}.csv"


def audio_path(data_dir: str | Path, domain: str, item_id: int, speaker: str) -> Path:
    """``speech/<domain>/<id:05d>_<speaker>.wav`` under ``data_dir``."""
    return Path(data_dir) / "speech" / domain / f"{int(item_id):05d}_{speaker}.wav"


def parse_labels(text: str, where: str) -> dict:
    """Parse a Python-literal dict safely (:func:`ast.literal_eval`); ``where`` names file and row."""
    try:
        value = ast.literal_eval(str(text))
    except (ValueError, SyntaxError) as exc:
        raise SpokenStereoSetError(f"{where}: labels is not a Python literal ({exc}): {str(text)[:80]!r}") from exc
    if not isinstance(value, dict):
        raise SpokenStereoSetError(f"{where}: labels must be a dict literal, got {type(value).__name__}")
    return value


def describe_missing(missing: pd.DataFrame, limit: int = 20) -> str:
    """One line naming the rows without audio: count per domain and the first ``limit`` files."""
    per_domain = ", ".join(f"{d}: {n}" for d, n in missing.groupby("domain").size().items())
    shown = [f"{r.domain}/{int(r.id):05d}_{r.speaker}" for r in missing.head(limit).itertuples()]
    more = f" and {len(missing) - limit} more" if len(missing) > limit else ""
    return f"{len(missing)} rows have no audio file ({per_domain}): {', '.join(shown)}{more}"


@dataclass
class SpokenStereoSet:
    """The loaded set.

    ``table``: one row per usable instance with columns domain, id, speaker, group, context,
    stereotypical, anti-stereotypical, irrelevant, labels (dict), annotators, audio_path, csv_row
    (1-based data row in the CSV). ``missing``: rows whose WAV does not exist (same columns).
    ``orphan_wavs``: per domain, number of WAVs under speech/<domain>/ without a CSV row.
    """

    table: pd.DataFrame
    missing: pd.DataFrame
    orphan_wavs: dict[str, int] = field(default_factory=dict)


def _read_domain(data_dir: Path, domain: str, version: str) -> pd.DataFrame:
    path = metadata_path(data_dir, domain, version)
    if not path.is_file():
        raise SpokenStereoSetError(
            f"{path}: metadata file does not exist (expected the released layout "
            f"metadata/<domain>_{version}.csv under data_dir={data_dir})"
        )
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise SpokenStereoSetError(f"{path}: not a readable CSV ({exc})") from exc
    group_col = GROUP_COLUMNS[domain]
    required = ("id", "speaker", group_col) + TEXT_COLUMNS + META_COLUMNS
    absent = [c for c in required if c not in raw.columns]
    if absent:
        raise SpokenStereoSetError(f"{path}: missing columns {absent}; has {list(raw.columns)}")
    ids = pd.to_numeric(raw["id"], errors="coerce")
    bad = ids.isna() | (ids != ids.round()) | (ids < 0)
    if bad.any():
        rows = (raw.index[bad] + 1).tolist()[:10]
        raise SpokenStereoSetError(f"{path}: column id must hold non-negative integers; bad data rows {rows}")
    for col in ("speaker",) + TEXT_COLUMNS:
        empty = raw[col].str.strip() == ""
        if empty.any():
            raise SpokenStereoSetError(f"{path}: empty {col!r} in data rows {(raw.index[empty] + 1).tolist()[:10]}")
    unsafe = raw["speaker"].str.contains(r"[/\\]|^\.\.?$", regex=True)
    if unsafe.any():
        raise SpokenStereoSetError(
            f"{path}: speaker names must be file-name safe; bad data rows {(raw.index[unsafe] + 1).tolist()[:10]}"
        )
    dup = raw.assign(id=ids).duplicated(["id", "speaker"], keep=False)
    if dup.any():
        raise SpokenStereoSetError(
            f"{path}: (id, speaker) must be unique; duplicated in data rows {(raw.index[dup] + 1).tolist()[:10]}"
        )
    labels = [parse_labels(t, f"{path} data row {i + 1}") for i, t in enumerate(raw["labels"])]
    table = pd.DataFrame(
        {
            "domain": domain,
            "id": ids.astype(int),
            "speaker": raw["speaker"].str.strip(),
            "group": raw[group_col].str.strip(),
            **{c: raw[c].str.strip() for c in TEXT_COLUMNS},
            "labels": labels,
            "annotators": raw["annotators"],
            "csv_row": raw.index + 1,
        }
    )
    table["audio_path"] = [str(audio_path(data_dir, domain, i, s)) for i, s in zip(table["id"], table["speaker"])]
    return table


def load_spoken_stereoset(
    data_dir: str | Path,
    domains: tuple[str, ...] | list[str] = ("gender", "age"),
    version: str = "v1.0",
    on_missing_audio: str = "error",
    max_items: int | None = None,
) -> SpokenStereoSet:
    """Load the listed domains.

    ``on_missing_audio``: ``error`` raises :class:`MissingAudioError` naming the rows without a WAV;
    ``skip`` drops them (logged with their ids, kept in ``.missing``). ``max_items`` keeps the first
    that many item ids per domain (all their voices), for quick runs.
    """
    if on_missing_audio not in ("error", "skip"):
        raise ValueError(f"on_missing_audio must be 'error' or 'skip', got {on_missing_audio!r}")
    if max_items is not None and int(max_items) < 1:
        raise ValueError(f"max_items must be a positive integer or null, got {max_items!r}")
    data_dir = Path(data_dir)
    unknown = [d for d in domains if d not in GROUP_COLUMNS]
    if unknown or not domains:
        raise ValueError(f"domains must be a non-empty subset of {sorted(GROUP_COLUMNS)}, got {list(domains)}")
    tables, orphans = [], {}
    for domain in domains:
        table = _read_domain(data_dir, domain, version)
        wav_dir = data_dir / "speech" / domain
        on_disk = {p.name for p in wav_dir.glob("*.wav")} if wav_dir.is_dir() else set()
        orphans[domain] = len(on_disk - {Path(p).name for p in table["audio_path"]})
        if max_items is not None:  # the first item ids in CSV order, all voices of each
            table = table[table["id"].isin(list(dict.fromkeys(table["id"]))[: int(max_items)])]
        table["has_audio"] = [Path(p).name in on_disk for p in table["audio_path"]]
        tables.append(table)
    full = pd.concat(tables, ignore_index=True)
    missing = full[~full["has_audio"]].drop(columns="has_audio").reset_index(drop=True)
    table = full[full["has_audio"]].drop(columns="has_audio").reset_index(drop=True)
    if len(missing):
        if on_missing_audio == "error":
            raise MissingAudioError(missing)
        log.warning("%s; skipped", describe_missing(missing))
    for domain, n in orphans.items():
        if n:
            log.info("%d WAVs under speech/%s have no metadata row (ignored)", n, domain)
    return SpokenStereoSet(table=table, missing=missing, orphan_wavs=orphans)

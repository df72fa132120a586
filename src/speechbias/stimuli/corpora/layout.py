"""Shared checks for corpus loaders: one error type, and helpers that name what is missing.

Every loader scans a corpus as it lies on disk after download. Structural problems (a missing
folder or metadata table, a table without the needed columns, unparsable values) raise
:class:`CorpusLayoutError`; per-file problems that leave the corpus usable (a recording without a
transcript, a table row without audio) are collected in the returned table's
``attrs["problems"]`` and logged once as a warning.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import pandas as pd
import soundfile as sf

log = logging.getLogger(__name__)

AUDIO_SUFFIXES = (".wav", ".flac", ".mp3")
MIN_SEGMENT_S = 5.0  # interview segments kept (Buckeye, CORAAL) are longer than this, in seconds
_MISSING = ("", "nan", "na", "n/a", "none", "?", "-")  # cells read as "unknown" in numeric columns


class CorpusLayoutError(ValueError):
    """A corpus folder that does not have the expected layout; the message names corpus, path and problem."""

    def __init__(self, corpus: str, path: str | Path, problem: str):
        super().__init__(f"{corpus} at {path}: {problem}")


def require_dir(path: str | Path, corpus: str, hint: str = "") -> Path:
    """``path`` as a Path, or :class:`CorpusLayoutError` if it is not a directory."""
    p = Path(path)
    if not p.is_dir():
        raise CorpusLayoutError(corpus, p, "folder does not exist" + (f" ({hint})" if hint else ""))
    return p


def find_first(root: Path, patterns: Iterable[str], corpus: str, what: str) -> Path:
    """First file under ``root`` matching one of the glob ``patterns`` (tried in order)."""
    patterns = list(patterns)
    for pattern in patterns:
        hits = sorted(p for p in root.glob(pattern) if p.is_file())
        if hits:
            return hits[0]
    raise CorpusLayoutError(corpus, root, f"no {what} found (looked for {patterns})")


def read_table(path: Path, corpus: str, required: Iterable[str] = (), sep: str | None = None) -> pd.DataFrame:
    """Read a CSV/TSV/TXT (separator sniffed unless given) or XLSX table as strings.

    Column names are kept as written; ``required`` names are checked case-insensitively and the
    matching columns are renamed to the required spelling.
    """
    try:
        if path.suffix.lower() in (".xlsx", ".xls"):
            df = pd.read_excel(path, dtype=str)
        else:
            df = pd.read_csv(path, sep=sep, engine="python" if sep is None else "c", dtype=str, keep_default_na=False)
    except ImportError as exc:
        raise CorpusLayoutError(
            corpus,
            path,
            f"reading {path.suffix} needs an extra package ({exc}); "
            "install it (pip install openpyxl / xlrd) or export the sheet to CSV next to it",
        ) from exc
    except Exception as exc:
        raise CorpusLayoutError(corpus, path, f"not a readable table ({type(exc).__name__}: {exc})") from exc
    df.columns = [str(c).strip() for c in df.columns]
    lower = {c.lower(): c for c in df.columns}
    missing = [r for r in required if r.lower() not in lower]
    if missing:
        raise CorpusLayoutError(corpus, path, f"missing column(s) {missing}; has {list(df.columns)}")
    return df.rename(columns={lower[r.lower()]: r for r in required})


def numeric_column(df: pd.DataFrame, column: str, corpus: str, source: Path, allow_missing: bool = True) -> pd.Series:
    """``df[column]`` as float; empty cells become NaN, anything else unparsable is an error naming rows."""
    raw = df[column].astype(str).str.strip()
    blank = raw.str.lower().isin(_MISSING)
    values = pd.to_numeric(raw.where(~blank, None), errors="coerce")
    bad = df.index[values.isna() & ~blank]
    if len(bad):
        rows = ", ".join(str(i + 2) for i in bad[:10])
        raise CorpusLayoutError(
            corpus, source, f"column {column!r} is not numeric in row(s) {rows} (e.g. {raw[bad[0]]!r})"
        )
    if not allow_missing and values.isna().any():
        rows = ", ".join(str(i + 2) for i in df.index[values.isna()][:10])
        raise CorpusLayoutError(corpus, source, f"column {column!r} is empty in row(s) {rows}")
    return values.astype(float)


_SEX = {
    "f": "female",
    "female": "female",
    "famale": "female",
    "woman": "female",
    "m": "male",
    "male": "male",
    "man": "male",
}


def normalise_sex(values: pd.Series) -> pd.Series:
    """Map f/F/female/Female (and the archive's 'famale' typo) to 'female', likewise 'male'; else ''."""
    return values.fillna("").astype(str).str.strip().str.lower().map(_SEX).fillna("")


def index_audio(root: Path) -> dict[str, Path]:
    """Map lower-cased file stem -> path for every audio file under ``root`` (first by sorted path wins)."""
    index: dict[str, Path] = {}
    for p in sorted(root.rglob("*")):
        if p.suffix.lower() in AUDIO_SUFFIXES and p.is_file() and not p.name.startswith("."):
            index.setdefault(p.stem.lower(), p)
    return index


def named_audio(
    files: Iterable[Path], name: re.Pattern, expected: str, problems: list[str]
) -> Iterator[tuple[Path, re.Match]]:
    """The audio files among ``files`` whose stem matches ``name``, with the match; any other audio
    file is added to ``problems`` as ``"<file name>: <expected>"``."""
    for p in files:
        if p.suffix.lower() not in AUDIO_SUFFIXES:
            continue
        m = name.match(p.stem)
        if m:
            yield p, m
        else:
            problems.append(f"{p.name}: {expected}")


def audio_duration_s(path: str | Path) -> float:
    """Duration in seconds from the file header (no decoding); NaN if the header is unreadable."""
    try:
        return sf.info(str(path)).duration  # frames / sample rate
    except Exception:
        return float("nan")


def record_problems(df: pd.DataFrame, corpus: str, problems: list[str]) -> pd.DataFrame:
    """Attach ``problems`` to ``df.attrs`` and log how many there were (first few in full)."""
    df.attrs["problems"] = list(problems)
    if problems:
        shown = "; ".join(problems[:5]) + (f"; ... (+{len(problems) - 5} more)" if len(problems) > 5 else "")
        log.warning("%s: %d file(s) skipped: %s", corpus, len(problems), shown)
    return df


def run_segments(turns: pd.DataFrame, run: pd.Series) -> pd.DataFrame:
    """One segment per value of ``run`` over ``turns`` (``start_s``, ``end_s``, ``text``), in run order:
    ``start_s`` (first start), ``end_s`` (last end), ``text`` (joined by spaces), ``duration_s``."""
    segments = (
        turns.groupby(run)
        .agg(start_s=("start_s", "min"), end_s=("end_s", "max"), text=("text", " ".join))
        .reset_index(drop=True)
    )
    segments["duration_s"] = segments["end_s"] - segments["start_s"]
    return segments


def interview_segment_rows(wav: Path, segments: pd.DataFrame, speaker: str, corpus: str, meta) -> list[dict]:
    """Clip-table rows for interview segments (Buckeye, CORAAL) of recording ``wav``: one per row of
    ``segments`` (columns start_s, end_s, duration_s, text) longer than :data:`MIN_SEGMENT_S`, clip id
    ``<corpus, lower case>:<wav's stem>:<start ms>``; ``meta`` gives sex, age_group, interviewer_sex."""
    return [
        {
            "clip_id": f"{corpus.lower()}:{wav.stem}:{round(seg.start_s * 1000)}",
            "path": str(wav),
            "start_s": seg.start_s,
            "end_s": seg.end_s,
            "duration_s": seg.duration_s,
            "speaker": speaker,
            "corpus": corpus,
            "sex": meta["sex"],
            "age_group": meta["age_group"],
            "interviewer_sex": meta["interviewer_sex"],
            "text": seg.text,
            "source_file": wav.name,
        }
        for seg in segments.itertuples()
        if seg.duration_s > MIN_SEGMENT_S
    ]

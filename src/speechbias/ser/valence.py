"""Valence training sets: clips with continuous ratings, and the map of ratings onto [0, 1].

A :class:`ValenceSet` is a clip table (``clip_id``, ``path``, ``speaker``, ``valence`` on the
corpus' own scale) plus the ends of that scale. The head is trained on
``(valence - low) / (high - low)`` in [0, 1]; dev metrics are reported back on the original scale.

Scales: MESS 0-100, EU-Emotion 1-5, the shipped demo set 0-100 (synthetic, espeak-ng).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

REQUIRED_COLUMNS = ("clip_id", "path", "speaker", "valence")


class ValenceDataError(ValueError):
    """A valence table that cannot be used; the message names the source and the offending rows."""


def _rows(index, offset: int = 2) -> str:
    """Row numbers as a reader of the CSV sees them (1-based, after the header line)."""
    idx = [int(i) + offset for i in list(index)[:10]]
    more = f" (+{len(index) - 10} more)" if len(index) > 10 else ""
    return ", ".join(map(str, idx)) + more


@dataclass
class ValenceSet:
    """Rated clips of one corpus. ``table`` has at least :data:`REQUIRED_COLUMNS`; ``low``/``high``
    are the ends of the rating scale; ``source`` names the ratings file (for error messages)."""

    name: str
    table: pd.DataFrame
    low: float
    high: float
    source: str = ""
    synthetic: bool = False

    def __post_init__(self):
        self.table = validate_valence_table(self.table, self.low, self.high, self.source or self.name)

    @property
    def scaled(self) -> np.ndarray:
        """Ratings mapped onto [0, 1], float32 (N,)."""
        return scale_valence(self.table["valence"].to_numpy(), self.low, self.high).astype(np.float32)

    def __len__(self) -> int:
        return len(self.table)


def scale_valence(values, low: float, high: float) -> np.ndarray:
    """``(values - low) / (high - low)``: ratings on the scale [low, high] -> [0, 1]."""
    if not high > low:
        raise ValueError(f"rating scale needs high > low, got low={low}, high={high}")
    return (np.asarray(values, dtype=np.float64) - low) / (high - low)


def unscale_valence(values, low: float, high: float) -> np.ndarray:
    """Inverse of :func:`scale_valence`: [0, 1] -> the original rating scale."""
    if not high > low:
        raise ValueError(f"rating scale needs high > low, got low={low}, high={high}")
    return np.asarray(values, dtype=np.float64) * (high - low) + low


def validate_valence_table(df: pd.DataFrame, low: float, high: float, source: str) -> pd.DataFrame:
    """A clean copy of ``df`` or :class:`ValenceDataError` naming ``source`` and the bad rows.

    Checks: required columns; every clip has a numeric, finite rating inside [low, high];
    unique clip ids; every audio file exists. Row numbers in messages count
    from 2 (the first data line of a CSV with a header).
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ValenceDataError(f"{source}: missing column(s) {missing}; has {list(df.columns)}")
    out = df.reset_index(drop=True).copy()
    raw = out["valence"]
    values = pd.to_numeric(raw, errors="coerce")
    unparsable = out.index[values.isna() & raw.notna() & (raw.astype(str).str.strip() != "")]
    if len(unparsable):
        raise ValenceDataError(
            f"{source}: valence is not a number in row(s) {_rows(unparsable)} (e.g. {raw.iloc[unparsable[0]]!r})"
        )
    unrated = out.index[~np.isfinite(values.to_numpy(dtype=float))]
    if len(unrated):
        ids = out.loc[unrated[:5], "clip_id"].tolist()
        raise ValenceDataError(
            f"{source}: {len(unrated)} clip(s) without a valence rating (empty/NaN) in "
            f"row(s) {_rows(unrated)}, e.g. {ids}"
        )
    outside = out.index[(values < low) | (values > high)]
    if len(outside):
        raise ValenceDataError(
            f"{source}: valence outside the scale [{low:g}, {high:g}] in row(s) "
            f"{_rows(outside)} (e.g. {values.iloc[outside[0]]:g})"
        )
    out["valence"] = values.astype(float)
    out["clip_id"] = out["clip_id"].astype(str)
    out["speaker"] = out["speaker"].astype(str)
    out["path"] = out["path"].astype(str)
    dup = out.index[out["clip_id"].duplicated(keep=False)]
    if len(dup):
        raise ValenceDataError(f"{source}: duplicate clip_id in row(s) {_rows(dup)}")
    absent = out.index[~out["path"].map(lambda p: Path(p).is_file())]
    if len(absent):
        raise ValenceDataError(
            f"{source}: {len(absent)} audio file(s) not found in row(s) {_rows(absent)}, "
            f"e.g. {out.loc[absent[0], 'path']}"
        )
    if len(out) < 2:
        raise ValenceDataError(f"{source}: needs at least 2 rated clips, has {len(out)}")
    return out


def csv_valence_set(
    ratings: str | Path, low: float = 0.0, high: float = 100.0, name: str | None = None, synthetic: bool = False
) -> ValenceSet:
    """A valence set from one CSV (``clip_id, path, speaker, valence`` + free columns); relative
    paths resolve against the CSV's folder. Used for the shipped demo set and any custom set."""
    p = Path(ratings)
    if not p.is_file():
        raise ValenceDataError(f"{p}: ratings file does not exist")
    try:
        df = pd.read_csv(p, dtype={"clip_id": str, "path": str, "speaker": str}, keep_default_na=True)
    except Exception as exc:
        raise ValenceDataError(f"{p}: not a readable CSV ({type(exc).__name__}: {exc})") from exc
    if "path" in df.columns:
        df["path"] = [str(q) if Path(str(q)).is_absolute() else str(p.parent / str(q)) for q in df["path"]]
    return ValenceSet(name=name or p.stem, table=df, low=low, high=high, source=str(p), synthetic=synthetic)


# MESS clip files are named <code>_SCR.wav with codes like AF1M01 (emotion, sex+talker, cue, number)
_MESS_CODE = re.compile(r"^([a-z][fm]\d[a-z]\d+)(?:_scr)?$", re.IGNORECASE)


def mess_valence_set(
    root: str | Path, ratings: str | Path | None = None, low: float = 0.0, high: float = 100.0
) -> ValenceSet:
    """MESS (Morgan Emotional Speech Set; 0-100 valence) via :func:`speechbias.stimuli.corpora.mess.load_mess`.

    A MESS clip on disk without a row in the ratings table is an error naming the table and clips.
    """
    from speechbias.stimuli.corpora.layout import index_audio
    from speechbias.stimuli.corpora.mess import load_mess

    table = load_mess(root, ratings=ratings)
    source = str(ratings) if ratings else f"MESS ratings under {root}"
    rated = set(table["code"].str.lower())
    unrated = sorted(
        path.name
        for stem, path in index_audio(Path(root)).items()
        if (m := _MESS_CODE.match(stem)) and m.group(1).lower() not in rated
    )
    if unrated:
        raise ValenceDataError(
            f"{source}: {len(unrated)} MESS clip(s) on disk have no valence rating, e.g. {unrated[:5]}"
        )
    return ValenceSet(name="mess", table=table, low=low, high=high, source=source)


def eu_emotion_valence_set(
    root: str | Path, ratings: str | Path | None = None, low: float = 1.0, high: float = 5.0
) -> ValenceSet:
    """EU-Emotion Stimulus Set, UK voices (1-5 valence) via ``speechbias.stimuli.corpora.eu_emotion``."""
    from speechbias.stimuli.corpora.eu_emotion import load_eu_emotion

    table = load_eu_emotion(root, ratings=ratings)
    source = str(ratings) if ratings else f"EU-Emotion ratings under {root}"
    return ValenceSet(name="eu_emotion", table=table, low=low, high=high, source=source)

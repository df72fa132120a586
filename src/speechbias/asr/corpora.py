"""Transcribed speech corpora with demographic columns -> one utterance table.

:class:`ASRCorpus.utterances` columns: ``utterance_id``, ``path`` (absolute), ``reference``
(the transcript), ``speaker`` (only when the corpus has speaker ids) and one column per
demographic category. Rows that cannot be used (empty transcript, audio file missing) are not
dropped silently: they are listed in ``excluded`` (source row number, id, path, reason) and the
rest of the corpus is analysed. Demographic values are normalised by
:func:`speechbias.asr.levels.normalise_levels` (case and whitespace folded; blank cells, "NaN",
"prefer not to say" and other non-answers become the explicit level "undisclosed", never a group);
``levels`` lists which raw values became which level.

Fair-Speech (Veliche et al., 2024) as released: a TSV with columns hash_name, transcription, age,
gender, first_language, socioeconomic_bkgd, ethnicity and audio at
``asr_fairness_audio/<hash_name>.wav``. The public release has no speaker column; one can be
named (``speaker_column``) when a version with speaker ids is available. Nothing invents speakers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from speechbias.asr.levels import UNDISCLOSED, normalise_levels, spelling_table

log = logging.getLogger(__name__)

FAIR_SPEECH_CATEGORIES = ("age", "gender", "ethnicity", "socioeconomic_bkgd", "first_language")
EXCLUDED_COLUMNS = ["row", "utterance_id", "path", "reason"]
LEVEL_SPELLING_COLUMNS = ["category", "level", "raw_value", "rows"]


class CorpusError(ValueError):
    """A corpus that cannot be read at all (missing file, missing columns)."""


@dataclass
class ASRCorpus:
    utterances: pd.DataFrame
    categories: list[str]
    speaker_column: str | None  # "speaker" when utterances has speaker ids, else None
    excluded: pd.DataFrame
    source: str
    notes: list[str] = field(default_factory=list)
    # LEVEL_SPELLING_COLUMNS over the kept utterances: which raw values became which level
    levels: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=LEVEL_SPELLING_COLUMNS))
    # utterance_id + each category's value as written in the corpus file (same rows as ``utterances``),
    # so that the analysis can count the raw values of the utterances it actually compared
    raw_values: pd.DataFrame | None = None


def _read_table(path: Path, sep: str | None, needed: list[str]) -> pd.DataFrame:
    """The table at ``path`` (every cell a string); CorpusError when it is unreadable or lacks a ``needed`` column."""
    if not path.is_file():
        raise CorpusError(f"{path}: metadata file does not exist")
    if sep is None:
        sep = "\t" if path.suffix.lower() in (".tsv", ".tab") else ","
    try:
        df = pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False, quoting=3 if sep == "\t" else 0)
    except Exception as exc:
        raise CorpusError(f"{path}: not a readable {'TSV' if sep == chr(9) else 'CSV'} ({exc})") from exc
    missing = sorted(set(needed) - set(df.columns))
    if missing:
        raise CorpusError(f"{path}: missing column(s) {missing}; has {list(df.columns)}")
    return df


def _build(
    df: pd.DataFrame,
    source: str,
    ids,
    paths,
    transcripts,
    speaker,
    categories: list[str],
    notes: list[str],
    undisclosed_values=None,
    raw: dict | None = None,
) -> ASRCorpus:
    """``raw``: category -> the original column when ``df[category]`` was already recoded (for ``levels``)."""
    raw = raw or {}
    out = pd.DataFrame({"utterance_id": ids, "path": paths, "reference": transcripts})
    if speaker is not None:
        out["speaker"] = speaker
    for c in categories:
        out[c] = normalise_levels(df[c].reset_index(drop=True), undisclosed_values).to_numpy()
    out["row"] = range(2, len(out) + 2)  # 1-based data rows after the header line
    excluded = []
    dup = out["utterance_id"].duplicated(keep="first")
    empty = out["reference"].str.strip() == ""
    missing = ~out["path"].map(lambda p: Path(p).is_file())
    no_speaker = (out["speaker"].str.strip() == "") if speaker is not None else pd.Series(False, index=out.index)
    for mask, reason in (
        (dup, "duplicate utterance id"),
        (empty, "empty transcript"),
        (missing & ~empty & ~dup, "audio file not found"),
        (no_speaker & ~missing & ~empty & ~dup, "empty speaker id"),
    ):
        for _, r in out[mask].iterrows():
            excluded.append(
                {"row": int(r["row"]), "utterance_id": r["utterance_id"], "path": r["path"], "reason": reason}
            )
    bad = dup | empty | missing | no_speaker
    excl = pd.DataFrame(excluded, columns=EXCLUDED_COLUMNS).sort_values("row", kind="stable").reset_index(drop=True)
    if len(excl):
        summary = excl["reason"].value_counts().to_dict()
        log.warning(
            "%s: %d row(s) excluded %s, e.g. row %d (%s)",
            source,
            len(excl),
            summary,
            excl["row"].iloc[0],
            excl["reason"].iloc[0],
        )
    kept = out[~bad].drop(columns="row").reset_index(drop=True)
    if kept.empty:
        raise CorpusError(f"{source}: no usable rows ({len(excl)} excluded: {excl['reason'].value_counts().to_dict()})")
    keep = (~bad).to_numpy()
    spellings = [
        spelling_table(out[c][keep], raw.get(c, df[c]).reset_index(drop=True)[keep]).assign(category=c)
        for c in categories
    ]
    levels = pd.concat(spellings, ignore_index=True)[LEVEL_SPELLING_COLUMNS] if spellings else None
    raw_values = pd.DataFrame(
        {
            "utterance_id": kept["utterance_id"].to_numpy(),
            **{c: raw.get(c, df[c]).reset_index(drop=True)[keep].to_numpy() for c in categories},
        }
    )
    return ASRCorpus(
        utterances=kept,
        categories=list(categories),
        speaker_column="speaker" if speaker is not None else None,
        excluded=excl,
        source=source,
        notes=notes,
        levels=levels if levels is not None else pd.DataFrame(columns=LEVEL_SPELLING_COLUMNS),
        raw_values=raw_values,
    )


def load_fair_speech(
    root: str | Path,
    metadata: str | None = None,
    audio_dir: str = "asr_fairness_audio",
    speaker_column: str | None = None,
    categories: list[str] | tuple[str, ...] = FAIR_SPEECH_CATEGORIES,
    l1_languages: list[str] | None = None,
    undisclosed_values: list[str] | tuple[str, ...] | None = None,
) -> ASRCorpus:
    """Load Fair-Speech from ``root``.

    ``metadata``: the TSV (relative to ``root``); ``None`` = the only ``*.tsv`` in ``root``.
    ``l1_languages``: first_language values counted as L1; when given, ``first_language`` is
    recoded to "L1" / "L2" (the paper's split); an undisclosed first language stays "undisclosed".
    ``undisclosed_values``: cell values (compared case-insensitively) that are non-answers;
    ``None`` = :data:`speechbias.asr.levels.DEFAULT_UNDISCLOSED_VALUES`.
    """
    root = Path(root)
    if not root.is_dir():
        raise CorpusError(f"{root}: Fair-Speech folder does not exist (set corpus.load.root or paths.data_root)")
    if metadata is None:
        tsvs = sorted(root.glob("*.tsv"))
        if len(tsvs) != 1:
            raise CorpusError(
                f"{root}: expected exactly one metadata *.tsv, found {[p.name for p in tsvs]}; set corpus.load.metadata"
            )
        meta = tsvs[0]
    else:
        meta = root / metadata
    needed = ["hash_name", "transcription", *categories] + ([speaker_column] if speaker_column else [])
    df = _read_table(meta, "\t", needed)
    notes = []
    if speaker_column is None:
        notes.append(
            "No speaker column: the public Fair-Speech release has no speaker ids, so the WER model is "
            "fitted without a speaker random effect (a Poisson GLM) and bootstrap CIs resample utterances; "
            "they are too narrow when a speaker's utterances are correlated. Set corpus.load.speaker_column "
            "to a speaker id column to fit the paper's mixed model."
        )
    raw = {}
    if l1_languages is not None and "first_language" in categories:
        df = df.copy()
        raw["first_language"] = df["first_language"]
        l1 = {" ".join(s.split()).casefold() for s in l1_languages}
        level = normalise_levels(df["first_language"], undisclosed_values)
        df["first_language"] = level.map(lambda v: v if v == UNDISCLOSED else ("L1" if v.casefold() in l1 else "L2"))
        notes.append(
            f"first_language recoded: L1 = {sorted(l1_languages)}, L2 = any other stated language; "
            f"a first language not given stays '{UNDISCLOSED}'."
        )
    audio = root / audio_dir
    paths = [str(audio / f"{h.strip()}.wav") for h in df["hash_name"]]
    speaker = df[speaker_column].astype(str).str.strip() if speaker_column else None
    return _build(
        df,
        str(meta),
        df["hash_name"].str.strip().tolist(),
        paths,
        df["transcription"].tolist(),
        speaker,
        list(categories),
        notes,
        undisclosed_values,
        raw,
    )


def load_asr_manifest(
    manifest: str | Path,
    category_columns: list[str] | tuple[str, ...],
    path_column: str = "path",
    transcript_column: str = "transcript",
    id_column: str | None = None,
    speaker_column: str | None = None,
    root: str | Path | None = None,
    sep: str | None = None,
    undisclosed_values: list[str] | tuple[str, ...] | None = None,
) -> ASRCorpus:
    """Load any CSV/TSV manifest with an audio path, a transcript and demographic columns.

    Relative audio paths resolve against ``root`` (default: the manifest's folder). ``id_column``
    defaults to the path. Works for Common Voice (``path``, ``sentence``, ``client_id``, ``age``,
    ``gender``, ``accents``), CORAAL segment tables, or a user's own data.
    """
    manifest = Path(manifest)
    needed = [path_column, transcript_column, *category_columns] + [c for c in (id_column, speaker_column) if c]
    df = _read_table(manifest, sep, needed)
    if not category_columns:
        raise CorpusError(f"{manifest}: no demographic category columns given (corpus.load.category_columns)")
    base = Path(root) if root is not None else manifest.parent
    paths = [str(p if Path(p).is_absolute() else base / p) for p in df[path_column].str.strip()]
    ids = df[id_column].str.strip().tolist() if id_column else df[path_column].str.strip().tolist()
    speaker = df[speaker_column].astype(str).str.strip() if speaker_column else None
    notes = (
        []
        if speaker_column
        else [
            "No speaker column given: the WER model is a Poisson GLM without a speaker random effect and "
            "bootstrap CIs resample utterances (too narrow when a speaker's utterances are correlated)."
        ]
    )
    return _build(
        df,
        str(manifest),
        ids,
        paths,
        df[transcript_column].tolist(),
        speaker,
        list(category_columns),
        notes,
        undisclosed_values,
    )

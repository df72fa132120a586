"""Speech Accent Archive (accent.gmu.edu): one reading of the same elicitation paragraph per speaker.

Accepted layouts under ``root`` (e.g. ``<data_root>/speech_accent_archive``):

* the widely mirrored Kaggle copy: ``speakers_all.csv`` (columns ``age, age_onset, birthplace,
  filename, native_language, sex, speakerid, country, file_missing?``) and the recordings as
  ``recordings/<filename>.mp3`` (any depth);
* a per-speaker table scraped from the archive's site, ``speaker_list.csv`` (columns ``language,
  id, name, birth_place, native_language, age, sex, has_mp3, sample_length, ...``, as published
  by the SpEAT authors), with audio named ``<id>.mp3|wav`` or ``<name>.mp3|wav`` (any depth).

Output (one row per speaker): ``clip_id`` ("saa:<name>"), ``path``, ``speaker`` (the archive's
name, e.g. "english102"; "id<id>" for the few speakers listed without a name), ``speaker_id`` (numeric id as text, "" if unknown), ``corpus``, ``age``
(years, float), ``sex`` ("female"/"male"/""), ``birth_place``, ``birth_country`` (last
comma-separated part of the birth place), ``native_language``, ``language`` and ``duration_s``
(from ``sample_length`` at 16 kHz when the table has it, else NaN).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from speechbias.stimuli.corpora.layout import (
    CorpusLayoutError,
    index_audio,
    normalise_sex,
    numeric_column,
    read_table,
    record_problems,
    require_dir,
)

CORPUS = "speech_accent_archive"
SCRAPED_TABLE = "speaker_list.csv"
KAGGLE_TABLE = "speakers_all.csv"
SAMPLE_RATE_OF_SAMPLE_LENGTH = 16_000  # the scraped table's sample_length counts 16 kHz samples


def _country(birth_place: pd.Series) -> pd.Series:
    return birth_place.fillna("").astype(str).str.split(",").str[-1].str.strip().str.lower()


def read_saa_metadata(path: str | Path) -> pd.DataFrame:
    """Normalised speaker table from either accepted metadata layout (no audio lookup)."""
    path = Path(path)
    if not path.is_file():
        raise CorpusLayoutError(CORPUS, path, "speaker table does not exist")
    head = read_table(path, CORPUS)
    cols = {c.lower() for c in head.columns}
    if {"id", "name", "birth_place"} <= cols:
        df = read_table(path, CORPUS, required=("id", "name", "birth_place", "native_language", "age", "sex"))
        name, sid = df["name"].str.strip(), df["id"].str.strip()
        out = pd.DataFrame(
            {
                "speaker": name.where(name != "", "id" + sid),  # a few archive speakers have no name: use the id
                "speaker_id": sid,
                "birth_place": df["birth_place"].str.strip().str.lower(),
                "native_language": df["native_language"].str.strip().str.lower(),
                "language": df["language"].str.strip().str.lower() if "language" in df.columns else "",
            }
        )
        listed = df["has_mp3"].str.strip().str.lower() if "has_mp3" in df.columns else pd.Series("true", index=df.index)
        out["listed_audio"] = listed.isin(["true", "1", "yes"])
        out["duration_s"] = (
            numeric_column(df, "sample_length", CORPUS, path) / SAMPLE_RATE_OF_SAMPLE_LENGTH
            if "sample_length" in df.columns
            else np.nan
        )
    elif {"speakerid", "filename", "birthplace"} <= cols:
        df = read_table(path, CORPUS, required=("speakerid", "filename", "birthplace", "native_language", "age", "sex"))
        out = pd.DataFrame(
            {
                "speaker": df["filename"].str.strip(),
                "speaker_id": df["speakerid"].str.strip(),
                "birth_place": df["birthplace"].str.strip().str.lower(),
                "native_language": df["native_language"].str.strip().str.lower(),
            }
        )
        out["language"] = out["speaker"].str.replace(r"\d+$", "", regex=True).str.lower()
        missing_col = next((c for c in df.columns if c.lower().startswith("file_missing")), None)
        out["listed_audio"] = (
            ~df[missing_col].str.strip().str.lower().isin(["true", "1", "yes"]) if missing_col else True
        )
        out["duration_s"] = np.nan
    else:
        raise CorpusLayoutError(
            CORPUS,
            path,
            "unknown speaker table: expected the scraped layout (id, name, birth_place, ...) "
            f"or the Kaggle layout (speakerid, filename, birthplace, ...); has {list(head.columns)}",
        )
    out["age"] = numeric_column(df, "age", CORPUS, path)
    out["sex"] = normalise_sex(df["sex"])
    out["birth_country"] = _country(out["birth_place"])
    empty = out.index[out["speaker"] == ""]
    if len(empty):
        raise CorpusLayoutError(CORPUS, path, f"empty speaker name in row(s) {[int(i) + 2 for i in empty[:10]]}")
    dup = out["speaker"].duplicated(keep=False)
    if dup.any():
        raise CorpusLayoutError(CORPUS, path, f"duplicate speaker(s) {sorted(set(out.loc[dup, 'speaker']))[:5]}")
    out["clip_id"] = "saa:" + out["speaker"]
    out["corpus"] = CORPUS
    out["path"] = ""
    return out.reset_index(drop=True)


def find_saa_table(root: Path) -> Path:
    """The speaker table under ``root`` (scraped layout preferred over the Kaggle one)."""
    for name in (SCRAPED_TABLE, KAGGLE_TABLE):
        hits = sorted(root.rglob(name))
        if hits:
            return hits[0]
    raise CorpusLayoutError(CORPUS, root, f"no speaker table ({SCRAPED_TABLE} or {KAGGLE_TABLE}) found")


def load_saa(root: str | Path) -> pd.DataFrame:
    """Speakers of the archive that have audio under ``root`` (a file named after the speaker's name or
    numeric id); speakers without audio are reported."""
    root = require_dir(root, CORPUS, "download the archive's recordings and speaker table here")
    out = read_saa_metadata(find_saa_table(root))
    index = index_audio(root)
    hits = [
        index.get(name.lower()) or (index.get(sid.lower()) if sid else None)
        for name, sid in zip(out["speaker"], out["speaker_id"])
    ]
    out["path"] = [str(hit) if hit else "" for hit in hits]
    no_audio = out["path"] == ""
    if no_audio.all():
        raise CorpusLayoutError(
            CORPUS,
            root,
            "no recordings found for any speaker in the table "
            "(expected <name>.mp3 or <id>.mp3/.wav, e.g. "
            f"{out['speaker'].iloc[0]}.mp3)"
            if len(out)
            else "speaker table is empty",
        )
    problems = [f"{s}: no audio file" for s in out.loc[no_audio & out["listed_audio"], "speaker"]]
    out = out[~no_audio].reset_index(drop=True)
    return record_problems(out, CORPUS, problems)


# --- speaker groups used by the paper's tests -------------------------------------------------


def us_native_english(df: pd.DataFrame) -> pd.DataFrame:
    """Speakers born in the USA whose native language is English."""
    return df[(df["birth_country"] == "usa") & (df["native_language"] == "english")]


def korean_native_korean(df: pd.DataFrame) -> pd.DataFrame:
    """Speakers born in Korea whose native language is Korean."""
    return df[df["birth_place"].str.contains("korea", regex=False) & (df["native_language"] == "korean")]


def british_native_english(df: pd.DataFrame) -> pd.DataFrame:
    """Speakers born in the UK or Ireland whose native language is English (as in the paper's UK tests)."""
    bp = df["birth_place"]
    born = (
        df["birth_country"].isin(["uk", "ireland"])
        | bp.str.contains(", uk", regex=False)
        | bp.str.contains("ireland", regex=False)
    )
    return df[born & (df["native_language"] == "english")]

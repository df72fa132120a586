"""EU-Emotion Stimulus Set, UK voice stimuli (Lassalle et al. 2019): 18 UK actors, ratings 1-5.

Layout under ``root`` (e.g. ``<data_root>/EU_Emotion_Stimulus_Set``): the distribution's
``Original/<Emotion>[ - Low Intensity]/<id>.mp3|wav`` and ``Fixed - amplified volume/...
/fix__<id>.mp3|wav`` folders (any depth is accepted: files are found by name), the actor table
``speaker_info.csv`` (``ActorCode, Age, Gender``) and a ratings table: either the survey results
``Supplementary Information/uk_voices_survey_results.csv|xlsx`` or a ``voice_file_info.csv`` in
the SpEAT authors' layout. Both need ``stimulus_id``, ``valence`` and ``semantically_neutral``.

Survey ids are mapped to file names as the corpus names them: dashes dropped (``O-V3E`` ->
``OV3E``), a trailing ``x`` means the volume-fixed file (``fix__`` prefix), and ``<id>1`` is
spelled ``<id> 1``; when that file does not exist the variant with/without `` 1`` is tried.

Output (one row per rated clip with audio): ``clip_id`` ("eu_emotion:<file stem>"), ``path``,
``speaker`` (actor code), ``corpus``, ``sex``, ``age``, ``valence``, ``semantically_neutral``
(bool), ``emotion``, ``intensity``, ``stimulus_id``, ``text``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from speechbias.stimuli.corpora.layout import (
    CorpusLayoutError,
    find_first,
    index_audio,
    normalise_sex,
    numeric_column,
    read_table,
    record_problems,
    require_dir,
)

CORPUS = "EU_Emotion_Stimulus_Set"
RATINGS_TABLES = ("voice_file_info.csv", "**/uk_voices_survey_results.csv", "**/uk_voices_survey_results.xlsx")


def file_stem(stimulus_id: str) -> str:
    """Survey id -> file stem: 'O-V3Ex' -> 'fix__OV3E', 'H-V8C1' -> 'HV8C 1'; file stems pass unchanged."""
    sid = stimulus_id.strip()
    if sid.startswith("fix__") or "-" not in sid:
        return sid
    fixed = sid.endswith("x")
    stem = re.sub(r"(.{4})1", r"\1 1", sid.replace("-", ""))
    stem = stem[:-1] if fixed else stem
    return ("fix__" if fixed else "") + stem


def load_eu_emotion(root: str | Path, ratings: str | Path | None = None) -> pd.DataFrame:
    """Rated clips with audio, joined with their actor's age and gender; clips without audio are reported."""
    root = require_dir(root, CORPUS)
    actors_path = find_first(root, ("speaker_info.csv", "**/speaker_info.csv"), CORPUS, "actor table speaker_info.csv")
    actors = read_table(actors_path, CORPUS, required=("ActorCode", "Age", "Gender"))
    actor_age = dict(zip(actors["ActorCode"].str.strip(), numeric_column(actors, "Age", CORPUS, actors_path)))
    actor_sex = dict(zip(actors["ActorCode"].str.strip(), normalise_sex(actors["Gender"])))
    table = Path(ratings) if ratings else find_first(root, RATINGS_TABLES, CORPUS, "ratings table")
    df = read_table(table, CORPUS, required=("stimulus_id", "valence", "semantically_neutral"))
    ids = df["stimulus_id"].str.strip()
    if "original_id" in df.columns:  # SpEAT authors' layout: ids already cleaned, actor = original id's first letter
        speaker = df["original_id"].str.strip().str[0]
    else:
        speaker = ids.str.replace("fix__", "", regex=False).str[0]
    unknown = sorted(set(speaker) - set(actor_age))
    if unknown:
        raise CorpusLayoutError(CORPUS, table, f"actor code(s) {unknown[:5]} not in {actors_path.name}")
    out = pd.DataFrame(
        {
            "stimulus_id": ids,
            "speaker": speaker,
            "corpus": CORPUS,
            "sex": speaker.map(actor_sex),
            "age": speaker.map(actor_age).astype(float),
            "semantically_neutral": df["semantically_neutral"].str.strip().str.lower().isin(["yes", "true", "1"]),
            "emotion": df["expressed_emotion"].str.strip() if "expressed_emotion" in df.columns else "",
            "intensity": df["emotion_intensity"].str.strip() if "emotion_intensity" in df.columns else "",
            "text": df["sentences"].str.strip() if "sentences" in df.columns else "",
        }
    )
    out["valence"] = numeric_column(df, "valence", CORPUS, table, allow_missing=False)
    index = index_audio(root)
    stems, paths, problems = [], [], []
    for sid in out["stimulus_id"]:
        stem = file_stem(sid)
        alternate = stem[:-2] if stem.endswith(" 1") else stem + " 1"  # the file spelled with/without " 1"
        if stem.lower() not in index and alternate.lower() in index:
            stem = alternate
        hit = index.get(stem.lower())
        if hit is None:
            problems.append(f"{sid}: no audio file {stem}.mp3/.wav")
        stems.append(stem)
        paths.append(str(hit) if hit else "")
    out["path"] = paths
    out["clip_id"] = "eu_emotion:" + pd.Series(stems, index=out.index)
    out = out[out["path"] != ""].drop_duplicates("clip_id").reset_index(drop=True)
    if out.empty:
        raise CorpusLayoutError(CORPUS, root, "no audio found for any rated stimulus")
    return record_problems(out, CORPUS, problems)

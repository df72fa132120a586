"""Morgan Emotional Speech Set (Morgan 2019): 1,800 clips by 6 actors with valence/arousal ratings.

Layout under ``root`` (e.g. ``<data_root>/morgan_emotional_speech_set``): the clips
``<code>_SCR.wav`` (any depth; ``<code>.wav`` is accepted too) and the ratings table, one of
``clip_info.csv``, ``ratings.csv``, ``Coded stimuli final.csv`` or ``Coded stimuli final.xlsx``
(XLSX needs ``openpyxl``), with at least the columns ``code`` and ``Valence``. ``Gender`` and
``Talker`` name the actor (otherwise taken from the code, e.g. ``AF1M01`` -> actor F1);
``Arousal``, ``Emotion`` and ``speaker_age`` (or ``Age``) are kept when present.

Output (one row per rated clip with audio): ``clip_id`` ("mess:<code>"), ``path``, ``speaker``
(actor, e.g. "F1"), ``corpus``, ``sex``, ``age`` (NaN if unknown), ``valence``, ``arousal``,
``emotion``, ``code``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
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

CORPUS = "morgan_emotional_speech_set"
RATINGS_TABLES = (
    "clip_info.csv",
    "ratings.csv",
    "Coded stimuli final.csv",
    "Coded stimuli final.xlsx",
    "**/clip_info.csv",
    "**/ratings.csv",
    "**/Coded stimuli final.*",
)


def _column(df: pd.DataFrame, *names: str) -> str | None:
    lower = {c.lower(): c for c in df.columns}
    return next((lower[n.lower()] for n in names if n.lower() in lower), None)


def load_mess(root: str | Path, ratings: str | Path | None = None) -> pd.DataFrame:
    """Rated clips with audio; rated codes without audio are reported."""
    root = require_dir(root, CORPUS)
    table = Path(ratings) if ratings else find_first(root, RATINGS_TABLES, CORPUS, "ratings table")
    df = read_table(table, CORPUS, required=("code", "valence"))
    code = df["code"].str.strip()
    gender_col, talker_col = _column(df, "gender"), _column(df, "talker")
    if gender_col and talker_col:
        sex_letter = df[gender_col].str.strip().str.upper().str[0]
        speaker = sex_letter + df[talker_col].str.strip().str.replace(r"\.0$", "", regex=True)
    else:
        speaker = code.str[1:3].str.upper()
        sex_letter = speaker.str[0]
    bad = df.index[~speaker.str.match(r"^[FM]\w+$")]
    if len(bad):
        raise CorpusLayoutError(
            CORPUS,
            table,
            f"cannot tell the actor of row(s) {[int(i) + 2 for i in bad[:10]]} "
            "(need Gender/Talker columns or codes like AF1M01)",
        )
    out = pd.DataFrame(
        {
            "clip_id": "mess:" + code,
            "code": code,
            "speaker": speaker,
            "corpus": CORPUS,
            "sex": normalise_sex(sex_letter),
        }
    )
    out["valence"] = numeric_column(df, "valence", CORPUS, table, allow_missing=False)
    arousal = _column(df, "arousal")
    out["arousal"] = numeric_column(df, arousal, CORPUS, table) if arousal else np.nan
    emotion = _column(df, "emotion")
    out["emotion"] = df[emotion].str.strip() if emotion else code.str[0]
    age = _column(df, "speaker_age", "age")
    out["age"] = numeric_column(df, age, CORPUS, table) if age else np.nan
    dup = out["code"].duplicated(keep=False)
    if dup.any():
        raise CorpusLayoutError(CORPUS, table, f"duplicate code(s) {sorted(set(out.loc[dup, 'code']))[:5]}")
    index = index_audio(root)
    out["path"] = [str(index.get(f"{c}_scr".lower()) or index.get(c.lower()) or "") for c in out["code"]]
    missing = out["path"] == ""
    if missing.all():
        raise CorpusLayoutError(
            CORPUS, root, f"no audio for any rated clip (expected e.g. {out['code'].iloc[0]}_SCR.wav)"
        )
    problems = [f"{c}: no audio file {c}_SCR.wav" for c in out.loc[missing, "code"]]
    return record_problems(out[~missing].reset_index(drop=True), CORPUS, problems)

"""Corpus of Regional African American Language (CORAAL, Kendall & Farrington): sociolinguistic interviews.

Layout under ``root`` (e.g. ``<data_root>/CORAAL``): one folder per component (ATL, DCA, DCB, LES,
PRV, ROC, VLD), each holding its metadata table ``<COMP>_metadata*.txt`` (tab-separated; columns
``CORAAL.File, CORAAL.Spkr, Gender, Age, Interviewer.Gender, Primary.Spkr`` and, when present,
``Year.of.Interview``), the audio ``<file>.wav`` and the transcripts ``<file>.txt`` (any depth,
e.g. ``ATL_audio_part01_2020.05/`` and ``ATL_textfiles_2020.05/``). Transcripts are tab-separated
with ``Line, Spkr, StTime, Content, EnTime``.

Speakers kept: primary speakers aged 18+, Female/Male, with a known interviewer gender, young
(< 30) or old (> 40), interviewed after 2000 (components without a year column are kept except
DCA, recorded in 1968). A segment is a run of consecutive turns by the speaker; turns that are
overlaps (``[...]``) or reading passages (``/RD-``) break a run. Only segments longer than
``MIN_SEGMENT_S`` (5 s) are kept.

Output: the same columns as :func:`speechbias.stimuli.corpora.buckeye.load_buckeye_segments`.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from speechbias.stimuli.corpora.layout import (
    MIN_SEGMENT_S,
    CorpusLayoutError,
    interview_segment_rows,
    normalise_sex,
    numeric_column,
    read_table,
    record_problems,
    require_dir,
    run_segments,
)

CORPUS = "CORAAL"
COMPONENT = re.compile(r"^[A-Z]{3}$")
RECORDED_BEFORE_2000 = ("DCA",)
META_COLUMNS = ("CORAAL.File", "CORAAL.Spkr", "Gender", "Age", "Interviewer.Gender", "Primary.Spkr")


def read_transcript(path: Path, speaker: str) -> pd.DataFrame:
    """The speaker's runs of consecutive turns: ``start_s``, ``end_s``, ``duration_s``, ``text``."""
    t = read_table(path, CORPUS, required=("Spkr", "StTime", "Content", "EnTime"), sep="\t")
    start = numeric_column(t, "StTime", CORPUS, path, allow_missing=False)
    end = numeric_column(t, "EnTime", CORPUS, path, allow_missing=False)
    content = t["Content"].astype(str)
    spkr = (
        t["Spkr"]
        .str.strip()
        .where(~(content.str.contains("/RD-", regex=False) | content.str.contains("[", regex=False)), "")
    )
    run = (spkr != spkr.shift()).cumsum()
    turns = pd.DataFrame({"start_s": start, "end_s": end, "text": content})
    return run_segments(turns[spkr == speaker], run[spkr == speaker])


def load_coraal_segments(root: str | Path) -> pd.DataFrame:
    """Segments longer than ``MIN_SEGMENT_S`` (5 s) of eligible primary speakers (see module docstring)."""
    root = require_dir(root, CORPUS)
    comps = [p for p in sorted(root.iterdir()) if p.is_dir() and COMPONENT.match(p.name)]
    if not comps:
        raise CorpusLayoutError(CORPUS, root, "no component folders (ATL, DCB, LES, PRV, ROC, VLD, ...) found")
    rows, problems = [], []
    for comp in comps:
        metas = sorted(comp.glob("*metadata*.txt"))
        if not metas:
            raise CorpusLayoutError(CORPUS, comp, f"no metadata table {comp.name}_metadata*.txt")
        meta = read_table(metas[0], CORPUS, required=META_COLUMNS, sep="\t")
        meta["age"] = numeric_column(meta, "Age", CORPUS, metas[0])
        year_col = next((c for c in meta.columns if c.lower().startswith("year")), None)
        if year_col:
            recent = numeric_column(meta, year_col, CORPUS, metas[0]) > 2000
        else:
            recent = pd.Series(comp.name not in RECORDED_BEFORE_2000, index=meta.index)
        meta = meta.assign(
            sex=normalise_sex(meta["Gender"]),
            interviewer_sex=normalise_sex(meta["Interviewer.Gender"]),
            age_group=np.where(meta["age"] < 30, "young", np.where(meta["age"] > 40, "old", "")),
        )
        eligible = meta[
            (meta["Primary.Spkr"].str.strip().str.lower() == "yes")
            & (meta["age"] >= 18)
            & recent
            & (meta["sex"] != "")
            & (meta["interviewer_sex"] != "")
            & (meta["age_group"] != "")
        ]
        files = {p.name: p for p in comp.rglob("*") if p.suffix.lower() in (".wav", ".txt") and p.is_file()}
        for _, spk in eligible.iterrows():
            stem, speaker = spk["CORAAL.File"].strip(), spk["CORAAL.Spkr"].strip()
            wav, txt = files.get(f"{stem}.wav"), files.get(f"{stem}.txt")
            if wav is None or txt is None:
                problems.append(f"{comp.name}/{stem}: missing {'audio' if wav is None else 'transcript'}")
                continue
            segments = read_transcript(txt, speaker)
            rows += interview_segment_rows(wav, segments, speaker, CORPUS, spk)
    if not rows:
        raise CorpusLayoutError(
            CORPUS, root, f"no eligible speaker segments longer than {MIN_SEGMENT_S} s (problems: {problems[:3]})"
        )
    return record_problems(pd.DataFrame(rows), CORPUS, problems)

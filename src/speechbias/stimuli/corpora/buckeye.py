"""Buckeye Corpus (Pitt et al. 2007): 40 Columbus, OH speakers interviewed (European American).

Layout under ``root`` (e.g. ``<data_root>/buckeye``): the unzipped recordings ``<sNNxx>.wav`` with
their word alignments ``<sNNxx>.words`` side by side (any depth, e.g. ``s01/s0101a/s0101a.wav``),
and the speaker table ``speakers.csv`` (or the SpEAT authors' space-separated
``recording_metadata.csv``) with columns ``speaker`` (S01..S40), ``speaker_gender`` (f/m),
``speaker_age`` (y = under 30, o = over 40) and ``interviewer_gender`` (f/m), transcribed from the
corpus manual.

Segments: a ``.words`` file lists ``<end time> <color> <word>`` lines after a ``#`` header line.
A segment is a stretch of the speaker's words between interviewer turns (``<IVER...>``) or
excluded stretches (``<EXCLUDE-...>``); silences and noises at its edges are not counted. Only
segments longer than ``MIN_SEGMENT_S`` (5 s) are kept.

Output (one row per segment): ``clip_id`` ("buckeye:<file>:<start ms>"), ``path`` (source
recording), ``start_s``, ``end_s``, ``duration_s``, ``speaker``, ``corpus``, ``sex``,
``age_group`` ("young"/"old"), ``interviewer_sex``, ``text``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from speechbias.stimuli.corpora.layout import (
    MIN_SEGMENT_S,
    CorpusLayoutError,
    find_first,
    interview_segment_rows,
    normalise_sex,
    read_table,
    record_problems,
    require_dir,
    run_segments,
)

CORPUS = "buckeye"
NON_SPEECH = {"<SIL>", "<VOCNOISE>", "<NOISE>", "{B_TRANS}", "{E_TRANS}"}
_AGE_GROUP = {"y": "young", "young": "young", "o": "old", "old": "old"}


def normalise_age_group(values: pd.Series) -> pd.Series:
    """y/young -> 'young', o/old -> 'old', anything else ''."""
    return values.fillna("").astype(str).str.strip().str.lower().map(_AGE_GROUP).fillna("")


def read_words(path: Path) -> pd.DataFrame:
    """Tokens of a ``.words`` file: ``start_s``, ``end_s``, ``word`` (start = previous token's end)."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    try:
        body = lines.index("#") + 1
    except ValueError:
        raise CorpusLayoutError(CORPUS, path, "no '#' line ending the header of the .words file") from None
    ends, words = [], []
    for lineno, line in enumerate(lines[body:], start=body + 1):
        if not line.strip():
            continue
        parts = line.split(";")[0].split()
        try:
            end = float(parts[0])
        except (IndexError, ValueError):
            raise CorpusLayoutError(
                CORPUS, path, f"line {lineno} is not '<time> <color> <word>; ...': {line!r}"
            ) from None
        ends.append(end)
        words.append(" ".join(parts[2:]))
    tokens = pd.DataFrame({"end_s": ends, "word": words})
    tokens["start_s"] = [0.0] + ends[:-1]
    return tokens


def words_to_segments(tokens: pd.DataFrame) -> pd.DataFrame:
    """Speaker segments between interviewer turns: ``start_s``, ``end_s``, ``duration_s``, ``text``."""
    breaks = tokens["word"].str.contains("IVER", regex=False) | tokens["word"].str.startswith("<EXCLUDE")
    seg = breaks.cumsum()
    keep = ~breaks & ~tokens["word"].isin(NON_SPEECH)
    return run_segments(tokens[keep].rename(columns={"word": "text"}), seg[keep])


def load_buckeye_segments(root: str | Path) -> pd.DataFrame:
    """Speaker segments longer than ``MIN_SEGMENT_S`` (5 s) from every recording with a ``.words`` file."""
    root = require_dir(root, CORPUS)
    table = find_first(
        root,
        ("speakers.csv", "recording_metadata.csv", "**/speakers.csv", "**/recording_metadata.csv"),
        CORPUS,
        "speaker table",
    )
    sep = r"\s+" if table.name == "recording_metadata.csv" else None
    info = read_table(
        table, CORPUS, required=("speaker", "speaker_gender", "speaker_age", "interviewer_gender"), sep=sep
    )
    info["speaker"] = info["speaker"].str.strip().str.upper()
    info = info.assign(
        sex=normalise_sex(info["speaker_gender"]),
        age_group=normalise_age_group(info["speaker_age"]),
        interviewer_sex=normalise_sex(info["interviewer_gender"]),
    ).set_index("speaker")
    bad = info.index[(info["sex"] == "") | (info["age_group"] == "") | (info["interviewer_sex"] == "")]
    if len(bad):
        raise CorpusLayoutError(CORPUS, table, f"speaker(s) {list(bad[:5])}: gender must be f/m and age y/o")
    rows, problems = [], []
    words_files = sorted(root.rglob("*.words"))
    if not words_files:
        raise CorpusLayoutError(CORPUS, root, "no .words alignment files found (unzip each sNNxxx.zip)")
    for words in words_files:
        wav = words.with_suffix(".wav")
        speaker = words.stem[:3].upper()
        if not wav.is_file():
            problems.append(f"{words}: no recording {wav.name} next to it")
            continue
        if speaker not in info.index:
            problems.append(f"{words}: speaker {speaker} not in {table.name}")
            continue
        segments = words_to_segments(read_words(words))
        rows += interview_segment_rows(wav, segments, speaker, CORPUS, info.loc[speaker])
    if not rows:
        raise CorpusLayoutError(
            CORPUS, root, f"no speaker segments longer than {MIN_SEGMENT_S} s (problems: {problems[:3]})"
        )
    return record_problems(pd.DataFrame(rows), CORPUS, problems)

"""``selection=paper``: the SpEAT paper's exact stimuli, from the authors' published lists.

The authors (github.com/isaacOnline/SpEAT) published one ``clip_info.csv`` per test. Given a
folder in their ``data/`` layout (``paper_lists_dir``), each listed clip is matched to the user's
copy of the corpus under ``data_root`` (see :mod:`speechbias.stimuli.selection.sources`); clips
that cannot be found are reported (an error by default; dropped, with their pair partner, when
``allow_missing`` is true).

Which list a test reads, and with which reader below, is the test's :class:`PaperList` in
:mod:`speechbias.stimuli.registry`; a reader turns the rows of one list format into target rows
(``role`` X/Y, ``pair_id``, ``stratum`` and the keys to find the audio), and the registry entry
names the groups. Attribute lists: :data:`ATTRIBUTE_LISTS`. MESS ratings are not published, so the
MESS poles are recomputed from the user's ratings table with the authors' procedure and tie-breaking
order, restricted to the clips of their ``all.tsv``; the EU-Emotion poles are recomputed from the
published ratings.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from speechbias.stimuli.corpora.audio_iats import listed_phrase
from speechbias.stimuli.corpora.layout import normalise_sex
from speechbias.stimuli.selection.attributes import paper_order, valence_poles
from speechbias.stimuli.selection.result import Selection
from speechbias.stimuli.selection.sources import CorpusSources

if TYPE_CHECKING:
    from speechbias.stimuli.registry import Recipe

ATTRIBUTE_LISTS = {
    "mess": "morgan_emotional_speech_set/all.tsv",
    "eu_emotion": "EU_Emotion_Stimulus_Set/voice_file_info.csv",
}
SAA_SAMPLE_RATE = 16_000  # sample_length in the lists counts 16 kHz samples
SAA_COLUMNS = ("id", "name", "sex", "age")
_PP_PHRASE = re.compile(r"^(?:AM|KOR)_Dr[12]_(?P<phrase>.+?)[xX]3n$")

# a reader: (the list's file, the test's corpus keys in registry order) -> target rows with a role column
ListReader = Callable[[Path, tuple[str, ...]], pd.DataFrame]


class PaperListError(ValueError):
    """A published list that is absent or malformed, or clips of it that are not in the user's corpora."""


@dataclass(frozen=True)
class PaperList:
    """A test's published targets: the list's ``path`` relative to ``paper_lists_dir``, and its reader."""

    path: str
    read: ListReader


def read_list_file(path: Path, required: tuple[str, ...] = ()) -> pd.DataFrame:
    """A published list as strings; error naming the file if absent or lacking ``required`` columns."""
    if not path.is_file():
        raise PaperListError(
            f"{path}: published list not found (paper_lists_dir should hold the authors' data/ layout)"
        )
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise PaperListError(f"{path}: missing column(s) {missing}")
    return df


def _stem(name: str) -> str:
    return Path(name.strip()).stem


def _num(s: pd.Series) -> pd.Series:
    return pd.to_numeric(s.replace("", np.nan), errors="coerce")


def _rows(df: pd.DataFrame, **cols) -> pd.DataFrame:
    """A table of ``cols`` (Series aligned on ``df``'s index, sequences in its row order, scalars repeated)."""
    return pd.DataFrame(cols, index=df.index).reset_index(drop=True)


def _with_roles(out: pd.DataFrame, x) -> pd.DataFrame:
    """``out`` with ``role`` X where the boolean array ``x`` is true, Y elsewhere."""
    out["role"] = np.where(x, "X", "Y")
    return out


def _saa_rows(df: pd.DataFrame, corpus: str) -> pd.DataFrame:
    return _rows(
        df,
        source=corpus,
        key=df["name"].str.strip(),
        alt_key=df["id"].str.strip(),
        speaker=df["name"].str.strip(),
        speaker_id=df["id"].str.strip(),
        sex=normalise_sex(df["sex"]),
        age=_num(df["age"]),
        duration_s=_num(df["sample_length"]) / SAA_SAMPLE_RATE if "sample_length" in df.columns else np.nan,
    )


# --- readers, one per list format (corpora: the test's corpus keys, see the registry) --------------


def saa_sex_pairs(path: Path, corpora: tuple[str, ...]) -> pd.DataFrame:
    """Archive speakers in pairs (``pair_id``): female speakers are X."""
    df = read_list_file(path, SAA_COLUMNS)
    out = _saa_rows(df, corpora[0])
    out["pair_id"], out["stratum"] = "paper-" + df["pair_id"].str.strip().to_numpy(), ""
    return _with_roles(out, (out["sex"] == "female").to_numpy())


def saa_language_pairs(path: Path, corpora: tuple[str, ...]) -> pd.DataFrame:
    """Archive speakers in pairs (``pair_id``), stratified by sex: English speakers are X."""
    df = read_list_file(path, SAA_COLUMNS)
    out = _saa_rows(df, corpora[0])
    out["pair_id"], out["stratum"] = "paper-" + df["pair_id"].str.strip().to_numpy(), out["sex"]
    return _with_roles(out, (df["language"].str.strip() == "english").to_numpy())


def saa_age_ranks(path: Path, corpora: tuple[str, ...]) -> pd.DataFrame:
    """Archive speakers by ``age_rank``, stratified by sex, unpaired: ``low_age`` speakers are X."""
    df = read_list_file(path, SAA_COLUMNS)
    out = _saa_rows(df, corpora[0])
    out["pair_id"], out["stratum"] = "", out["sex"]
    return _with_roles(out, (df["age_rank"].str.strip() == "low_age").to_numpy())


def saa_and_synthesized(path: Path, corpora: tuple[str, ...]) -> pd.DataFrame:
    """Archive speakers (X, ``human`` true; corpus ``corpora[0]``) and synthesized voices (Y, ``corpora[1]``)."""
    df = read_list_file(path, ("id", "name", "sex", "human"))
    x = (df["human"].str.strip().str.lower() == "true").to_numpy()
    out = _saa_rows(df, corpora[0])
    synth = ~x
    out.loc[synth, "source"] = corpora[1]
    out.loc[synth, "key"] = [_stem(i) for i in df.loc[synth, "id"]]
    out.loc[synth, "alt_key"] = ""
    out.loc[synth, "speaker"] = df.loc[synth, "voice"].str.strip().to_numpy()
    out["pair_id"], out["stratum"] = "", out["sex"]
    return _with_roles(out, x)


def torgo_pairs(path: Path, corpora: tuple[str, ...]) -> pd.DataFrame:
    """TORGO utterances in pairs, stratified by sex: control speakers are X."""
    df = read_list_file(path, ("id", "speaker", "session", "dysarthric", "gender", "text", "pair_id"))
    x = (df["dysarthric"].str.strip() == "control").to_numpy()
    out = _rows(
        df,
        source=corpora[0],
        key=df["speaker"].str.strip() + "/" + df["session"].str.strip() + "/" + df["id"].str.strip(),
        alt_key="",
        speaker=df["speaker"].str.strip(),
        sex=normalise_sex(df["gender"]),
        text=df["text"],
        duration_s=_num(df["sample_length"]) / SAA_SAMPLE_RATE if "sample_length" in df.columns else np.nan,
    )
    out["pair_id"], out["stratum"] = "paper-" + df["pair_id"].str.strip().to_numpy(), out["sex"]
    return _with_roles(out, x)


def interview_segment_pairs(path: Path, corpora: tuple[str, ...]) -> pd.DataFrame:
    """Interview segments matched across two corpora: ``caucasian`` speakers (``corpora[0]``) are X,
    the others (``corpora[1]``) Y; stratified by sex x age group."""
    df = read_list_file(
        path,
        (
            "speaker",
            "start_time",
            "end_time",
            "original_file_name",
            "speaker_gender",
            "speaker_age",
            "interviewer_gender",
            "speaker_race",
            "file_name",
            "match_file_name",
        ),
    )
    x = (df["speaker_race"].str.strip() == "caucasian").to_numpy()
    pair = ["paper-" + "~".join(sorted((_stem(a), _stem(b)))) for a, b in zip(df["file_name"], df["match_file_name"])]
    out = _rows(
        df,
        source=np.where(x, corpora[0], corpora[1]),
        key=[_stem(n) for n in df["original_file_name"]],
        alt_key="",
        speaker=df["speaker"].str.strip(),
        sex=normalise_sex(df["speaker_gender"]),
        age_group=df["speaker_age"].str.strip(),
        interviewer_sex=normalise_sex(df["interviewer_gender"]),
        start_s=_num(df["start_time"]),
        end_s=_num(df["end_time"]),
        text=df.get("content", ""),
    )
    out["duration_s"] = out["end_s"] - out["start_s"]
    out["pair_id"], out["stratum"] = pair, out["sex"] + "|" + out["age_group"]
    return _with_roles(out, x)


def _mitchell_rows(path: Path, corpus: str) -> pd.DataFrame:
    df = read_list_file(path, ("file_name", "human_or_synthesized", "male_or_female"))
    keys = [_stem(n) for n in df["file_name"]]
    out = _rows(
        df,
        source=corpus,
        key=keys,
        alt_key="",
        speaker=keys,
        sex=normalise_sex(df["male_or_female"]),
        voice=df["human_or_synthesized"].str.strip(),
    )
    out["pair_id"] = ""
    return out


def mitchell_by_voice(path: Path, corpora: tuple[str, ...]) -> pd.DataFrame:
    """Mitchell et al.'s clips, stratified by sex: human voices are X."""
    out = _mitchell_rows(path, corpora[0])
    out["stratum"] = out["sex"]
    return _with_roles(out, (out["voice"] == "human").to_numpy())


def mitchell_by_sex(path: Path, corpora: tuple[str, ...]) -> pd.DataFrame:
    """Mitchell et al.'s clips, stratified by human/synthesized: female voices are X."""
    out = _mitchell_rows(path, corpora[0])
    out["stratum"] = out["voice"]
    return _with_roles(out, (out["sex"] == "female").to_numpy())


def pantos_perkins_pairs(path: Path, corpora: tuple[str, ...]) -> pd.DataFrame:
    """Pantos & Perkins' clips paired by phrase: ``american`` clips are X."""
    df = read_list_file(path, ("category", "clip_name"))
    keys = [_stem(n) for n in df["clip_name"]]
    raw = [(_PP_PHRASE.match(k)["phrase"] if _PP_PHRASE.match(k) else k) for k in keys]
    phrases = [listed_phrase(p, raw) for p in raw]  # names truncate phrases inconsistently
    x = (df["category"].str.strip() == "american").to_numpy()
    out = _rows(df, source=corpora[0], key=keys, alt_key="", speaker=[k.split("_")[0] for k in keys], phrase=phrases)
    out["pair_id"], out["stratum"] = ["paper-" + p for p in phrases], ""
    return _with_roles(out, x)


def romero_rivas_pairs(path: Path, corpora: tuple[str, ...]) -> pd.DataFrame:
    """Romero-Rivas et al.'s neutral words paired by word and background: the native speaker is X."""
    df = read_list_file(path, ("speaker_type", "stimuli_type", "word", "background_noise", "clip_name"))
    df = df[df["stimuli_type"].str.strip() == "neutral"]
    x = (df["speaker_type"].str.strip() == "native").to_numpy()
    out = _rows(
        df,
        source=corpora[0],
        key=df["clip_name"].str.strip(),
        alt_key="",
        speaker=df["speaker_type"].str.strip(),
        word=df["word"].str.strip(),
        background=df["background_noise"].str.strip(),
    )
    out["pair_id"] = "paper-" + out["word"] + "|" + out["background"]
    out["stratum"] = out["background"]
    return _with_roles(out, x)


def paper_target_rows(recipe: Recipe, lists_dir: str | Path) -> pd.DataFrame:
    """The published target clips of ``recipe`` (one with a ``paper_list``): role, pair_id, stratum and the
    keys to find the audio (``source`` names the corpus, ``key`` and ``alt_key`` the file stem in it)."""
    listed = recipe.paper_list
    return listed.read(Path(lists_dir) / listed.path, recipe.corpora)


def _torgo_index(sources: CorpusSources) -> dict[str, Path]:
    t = sources.table("torgo")
    return {
        f"{s}/{se}/{u}".lower(): Path(p) for s, se, u, p in zip(t["speaker"], t["session"], t["utterance"], t["path"])
    }


def match_audio(rows: pd.DataFrame, sources: CorpusSources) -> tuple[pd.DataFrame, list[str]]:
    """``rows`` with ``path`` filled from the user's corpora, and a description of each row not found."""
    paths, missing = [], []
    torgo: dict[str, Path] | None = None  # built from TORGO's table once, not per row
    for r in rows.itertuples(index=False):
        if r.source == "torgo":
            torgo = _torgo_index(sources) if torgo is None else torgo
            index = torgo
        else:
            index = sources.audio_index(r.source)
        hit = index.get(str(r.key).lower())
        if hit is None and r.alt_key:
            hit = index.get(str(r.alt_key).lower())
            # the authors kept copies named <id>.wav beside the synthesized voices
            if hit is None and r.source == "saa":
                hit = sources.audio_index("synthesized").get(str(r.alt_key).lower())
        if hit is None:
            missing.append(f"{r.source}:{r.key} (looked under {sources.path(r.source)})")
        paths.append(str(hit) if hit else "")
    out = rows.copy()
    out["path"] = paths
    return out, missing


def _drop_missing(
    rows: pd.DataFrame, missing: list[str], what: str, allow_missing: bool
) -> tuple[pd.DataFrame, list[str]]:
    if not missing:
        return rows, []
    msg = f"{what}: {len(missing)} of {len(rows)} published clips not found, e.g. {missing[:5]}"
    if not allow_missing:
        raise PaperListError(msg + " (set allow_missing=true to build without them and their pair partners)")
    gone = rows["path"] == ""
    broken = set(rows.loc[gone & (rows["pair_id"] != ""), "pair_id"])  # every reader and label() give pair_id
    keep = ~gone & ~rows["pair_id"].isin(broken)
    return rows[keep].reset_index(drop=True), [msg + f"; dropped them and {len(broken)} broken pair(s)"]


def paper_targets(
    recipe: Recipe, lists_dir: str | Path, sources: CorpusSources, allow_missing: bool = False
) -> Selection:
    """The published targets of ``recipe`` matched to the user's audio (``group`` not yet named)."""
    rows = paper_target_rows(recipe, lists_dir)
    rows, missing = match_audio(rows, sources)
    rows, notes = _drop_missing(rows, missing, recipe.name, allow_missing)
    rows["clip_id"] = [
        f"{s}:{k}" + (f":{round(a * 1000)}" if isinstance(a, float) and np.isfinite(a) else "")
        for s, k, a in zip(rows["source"], rows["key"], rows.get("start_s", pd.Series(np.nan, index=rows.index)))
    ]
    rows["corpus"] = rows.pop("source")
    rows = rows.drop(columns=["key", "alt_key"])
    return Selection(
        rows, f"published list {recipe.paper_list.path} of the SpEAT authors, matched to local audio", notes=notes
    )


def eu_emotion_paper_pool(lists_dir: str | Path) -> pd.DataFrame:
    """Published EU-Emotion ratings: rated, existing, semantically neutral clips in the authors' row order."""
    df = read_list_file(
        Path(lists_dir) / ATTRIBUTE_LISTS["eu_emotion"],
        (
            "stimulus_id",
            "valence",
            "semantically_neutral",
            "speaker_id",
            "speaker_gender",
            "speaker_age",
            "file_exists",
            "path",
        ),
    )
    df = df[df["file_exists"].str.strip().str.lower() == "true"]
    df = df[df["semantically_neutral"].str.strip().str.lower() == "yes"]
    return _rows(
        df,
        clip_id="eu_emotion:" + df["stimulus_id"].str.strip(),
        key=df["stimulus_id"].str.strip(),
        listed_path=df["path"].str.strip(),
        speaker=df["speaker_id"].str.strip(),
        sex=normalise_sex(df["speaker_gender"]),
        age=_num(df["speaker_age"]),
        valence=_num(df["valence"]),
        corpus="EU_Emotion_Stimulus_Set",
        emotion=df.get("expressed_emotion", ""),
        text=df.get("sentences", ""),
    )


def _eu_emotion_path(row, root: Path, index: dict[str, Path]) -> str:
    rel = row.listed_path.split("EU_Emotion_Stimulus_Set/", 1)[-1]
    for candidate in (root / rel, (root / rel).with_suffix(".mp3")):
        if candidate.is_file():
            return str(candidate)
    hit = index.get(row.key.lower())
    return str(hit) if hit else ""


def paper_eu_emotion_attributes(
    lists_dir: str | Path, sources: CorpusSources, allow_missing: bool = False
) -> Selection:
    """EU-Emotion pleasant/unpleasant clips from the published ratings, by the authors' procedure and
    tie-breaking, matched to local audio."""
    pool = eu_emotion_paper_pool(lists_dir)
    chosen = valence_poles(pool, 3, paper_order(pool), "EU-Emotion (published ratings)")
    root, index = sources.path("eu_emotion"), sources.audio_index("eu_emotion")
    clips = chosen.clips.copy()
    clips["path"] = [_eu_emotion_path(r, root, index) for r in clips.itertuples(index=False)]
    missing = [f"eu_emotion:{k} (looked under {root})" for k in clips.loc[clips["path"] == "", "key"]]
    clips, notes = _drop_missing(clips, missing, "EU-Emotion attributes", allow_missing)
    return Selection(
        clips.drop(columns=["key", "listed_path"]), chosen.method + " (selection=paper)", pool=pool, notes=notes
    )


def paper_mess_attributes(lists_dir: str | Path, sources: CorpusSources, allow_missing: bool = False) -> Selection:
    """MESS pleasant/unpleasant clips of the published list, by the authors' procedure and tie-breaking."""
    listed = read_list_file(Path(lists_dir) / ATTRIBUTE_LISTS["mess"])
    names = [listed.columns[0]] + list(listed.iloc[:, 0])  # headerless: first line is the root folder
    codes = {_stem(n.split("\t")[0]).removesuffix("_SCR") for n in names[1:]}
    mess = sources.table("mess")
    pool = mess[mess["code"].isin(codes)]
    notes = []
    absent = sorted(codes - set(pool["code"]))
    if absent:
        msg = f"MESS attributes: {len(absent)} of {len(codes)} listed clips not in the local corpus, e.g. {absent[:5]}"
        if not allow_missing:
            raise PaperListError(msg + " (set allow_missing=true to build without them)")
        notes.append(msg)
    chosen = valence_poles(pool, 10, paper_order(pool), "Morgan Emotional Speech Set (clips of the published list)")
    return Selection(chosen.clips, chosen.method + " (selection=paper)", pool=pool, notes=notes)

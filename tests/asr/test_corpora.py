"""Fair-Speech and generic manifest loaders: columns, exclusions named by row, L1/L2 recoding."""

from __future__ import annotations

import pandas as pd
import pytest

from speechbias.asr.corpora import CorpusError, load_asr_manifest, load_fair_speech
from tests.asr.fixtures import make_fair_speech_tree


def test_fair_speech_layout_with_bad_rows(tmp_path):
    meta = make_fair_speech_tree(tmp_path, missing_audio=2, empty_transcripts=1, with_speaker=False)
    c = load_fair_speech(tmp_path, l1_languages=["English"])
    assert c.speaker_column is None and "speaker" not in c.utterances.columns
    assert any("no speaker ids" in n for n in c.notes)
    assert len(c.utterances) == len(meta) - 3
    ex = c.excluded
    assert list(ex.reason) == ["empty transcript", "audio file not found", "audio file not found"]
    # rows are data-file line numbers: header is line 1
    assert list(ex.row) == [2, len(meta), len(meta) + 1]
    assert ex.utterance_id.iloc[0] == meta.hash_name.iloc[0]
    assert set(c.utterances.first_language) == {"L1", "L2"}
    assert (c.utterances.first_language == "L1").sum() == (meta.iloc[1:-2].first_language == "English").sum()
    assert c.utterances.path.iloc[0].endswith(f"asr_fairness_audio/{c.utterances.utterance_id.iloc[0]}.wav")


def test_fair_speech_speaker_column_and_errors(tmp_path):
    make_fair_speech_tree(tmp_path)
    c = load_fair_speech(tmp_path, speaker_column="speaker_id", l1_languages=None)
    assert c.speaker_column == "speaker" and c.utterances.speaker.nunique() == 8
    assert set(c.utterances.first_language) == {"English", "Spanish", "Mandarin"}
    with pytest.raises(CorpusError, match=r"missing column\(s\) \['spk'\]"):
        load_fair_speech(tmp_path, speaker_column="spk")
    with pytest.raises(CorpusError, match="does not exist"):
        load_fair_speech(tmp_path / "nope")
    (tmp_path / "other.tsv").write_text("a\n")
    with pytest.raises(CorpusError, match="expected exactly one metadata"):
        load_fair_speech(tmp_path)


def test_generic_manifest(tmp_path):
    meta = make_fair_speech_tree(tmp_path)
    m = pd.DataFrame(
        {
            "file": [f"asr_fairness_audio/{h}.wav" for h in meta.hash_name],
            "sentence": meta.transcription,
            "client_id": meta.speaker_id,
            "gender": meta.gender,
        }
    )
    m.to_csv(tmp_path / "cv.csv", index=False)
    c = load_asr_manifest(
        tmp_path / "cv.csv", ["gender"], path_column="file", transcript_column="sentence", speaker_column="client_id"
    )
    assert len(c.utterances) == len(meta) and c.excluded.empty
    assert c.utterances.utterance_id.iloc[0] == "asr_fairness_audio/" + meta.hash_name.iloc[0] + ".wav"
    with pytest.raises(CorpusError, match=r"missing column\(s\) \['accent'\]"):
        load_asr_manifest(tmp_path / "cv.csv", ["accent"], path_column="file", transcript_column="sentence")


def _write_odd_values(root) -> pd.DataFrame:
    """The fixture tree with survey-style gender/first_language cells (case, whitespace, non-answers)."""
    make_fair_speech_tree(root, with_speaker=False)  # 16 rows: 8 female, 8 male
    m = pd.read_csv(root / "metadata.tsv", sep="\t", dtype=str, keep_default_na=False)
    m.loc[0:4, "gender"] = ["Female", " female ", "Prefer not to say", "", "NaN"]
    m.loc[8:9, "gender"] = ["MALE", "male  "]
    m.loc[0:3, "first_language"] = ["prefer not to say", " english", "", "Spanish "]
    m.to_csv(root / "metadata.tsv", sep="\t", index=False)
    return m


def test_fair_speech_odd_values_fold_to_levels_and_undisclosed(tmp_path):
    m = _write_odd_values(tmp_path)
    c = load_fair_speech(tmp_path, l1_languages=["English"])
    # gender: rows 0-1 are female spellings, 2-4 non-answers, 5-7 female, 8-15 male (8, 9 odd spellings)
    assert c.utterances.gender.value_counts().to_dict() == {"male": 8, "female": 5, "undisclosed": 3}
    lv = c.levels[c.levels.category == "gender"].set_index("raw_value")
    assert lv.loc["Female", "level"] == "female" and lv.loc[" female ", "level"] == "female"
    assert lv.loc["MALE", "level"] == "male" and lv.loc["male  ", "level"] == "male"
    assert set(lv[lv.level == "undisclosed"].index) == {"Prefer not to say", "", "NaN"}
    assert lv.rows.sum() == len(m)
    # first_language: a non-answer is never recoded to L2
    fl = c.utterances.first_language
    assert fl.iloc[0] == "undisclosed" and fl.iloc[1] == "L1" and fl.iloc[2] == "undisclosed" and fl.iloc[3] == "L2"
    expect_l1 = 1 + (m.first_language.iloc[4:] == "English").sum()
    assert (fl == "L1").sum() == expect_l1 and (fl == "undisclosed").sum() == 2
    fl_lv = c.levels[c.levels.category == "first_language"].set_index("raw_value")
    assert fl_lv.loc[" english", "level"] == "L1" and fl_lv.loc["prefer not to say", "level"] == "undisclosed"

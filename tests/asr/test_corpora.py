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
    m = pd.DataFrame({"file": [f"asr_fairness_audio/{h}.wav" for h in meta.hash_name], "sentence": meta.transcription,
                      "client_id": meta.speaker_id, "gender": meta.gender})
    m.to_csv(tmp_path / "cv.csv", index=False)
    c = load_asr_manifest(tmp_path / "cv.csv", ["gender"], path_column="file", transcript_column="sentence",
                          speaker_column="client_id")
    assert len(c.utterances) == len(meta) and c.excluded.empty
    assert c.utterances.utterance_id.iloc[0] == "asr_fairness_audio/" + meta.hash_name.iloc[0] + ".wav"
    with pytest.raises(CorpusError, match=r"missing column\(s\) \['accent'\]"):
        load_asr_manifest(tmp_path / "cv.csv", ["accent"], path_column="file", transcript_column="sentence")

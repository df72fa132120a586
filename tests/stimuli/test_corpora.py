"""Corpus loaders on generated trees that mimic each corpus's real layout, including malformed variants."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from speechbias.stimuli.corpora import (
    CorpusLayoutError,
    load_buckeye_segments,
    load_coraal_segments,
    load_eu_emotion,
    load_mess,
    load_mitchell,
    load_pantos_perkins,
    load_romero_rivas,
    load_saa,
    load_synthesized,
    load_torgo,
    load_uaspeech,
    read_saa_metadata,
)
from speechbias.stimuli.corpora.eu_emotion import file_stem
from speechbias.stimuli.corpora.torgo import count_spoken_words

from tests.stimuli import corpus_trees as trees


@pytest.fixture
def rng():
    return np.random.default_rng(7)


# --- Speech Accent Archive ---------------------------------------------------------------------


def test_saa_scraped_layout_finds_audio_by_id_and_reports_missing(tmp_path, rng):
    speakers = trees.saa_speakers(rng)
    root = trees.write_saa_scraped(tmp_path / "saa", speakers, audio_by="id")
    (root / f"{speakers['id'].iloc[0]}.wav").unlink()  # one listed recording is gone
    df = load_saa(root)
    with_audio = speakers[speakers["has_mp3"]]
    assert len(df) == len(with_audio) - 1
    assert df.attrs["problems"] == [f"{speakers['name'].iloc[0]}: no audio file"]
    row = df.set_index("speaker").loc["korean3"]
    assert row["path"].endswith(f"{speakers.set_index('name').loc['korean3', 'id']}.wav")
    assert row["birth_country"] == "south korea" and row["sex"] in ("female", "male")
    expected = speakers.set_index("name").loc["korean3", "sample_length"] / 16000
    assert row["duration_s"] == pytest.approx(expected)


def test_saa_kaggle_layout_with_mp3(tmp_path, rng):
    speakers = trees.saa_speakers(rng, n_us=4, n_korean=2, n_uk=2)
    root = trees.write_saa_kaggle(tmp_path / "saa", speakers)
    df = load_saa(root)
    assert len(df) == int(speakers["has_mp3"].sum())
    assert all(p.endswith(".mp3") for p in df["path"])
    assert set(df.loc[df["speaker"].str.startswith("korean"), "birth_country"]) == {"south korea"}


def test_saa_name_lookup_and_malformed_tables(tmp_path, rng):
    speakers = trees.saa_speakers(rng, n_us=4, n_korean=2, n_uk=2)
    root = trees.write_saa_scraped(tmp_path / "saa", speakers, audio_by="name")
    assert len(load_saa(root)) == int(speakers["has_mp3"].sum())
    bad = speakers.astype({"age": object})
    bad.loc[3, "age"] = "forty"
    bad.to_csv(root / "speaker_list.csv", index=False)
    with pytest.raises(CorpusLayoutError, match=r"'age' is not numeric in row\(s\) 5"):
        load_saa(root)
    speakers.drop(columns=["sex"]).to_csv(root / "speaker_list.csv", index=False)
    with pytest.raises(CorpusLayoutError, match=r"missing column\(s\) \['sex'\]"):
        load_saa(root)
    with pytest.raises(CorpusLayoutError, match="folder does not exist"):
        load_saa(tmp_path / "nowhere")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CorpusLayoutError, match="no speaker table"):
        load_saa(empty)


SHARED = trees.SHARED_PAPER_DATA


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/speat_paper not available")
def test_saa_reads_the_real_scraped_speaker_list():
    raw = pd.read_csv(SHARED / "speech_accent_archive" / "speaker_list.csv")
    df = read_saa_metadata(SHARED / "speech_accent_archive" / "speaker_list.csv")
    assert len(df) == len(raw) == df["speaker"].nunique()
    us = raw[raw["birth_place"].str.contains(", usa", na=False) & (raw["native_language"] == "english")]
    ours = df[(df["birth_country"] == "usa") & (df["native_language"] == "english")]
    assert len(ours) == len(us)
    assert df["sex"].isin(["female", "male", ""]).all()


# --- TORGO, UASpeech ---------------------------------------------------------------------------


def test_count_spoken_words_drops_directions():
    assert count_spoken_words("[say 'ah' for five seconds]") == 0
    assert count_spoken_words("Although always alone, we survive") == 5
    assert count_spoken_words("hello [pause] world") == 2


def test_torgo_layout_and_missing_prompt(tmp_path):
    phrases = trees.write_torgo(tmp_path / "TORGO", n_phrases=3)
    df = load_torgo(tmp_path / "TORGO")
    assert len(df) == len(trees.TORGO_SPEAKERS) * (len(phrases) + 2)
    assert set(df.loc[df["dysarthric"], "speaker"]) == {"F01", "F03", "M01", "M02"}
    assert set(df.loc[df["speaker"] == "MC02", "sex"]) == {"male"}
    assert df.loc[df["text"] == phrases[0], "num_words"].eq(6).all()
    (tmp_path / "TORGO" / "F" / "F01" / "Session1" / "prompts" / "0001.txt").unlink()
    df = load_torgo(tmp_path / "TORGO")
    assert any("F01/Session1/wav_headMic/0001.wav: no prompt" in p for p in df.attrs["problems"])
    with pytest.raises(CorpusLayoutError, match="no speaker folders"):
        load_torgo(tmp_path)  # one level too high: TORGO/F/F01 is two levels below


def test_uaspeech_layout(tmp_path):
    trees.write_uaspeech(tmp_path / "UASpeech")
    trees.write_tone(tmp_path / "UASpeech" / "audio" / "noisereduce" / "F02" / "badname.wav")
    df = load_uaspeech(tmp_path / "UASpeech")
    assert len(df) == 2 * 2 * 6
    assert set(df.loc[df["speaker"] == "CF02", "speaker_number"]) == {"F02"}
    assert df.loc[df["speaker_number"] == "M05", "age"].eq(44).all()
    assert df.attrs["problems"] and "badname.wav" in df.attrs["problems"][0]
    with pytest.raises(CorpusLayoutError, match="audio/original"):
        load_uaspeech(tmp_path / "UASpeech", variant="original")


# --- attribute corpora -------------------------------------------------------------------------


def test_mess_ratings_and_audio(tmp_path, rng):
    table = trees.write_mess(tmp_path / "mess", rng, clips_per_actor=4)
    (tmp_path / "mess" / f"{table['code'].iloc[0]}_SCR.wav").unlink()
    df = load_mess(tmp_path / "mess")
    assert len(df) == len(table) - 1
    assert sorted(df["speaker"].unique()) == ["F1", "F2", "F3", "M1", "M2", "M3"]
    merged = df.merge(table, on="code")
    assert np.allclose(merged["valence"], merged["Valence"]) and merged["age"].eq(merged["speaker_age"]).all()
    assert df.attrs["problems"] == [f"{table['code'].iloc[0]}: no audio file {table['code'].iloc[0]}_SCR.wav"]
    table = table.astype({"Valence": object})
    table.loc[2, "Valence"] = "high"
    table.to_csv(tmp_path / "mess" / "Coded stimuli final.csv", index=False)
    with pytest.raises(CorpusLayoutError, match=r"'valence' is not numeric in row\(s\) 4"):
        load_mess(tmp_path / "mess")


def test_eu_emotion_id_mapping_and_actor_join(tmp_path, rng):
    assert file_stem("O-V3E") == "OV3E" and file_stem("O-V3Hx") == "fix__OV3H"
    assert file_stem("H-V8C1") == "HV8C 1" and file_stem("fix__OV3H") == "fix__OV3H"
    table = trees.write_eu_emotion(tmp_path / "eu", rng)
    df = load_eu_emotion(tmp_path / "eu")
    assert len(df) == len(table) and not df.attrs["problems"]
    assert sorted(df["clip_id"].str.removeprefix("eu_emotion:")) == sorted(table["stem"])
    assert set(df.loc[df["speaker"] == "B", "sex"]) == {"male"} and df.loc[df["speaker"] == "B", "age"].eq(26).all()
    assert df["semantically_neutral"].sum() == (table["semantically_neutral"] == "yes").sum()
    # a survey row whose file is absent is reported, not fatal; an unknown actor is fatal
    table.loc[len(table)] = {**table.iloc[0].to_dict(), "stimulus_id": "A-V9Z"}
    table.drop(columns="stem").to_csv(
        tmp_path / "eu" / "Supplementary Information" / "uk_voices_survey_results.csv", index=False
    )
    assert load_eu_emotion(tmp_path / "eu").attrs["problems"] == ["A-V9Z: no audio file AV9Z.mp3/.wav"]
    table.loc[len(table)] = {**table.iloc[0].to_dict(), "stimulus_id": "Z-V1A"}
    table.drop(columns="stem").to_csv(
        tmp_path / "eu" / "Supplementary Information" / "uk_voices_survey_results.csv", index=False
    )
    with pytest.raises(CorpusLayoutError, match=r"actor code\(s\) \['Z'\]"):
        load_eu_emotion(tmp_path / "eu")


# --- interviews ----------------------------------------------------------------------------------


def test_buckeye_segments_between_interviewer_turns(tmp_path):
    root = tmp_path / "buckeye"
    plan = trees.write_buckeye_recording(root, "s0101a", [6.0, 3.0, 8.5])
    pd.DataFrame(
        {"speaker": ["S01"], "speaker_gender": ["f"], "speaker_age": ["y"], "interviewer_gender": ["m"]}
    ).to_csv(root / "speakers.csv", index=False)
    df = load_buckeye_segments(root)
    expected = [(s, e) for s, e in plan if e - s > 5.0]
    assert list(zip(df["start_s"].round(6), df["end_s"].round(6))) == expected
    assert set(df["sex"]) == {"female"} and set(df["age_group"]) == {"young"} and set(df["interviewer_sex"]) == {"male"}
    assert set(df["text"]) == {"hello world"}
    words = root / "s0101a" / "s0101a.words"
    words.write_text(words.read_text().replace("#\n", "", 1))
    with pytest.raises(CorpusLayoutError, match="no '#' line"):
        load_buckeye_segments(root)


def test_coraal_segments_and_speaker_filters(tmp_path):
    root = tmp_path / "CORAAL"

    def spk(f, s, g, a, i, **kw):
        return {"file": f, "spkr": s, "gender": g, "age": a, "interviewer": i, "lengths": [7.0, 4.0, 9.0], **kw}

    trees.write_coraal_component(
        root,
        "ATL",
        [
            spk("ATL_se0_ag1_f_01_1", "ATL_se0_ag1_f_01", "Female", 25, "Male"),
            spk("ATL_se0_ag2_m_01_1", "ATL_se0_ag2_m_01", "Male", 35, "Male"),
            spk("ATL_se0_ag3_m_02_1", "ATL_se0_ag3_m_02", "Male", 61, "Female"),
            spk("ATL_se0_ag1_m_03_1", "ATL_se0_ag1_m_03", "Male", 16, "Female"),
            spk("ATL_se0_ag3_f_02_1", "ATL_se0_ag3_f_02", "Female", 70, "Female", primary="no"),
        ],
    )
    trees.write_coraal_component(
        root, "DCA", [spk("DCA_se1_ag1_f_01_1", "DCA_se1_ag1_f_01", "Female", 22, "Female")], year=None
    )
    df = load_coraal_segments(root)
    # 35-year-old (neither young nor old), 16-year-old, non-primary and 1968 DCA speakers are excluded
    assert sorted(df["speaker"].unique()) == ["ATL_se0_ag1_f_01", "ATL_se0_ag3_m_02"]
    assert sorted(df["duration_s"].round(6).unique()) == [7.0, 9.0]
    assert set(df.loc[df["speaker"] == "ATL_se0_ag3_m_02", "age_group"]) == {"old"}
    next(root.glob("ATL/*textfiles*/ATL_se0_ag1_f_01_1.txt")).unlink()
    assert any("missing transcript" in p for p in load_coraal_segments(root).attrs["problems"])
    meta = next(root.glob("ATL/*metadata*.txt"))
    pd.read_csv(meta, sep="\t").drop(columns=["Primary.Spkr"]).to_csv(meta, sep="\t", index=False)
    with pytest.raises(CorpusLayoutError, match=r"Primary.Spkr"):
        load_coraal_segments(root)


# --- audio IATs, synthesized voices ----------------------------------------------------------------


def test_audio_iat_sets(tmp_path):
    trees.write_mitchell(tmp_path / "mitchell")
    m = load_mitchell(tmp_path / "mitchell")
    assert m.groupby(["voice", "sex"]).size().eq(3).all() and len(m) == 12
    trees.write_pantos_perkins(tmp_path / "pp")
    pp = load_pantos_perkins(tmp_path / "pp")
    assert sorted(pp["phrase"].unique()) == sorted(trees.PP_PHRASES) and len(pp) == 8
    (tmp_path / "pp" / "audio_stimuli_used.csv").unlink()
    with pytest.raises(CorpusLayoutError, match="list of phrases"):
        load_pantos_perkins(tmp_path / "pp")
    trees.write_romero_rivas(tmp_path / "rr")
    rr = load_romero_rivas(tmp_path / "rr")
    assert len(rr) == 7 * 2 * 2
    assert rr[rr["word_type"] == "neutral"].groupby(["accent", "background"]).size().eq(3).all()
    (tmp_path / "rr" / "IAT_Stimuli - noise" / "door_foreign_Noise.wav").unlink()
    assert load_romero_rivas(tmp_path / "rr").attrs["problems"] == [
        "IAT_Stimuli - noise/door_foreign_Noise.wav: missing"
    ]


def test_synthesized_voices(tmp_path):
    trees.write_synthesized(tmp_path / "synth")
    trees.write_tone(tmp_path / "synth" / "robot.wav")
    df = load_synthesized(tmp_path / "synth")
    assert len(df) == 3 * 5 and set(df["speed"]) == {"normal", "fast", "slow"}
    assert df.loc[df["voice"] == "tru_voice_adult_male_1", "sex"].eq("male").all()
    assert df.attrs["problems"] == ["robot.wav: name is not <female|male>_<voice>[_fast|_slow]"]

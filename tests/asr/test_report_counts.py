"""The WER report counts what it compared: the levels table's raw values add up to the scored utterances,
utterances dropped before scoring are listed per level, and Table 3 is titled with the model fitted."""

from __future__ import annotations

import re

import pandas as pd

from speechbias.asr import report
from speechbias.asr.analysis import analyse_wer_disparity
from speechbias.asr.corpora import load_fair_speech
from speechbias.asr.groups import GroupRule
from tests.asr.fixtures import make_fair_speech_tree


def _analyse(tmp_path, speaker_column):
    meta = make_fair_speech_tree(tmp_path / "fs", speakers_per_group=2, utts_per_speaker=2)
    # one male utterance whose transcript is only fillers: kept by the loader, empty after normalisation;
    # and "Male" spelled with a capital on another row (folded into the same level)
    male = meta.index[meta["gender"] == "male"]
    meta.loc[male[0], "transcription"] = "Uh, um."
    meta.loc[male[1], "gender"] = "Male"
    meta.drop(columns=[] if speaker_column else ["speaker_id"]).to_csv(
        tmp_path / "fs" / "metadata.tsv", sep="\t", index=False
    )
    corpus = load_fair_speech(tmp_path / "fs", speaker_column=speaker_column, categories=["gender"])
    hyps = corpus.utterances[["utterance_id"]].assign(hypothesis=corpus.utterances["reference"].str.upper() + " x")
    result = analyse_wer_disparity(
        corpus,
        hyps,
        categories=["gender"],
        n_resamples=20,
        wer_ci_resamples=20,
        rule=GroupRule(min_utterances=1, min_speakers=1),
    )
    return meta, corpus, result


def test_raw_value_counts_add_up_to_the_compared_utterances_and_drops_are_listed(tmp_path):
    meta, corpus, result = _analyse(tmp_path, "speaker_id")
    n_male = int((meta["gender"].str.lower() == "male").sum())  # 8 rows in the file
    # the loader keeps all 8 (its own spelling table counts them), the analysis scores 7
    assert corpus.levels.query("level == 'male'")["rows"].sum() == n_male
    levels = result.levels.set_index("group")
    assert levels.loc["male", "utterances"] == n_male - 1
    spell = result.spellings.query("level == 'male'").set_index("raw_value")["rows"]
    assert spell.to_dict() == {"Male": 1, "male": n_male - 2} and spell.sum() == levels.loc["male", "utterances"]
    drops = result.drops
    assert drops.to_dict("records") == [
        {
            "category": "gender",
            "group": "male",
            "dropped": 1,
            "reasons": "reference empty after whisper_english normalisation (1)",
        }
    ]
    sections = dict(report.report_sections(result, {"asr": "a", "corpus": "c"}, {"normalizer": "whisper_english"}))
    md = sections["Levels"]
    row = next(ln for ln in md.splitlines() if ln.startswith("| gender | male |"))
    assert f"| {n_male - 1} |" in row and "'Male' (1), 'male' (6)" in row
    assert "| gender | male | 1 | reference empty after whisper_english normalisation (1) |" in md


def test_table3_heading_names_the_model_that_was_fitted(tmp_path):
    *_, with_speakers = _analyse(tmp_path / "a", "speaker_id")
    *_, without = _analyse(tmp_path / "b", None)
    headings = [h for h, _ in report.report_sections(without, {}, {"normalizer": "whisper_english"})]
    assert "Table 3: WER ratios (Poisson GLM, no speaker random effect)" in headings
    assert not any(re.search("mixed-effects", h) for h in headings)
    headings = [h for h, _ in report.report_sections(with_speakers, {}, {"normalizer": "whisper_english"})]
    assert "Table 3: WER ratios (mixed-effects Poisson regression, speaker random intercept)" in headings
    fits = {"gender": with_speakers.fits["gender"], "age": without.fits["gender"]}
    assert report.table3_heading(fits) == "Table 3: WER ratios (mixed-effects Poisson regression; Poisson GLM for age)"
    assert isinstance(with_speakers.drops, pd.DataFrame)


def test_an_utterance_without_a_hypothesis_is_counted_with_its_whole_reason(tmp_path):
    """An utterance the ASR did not transcribe (another shard's): the notes and the dropped-per-level table
    give its reason whole (the reason's kind is the text before a colon: "audio: <problem>" counts as
    "audio"; this reason has none, so it is not cut to "no hypothesis (not transcribed")."""
    meta = make_fair_speech_tree(tmp_path / "fs", speakers_per_group=2, utts_per_speaker=2)
    corpus = load_fair_speech(tmp_path / "fs", speaker_column="speaker_id", categories=["gender"])
    utts = corpus.utterances
    missing = utts["utterance_id"].iloc[0]
    hyps = utts.loc[utts["utterance_id"] != missing, ["utterance_id"]].assign(hypothesis="a b")
    result = analyse_wer_disparity(
        corpus, hyps, categories=["gender"], n_resamples=20, wer_ci_resamples=20, rule=GroupRule(1, 1)
    )
    (reason,) = result.excluded.loc[result.excluded["utterance_id"] == missing, "reason"]
    assert reason.startswith("no hypothesis (") and reason.endswith(")")
    assert f"1 utterance(s) excluded ({{'{reason}': 1}})" in " ".join(result.notes)
    level = str(utts.loc[utts["utterance_id"] == missing, "gender"].iloc[0])
    assert result.drops.to_dict("records") == [
        {"category": "gender", "group": level, "dropped": 1, "reasons": f"{reason} (1)"}
    ]
    assert len(meta) == len(utts)

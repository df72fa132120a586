"""End to end: Fair-Speech-layout fixture -> evaluate.py's compose + run_task with tiny random ASR models.

Checks the outputs exist and that Table 2 / Table 3 agree with a recomputation from the
per-utterance counts in utterances.csv (written here from the formulas), and that a second run
transcribes nothing.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from speechbias.launch.entry import run_task
from speechbias.report.caveat import DEMO_CAVEAT
from tests.asr.fixtures import make_fair_speech_tree

CONF = str(Path(__file__).resolve().parents[2] / "conf")


def _run(tmp_path: Path, asr: str, extra: list[str], out: str = "out", force: bool = False) -> tuple[dict, Path]:
    overrides = [
        "task=wer_disparity",
        f"asr={asr}",
        "corpus=fair_speech",
        f"corpus.load.root={tmp_path / 'fs'}",
        f"paths.output_dir={tmp_path / out}",
        f"paths.cache_dir={tmp_path / 'cache'}",
        "logger=none",
        "task.progress=false",
        "corpus.min_group.speakers=2",
        "corpus.min_group.utterances=1",
        "task.glmm.n_resamples=200",
        "task.wer_ci_resamples=200",
        f"force={str(force).lower()}",
        *extra,
    ]
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("evaluate", overrides=overrides, return_hydra_config=True)
    return run_task(cfg), tmp_path / out


def _check_table2(out: Path, categories: list[str], with_speakers: bool) -> pd.DataFrame:
    utts = pd.read_csv(out / "utterances.csv", keep_default_na=False)
    t2 = pd.read_csv(out / "table2.csv", keep_default_na=False)
    # recompute from the per-utterance counts
    for cat in categories:
        for grp in sorted(set(utts[cat])):
            d = utts[utts[cat] == grp]
            row = t2[(t2.category == cat) & (t2.group.astype(str) == str(grp))].iloc[0]
            assert row.utterances == len(d)
            assert row.errors == d.substitutions.sum() + d.deletions.sum() + d.insertions.sum()
            assert row.wer == pytest.approx(d.errors.sum() / d.ref_words.sum(), rel=1e-12)
            if with_speakers:
                assert row.speakers == d.speaker.nunique()
    gaps = pd.read_csv(out / "gaps.csv")
    for cat in categories:
        w = t2[t2.category == cat].wer
        assert gaps[gaps.category == cat].relative_gap.iloc[0] == pytest.approx((w.max() - w.min()) / w.min())
    return t2


def test_ctc_with_speakers_end_to_end(tmp_path):
    make_fair_speech_tree(
        tmp_path / "fs", speakers_per_group=2, utts_per_speaker=2, missing_audio=1, empty_transcripts=1
    )
    summary, out = _run(
        tmp_path,
        "tiny_random_ctc",
        ["corpus.load.speaker_column=speaker_id", "task.categories=[gender,first_language]"],
    )
    for name in (
        "results.csv",
        "results.json",
        "table2.csv",
        "table3.csv",
        "utterances.csv",
        "excluded.csv",
        "report.md",
        "wer_by_group.png",
    ):
        assert (out / name).is_file(), name
    assert summary["n_transcribed"] == 14 and summary["n_excluded"] == 2
    excluded = pd.read_csv(out / "excluded.csv")
    assert sorted(excluded.reason) == ["audio file not found", "empty transcript"]
    t2 = _check_table2(out, ["gender", "first_language"], with_speakers=True)
    assert set(t2[t2.category == "first_language"].group) == {"L1", "L2"}
    t3 = pd.read_csv(out / "table3.csv")
    # all pairs of groups, ratio inside its own CI or at least positive, method = GLMM
    assert set(zip(t3.category, t3.group_a, t3.group_b)) == {
        ("gender", "female", "male"),
        ("first_language", "L1", "L2"),
    }
    assert (t3.method == "laplace").all() and (t3.wer_ratio > 0).all() and (t3.ci_low <= t3.ci_high).all()
    # the same model refitted here on utterances.csv gives the reported ratios
    from speechbias.stats.glmm import fit_poisson_glmm

    utts = pd.read_csv(out / "utterances.csv")
    fit = fit_poisson_glmm(utts.errors, utts.ref_words, utts.gender, utts.speaker)
    assert t3[t3.category == "gender"].wer_ratio.iloc[0] == pytest.approx(fit.ratio("female", "male"), rel=1e-8)
    report = (out / "report.md").read_text()
    assert "Table 2" in report and "Table 3" in report and "wer_by_group.png" in report
    assert DEMO_CAVEAT in report  # a tiny random model: plumbing
    res = pd.read_csv(out / "results.csv")
    assert set(res.kind) == {"wer", "gap", "ratio"} and (res.asr == "tiny_random_wav2vec2_ctc").all()
    # a second run reads every hypothesis from the cache
    again, _ = _run(tmp_path, "tiny_random_ctc", ["corpus.load.speaker_column=speaker_id"], out="out2")
    assert again["n_transcribed"] == 0 and again["n_cached"] == 14


def test_whisper_without_speakers_end_to_end(tmp_path):
    make_fair_speech_tree(tmp_path / "fs", speakers_per_group=2, utts_per_speaker=1, seconds=0.6)
    summary, out = _run(tmp_path, "tiny_random_whisper", ["task.categories=[gender,age]", "asr.batch_size=8"])
    assert summary["n_transcribed"] == 8
    t2 = _check_table2(out, ["gender", "age"], with_speakers=False)
    t3 = pd.read_csv(out / "table3.csv")
    # without speakers the model is the cell-means Poisson GLM: its ratio is exactly the WER ratio
    for r in t3.itertuples():
        wa = t2[(t2.category == r.category) & (t2.group == r.group_a)].wer.iloc[0]
        wb = t2[(t2.category == r.category) & (t2.group == r.group_b)].wer.iloc[0]
        assert r.wer_ratio == pytest.approx(wa / wb, rel=1e-6)
        assert r.method == "poisson_glm"
    report = (out / "report.md").read_text()
    assert "No speaker column" in report and "utterances resampled" in report

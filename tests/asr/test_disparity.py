"""Table 2 / Table 3 builders on simulated per-utterance counts, including the bad-group paths."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from speechbias.asr.disparity import relative_gaps, wer_by_group, wer_ratio_table
from speechbias.asr.groups import GroupRule, level_table

SMALL = GroupRule(min_utterances=1, min_speakers=2)


def _utts(seed=0, speakers=(6, 6, 2)):
    rng = np.random.default_rng(seed)
    rows = []
    for g, n_spk in zip(["a", "b", "c"], speakers):
        for s in range(n_spk):
            r = rng.normal(0, 0.4)
            for _ in range(10):
                w = int(rng.integers(3, 12))
                e = int(rng.poisson(w * 0.15 * np.exp(r)))
                sub = int(rng.integers(0, e + 1))
                rows.append(
                    {
                        "grp": g,
                        "speaker": f"{g}{s}",
                        "ref_words": w,
                        "errors": e,
                        "substitutions": sub,
                        "deletions": e - sub,
                        "insertions": 0,
                        "other": ["x", "y"][len(rows) % 2],
                    }
                )
    return pd.DataFrame(rows)


def _one_utterance_group(seed=3) -> pd.DataFrame:
    """Two large gender groups (no speaker ids) and one group of a single utterance with many errors."""
    rng = np.random.default_rng(seed)
    rows = []
    for g, wer, n in (("female", 0.10, 400), ("male", 0.11, 400), ("other", None, 1)):
        for _ in range(n):
            w = int(rng.integers(4, 12))
            e = int(rng.poisson(w * wer)) if wer is not None else w  # the lone utterance: all words wrong
            rows.append({"gender": g, "ref_words": w, "errors": e, "substitutions": e, "deletions": 0, "insertions": 0})
    return pd.DataFrame(rows)


def test_table2_matches_loop_and_ci_brackets_estimate():
    u = _utts()
    t2 = wer_by_group(u, ["grp"], "speaker", n_resamples=500, seed=1, rule=SMALL)
    for g in "abc":
        d = u[u.grp == g]
        err = sum(d.errors)
        words = sum(d.ref_words)
        row = t2[t2.group == g].iloc[0]
        assert row.wer == pytest.approx(err / words) and row.speakers == d.speaker.nunique()
        assert row.wer != pytest.approx(np.mean(d.errors / d.ref_words))  # not the mean of utterance WERs
        assert row.wer_ci_low <= row.wer <= row.wer_ci_high
        assert row.compared
    gaps = relative_gaps(t2)
    w = t2.set_index("group").wer
    assert gaps.relative_gap.iloc[0] == pytest.approx((w.max() - w.min()) / w.min())
    assert gaps.highest_group.iloc[0] == w.idxmax() and gaps.n_groups.iloc[0] == 3


def test_level_table_statuses():
    u = _utts()  # a, b: 6 speakers x 10 utterances; c: 2 speakers x 10
    u.loc[u.index[:3], "grp"] = "undisclosed"
    lv = level_table(u, ["grp"], "speaker", GroupRule(min_utterances=15, min_speakers=5)).set_index("group")
    assert lv.loc["a", "status"] == "compared" and lv.loc["a", "utterances"] == 57  # 3 rows moved
    assert lv.loc["c", "status"] == "not compared: too small (2 speaker(s) < 5)" and not lv.loc["c", "compared"]
    assert lv.loc["undisclosed", "status"].startswith("not compared: undisclosed")
    lv = level_table(u, ["grp"], None, GroupRule(min_utterances=25, min_speakers=5)).set_index("group")
    assert lv.loc["c", "status"] == "not compared: too small (20 utterance(s) < 25)"  # no speaker ids: utterances
    assert lv.loc["b", "compared"] and np.isnan(lv.loc["b", "speakers"])
    lv = level_table(u, ["grp"], "speaker", GroupRule(min_utterances=1, min_speakers=1, include_undisclosed=True))
    assert lv.compared.all()
    with pytest.raises(ValueError, match="min_group"):
        GroupRule(min_utterances=0)


def test_one_utterance_group_sets_no_gap_and_no_significance():
    """Before: the lone 'other' utterance (100% WER) set the gender gap and its zero-width CI was
    marked significant. Now it is listed as too small; the gap and the ratios are female vs male."""
    u = _one_utterance_group()
    rule = GroupRule(min_utterances=200, min_speakers=5)
    t2 = wer_by_group(u, ["gender"], None, n_resamples=300, seed=0, rule=rule)
    other = t2.set_index("group").loc["other"]
    assert other.wer == 1.0 and not other.compared and "too small (1 utterance(s) < 200)" in other.status
    assert np.isnan(other.wer_ci_low) and np.isnan(other.wer_ci_high)  # one utterance: nothing to resample
    gaps = relative_gaps(t2)
    wf = u[u.gender == "female"].errors.sum() / u[u.gender == "female"].ref_words.sum()
    wm = u[u.gender == "male"].errors.sum() / u[u.gender == "male"].ref_words.sum()
    assert gaps.relative_gap.iloc[0] == pytest.approx(abs(wm - wf) / min(wf, wm))
    assert {gaps.lowest_group.iloc[0], gaps.highest_group.iloc[0]} == {"female", "male"}
    res = wer_ratio_table(u, ["gender"], None, n_resamples=200, rule=rule)
    assert list(zip(res.table.group_a, res.table.group_b)) == [("female", "male")]
    assert any("'other' too small (1 utterance(s) < 200)" in n for n in res.notes)
    # even when a one-utterance group is let through, its ratios are degenerate and never significant
    res = wer_ratio_table(u, ["gender"], None, n_resamples=200, rule=GroupRule(min_utterances=1, min_speakers=1))
    t3 = res.table.set_index(["group_a", "group_b"])
    for pair in (("female", "other"), ("male", "other")):
        assert t3.loc[pair, "degenerate"] and not t3.loc[pair, "significant"]
    assert not t3.loc[("female", "male"), "degenerate"]


def test_table3_drops_small_and_errorless_groups_with_notes():
    u = _utts()
    res = wer_ratio_table(u, ["grp"], "speaker", n_resamples=100, rule=GroupRule(min_utterances=1, min_speakers=5))
    assert any("'c' too small (2 speaker(s) < 5)" in n for n in res.notes)
    assert list(zip(res.table.group_a, res.table.group_b)) == [("a", "b")]
    u.loc[u.grp == "b", "errors"] = 0
    res = wer_ratio_table(u, ["grp"], "speaker", n_resamples=50, rule=SMALL)
    assert any("['b'] have no word errors" in n for n in res.notes)
    assert list(zip(res.table.group_a, res.table.group_b)) == [("a", "c")]
    # a category whose speakers span groups is reported, the other category still runs
    res = wer_ratio_table(_utts(), ["other", "grp"], "speaker", n_resamples=50, rule=SMALL)
    assert any(n.startswith("other: WER model not fitted") for n in res.notes)
    assert set(res.table.category) == {"grp"}

"""Table 2 / Table 3 builders on simulated per-utterance counts, including the bad-group paths."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from speechbias.asr.disparity import relative_gaps, wer_by_group, wer_ratio_table


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
                rows.append({"grp": g, "speaker": f"{g}{s}", "ref_words": w, "errors": e, "substitutions": sub,
                             "deletions": e - sub, "insertions": 0, "other": ["x", "y"][len(rows) % 2]})
    return pd.DataFrame(rows)


def test_table2_matches_loop_and_ci_brackets_estimate():
    u = _utts()
    t2 = wer_by_group(u, ["grp"], "speaker", n_resamples=500, seed=1)
    for g in "abc":
        d = u[u.grp == g]
        err = sum(d.errors)
        words = sum(d.ref_words)
        row = t2[t2.group == g].iloc[0]
        assert row.wer == pytest.approx(err / words) and row.speakers == d.speaker.nunique()
        assert row.wer != pytest.approx(np.mean(d.errors / d.ref_words))  # not the mean of utterance WERs
        assert row.wer_ci_low <= row.wer <= row.wer_ci_high
    gaps = relative_gaps(t2)
    w = t2.set_index("group").wer
    assert gaps.relative_gap.iloc[0] == pytest.approx((w.max() - w.min()) / w.min())
    assert gaps.highest_group.iloc[0] == w.idxmax()


def test_table3_drops_small_and_errorless_groups_with_notes():
    u = _utts()
    res = wer_ratio_table(u, ["grp"], "speaker", n_resamples=100, min_speakers=5)
    assert any("['c'] have fewer than 5 speakers (c: 2)" in n for n in res.notes)
    assert list(zip(res.table.group_a, res.table.group_b)) == [("a", "b")]
    u.loc[u.grp == "b", "errors"] = 0
    res = wer_ratio_table(u, ["grp"], "speaker", n_resamples=50, min_speakers=2)
    assert any("['b'] have no word errors" in n for n in res.notes)
    assert list(zip(res.table.group_a, res.table.group_b)) == [("a", "c")]
    # a category whose speakers span groups is reported, the other category still runs
    res = wer_ratio_table(_utts(), ["other", "grp"], "speaker", n_resamples=50, min_speakers=2)
    assert any(n.startswith("other: WER model not fitted") for n in res.notes)
    assert set(res.table.category) == {"grp"}

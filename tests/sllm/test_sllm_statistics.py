from __future__ import annotations

import numpy as np
import pytest

from speechbias.sllm.data import load_spoken_stereoset
from speechbias.sllm.statistics import continuation_rouge_l, dataset_statistics, plot_rouge_l_histogram


def test_table2_and_histogram(tree, tmp_path):
    root, durations = tree
    table = load_spoken_stereoset(root).table
    rouge = continuation_rouge_l(table)
    # distinct continuations: 2 gender items x 3 kinds, 1 age item x 3 kinds
    assert rouge.groupby("domain").size().to_dict() == {"gender": 6, "age": 3}
    stats = dataset_statistics(table, rouge).set_index("domain")
    assert stats.at["gender", "speakers"] == 4 and stats.at["gender", "instances"] == 4
    assert stats.at["age", "speakers"] == 2 and stats.at["age", "items"] == 1
    gender_durs = [d for (dom, _, _), d in durations.items() if dom == "gender"]
    assert stats.at["gender", "mean_context_duration_s"] == pytest.approx(np.mean(gender_durs), abs=1e-3)
    age_words = [len("Technology confuses me these days.".split()), len("I set it up in two minutes.".split()),
                 len("Bananas are yellow.".split())]
    assert stats.at["age", "mean_continuation_words"] == pytest.approx(np.mean(age_words))
    assert stats.at["age", "mean_rouge_l"] == pytest.approx(rouge[rouge.domain == "age"].mean_rouge_l.mean())
    png = plot_rouge_l_histogram(rouge, tmp_path / "hist.png")
    assert png.stat().st_size > 1000

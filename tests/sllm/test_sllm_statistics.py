from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from speechbias.report.run_writer import RunWriter
from speechbias.sllm.data import load_spoken_stereoset
from speechbias.sllm.statistics import (
    continuation_rouge_l,
    dataset_statistics,
    distinct_continuations,
    plot_rouge_l_histogram,
)


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
    age_words = [
        len("Technology confuses me these days.".split()),
        len("I set it up in two minutes.".split()),
        len("Bananas are yellow.".split()),
    ]
    assert stats.at["age", "mean_continuation_words"] == pytest.approx(np.mean(age_words))
    assert stats.at["age", "mean_rouge_l"] == pytest.approx(rouge[rouge.domain == "age"].mean_rouge_l.mean())
    png = RunWriter(tmp_path).figure("hist", plot_rouge_l_histogram(rouge))
    assert png == tmp_path / "hist.png" and png.stat().st_size > 1000


def test_continuations_are_distinct_by_text_when_every_voice_has_its_own_id():
    # the released CSVs give each voice its own id: 2 contexts x 3 voices = 6 ids, 6 distinct texts
    texts = {"c1": ("She cooks.", "He cooks.", "Rain falls."), "c2": ("He fixes cars.", "She fixes cars.", "Sky.")}
    rows = []
    for n, (_ctx, (st, anti, irr)) in enumerate(texts.items()):
        for v in range(3):
            rows.append(
                {
                    "domain": "gender",
                    "id": 10 * n + v,
                    "stereotypical": st,
                    "anti-stereotypical": anti,
                    "irrelevant": irr,
                }
            )
    # an age item reusing a gender text stays separate (distinct per domain)
    rows.append(
        {"domain": "age", "id": 0, "stereotypical": "She cooks.", "anti-stereotypical": "Old.", "irrelevant": "Sky."}
    )
    conts = distinct_continuations(pd.DataFrame(rows))
    assert conts.groupby("domain").size().to_dict() == {"gender": 6, "age": 3}
    gender = conts[conts.domain == "gender"].set_index("text")
    assert gender.at["Sky.", "id"] == 10 and gender.at["Sky.", "kind"] == "irrelevant"  # first row that has it
    assert list(gender["id"]) == [0, 0, 0, 10, 10, 10]
    rouge = continuation_rouge_l(pd.DataFrame(rows))
    assert len(rouge) == 9


def test_histogram_counts_are_ticked_on_whole_numbers():
    # 3 continuations: the tallest bar is 2, where matplotlib's default ticks were 0, 0.5, 1, 1.5, 2
    rouge = pd.DataFrame({"domain": ["gender", "gender", "age"], "mean_rouge_l": [0.10, 0.11, 0.40]})
    fig = plot_rouge_l_histogram(rouge, bins=10)
    ax = fig.axes[0]
    ax.figure.canvas.draw()
    ticks = [t for t in ax.get_yticks() if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks)
    heights = sorted(p.get_height() for p in ax.patches if p.get_height() > 0)
    assert heights == [1.0, 2.0]

"""Per-group tables of report.md: the model's speaker groups, and the baselines in their own, folded table."""

from __future__ import annotations

import pandas as pd

from speechbias.sllm.metrics import METRICS
from speechbias.sllm.tables import baseline_group_table, group_sections


def _summary(model, condition, values_by_group, speakers=2):
    rows = []
    for group, values in values_by_group.items():
        for metric, v in zip(METRICS, values):
            rows.append(
                {
                    "model": model,
                    "domain": "gender",
                    "group": group,
                    "metric": metric,
                    "value": v,
                    "speaker_mean": v,
                    "speaker_sd": 0.0,
                    "n_speakers": speakers,
                    "condition": condition,
                }
            )
    return pd.DataFrame(rows)


def test_baselines_get_their_own_table_one_row_per_domain_when_the_same_in_every_group():
    model = _summary("qwen", "audio", {"all": [10, 90, 55], "female": [12, 88, 60], "male": [8, 92, 50]})
    oracle = _summary("Oracle", "baseline", {"all": [100, 100, 50], "female": [100, 100, 50], "male": [100, 100, 50]})
    odd = _summary(
        "Random", "baseline", {"all": [None, 66.7, 50], "female": [None, 66.7, 50], "male": [None, 60.0, 50]}
    )
    sections = dict(group_sections(pd.concat([model, oracle, odd], ignore_index=True)))
    per_group = sections["Per speaker group (mean ± SD across speakers)"]
    assert "Oracle" not in per_group and "Random" not in per_group and per_group.count("| qwen ") == 3
    base = sections["Baselines per speaker group"]
    assert base.count("| Oracle ") == 1 and "every group" in base  # 3 identical rows folded into one
    assert base.count("| Random ") == 3  # differs between groups: every group kept
    table = baseline_group_table(pd.concat([oracle, odd], ignore_index=True))
    assert list(table["group"]) == ["every group", "all", "female", "male"]


def test_a_baselines_only_run_has_only_the_baseline_table():
    oracle = _summary("Oracle", "baseline", {"all": [100, 100, 50], "female": [100, 100, 50]})
    assert [h for h, _ in group_sections(oracle)] == ["Baselines per speaker group"]

"""report.md of one SpEAT run says what a reader would otherwise have to guess: why a layer's sampled p
is larger than the run's exact p at the same d, why human_iat_d is empty, that the bootstrap SE was not
computed, and that the layer aggregation is moot on a one-layer upstream."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from speechbias.report.speat_report import report_sections
from speechbias.speat.optional_statistics import computed_tables

BIAS_TEST = SimpleNamespace(x_label="group x", y_label="group y", a_label="pleasant", b_label="unpleasant")


def _row(**kw) -> dict:
    row = {"upstream": "fbank", "test": "demo_voice", "aggregation": "max_q3", "temporal": "max", "d": 1.66}
    row |= {"p": 5.4e-06, "n_permutations": 184_756, "exact": True, "human_iat_d": None}
    return row | kw


def _layers(p: float, n_layers: int = 1, n_permutations: int = 10_000) -> pd.DataFrame:
    return pd.DataFrame({"layer": range(n_layers), "d": 1.66, "p": p, "n_permutations": n_permutations, "exact": False})


def _text(row, layers, se=None) -> str:
    tables = computed_tables({"layers": layers, "se_curve": se})
    return "\n".join(f"## {h}\n{body}" for h, body in report_sections(row, tables, BIAS_TEST))


def test_a_layer_p_at_the_sampled_floor_is_explained_against_the_runs_exact_p():
    floor = 1 / 10_001  # (1 + 0) / (1 + 10,000): no sampled permutation reached the observed d
    text = _text(_row(), _layers(floor))
    assert "never below 1 / (10,000 + 1) = 0.0001" in text and "run's p (5.4e-06) is the finer figure" in text
    # above the floor, or a run p that is not finer, needs no such sentence
    assert "never below" not in _text(_row(), _layers(0.0123))
    assert "never below" not in _text(_row(p=0.5), _layers(floor))


def test_unknown_human_iat_d_and_the_missing_se_are_said_and_a_known_one_is_shown():
    text = _text(_row(), _layers(0.01))
    assert "| unknown" in text and "no human IAT effect size is recorded for demo_voice" in text
    assert "Bootstrap standard error of d: not computed" in text and "speat.se_curve=true" in text
    known = _text(_row(human_iat_d=0.31), _layers(0.01), se=pd.DataFrame({"n": [10], "se": [0.2]}))
    assert "0.31" in known and "unknown" not in known and "not computed" not in known


def test_the_layer_rule_is_called_moot_only_on_a_one_layer_upstream():
    one = _text(_row(), _layers(0.01))
    assert "The layer aggregation `q3` has no effect here: fbank has one layer" in one
    assert "every `max_<layer>` aggregation gives this d" in one
    assert "has no effect" not in _text(_row(upstream="hubert_base"), _layers(0.01, n_layers=13))

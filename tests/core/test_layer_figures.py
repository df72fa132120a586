"""layer_profile.png: whole-layer ticks, no figure for a one-layer upstream (one line why), permutation counts."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from speechbias.speat.optional_statistics import computed_tables, speat_by_layer
from speechbias.report import figures, speat_report
from speechbias.report.run_writer import RunWriter


def _ticks(ax):
    return [t.get_text() for t in ax.get_xticklabels()], list(ax.get_xticks())


def test_single_layer_upstream_has_one_named_tick_and_no_transformer_label():
    fig, ax = plt.subplots()
    assert figures.layer_axis(ax, [0], "single-layer") is True
    labels, ticks = _ticks(ax)
    assert ticks == [0] and labels == ["the features (one layer)"]
    assert "transformer" not in ax.get_xlabel() and "single-layer" in ax.get_xlabel()
    plt.close(fig)


def test_multi_layer_upstream_ticks_on_whole_layers_only():
    fig, ax = plt.subplots()
    assert figures.layer_axis(ax, [0, 1, 2], "block-io-v1") is False
    _, ticks = _ticks(ax)
    assert ticks == [0, 1, 2]
    assert "transformer block" in ax.get_xlabel()
    plt.close(fig)
    fig, ax = plt.subplots()
    figures.layer_axis(ax, range(49), "block-io-v1")  # whisper-large-like: a locator, still integers
    ax.set_xlim(0, 48)
    assert all(float(t).is_integer() for t in ax.get_xticks())
    plt.close(fig)


def test_per_layer_p_says_how_many_permutations():
    rng = np.random.default_rng(0)
    roles = np.array(["X"] * 10 + ["Y"] * 10 + ["A"] * 10 + ["B"] * 10)
    sampled = speat_by_layer(rng.normal(size=(40, 2, 5)), roles, n_permutations=10_000, seed=0)
    assert math.comb(20, 10) > 10_000  # 184,756 partitions: sampled
    assert [r["n_permutations"] for r in sampled] == [10_000, 10_000] and not any(r["exact"] for r in sampled)
    assert figures.permutation_note(sampled) == "p per layer: one-sided, 10,000 random permutations"
    small_roles = np.array(["X"] * 3 + ["Y"] * 3 + ["A"] * 3 + ["B"] * 3)
    exact = speat_by_layer(rng.normal(size=(12, 1, 5)), small_roles, n_permutations=10_000, seed=0)
    assert [r["n_permutations"] for r in exact] == [math.comb(6, 3)] and all(r["exact"] for r in exact)
    assert figures.permutation_note(exact) == "p per layer: one-sided, exact over all 20 partitions"
    assert figures.permutation_note(pd.DataFrame({"layer": [0], "d": [0.1]})) == ""


def test_no_layer_profile_for_a_single_layer_upstream_and_report_says_why(tmp_path):
    layers = pd.DataFrame(
        {
            "upstream": ["fbank"],
            "family": ["classical"],
            "layer": [0],
            "d": [1.5],
            "p": [1e-4],
            "n_permutations": [10_000],
            "exact": [False],
        }
    )
    assert figures.layer_profile(layers, "demo_voice: d per layer", layer_convention="single-layer") is None
    assert figures.layer_profile(layers, "demo_voice: d per layer") is None  # only layer 0: one layer too
    assert RunWriter(tmp_path).figure("layer_profile", None) is None and not (tmp_path / "layer_profile.png").exists()
    row = {
        "upstream": "fbank",
        "test": "demo_voice",
        "aggregation": "mean_sum",
        "d": 1.5,
        "p": 1e-4,
        "exact": False,
        "n_permutations": 10_000,
    }
    test = type("T", (), {"x_label": "x", "a_label": "a", "y_label": "y"})()
    body = dict(speat_report.report_sections(row, computed_tables({"layers": layers}), test, "single-layer"))[
        "d at every layer"
    ]
    assert body.splitlines()[0] == figures.single_layer_note("fbank") and "layer_profile.png" not in body


def test_layer_profile_of_a_multi_layer_upstream_draws_every_layer(tmp_path):
    layers = pd.DataFrame({"upstream": "tiny", "family": "wav2vec2", "layer": [0, 1, 2], "d": [0.2, -0.1, 0.4]})
    fig = figures.layer_profile(layers, "t", layer_convention="block-io-v1")
    line = fig.axes[0].lines[0]
    assert list(line.get_xdata()) == [0, 1, 2] and list(line.get_ydata()) == [0.2, -0.1, 0.4]
    assert "input to the first transformer block" in fig.axes[0].get_xlabel()
    path = RunWriter(tmp_path, caveat="DEMO caveat").figure("layer_profile", fig)
    assert path.stat().st_size > 1000

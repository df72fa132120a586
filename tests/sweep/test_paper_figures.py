"""The sweep report's figures draw what carries information: checked on the drawn artists."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from speechbias.report import figures, paper_figures
from speechbias.report.sweep_report import _no_heatmap_reason, _no_layer_profiles_reason


def _layers(models: dict[str, tuple[str, list[float]]], test: str = "demo_voice") -> pd.DataFrame:
    rows = []
    for name, (family, ds) in models.items():
        rows += [
            {"upstream": name, "family": family, "test": test, "temporal": "mean", "layer": k, "d": d}
            for k, d in enumerate(ds)
        ]
    return pd.DataFrame(rows)


def _marker_points(ax):
    """(x, y) of every line drawn without a line style (markers only)."""
    return [
        (float(ln.get_xdata()[0]), float(ln.get_ydata()[0]))
        for ln in ax.lines
        if ln.get_linestyle() in ("None", "none", "") and len(ln.get_xdata()) == 1
    ]


def test_one_layer_upstreams_with_equal_d_are_both_visible_left_of_layer_0():
    layers = _layers(
        {"fbank": ("classical", [1.66]), "mfcc": ("classical", [1.66]), "tiny-wavlm": ("wavlm", [-0.5, -0.52, -0.51])}
    )
    fig = paper_figures.layer_lines_figure(layers)
    ax = fig.axes[0]
    points = _marker_points(ax)
    assert len(points) == 2 and {y for _, y in points} == {1.66}
    xs = sorted(x for x, _ in points)
    # side by side, more than a marker apart, both left of layer 0
    assert xs[1] - xs[0] >= paper_figures.FEATURES_WIDTH * 0.99 and xs[1] < -0.5
    wavlm = [ln for ln in ax.lines if len(ln.get_xdata()) == 3]
    assert len(wavlm) == 1 and list(wavlm[0].get_xdata()) == [0, 1, 2]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[0] == "features" and labels[1:] == ["0", "1", "2"]
    assert "input to the first transformer block" in fig._supxlabel.get_text()
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "fbank (one layer)" in legend and "mfcc (one layer)" in legend
    plt.close(fig)


def test_the_layer_axis_names_each_layer_convention_of_the_sweep():
    layers = _layers({"hubert": ("hubert", [0.1, 0.2]), "s3prl-apc": ("s3prl", [0.3, 0.1])})
    fig = paper_figures.layer_lines_figure(layers)
    label = fig._supxlabel.get_text()
    assert "block-io-v1: layer (0 = input to the first transformer block" in label and "s3prl-native" in label
    plt.close(fig)


def test_no_layer_figure_when_every_upstream_has_one_layer_and_the_report_says_why():
    layers = _layers({"fbank": ("classical", [1.66]), "mfcc": ("classical", [1.65])})
    assert paper_figures.layer_lines_figure(layers) is None
    assert _no_layer_profiles_reason(layers) == (
        "every upstream of this sweep has a single layer (fbank, mfcc), whose one d per test is Figure 1's"
    )


def test_appendix_d_needs_two_strategies_and_says_so_with_its_one_number():
    one = pd.DataFrame({"mean": [1 / 3]}, index=pd.Index(["sum"], name="layer"))
    assert paper_figures.positive_heatmap(one) is None
    appendix = pd.DataFrame(
        {
            "temporal": ["mean"],
            "layer": ["sum"],
            "aggregation": ["mean_sum"],
            "n": [12],
            "n_positive": [4],
            "proportion_positive": [1 / 3],
        }
    )
    assert "one aggregation strategy in this sweep (mean_sum: d > 0 in 4 of 12 results)" in _no_heatmap_reason(appendix)
    # the heat map's strategies are those of experiment=paper_aggregation: its list, as the reason counts it
    experiment = OmegaConf.load(Path(__file__).resolve().parents[2] / "conf" / "experiment" / "paper_aggregation.yaml")
    n = len(str(experiment.hydra.sweeper.params.aggregation).strip("[]").split(","))
    assert f"experiment=paper_aggregation runs the paper's {n})" in _no_heatmap_reason(appendix)
    two = pd.DataFrame({"mean": [0.25, 0.75]}, index=pd.Index(["sum", "q3"], name="layer"))
    fig = paper_figures.positive_heatmap(two, n_results=4)
    image = fig.axes[0].images[0].get_array()
    assert np.allclose(np.asarray(image), [[0.25], [0.75]])
    assert sorted(t.get_text() for t in fig.axes[0].texts) == ["0.25", "0.75"]
    plt.close(fig)


def test_family_layer_conventions():
    assert figures.family_layer_convention("classical") == "single-layer"
    assert figures.family_layer_convention("s3prl") == "s3prl-native"
    assert figures.family_layer_convention("whisper") == "block-io-v1"


def test_the_se_curves_say_which_line_is_which_test():
    """Figure 3: each (model, test) curve has its test's line pattern, one per test, and the legend names
    every test with that pattern (the colours are the families')."""
    sizes = [10, 20, 40]
    rows = [
        {"upstream": model, "family": family, "test": test, "sizes": n, "se": 1.0 / n + 0.01 * k + 0.001 * j}
        for j, (model, family) in enumerate((("wav2vec2-base", "wav2vec2"), ("hubert-base", "hubert")))
        for k, test in enumerate(("female_male", "young_old", "us_foreign"))
        for n in sizes
    ]
    se = pd.DataFrame(rows)
    fig = paper_figures.se_curves_figure(se)
    ax = fig.axes[0]
    pattern_of_test: dict[str, set] = {}
    for line in ax.lines[:-1]:  # the last line is the mean
        match = se[np.isclose(se["se"], float(line.get_ydata()[0]))]
        assert len(match) == 1
        pattern_of_test.setdefault(match["test"].iloc[0], set()).add(line.get_linestyle())
    assert set(pattern_of_test) == {"female_male", "young_old", "us_foreign"}
    assert all(len(p) == 1 for p in pattern_of_test.values())  # one pattern per test...
    assert len({next(iter(p)) for p in pattern_of_test.values()}) == 3  # ...each its own
    legend = {
        t.get_text(): h.get_linestyle() for t, h in zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles)
    }
    for test, patterns in pattern_of_test.items():
        assert legend[f"test: {test}"] == next(iter(patterns))
    assert {"wav2vec2", "hubert", "mean"} <= set(legend)
    plt.close(fig)

"""The sweep report's figures draw what carries information: checked on the drawn artists."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

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

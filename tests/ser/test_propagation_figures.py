"""The figures of a train.py run show the rating scale, flag predictions outside it and training that had not
converged, and leave out a one-bar layer-weight figure; checked on the drawn artists, not only the files."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import to_hex

from speechbias.report import propagation_figures as pf
from speechbias.report.run_writer import RunWriter


def _preds(values_x, values_y, low=0.0, high=100.0):
    n_x, n_y = len(values_x), len(values_y)
    return pd.DataFrame(
        {
            "test": "demo_voice",
            "lr": 1e-4,
            "role": ["X"] * n_x + ["Y"] * n_y,
            "predicted_valence": list(values_x) + list(values_y),
            "valence_low": low,
            "valence_high": high,
        }
    )


ROW = pd.Series({"test": "demo_voice", "x_label": "female", "y_label": "male"})


def _red_crosses(ax):
    return [c for c in ax.collections if len(c.get_offsets()) and to_hex(c.get_facecolor()[0]) == pf.WARNING_COLOUR]


def test_predictions_outside_the_rating_scale_are_red_crosses_and_counted(tmp_path):
    preds = _preds([120.0, 150.0, 95.0], [40.0, -5.0, 60.0])
    assert pf.outside_scale(preds) == 3  # 120, 150 above 100; -5 below 0
    fig = pf.predictions_figure(preds, ROW, d=1.0)
    ax = fig.axes[0]
    crosses = _red_crosses(ax)
    assert sorted(float(y) for c in crosses for _, y in c.get_offsets()) == [-5.0, 120.0, 150.0]
    # the scale is a shaded band from 0 to 100
    band = [p for p in ax.patches if p.get_label().startswith("rating scale")]
    assert len(band) == 1
    assert (band[0].get_y(), band[0].get_y() + band[0].get_height()) == (0.0, 100.0)  # y in data units
    assert any("3 of 6 predictions outside the rating scale" in t.get_text() for t in ax.texts)
    assert RunWriter(tmp_path).figure("propagation_demo_voice", fig).stat().st_size > 1000


def test_predictions_inside_the_scale_are_not_flagged():
    fig = pf.predictions_figure(_preds([60.0, 70.0], [40.0, 50.0]), ROW, d=1.0)
    assert not _red_crosses(fig.axes[0]) and not fig.axes[0].texts
    plt.close(fig)
    # without a recorded scale (an older run's table) nothing is shaded or flagged
    old = _preds([160.0], [40.0]).drop(columns=["valence_low", "valence_high"])
    fig = pf.predictions_figure(old, ROW, d=1.0)
    assert pf.outside_scale(old) == 0 and not fig.axes[0].patches[1:] and not _red_crosses(fig.axes[0])
    plt.close(fig)


def _curve(r2, lr=1e-4):
    r2 = np.asarray(r2, dtype=float)
    return pd.DataFrame({"step": np.arange(1, len(r2) + 1) * 10, "lr": lr, "r2": r2, "mse": 100 * (1 - r2)})


def test_not_converged_when_the_best_dev_mse_is_the_last_validation_or_r2_still_rises():
    rising = _curve(np.linspace(-1, 0.85, 40))
    assert pf.not_converged(rising) == {"": "its lowest dev MSE is at its last validation (step 400)"}
    # a noisy end whose best is earlier, but the last quarter is still 0.05 above the third
    noisy = _curve(np.r_[np.zeros(10), np.zeros(10), np.full(10, 0.50), np.full(9, 0.55), [0.30]])
    why = pf.not_converged(noisy)[""]
    assert why.startswith("its dev R² rose by 0.025")  # mean(0.55 x9, 0.30) - 0.50
    flat = _curve(np.r_[np.linspace(-1, 0.8, 20), np.full(19, 0.8), [0.79]])
    assert pf.not_converged(flat) == {}
    fig = pf.dev_curve_figure(rising)
    assert any(t.get_text().startswith("NOT CONVERGED") for t in fig.axes[0].texts)
    plt.close(fig)
    fig = pf.dev_curve_figure(flat)
    assert not fig.axes[0].texts
    plt.close(fig)
    notes = pf.training_notes(rising, _preds([120.0], [50.0]))
    assert notes[0].startswith("**Not converged:**") and "1 of 2 predictions lie outside" in notes[1]


def test_one_layer_upstream_has_no_layer_weight_figure_but_a_line_why():
    one = pd.DataFrame({"lr": [1e-4], "layer": [0], "weight": [1.0]})
    assert pf.layer_weights_figure(one) is None
    assert "single layer" in pf.layer_weights_markdown(one)
    three = pd.DataFrame({"lr": 1e-4, "layer": [0, 1, 2], "weight": [0.2, 0.5, 0.3]})
    fig = pf.layer_weights_figure(three)
    heights = [b.get_height() for b in fig.axes[0].patches]
    assert heights == [0.2, 0.5, 0.3] and pf.layer_weights_markdown(three) == "![layer weights](layer_weights.png)"
    plt.close(fig)

"""Figures of a train.py run (SER bias propagation): they return matplotlib figures, the run's
:class:`~speechbias.report.run_writer.RunWriter` saves them (with the demo caveat of a demo run).

Tables are those of :mod:`speechbias.callbacks.propagation`: the dev curve (``step``, ``lr``,
``r2``), the layer weights (``lr``, ``layer``, ``weight``) and the per-clip predictions (``role``,
``lr``, ``predicted_valence`` on the original rating scale).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from speechbias.report import figures
from speechbias.ser.pooling import lr_label


def lr_groups(table: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(label, rows) per learning rate; the label is empty for a one-head table."""
    groups = list(table.groupby(table["lr"].astype(float), sort=False)) if "lr" in table else [(None, table)]
    return [("" if len(groups) == 1 else f"lr={lr_label(lr)}", g) for lr, g in groups]


def dev_curve_figure(curve: pd.DataFrame):
    """Dev R^2 against the training step, one line per head; None for an empty curve."""
    if curve.empty:
        return None
    fig, ax = figures.plt.subplots(figsize=(5.6, 3.4))
    groups = lr_groups(curve)
    for label, g in groups:
        ax.plot(g["step"], g["r2"], marker="o", ms=2, label=label or None)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("training step")
    ax.set_ylabel("dev R$^2$ (original rating scale)")
    ax.set_title("valence head: dev R$^2$ during training")
    if len(groups) > 1:
        ax.legend(fontsize=7)
    return fig


def layer_weights_figure(layers: pd.DataFrame):
    """The learned softmax layer weights, bars per head, against the equal initial weights."""
    fig, ax = figures.plt.subplots(figsize=(5.6, 3.4))
    groups = lr_groups(layers)
    width = 0.8 / len(groups)
    for k, (label, g) in enumerate(groups):
        offset = (k - (len(groups) - 1) / 2) * width
        ax.bar(g["layer"] + offset, g["weight"], width=width, label=label or None)
    n_layers = int(layers["layer"].max()) + 1
    ax.axhline(1.0 / n_layers, color="black", lw=0.8, ls="--", label="initial (equal)")
    figures.layer_axis(ax, layers["layer"])
    ax.set_ylabel("softmax layer weight")
    ax.set_title("learned layer weights")
    ax.legend(fontsize=7)
    return fig


def predictions_figure(preds: pd.DataFrame, row: pd.Series, d: float):
    """Predicted valence of X and Y of one test (all heads of the run pooled), titled with ``d``;
    ``row``: the test's results row (``test``, ``x_label``, ``y_label``)."""
    fig, ax = figures.plt.subplots(figsize=(4.2, 3.4))
    data = [preds.loc[preds["role"] == r, "predicted_valence"].to_numpy() for r in ("X", "Y")]
    ax.boxplot(data)
    ax.set_xticks([1, 2], [f"X: {row['x_label']}", f"Y: {row['y_label']}"], fontsize=7)
    for k, values in enumerate(data, start=1):
        ax.scatter(np.full(values.size, k) + np.linspace(-0.08, 0.08, values.size), values, s=8, alpha=0.6)
    ax.set_ylabel("predicted valence (original scale)")
    n_heads = preds["lr"].nunique() if "lr" in preds else 1
    pooled = f", {n_heads} heads pooled" if n_heads > 1 else ""
    ax.set_title(f"{row['test']}: Cohen's d = {d:.2f}{pooled}")
    return fig

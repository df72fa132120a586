"""Figures of a train.py run (SER bias propagation): they return matplotlib figures, the run's
:class:`~speechbias.report.run_writer.RunWriter` saves them (with the demo caveat of a demo run).

Tables are those of :mod:`speechbias.callbacks.propagation`: the dev curve (``step``, ``lr``,
``r2``, ``mse``), the layer weights (``lr``, ``layer``, ``weight``) and the per-clip predictions
(``role``, ``lr``, ``predicted_valence`` on the original rating scale, whose ends are the columns
``valence_low`` / ``valence_high`` when the run recorded them).

What a reader must not miss is drawn, and said in report.md (:func:`training_notes`): a head whose dev
MSE was still improving at its last validation (not converged), and predictions outside the rating scale.
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


WARNING_COLOUR = "#b00000"
# a head still improving by this much dev R^2 from the third to the last quarter of its validations has
# not converged (as has one whose lowest dev MSE is its very last validation)
RISING_R2 = 0.01


def not_converged(curve: pd.DataFrame) -> dict[str, str]:
    """Head label ("" for a one-head run) -> why it had not converged at the end of training: its
    lowest dev MSE came at its last validation, or its mean dev R^2 rose by more than
    :data:`RISING_R2` from the third to the last quarter of its validations. Heads that had
    converged (and curves of fewer than 4 validations) are left out."""
    out = {}
    for label, g in lr_groups(curve):
        g = g.sort_values("step")
        if len(g) < 4:
            continue
        last = int(g["step"].iloc[-1])
        value = g["mse"] if "mse" in g else -g["r2"]
        if int(g["step"].iloc[int(np.argmin(value.to_numpy()))]) == last:
            out[label] = f"its lowest dev MSE is at its last validation (step {last})"
            continue
        q = len(g) // 4
        rise = float(g["r2"].iloc[-q:].mean() - g["r2"].iloc[-2 * q : -q].mean())
        if rise > RISING_R2:
            out[label] = f"its dev R² rose by {rise:.3f} over the last quarter of training (to step {last})"
    return out


def _warning_above(ax, text: str, y: float) -> None:
    """``text`` in small red type centred above the axes, its bottom at ``y`` (axes units)."""
    ax.text(0.5, y, text, transform=ax.transAxes, ha="center", va="bottom", fontsize=7, color=WARNING_COLOUR)


def dev_curve_figure(curve: pd.DataFrame):
    """Dev R^2 against the training step, one line per head; None for an empty curve. A head that
    had not converged (:func:`not_converged`) is named in red under the title."""
    if curve.empty:
        return None
    fig, ax = figures.plt.subplots(figsize=(5.6, 3.6))
    groups = lr_groups(curve)
    for label, g in groups:
        ax.plot(g["step"], g["r2"], marker="o", ms=2, label=label or None)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("training step")
    ax.set_ylabel("dev R$^2$ (original rating scale)")
    unconverged = not_converged(curve)
    title = "valence head: dev R$^2$ during training"
    ax.set_title(title + ("\n" if unconverged else ""))
    if unconverged:
        heads = ", ".join(k for k in unconverged if k) or "the head"
        _warning_above(ax, f"NOT CONVERGED ({heads}): still improving at the last step; raise max_steps", 1.01)
    if len(groups) > 1:
        ax.legend(fontsize=7)
    return fig


def layer_weights_figure(layers: pd.DataFrame):
    """The learned softmax layer weights, bars per head, against the equal initial weights; None for
    a one-layer upstream, whose one weight is 1 by construction (:func:`layer_weights_markdown`)."""
    if layers.empty or figures.is_single_layer(layers["layer"]):
        return None
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


def layer_weights_markdown(layers: pd.DataFrame) -> str:
    """report.md's image of the layer weights, or the one line saying why a one-layer upstream has none."""
    if layers.empty or figures.is_single_layer(layers["layer"]):
        return "_No layer-weight figure: the upstream has a single layer, so its softmax weight is 1 by construction._"
    return "![layer weights](layer_weights.png)"


def rating_scale(preds: pd.DataFrame) -> tuple[float, float] | None:
    """(low, high) of the rating scale the predictions are on, when the table records it."""
    if not {"valence_low", "valence_high"} <= set(preds.columns) or preds.empty:
        return None
    return float(preds["valence_low"].iloc[0]), float(preds["valence_high"].iloc[0])


def outside_scale(preds: pd.DataFrame) -> int:
    """How many predictions lie outside the rating scale (0 when the scale is not recorded)."""
    scale = rating_scale(preds)
    if scale is None:
        return 0
    values = preds["predicted_valence"].to_numpy(dtype=float)
    return int(((values < scale[0]) | (values > scale[1])).sum())


def training_notes(curve: pd.DataFrame, preds: pd.DataFrame) -> list[str]:
    """report.md lines a reader must not miss: heads that had not converged, and per test how many
    predictions lie outside the rating scale. Empty when there is nothing to flag."""
    notes = [
        f"**Not converged{f' ({label})' if label else ''}:** {why}; the head's predictions come "
        "from a model still learning (raise `max_steps`)."
        for label, why in not_converged(curve).items()
    ]
    scale = rating_scale(preds)
    for test, g in preds.groupby("test", sort=False) if "test" in preds else []:
        n = outside_scale(g)
        if n:
            notes.append(
                f"**{test}: {n} of {len(g)} predictions lie outside the rating scale "
                f"[{scale[0]:g}, {scale[1]:g}]** (range {g['predicted_valence'].min():.1f} to "
                f"{g['predicted_valence'].max():.1f}): the head extrapolates on these clips."
            )
    return notes


def predictions_figure(preds: pd.DataFrame, row: pd.Series, d: float):
    """Predicted valence of X and Y of one test (all heads of the run pooled), titled with ``d``;
    ``row``: the test's results row (``test``, ``x_label``, ``y_label``). The rating scale (when the
    table records it) is shaded, and predictions outside it are drawn as red crosses and counted."""
    fig, ax = figures.plt.subplots(figsize=(4.2, 3.6))
    data = [preds.loc[preds["role"] == r, "predicted_valence"].to_numpy() for r in ("X", "Y")]
    scale = rating_scale(preds)
    if scale is not None:
        ax.axhspan(scale[0], scale[1], color="#e8f5e9", zorder=0, label=f"rating scale [{scale[0]:g}, {scale[1]:g}]")
        for end in scale:
            ax.axhline(end, color="#2e7d32", lw=0.8, ls="--", zorder=1)
    ax.boxplot(data)
    ax.set_xticks([1, 2], [f"X: {row['x_label']}", f"Y: {row['y_label']}"], fontsize=7)
    for k, values in enumerate(data, start=1):
        x = np.full(values.size, k) + np.linspace(-0.08, 0.08, values.size)
        out = np.zeros(values.size, bool) if scale is None else (values < scale[0]) | (values > scale[1])
        ax.scatter(x[~out], values[~out], s=8, alpha=0.6, zorder=3)
        if out.any():
            ax.scatter(
                x[out], values[out], s=18, marker="x", color=WARNING_COLOUR, zorder=4, label="outside the rating scale"
            )
    ax.set_ylabel("predicted valence (original scale)")
    n_heads = preds["lr"].nunique() if "lr" in preds else 1
    pooled = f", {n_heads} heads pooled" if n_heads > 1 else ""
    n_out = outside_scale(preds)
    ax.set_title(f"{row['test']}: Cohen's d = {d:.2f}{pooled}" + ("\n" if n_out else ""), fontsize=10)
    if n_out:
        _warning_above(ax, f"{n_out} of {len(preds)} predictions outside the rating scale", 1.0)
    if scale is not None:
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles))
        ax.legend(unique.values(), unique.keys(), fontsize=6, loc="best")
    return fig

"""The SpEAT paper's figures from a sweep's tables (matplotlib, Agg; PNG at 200 dpi).

Every figure draws a model in the same way: its family's colour (``figures.FAMILY_COLOURS``) and
a marker / line style that tells the models of one family apart, so the legend of one figure
reads for all of them.

* :func:`effect_sizes_figure` (Figure 1): d per test for every model, the mean over models and the human IAT D;
* :func:`propagation_figure` (Figure 2): SpEAT d vs. downstream Cohen's d, pooled and per learning rate;
* :func:`se_curves_figure` (Figure 3): bootstrap SE of d vs. number of stimuli with the mean curve;
* :func:`positive_heatmap` (appendix D): proportion of d > 0 per temporal x layer strategy;
* :func:`layer_lines_figure`: d at every single layer, one line per model, one panel per test
  (one-layer upstreams as markers at "features");
* :func:`significance_heatmap`: significant after correction / uncorrected only / not, per model x test;
* :func:`paper_comparison_figure`: this sweep's d against the paper's published d.

Each returns the matplotlib figure, or None when its table has no rows (the report then says why
there is no figure); nothing is written here. The run's writer saves them with :func:`save`
(``RunWriter.figure(stem, fig, save=paper_figures.save)``): 200 dpi, the tight box of the drawing,
and a demo run's caveat under everything drawn.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from speechbias.fileio.atomic_file import atomic_write  # noqa: E402
from speechbias.report import figures  # noqa: E402
from speechbias.results.sweep_results import model_order  # noqa: E402

DPI = 200
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
LINESTYLES = ("-", "--", "-.", ":")
MEAN_COLOUR = "#000000"
HUMAN_COLOUR = "#1E88E5"
CAVEAT_FONTSIZE = 6
CAVEAT_COLOUR = "#b00000"
SIGNIFICANCE_COLOURS = {"corrected": "#08306B", "uncorrected": "#6AAED6", "none": "#F7FBFF"}

plt.rcParams.update(
    {
        "font.size": 9,
        "axes.titlesize": 10,
        "axes.labelsize": 9,
        "legend.fontsize": 8,
        "xtick.labelsize": 8,
        "ytick.labelsize": 8,
        "axes.spines.top": False,
        "axes.spines.right": False,
    }
)


@dataclass(frozen=True)
class ModelStyle:
    colour: str
    marker: str
    linestyle: str
    family: str


def family_colour(family) -> str:
    """The family's colour; weight-free baselines without a family read as ``classical``."""
    family = str(family) if family is not None and str(family) not in ("", "nan", "other") else "classical"
    return figures.family_colour(family)


def model_styles(table: pd.DataFrame) -> dict[str, ModelStyle]:
    """upstream -> style: family colour; marker and line style numbered within the family."""
    styles, seen = {}, {}
    fam = dict(zip(table["upstream"].astype(str), table["family"].astype(str))) if "family" in table else {}
    for model in model_order(table):
        family = fam.get(model, "other")
        k = seen.get(family, 0)
        seen[family] = k + 1
        styles[model] = ModelStyle(
            family_colour(family), MARKERS[k % len(MARKERS)], LINESTYLES[k % len(LINESTYLES)], family
        )
    return styles


def test_label(test: str) -> str:
    """``european_african_american`` -> ``european / african american`` style labels for axes."""
    return str(test).replace("_", " ")


def _write_caveat_below(fig, caveat: str) -> None:
    """``caveat`` in small red type under everything drawn, as wide as the figure's content; the
    tight box of the saved PNG grows to hold it. (``figures.save(caveat=...)`` reserves a strip with
    ``tight_layout``, which squeezes these figures' outside legends and small heat maps.)"""
    box = fig.get_tightbbox(fig.canvas.get_renderer())  # inches
    fig_w, fig_h = fig.get_size_inches()
    chars = max(40, int(max(box.width, 3.0) * 72 / (CAVEAT_FONTSIZE * 0.55)))
    fig.text(
        (box.x0 + box.width / 2) / fig_w,
        (box.y0 - 0.06) / fig_h,
        "\n".join(textwrap.wrap(caveat, chars)),
        ha="center",
        va="top",
        fontsize=CAVEAT_FONTSIZE,
        color=CAVEAT_COLOUR,
    )


def save(fig, path: str | Path, caveat: str | None = None) -> Path:
    """Write ``fig`` as PNG (200 dpi, tight box) and close it, with ``caveat`` (the demo caveat) under
    everything drawn (the saved image grows to hold it). The signature of ``figures.save``, so a
    :class:`~speechbias.report.run_writer.RunWriter` saves these figures with it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if caveat:
        _write_caveat_below(fig, caveat)
    try:
        atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=DPI, bbox_inches="tight"))
    finally:
        plt.close(fig)
    return path


def _model_handle(style: ModelStyle, label: str, line: bool = False) -> Line2D:
    """A model's legend entry: its colour and marker, and its line style when ``line``."""
    linestyle = style.linestyle if line else "none"
    return Line2D([0], [0], color=style.colour, marker=style.marker, linestyle=linestyle, markersize=6, label=label)


def _points(ax, x, y, colour: str, marker: str, size: float, edge: float = 0.4, zorder: int = 3, **kwargs) -> None:
    """Markers of area ``size`` (points^2) with a white edge ``edge`` points wide, as every figure draws them."""
    ax.scatter(x, y, color=colour, marker=marker, s=size, edgecolors="white", linewidths=edge, zorder=zorder, **kwargs)


def effect_sizes_figure(table: pd.DataFrame, title: str = "", styles: dict | None = None) -> Figure | None:
    """Figure 1: one row per test; a marker per model (spread vertically in model order), the mean
    d over models (black diamond) and the human IAT D (blue triangle) where known."""
    if table.empty:
        return None
    styles = styles or model_styles(table)
    models = [m for m in styles if m in set(table["upstream"])]
    tests = list(dict.fromkeys(table["test"]))
    fig, ax = plt.subplots(figsize=(7.5, 0.9 + 0.75 * len(tests)))
    # first model (in legend order) at the top of each row
    offsets = np.linspace(0.3, -0.3, len(models)) if len(models) > 1 else np.zeros(1)
    offset = dict(zip(models, offsets))
    ypos = {t: len(tests) - 1 - i for i, t in enumerate(tests)}
    for m in models:
        rows = table[table["upstream"] == m]
        _points(ax, rows["d"], [ypos[t] + offset[m] for t in rows["test"]], styles[m].colour, styles[m].marker, 28)
    means = table.groupby("test", sort=False)["d"].mean()
    _points(ax, [means[t] for t in tests], [ypos[t] for t in tests], MEAN_COLOUR, "D", 90, edge=0.8, zorder=4)
    human = table.dropna(subset=["human_iat_d"]).drop_duplicates("test") if "human_iat_d" in table else table.iloc[:0]
    if len(human):
        human_d = human["human_iat_d"].astype(float)
        _points(ax, human_d, [ypos[t] for t in human["test"]], HUMAN_COLOUR, "v", 110, edge=0.8, zorder=5)
    for t in tests[1:]:
        ax.axhline(ypos[t] + 0.5, color="#cccccc", lw=0.6, zorder=0)
    ax.axvline(0, color="black", lw=0.8, zorder=1)
    lim = max(2.0, float(np.nanmax(np.abs(table["d"]))) * 1.05)
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-0.5, len(tests) - 0.5)
    ax.set_yticks([ypos[t] for t in tests], [test_label(t) for t in tests])
    ax.set_xlabel("effect size (SpEAT d; human IAT D)  —  > 0: X group associated with pleasant")
    ax.set_title(title or "SpEAT effect size d per bias test")
    handles = [_model_handle(styles[m], m) for m in models] + [
        Line2D([0], [0], marker="D", color=MEAN_COLOUR, linestyle="none", markersize=7, label="mean SpEAT d")
    ]
    if len(human):
        handles.append(
            Line2D([0], [0], marker="v", color=HUMAN_COLOUR, linestyle="none", markersize=8, label="human IAT D")
        )
    ax.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        frameon=False,
        ncol=1 if len(handles) <= 20 else 2,
    )
    return fig


def propagation_figure(prop: pd.DataFrame, agreement: pd.DataFrame, styles: dict | None = None) -> Figure | None:
    """Figure 2: SpEAT d (x) vs. Cohen's d of predicted valence (y), one panel for the pooled heads
    and one per learning rate, titled with the sign agreement count."""
    if prop.empty:
        return None
    styles = styles or model_styles(prop)
    lrs = list(dict.fromkeys(prop["lr"]))  # in table order: pooled first, then large to small
    tests = list(dict.fromkeys(prop["test"]))
    test_marker = {t: MARKERS[i % len(MARKERS)] for i, t in enumerate(tests)}
    n = len(lrs)
    fig, axes = plt.subplots(1, n, figsize=(3.3 * n + 1.8, 3.4), squeeze=False, sharex=True, sharey=True)
    lim_x = max(0.5, float(np.nanmax(np.abs(prop["speat_d"])))) * 1.1
    lim_y = max(0.5, float(np.nanmax(np.abs(prop["cohens_d"])))) * 1.1
    counts = {str(r.lr): (int(r.n_agree), int(r.n_total)) for r in agreement.itertuples()}
    for ax, lr in zip(axes[0], lrs):
        rows = prop[prop["lr"] == lr]
        for r in rows.itertuples():
            _points(ax, r.speat_d, r.cohens_d, styles[r.upstream].colour, test_marker[r.test], 30)
        ax.axhline(0, color="black", lw=0.8)
        ax.axvline(0, color="black", lw=0.8)
        ax.fill_between([0, lim_x], 0, lim_y, color="#e8f5e9", zorder=0)
        ax.fill_between([-lim_x, 0], -lim_y, 0, color="#e8f5e9", zorder=0)
        ax.set_xlim(-lim_x, lim_x)
        ax.set_ylim(-lim_y, lim_y)
        k, tot = counts.get(str(lr), (0, 0))
        head = "heads pooled" if lr == "pooled" else f"learning rate {lr}"
        ax.set_title(f"{head}\nsigns agree: {k} of {tot}")
        ax.set_xlabel("SpEAT d")
    axes[0][0].set_ylabel("Cohen's d of predicted valence (X vs. Y)")
    families = list(dict.fromkeys(s.family for m, s in styles.items() if m in set(prop["upstream"])))
    handles = [Patch(color=family_colour(f), label=f) for f in families] + [
        Line2D([0], [0], marker=test_marker[t], color="#555555", linestyle="none", label=test_label(t)) for t in tests
    ]
    axes[0][-1].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    return fig


def _se_columns(se: pd.DataFrame) -> tuple[str, str]:
    size = next((c for c in ("sizes", "size", "n", "n_stimuli", "n_targets") if c in se.columns), None)
    value = next((c for c in ("se", "standard_error", "stdev") if c in se.columns), None)
    if size is None or value is None:
        raise ValueError(
            f"se_curve tables need a size column (sizes|size|n) and an SE column (se); have {list(se.columns)}"
        )
    return size, value


# Figure 3's line pattern per bias test (the colour is the model's family), in order of appearance, repeated
# past eight tests
TEST_DASHES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (8, 2)), (0, (1, 3)), (0, (3, 1, 1, 1)))


def se_curves_figure(se: pd.DataFrame, styles: dict | None = None) -> Figure | None:
    """Figure 3: bootstrap SE of d vs. number of stimuli per target group; a thin line per model x
    test, in its family's colour and its test's pattern (both in the legend), and the mean over them in
    black."""
    if se.empty:
        return None
    size, value = _se_columns(se)
    styles = styles or (model_styles(se) if "upstream" in se.columns else {})
    tests = dict.fromkeys(se["test"]) if "test" in se.columns else {}
    dashes = {t: TEST_DASHES[k % len(TEST_DASHES)] for k, t in enumerate(tests)}
    fig, ax = plt.subplots(figsize=(7.6 if dashes else 6.0, 3.8))
    keys = [c for c in ("upstream", "test", "run_dir") if c in se.columns]
    for key, g in se.groupby(keys, sort=False):  # a list of keys: each group's key is a tuple
        row = dict(zip(keys, key))
        model = row.get("upstream")
        colour = styles[model].colour if model in styles else "#888888"
        ax.plot(g[size], g[value], color=colour, lw=0.9, alpha=0.45, linestyle=dashes.get(row.get("test"), "-"))
    mean = se.groupby(size)[value].mean()
    ax.plot(mean.index, mean.to_numpy(), color=MEAN_COLOUR, lw=2.6, label="mean over models and tests")
    ax.set_xlabel("number of stimuli per target group")
    ax.set_ylabel("bootstrap standard error of d")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    shown = set(se["upstream"]) if "upstream" in se.columns else set()
    families = list(dict.fromkeys(s.family for m, s in styles.items() if m in shown))
    handles = [Line2D([0], [0], color=MEAN_COLOUR, lw=2.6, label="mean")] + [
        Line2D([0], [0], color=family_colour(f), lw=1.2, label=f) for f in families
    ]
    handles += [Line2D([0], [0], color="#555555", lw=1.2, linestyle=d, label=f"test: {t}") for t, d in dashes.items()]
    if dashes:  # beside the axes: the tests' entries would cover the curves
        ax.legend(handles=handles, frameon=False, loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    else:
        ax.legend(handles=handles, frameon=False, loc="upper right")
    ax.set_title("Standard error of SpEAT d vs. number of stimuli")
    return fig


def _cell_values(ax, values: np.ndarray, fontsize: float, on_dark) -> None:
    """Each finite cell of ``values`` (rows x columns, as ``imshow`` draws them) written as ``0.00`` at its
    centre: white where ``on_dark(i, j)``, else black."""
    for (i, j), v in np.ndenumerate(values):
        if np.isfinite(v):
            colour = "white" if on_dark(i, j) else "black"
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=fontsize, color=colour)


def positive_heatmap(pivot: pd.DataFrame, n_results: int | None = None) -> Figure | None:
    """Appendix D: proportion of positive d, rows = layer strategy, columns = temporal strategy; None
    for fewer than two strategies (one cell compares nothing: report.md gives the number instead)."""
    if pivot.size < 2 or int(np.isfinite(pivot.to_numpy(dtype=float)).sum()) < 2:
        return None
    fig, ax = plt.subplots(figsize=(max(4.6, 1.8 + 1.1 * pivot.shape[1]), max(2.6, 1.0 + 0.38 * pivot.shape[0])))
    values = pivot.to_numpy(dtype=float)
    im = ax.imshow(values, cmap="RdBu", vmin=0, vmax=1, aspect="auto")
    _cell_values(ax, values, 8, on_dark=lambda i, j: abs(values[i, j] - 0.5) > 0.3)
    ax.set_xticks(range(pivot.shape[1]), list(pivot.columns))
    ax.set_yticks(range(pivot.shape[0]), list(pivot.index))
    ax.set_xlabel("temporal aggregation (over frames)")
    ax.set_ylabel("layer aggregation")
    sub = f"\n({n_results} model x test results per strategy)" if n_results else ""
    ax.set_title("Proportion of d > 0 per aggregation strategy" + sub)
    fig.colorbar(im, ax=ax, label="proportion of d > 0", fraction=0.08)
    return fig


FEATURES_X = -1.0  # where one-layer upstreams (fbank, mfcc) sit, left of layer 0
FEATURES_WIDTH = 0.6  # their markers are spread over this width so that equal d values stay visible


def _layer_axis_label(data: pd.DataFrame) -> str:
    """The x label of the multi-layer models in ``data``: what layer 0 is under their layer convention
    (by family, :func:`figures.family_layer_convention`); several conventions are each named."""
    families = data.drop_duplicates("upstream")["family"] if "family" in data else pd.Series(["other"])
    conventions = sorted({figures.family_layer_convention(f) for f in families} - {figures.SINGLE_LAYER_CONVENTION})
    if len(conventions) == 1:
        return figures.LAYER_AXIS_LABELS.get(conventions[0], figures.GENERIC_LAYER_AXIS_LABEL)
    return "layer (" + "; ".join(f"{c}: {figures.LAYER_AXIS_LABELS.get(c, c)}" for c in conventions) + ")"


def layer_lines_figure(layers: pd.DataFrame, temporal: str = "mean", styles: dict | None = None) -> Figure | None:
    """d at every single layer: one line per multi-layer model, one panel per test; the x label says
    what layer 0 is (the models' layer convention). One-layer upstreams (fbank, mfcc) are markers at
    "features", left of layer 0, spread sideways so that equal d values do not hide each other. None
    when no model has several layers (their one d per test is Figure 1's)."""
    if layers.empty:
        return None
    data = (
        layers[layers["temporal"] == temporal]
        if "temporal" in layers and temporal in set(layers["temporal"])
        else layers
    )
    data = data.drop_duplicates(["upstream", "test", "layer"])
    depth = data.groupby("upstream")["layer"].nunique()
    single = [m for m in depth.index if depth[m] == 1 and set(data.loc[data["upstream"] == m, "layer"]) == {0}]
    multi = data[~data["upstream"].isin(single)]
    if multi.empty:
        return None
    styles = styles or model_styles(data)
    tests = list(dict.fromkeys(data["test"]))
    ncols = min(3, len(tests))
    nrows = math.ceil(len(tests) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols, 2.7 * nrows + 0.7), squeeze=False, sharey=True)
    lim = max(1.0, float(np.nanmax(np.abs(data["d"]))) * 1.05)
    single_models = [m for m in styles if m in single]
    offsets = dict(
        zip(
            single_models,
            np.linspace(-FEATURES_WIDTH / 2, FEATURES_WIDTH / 2, len(single_models))
            if len(single_models) > 1
            else [0.0],
        )
    )
    numbers = sorted({int(v) for v in multi["layer"]})
    for ax, t in zip(axes.flat, tests):
        rows = data[data["test"] == t]
        for m in [m for m in styles if m in set(rows["upstream"])]:
            s = styles[m]
            g = rows[rows["upstream"] == m].sort_values("layer")
            if m in offsets:
                ax.plot(
                    [FEATURES_X + offsets[m]],
                    g["d"].to_numpy()[:1],
                    color=s.colour,
                    marker=s.marker,
                    ms=5,
                    linestyle="none",
                    markeredgecolor="white",
                    markeredgewidth=0.5,
                )
                continue
            ax.plot(
                g["layer"],
                g["d"],
                color=s.colour,
                linestyle=s.linestyle,
                marker=s.marker,
                ms=3.5,
                lw=1.1,
                markevery=max(1, len(g) // 8),
            )
        ax.axhline(0, color="black", lw=0.7)
        ax.set_ylim(-lim, lim)
        ax.set_title(test_label(t))
        figures.layer_axis(ax, numbers, figures.HF_LAYER_CONVENTION)
        ax.set_xlabel("")
        if single_models:
            ticks = [FEATURES_X] + [int(v) for v in ax.get_xticks() if 0 <= v <= numbers[-1]]
            ax.set_xticks(ticks, ["features"] + [str(v) for v in ticks[1:]])
            ax.axvline(-0.5, color="#bbbbbb", lw=0.6, ls=":")
            ax.set_xlim(FEATURES_X - FEATURES_WIDTH / 2 - 0.3, numbers[-1] + 0.5)
    fig.supxlabel(_layer_axis_label(multi) + ("; features: one-layer upstreams" if single_models else ""), fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("SpEAT d")
    for ax in list(axes.flat)[len(tests) :]:
        ax.axis("off")
    models = [m for m in styles if m in set(data["upstream"])]
    handles = [_model_handle(styles[m], f"{m} (one layer)" if m in offsets else m, m not in offsets) for m in models]
    fig.legend(
        handles=handles,
        loc="lower center",
        frameon=False,
        ncol=min(4, len(models)),
        bbox_to_anchor=(0.5, -0.06 - 0.035 * math.ceil(len(models) / 4)),
    )
    fig.suptitle(f"SpEAT d at every layer (temporal {temporal})")
    fig.tight_layout()
    return fig


def significance_heatmap(
    table: pd.DataFrame, alpha: float = 0.05, method: str = "bonferroni", styles: dict | None = None
) -> Figure | None:
    """Rows = tests, columns = models; colour = significant after correction / uncorrected only / not;
    each cell shows d."""
    if table.empty:
        return None
    models = [m for m in (styles or model_styles(table)) if m in set(table["upstream"])]
    tests = list(dict.fromkeys(table["test"]))
    levels = list(SIGNIFICANCE_COLOURS)
    grid = np.full((len(tests), len(models)), np.nan)
    d = np.full_like(grid, np.nan)
    for r in table.itertuples():
        i, j = tests.index(r.test), models.index(r.upstream)
        grid[i, j] = levels.index(r.significance)
        d[i, j] = r.d
    fig, ax = plt.subplots(figsize=(1.8 + 0.62 * len(models), 0.9 + 0.45 * len(tests)))
    ax.imshow(
        np.ma.masked_invalid(grid),
        cmap=ListedColormap([SIGNIFICANCE_COLOURS[v] for v in levels]),
        vmin=-0.5,
        vmax=len(levels) - 0.5,
        aspect="auto",
    )
    _cell_values(ax, d, 7, on_dark=lambda i, j: grid[i, j] == 0)
    ax.set_xticks(np.arange(len(models) + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(len(tests) + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="black", lw=0.5)
    ax.tick_params(which="minor", length=0)
    ax.set_xticks(range(len(models)), models, rotation=40, ha="right")
    colours = styles or model_styles(table)
    for lab in ax.get_xticklabels():
        lab.set_color(colours[lab.get_text()].colour)
    ax.set_yticks(range(len(tests)), [test_label(t) for t in tests])
    ax.set_xlabel("model (label colour = family)")
    ax.set_ylabel("bias test")
    ax.set_title(f"One-sided permutation test, alpha = {alpha} (cells: d)")
    names = {
        "corrected": f"significant after {method.capitalize()} correction",
        "uncorrected": "significant uncorrected only",
        "none": "not significant",
    }
    ax.legend(
        handles=[Patch(facecolor=SIGNIFICANCE_COLOURS[v], edgecolor="black", label=names[v]) for v in levels],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        frameon=False,
    )
    return fig


def paper_comparison_figure(comparison: pd.DataFrame, styles: dict | None = None) -> Figure | None:
    """This sweep's d (y) against the paper's published d (x), one marker per model (family colour)
    and test; the diagonal is perfect reproduction."""
    if comparison.empty:
        return None
    table = comparison if "family" in comparison.columns else comparison.assign(family="other")
    styles = styles or model_styles(table)
    fig, ax = plt.subplots(figsize=(5.6, 4.4))
    lim = max(1.0, float(np.nanmax(np.abs(comparison[["d", "paper_d"]].to_numpy(float))))) * 1.1
    ax.plot([-lim, lim], [-lim, lim], color="#888888", lw=0.8, linestyle="--", label="d = paper d")
    for m in [m for m in styles if m in set(table["upstream"])]:
        g = table[table["upstream"] == m]
        _points(ax, g["paper_d"], g["d"], styles[m].colour, styles[m].marker, 30, label=m)
    ax.axhline(0, color="black", lw=0.6)
    ax.axvline(0, color="black", lw=0.6)
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_aspect("equal")
    ax.set_xlabel("paper's published SpEAT d")
    ax.set_ylabel("this sweep's SpEAT d")
    n = len(comparison)
    mad = float(np.mean(np.abs(comparison["d_minus_paper"].astype(float))))
    ax.set_title(f"Reproduction check: {n} model x test pairs, mean |difference| = {mad:.3f}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    return fig

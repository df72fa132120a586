"""Matplotlib figures shared by the reports (Agg backend, labelled axes, family colours).

Plotting functions return figures; :func:`save` (used by ``RunWriter.figure``) lays one out, adds a
demo run's caveat and writes it. Matplotlib is imported at the first figure (:func:`pyplot`; ``figures.plt``
is the same module), not with this module: its text helpers serve runs that draw nothing (a one-layer
upstream's report), and importing pyplot costs ~0.5 s. The SpEAT helpers take the layer table as row dicts
(or a DataFrame) and import no pandas.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from speechbias.fileio.atomic_file import atomic_write
from speechbias.report.run_writer import Table, table_rows

# one colour per model family, used by every figure so families read the same everywhere
FAMILY_COLOURS = {
    "wav2vec2": "#1f77b4",
    "hubert": "#ff7f0e",
    "wavlm": "#2ca02c",
    "whisper": "#d62728",
    "classical": "#7f7f7f",
    "s3prl": "#9467bd",
    "tiny": "#8c564b",
}


_backend_selected = False


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (selected at the first call, as importing this module did)."""
    global _backend_selected
    import matplotlib

    if not _backend_selected:
        matplotlib.use("Agg")
        _backend_selected = True
    import matplotlib.pyplot as plt

    return plt


def __getattr__(name: str):
    # ``figures.plt`` / ``from speechbias.report.figures import plt``: pyplot, imported on first use
    if name == "plt":
        return pyplot()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def family_colour(family: str | None) -> str:
    return FAMILY_COLOURS.get(str(family), "#17becf")


def save(fig, path: str | Path, caveat: str | None = None) -> Path:
    """Lay out, write (150 dpi) and close ``fig``; ``caveat`` (e.g. ``report.caveat.DEMO_CAVEAT``) is
    written along the bottom edge, in a strip the layout leaves free."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if caveat:
        fig.tight_layout(rect=(0, 0.06, 1, 1))
        fig.text(0.5, 0.01, caveat, ha="center", va="bottom", fontsize=6, color="#b00000", wrap=True)
    else:
        fig.tight_layout()
    try:
        atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=150))  # the suffix of tmp is path's: .png
    finally:
        pyplot().close(fig)
    return path


# x-axis label of a layer profile by the upstream's layer convention (``fingerprint_fields()``)
LAYER_AXIS_LABELS = {
    "block-io-v1": "layer (0 = input to the first transformer block, l = output of block l)",
    "s3prl-native": "layer (index into the s3prl upstream's hidden states)",
}
GENERIC_LAYER_AXIS_LABEL = "layer (0 = the first hidden state the upstream returns)"
SINGLE_LAYER_CONVENTION = "single-layer"


# the layer convention of an upstream by its family, for tables that carry the family only (a sweep's
# layers.csv): every Hugging Face family adapter records block-io-v1 (upstream/block_states.py)
FAMILY_LAYER_CONVENTION = {"classical": SINGLE_LAYER_CONVENTION, "s3prl": "s3prl-native"}
HF_LAYER_CONVENTION = "block-io-v1"


def family_layer_convention(family: str | None) -> str:
    """The layer convention of an upstream of ``family`` (``single-layer``, ``s3prl-native`` or ``block-io-v1``)."""
    return FAMILY_LAYER_CONVENTION.get(str(family), HF_LAYER_CONVENTION)


def is_single_layer(layer_numbers, layer_convention: str | None = None) -> bool:
    """True for an upstream with one layer (its feature vector): fbank, mfcc."""
    return layer_convention == SINGLE_LAYER_CONVENTION or sorted({int(v) for v in layer_numbers}) == [0]


def single_layer_note(upstream: str) -> str:
    """The one line report.md gives instead of a per-layer figure of a one-layer upstream."""
    return (
        f"_No layer figure: {upstream or 'this upstream'} has a single layer (its feature vector), so its d "
        "at every layer is the one d above._"
    )


def layer_profile(layers: Table, title: str, layer_convention: str | None = None):
    """SpEAT d at every single layer (row dicts or a DataFrame), as a matplotlib figure (the caller saves
    it, e.g. ``RunWriter.figure``, which adds a demo run's caveat): one line per upstream (column
    ``upstream``, in the order of its first row), x = layer index; None for a one-layer upstream (:func:`is_single_layer`: fbank,
    mfcc), whose one point would only repeat its d (report.md says so: :func:`single_layer_note`).

    Ticks sit on whole layers only. When ``layers`` has ``n_permutations`` (and ``exact``), the
    subtitle says what the per-layer p values came from.
    """
    rows = table_rows(layers)
    if not rows or is_single_layer([r["layer"] for r in rows], layer_convention):
        return None
    fig, ax = pyplot().subplots(figsize=(6.4, 3.6))
    has_upstream = "upstream" in rows[0]
    groups: dict = {}
    for r in rows:
        groups.setdefault(r["upstream"] if has_upstream else "", []).append(r)
    layer_axis(ax, [r["layer"] for r in rows], layer_convention)
    for name, g in groups.items():
        colour = family_colour(g[0]["family"]) if "family" in g[0] else None
        ax.plot([r["layer"] for r in g], [r["d"] for r in g], marker="o", ms=3, label=str(name) or None, color=colour)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_ylabel("SpEAT effect size d")
    permutations = permutation_note(layers)
    ax.set_title(title + (f"\n{permutations}" if permutations else ""), fontsize=10)
    if has_upstream and len(groups) > 1:
        ax.legend(fontsize=7, ncol=2)
    return fig


def layer_axis(ax, layer_numbers, layer_convention: str | None = None) -> bool:
    """Ticks on whole layers and an x label that says what layer 0 is; returns True for a
    single-layer upstream (``layer_convention == "single-layer"`` or only layer 0), whose one tick
    reads "the features (one layer)" and whose label says there are no network layers."""
    numbers = sorted({int(v) for v in layer_numbers})
    if is_single_layer(numbers, layer_convention):
        ax.set_xlim(-1, 1)
        ax.set_xticks([0], ["the features (one layer)"])
        ax.set_xlabel("single-layer upstream: layer 0 is the feature vector itself")
        return True
    if len(numbers) <= 32:
        ax.set_xticks(numbers)
    else:
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(LAYER_AXIS_LABELS.get(str(layer_convention), GENERIC_LAYER_AXIS_LABEL))
    return False


def sampled_p_floor_note(layers: Table, run_p: float) -> str:
    """Why a sampled per-layer p can exceed the run's p at the same d: a p from n random permutations
    counts the observed split as one of them, (1 + #{T >= T_obs}) / (1 + n), so it is never below
    1 / (1 + n). Empty unless some layer's sampled p sits at that floor above ``run_p``."""
    rows = table_rows(layers)
    if not rows or not {"n_permutations", "exact", "p"} <= set(rows[0]):
        return ""
    sampled = [r for r in rows if not bool(r["exact"])]
    floors = [1.0 / (1.0 + float(r["n_permutations"])) for r in sampled]
    at_floor = [
        (r, floor) for r, floor in zip(sampled, floors) if np.isclose(float(r["p"]), floor, rtol=1e-9, atol=0.0)
    ]
    if not at_floor or not run_p < min(floor for _, floor in at_floor):
        return ""
    n = int(max(r["n_permutations"] for r, _ in at_floor))
    return (
        f"A p from {n:,} random permutations is never below 1 / ({n:,} + 1) = {1 / (n + 1):.2g} (the observed "
        "split counts as one of them): a layer p at that floor means no permutation reached its d, and "
        f"the run's p ({run_p:.3g}) is the finer figure"
    )


def permutation_note(layers: Table) -> str:
    """What the per-layer p values of ``layers`` came from: ``p per layer: one-sided, 10,000 random
    permutations`` or ``p per layer: one-sided, exact over all 184,756 partitions`` (empty when the
    table has no ``n_permutations``)."""
    rows = table_rows(layers)
    if not rows or "n_permutations" not in rows[0]:
        return ""
    counts = "/".join(f"{c:,}" for c in sorted({int(r["n_permutations"]) for r in rows}))
    if "exact" in rows[0] and all(bool(r["exact"]) for r in rows):
        return f"p per layer: one-sided, exact over all {counts} partitions"
    return f"p per layer: one-sided, {counts} random permutations"

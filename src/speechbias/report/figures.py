"""Matplotlib figures shared by the reports (Agg backend, labelled axes, family colours)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

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
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path


def layer_profile(layers: pd.DataFrame, title: str, path: str | Path) -> Path:
    """SpEAT d at every single layer: one line per upstream (column ``upstream``), x = layer index."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    groups = layers.groupby("upstream") if "upstream" in layers.columns else [("", layers)]
    for name, g in groups:
        colour = family_colour(g["family"].iloc[0]) if "family" in g.columns else None
        ax.plot(g["layer"], g["d"], marker="o", ms=3, label=str(name) or None, color=colour)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("layer (0 = input to first transformer block)")
    ax.set_ylabel("SpEAT effect size d")
    ax.set_title(title)
    if len(layers.get("upstream", pd.Series(dtype=str)).unique()) > 1:
        ax.legend(fontsize=7, ncol=2)
    return save(fig, path)

"""The demo caveat: one sentence, written on every console summary, report.md and figure of a demo run.

Runs on the shipped synthetic data (espeak-ng voices, made-up labels) and tiny random or weight-free
models check the plumbing only. Every task that can run on such data says so in the same words.
"""

from __future__ import annotations

DEMO_CAVEAT = ("DEMO: synthetic stimuli (espeak-ng voices) and tiny or weight-free models - "
               "these numbers check the plumbing and are not findings about any model or group.")


def markdown_caveat(caveat: str = DEMO_CAVEAT) -> str:
    """The caveat as a bold report.md paragraph."""
    return f"**{caveat}**"


def stamp_caveat(fig, caveat: str = DEMO_CAVEAT) -> None:
    """Write the caveat along the bottom edge of a matplotlib figure (call before saving).

    Reserves a strip at the bottom so the text never overlaps axes labels after ``tight_layout``.
    """
    fig.subplots_adjust(bottom=max(fig.subplotpars.bottom, 0.18))
    fig.text(0.5, 0.01, caveat, ha="center", va="bottom", fontsize=6, color="#b00000", wrap=True)

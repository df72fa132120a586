"""Attribute stimuli: pleasant (A) and unpleasant (B) clips chosen by rated valence within each actor.

* MESS (US tests): the 10 highest- and 10 lowest-valence clips of each of the 6 actors -> 60/60.
* EU-Emotion (UK tests): among semantically neutral sentences, the 3 highest and 3 lowest of
  each of the 18 actors -> 54/54.

Ties in valence are broken by a random ordering of the clips: ``rng`` (selection=ours), or
:func:`paper_order`, the SpEAT authors' ordering (selection=paper).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from speechbias.stimuli.selection.matching import poles_within, shuffled
from speechbias.stimuli.selection.result import Selection, label

PAPER_TIE_BREAK_SEED = 431137  # seed of the authors' random row order before ranking valence


def paper_order(df: pd.DataFrame, seed: int = PAPER_TIE_BREAK_SEED) -> pd.DataFrame:
    """``df`` in the order ``DataFrame.sample(frac=1)`` gives after ``numpy.random.seed(seed)``.

    Reproduces the authors' tie-breaking when ``df`` lists the clips in the ratings table's order.
    """
    return df.iloc[np.random.RandomState(seed).choice(len(df), size=len(df), replace=False)]


def valence_poles(pool: pd.DataFrame, per_speaker: int, order: pd.DataFrame, source: str) -> Selection:
    """A = ``per_speaker`` highest-valence clips per actor, B = the same number of lowest."""
    low, high = poles_within(pool, "speaker", "valence", per_speaker, order=order)
    a, b = pool.loc[high], pool.loc[low]
    clips = pd.concat(
        [label(a, "A", "pleasant", a["speaker"]), label(b, "B", "unpleasant", b["speaker"])], ignore_index=True
    )
    return Selection(
        clips,
        f"{source}: the {per_speaker} highest- and {per_speaker} lowest-valence clips of each "
        f"of {pool['speaker'].nunique()} actors",
        pool=pool,
    )


def mess_attributes(mess: pd.DataFrame, rng: np.random.Generator | None, per_speaker: int = 10) -> Selection:
    """MESS pleasant/unpleasant clips; ``rng`` None means the paper's tie-breaking order."""
    order = paper_order(mess) if rng is None else shuffled(mess, rng)
    return valence_poles(mess, per_speaker, order, "Morgan Emotional Speech Set")


def eu_emotion_attributes(eu: pd.DataFrame, rng: np.random.Generator | None, per_speaker: int = 3) -> Selection:
    """EU-Emotion pleasant/unpleasant semantically neutral clips; ``rng`` None means the paper's order."""
    pool = eu[eu["semantically_neutral"]]
    order = paper_order(pool) if rng is None else shuffled(pool, rng)
    return valence_poles(pool, per_speaker, order, "EU-Emotion Stimulus Set (semantically neutral sentences)")

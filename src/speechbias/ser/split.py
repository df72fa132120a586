"""Seeded train/dev split of a valence set: random clips, or whole speakers held out."""

from __future__ import annotations

import numpy as np


def dev_split(speakers, fraction: float = 0.125, seed: int = 0, speaker_disjoint: bool = False) -> np.ndarray:
    """Boolean mask (N,) of dev clips.

    Random (default): exactly ``round(N * fraction)`` clips (at least 1, at most N - 1), drawn
    with ``numpy.random.default_rng(seed)`` (the paper holds out 1/8 of clips).
    Speaker-disjoint: speakers in a seeded random order are moved to dev until dev holds at least
    ``fraction`` of the clips; at least one speaker stays in training. No speaker is in both sets.
    """
    speakers = np.asarray(speakers).astype(str)
    n = speakers.shape[0]
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"dev fraction must be in (0, 1), got {fraction}")
    if n < 2:
        raise ValueError(f"a train/dev split needs at least 2 clips, got {n}")
    rng = np.random.default_rng(seed)
    mask = np.zeros(n, dtype=bool)
    if not speaker_disjoint:
        n_dev = min(max(1, round(n * fraction)), n - 1)
        mask[rng.permutation(n)[:n_dev]] = True
        return mask
    unique = np.unique(speakers)
    if unique.size < 2:
        raise ValueError(f"a speaker-disjoint split needs at least 2 speakers, got {unique.tolist()}")
    target = fraction * n
    for speaker in rng.permutation(unique)[:-1]:  # the last speaker in the order always trains
        mask |= speakers == speaker
        if mask.sum() >= target:
            break
    return mask

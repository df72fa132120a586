"""Simulated word-error data with known group WERs and speaker random intercepts (shared by GLMM tests)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def simulate_errors(
    group_wers, speakers_per_group, utts_per_speaker=(5, 20), sigma=0.5, seed=0, words=(3, 20), covariate_effect=None
) -> pd.DataFrame:
    """One row per utterance: group, speaker, words, errors (+ covariate x when ``covariate_effect``).

    errors ~ Poisson(words * wer_group * exp(r_speaker + beta x)), r ~ N(0, sigma^2).
    """
    rng = np.random.default_rng(seed)
    rows = []
    for g, wer in enumerate(group_wers):
        for s in range(speakers_per_group):
            r = rng.normal(0.0, sigma)
            n = int(rng.integers(utts_per_speaker[0], utts_per_speaker[1] + 1))
            w = rng.integers(words[0], words[1] + 1, size=n)
            x = rng.normal(size=n)
            lin = np.log(wer) + r + (covariate_effect * x if covariate_effect is not None else 0.0)
            e = rng.poisson(w * np.exp(lin))
            for k in range(n):
                rows.append(
                    {
                        "group": f"g{g}",
                        "speaker": f"g{g}s{s:03d}",
                        "words": int(w[k]),
                        "errors": int(e[k]),
                        "x": float(x[k]),
                    }
                )
    return pd.DataFrame(rows)

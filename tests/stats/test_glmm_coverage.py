"""Coverage of the speaker-bootstrap 95% CIs of WER ratios over repeated simulations (marker: slow).

Sizes (chosen to finish in ~2-3 min on 2 cores): 40 simulated corpora, each with 3 groups x 16
speakers x 8-20 utterances, speaker SD 0.5, true WERs 0.08 / 0.10 / 0.16; 1,000 speaker
resamples per corpus (the analysis default); 3 pairwise ratios per corpus -> 120 interval checks.
A percentile cluster bootstrap with 16 clusters per group undercovers slightly; intervals that
ignored the speaker clustering cover ~50-70% here. Accepted range: [0.87, 0.99].
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from glmm_sim import simulate_errors  # noqa: E402

from speechbias.stats.glmm import bootstrap_wer_ratios  # noqa: E402

TRUE_WERS = [0.08, 0.10, 0.16]
N_SIMULATIONS = 40
N_RESAMPLES = 1000


@pytest.mark.slow
def test_speaker_bootstrap_ci_coverage_near_95_percent():
    covered = []
    for sim in range(N_SIMULATIONS):
        df = simulate_errors(TRUE_WERS, speakers_per_group=16, utts_per_speaker=(8, 20), sigma=0.5, seed=1000 + sim)
        boot = bootstrap_wer_ratios(df.errors, df.words, df.group, df.speaker, n_resamples=N_RESAMPLES, seed=sim)
        assert boot.n_failed == 0
        t = boot.table.set_index(["group_a", "group_b"])
        for (ia, a), (ib, b) in itertools.combinations(enumerate(["g0", "g1", "g2"]), 2):
            truth = TRUE_WERS[ia] / TRUE_WERS[ib]
            covered.append(t.loc[(a, b), "ci_low"] <= truth <= t.loc[(a, b), "ci_high"])
    coverage = float(np.mean(covered))
    print(f"coverage {coverage:.3f} over {len(covered)} intervals ({N_SIMULATIONS} corpora x 3 pairs)")
    assert 0.87 <= coverage <= 0.99, coverage
    assert not math.isnan(coverage)

"""What a SpEAT run computes (``speat.*``; light: no pandas, no torch).

:class:`SpeatSettings` is the ``speat`` node of a run (conf/task/speat.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass

# permutations of each per-layer p (the run's own p uses speat.n_permutations); exact when a test
# has at most this many partitions
PER_LAYER_PERMUTATIONS = 10_000


@dataclass
class SpeatSettings:
    """What a SpEAT run computes (``speat.*`` of conf/evaluate.yaml).

    n_permutations: permutations of the run's one-sided p (exact when the test has at most this
        many partitions). per_layer: also d and p at every single layer (``layers.csv``, at most
        ``PER_LAYER_PERMUTATIONS`` permutations each). se_curve: bootstrap SE of d vs. number of
        target stimuli (``se_curve.csv``) with ``n_resamples`` resamples per size.
    """

    n_permutations: int = 1_000_000
    per_layer: bool = True
    se_curve: bool = False
    n_resamples: int = 10_000

    def __post_init__(self):
        self.n_permutations, self.n_resamples = int(self.n_permutations), int(self.n_resamples)
        self.per_layer, self.se_curve = bool(self.per_layer), bool(self.se_curve)

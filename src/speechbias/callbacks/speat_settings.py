"""What a SpEAT run computes (``speat.*``), and the statistics work they make (light: no pandas, no torch).

:class:`SpeatSettings` is the ``speat`` node of a run (conf/task/speat.yaml); :meth:`SpeatSettings.planned_draws`
is the random draws one test computes with them, as the statistics kernels' choice counts them
(:func:`speechbias.stats.kernel_choice.plan_draws`): what a SpEAT job declares for its process
(:class:`speechbias.callbacks.speat_results.SpeatResults`), and what benchmarks/stats_bench.py's workers
declare the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from speechbias.stats.bootstrap import resample_draws
from speechbias.stats.permutation import permutation_draws

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

    def planned_draws(self, n_x: int, n_y: int, n_layers: int, design: str = "iid") -> int:
        """The random draws of one test of ``n_x`` + ``n_y`` targets and ``n_layers`` layers with these
        settings, as the statistics kernels' choice counts them (:func:`speechbias.stats.kernel_choice.plan_draws`)."""
        draws = permutation_draws(n_x, n_y, self.n_permutations)
        if self.per_layer:
            draws += n_layers * permutation_draws(n_x, n_y, min(self.n_permutations, PER_LAYER_PERMUTATIONS))
        if self.se_curve:
            draws += resample_draws(n_x, n_y, self.n_resamples, design=design)
        return draws

"""What a SpEAT run computes: :class:`SpeatSettings`, the ``speat`` node of conf/evaluate.yaml, checked on
construction (:mod:`speechbias.checked_settings`; light: no pandas, no torch)."""

from __future__ import annotations

from dataclasses import dataclass

from speechbias.checked_settings import Settings, boolean, integer, setting

# permutations of each per-layer p (the run's own p uses speat.n_permutations); exact when a test
# has at most this many partitions
PER_LAYER_PERMUTATIONS = 10_000


@dataclass
class SpeatSettings(Settings):
    """``speat.*``. n_permutations: exact when the test has at most this many partitions. per_layer: d and p
    at every single layer (``layers.csv``, at most ``PER_LAYER_PERMUTATIONS`` permutations each). se_curve:
    the SE of d vs. number of target stimuli (``se_curve.csv``), ``n_resamples`` per size."""

    NODE = "speat"

    n_permutations: int = setting(integer(1), 1_000_000, "permutations of the one-sided p")
    per_layer: bool = setting(boolean(), True, "d and p at every layer")
    se_curve: bool = setting(boolean(), False, "bootstrap SE of d vs. number of stimuli")
    n_resamples: int = setting(integer(1), 10_000, "bootstrap resamples per size of the SE curve")

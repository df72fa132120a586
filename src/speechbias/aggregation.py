"""Temporal x layer aggregation of cached statistics -> one vector per clip.

Temporal: ``mean`` | ``min`` | ``max`` (which per-layer statistic over frames).
Layer, over the L kept states (index 0 = input to the first transformer block):
``sum`` | ``mean`` | ``min`` | ``max`` (elementwise over all layers) or a single layer:
first = 0, second = 1, q1 = L//4, q2 = L//2, q3 = 3L//4, penultimate = L-2, last = L-1.
The paper's main setting is temporal mean, layer sum.

Vectors come out as float64 (the statistics engine works in float64): ``sum`` and ``mean``
accumulate the float32 cached statistics in float64 (numpy casts block by block, no float32
partial sums; relative error below L x 1.1e-16), where a float32 sum over 33 layers was up to
8e-7 relative off (tests/core/test_statistics_aggregation.py). ``min``, ``max`` and single layers
are exact in any precision and are only cast.

numpy is imported where vectors are computed, not at module import: the entry points import this
module's names (speechbias.launch.aggregation_configs) before ``@hydra.main`` composes, and a ``--cfg job``
or a config error should not wait for numpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

TEMPORAL = ("mean", "min", "max")
LAYER_REDUCTIONS = ("sum", "mean", "min", "max")
LAYER_SELECTIONS = ("first", "second", "q1", "q2", "q3", "penultimate", "last")
LAYER_CHOICES = LAYER_REDUCTIONS + LAYER_SELECTIONS


def layer_index(layer: str, num_layers: int) -> int:
    """Index of a named single layer among ``num_layers`` kept states."""
    table = {
        "first": 0,
        "second": 1,
        "q1": num_layers // 4,
        "q2": num_layers // 2,
        "q3": 3 * num_layers // 4,
        "penultimate": num_layers - 2,
        "last": num_layers - 1,
    }
    if layer not in table:
        raise ValueError(f"layer selection must be one of {LAYER_SELECTIONS}, got {layer!r}")
    idx = table[layer]
    if not 0 <= idx < num_layers:
        raise ValueError(f"layer {layer!r} does not exist in a model with {num_layers} layer(s)")
    return idx


@dataclass(frozen=True)
class Aggregation:
    """A (temporal, layer) strategy, e.g. ``Aggregation("mean", "sum")``."""

    temporal: str = "mean"
    layer: str = "sum"

    def __post_init__(self):
        if self.temporal not in TEMPORAL:
            raise ValueError(f"temporal aggregation must be one of {TEMPORAL}, got {self.temporal!r}")
        if self.layer not in LAYER_CHOICES:
            raise ValueError(f"layer aggregation must be one of {LAYER_CHOICES}, got {self.layer!r}")

    @property
    def name(self) -> str:
        return f"{self.temporal}_{self.layer}"

    def __call__(self, per_layer: np.ndarray) -> np.ndarray:
        """(N, L, D) per-layer statistics of the chosen temporal kind -> (N, D) float64."""
        return aggregate_layers(per_layer, self.layer)


def aggregations_named(names) -> list[Aggregation]:
    """The strategies named ``<temporal>_<layer>`` (``mean_sum``, ``max_q3``), in the order given: the
    options a SpEAT job is given as a list (``aggregation=[mean_sum,max_q3]``); ValueError for another name."""
    out = []
    for name in names:
        temporal, _, layer = str(name).partition("_")
        out.append(Aggregation(temporal, layer))
    return out


def aggregate_layers(per_layer: np.ndarray, layer: str) -> np.ndarray:
    """Reduce or select over the layer axis of an (N, L, D) array -> (N, D) float64."""
    import numpy as np

    per_layer = np.asarray(per_layer)
    if per_layer.ndim != 3:
        raise ValueError(f"per-layer statistics must be (N, L, D), got shape {per_layer.shape}")
    if layer in ("sum", "mean"):
        return getattr(np, layer)(per_layer, axis=1, dtype=np.float64)
    if layer in LAYER_REDUCTIONS:
        return getattr(np, layer)(per_layer, axis=1).astype(np.float64)
    return per_layer[:, layer_index(layer, per_layer.shape[1]), :].astype(np.float64)

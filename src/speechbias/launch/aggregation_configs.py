"""The options of config group ``aggregation``: one ConfigStore node per temporal x layer strategy.

``register_aggregation_configs()`` stores ``aggregation/<temporal>_<layer>`` (3 x 11 = 33 options, e.g.
``mean_sum``, ``max_q3``), each ``{_target_: speechbias.aggregation.Aggregation, temporal, layer}``, so
``aggregation=max_q3``, the default ``aggregation: mean_sum`` and sweeps like
``aggregation=glob(*,exclude=*_sum)`` see them as if they were files of ``conf/aggregation/``.
It must run before Hydra composes: :mod:`speechbias.launch.entry` calls it on import (the entry points import
it before ``@hydra.main``), and tests/conftest.py does for tests that compose with Hydra's compose API.
Import-light: no numpy or torch.
"""

from __future__ import annotations

from hydra.core.config_store import ConfigStore

from speechbias.aggregation import LAYER_CHOICES, TEMPORAL, Aggregation

GROUP = "aggregation"
# the ConfigStore provider of the nodes this project stores (Hydra's own nodes have provider "hydra")
PROVIDER = "speechbias"
TARGET = f"{Aggregation.__module__}.{Aggregation.__qualname__}"


def aggregation_nodes() -> dict[str, dict[str, str]]:
    """``{"<temporal>_<layer>": {"_target_": ..., "temporal": ..., "layer": ...}}`` for every strategy,
    temporal-major in the order of ``aggregation.TEMPORAL`` x ``aggregation.LAYER_CHOICES``."""
    return {
        f"{temporal}_{layer}": {"_target_": TARGET, "temporal": temporal, "layer": layer}
        for temporal in TEMPORAL
        for layer in LAYER_CHOICES
    }


def register_aggregation_configs() -> None:
    """Store every node of :func:`aggregation_nodes` in Hydra's ConfigStore, group ``aggregation``
    (idempotent: storing again replaces the same nodes)."""
    store = ConfigStore.instance()
    for name, node in aggregation_nodes().items():
        store.store(group=GROUP, name=name, node=node, provider=PROVIDER)

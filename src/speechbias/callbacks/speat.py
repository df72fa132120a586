"""SpEAT after extraction: aggregate cached statistics, test association, write the results.

Runs in ``on_predict_end`` of the extraction loop (on global rank 0, after every rank has written
its cache entries), so the same code path serves a cold run and a DDP run: the statistics are those
the loop met (read once) plus, under DDP, the other ranks' clips from the shared cache. What it computes
and writes is :class:`speechbias.speat.results.SpeatResults` (also used, without a loop, by a
run whose clips are all cached). It writes through the run's :class:`~speechbias.report.run_writer.RunWriter`
(which pickles into spawned DDP workers as its folder); the task logs what the writer recorded to the
tracker afterwards.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import pytorch_lightning as pl
import torch

from speechbias.aggregation import Aggregation
from speechbias.speat.results import SpeatResults, speat_by_layer
from speechbias.speat.settings import PER_LAYER_PERMUTATIONS, SpeatSettings
from speechbias.features.cache import FeatureCache
from speechbias.features.cached_statistics import StackedStatistics
from speechbias.features.extraction import collected_statistics
from speechbias.report.run_writer import RunWriter

__all__ = ["PER_LAYER_PERMUTATIONS", "SpeatCallback", "SpeatSettings", "speat_by_layer"]

log = logging.getLogger(__name__)


class SpeatCallback(pl.Callback):
    """Computes SpEAT for one bias test and aggregation and writes the results through ``writer``.

    ``manifest``: the bias test's clips (rows in the order of the cached statistics) as columns
    (:meth:`~speechbias.stimuli.bias_test.BiasTest.load_columns`, or a DataFrame); ``fingerprint``:
    the upstream's (cache key); ``run_info``: the run's identity columns
    (:func:`speechbias.run_context.upstream_info`); ``layer_convention``: the upstream's, for the
    layer axis of the layer profile. After the loop,
    :attr:`summary` is the result row (None on ranks other than global zero, and in the parent process of
    a ``ddp_spawn`` run).
    """

    def __init__(
        self,
        bias_test,
        manifest: Mapping[str, Sequence],
        aggregation: Aggregation,
        cache: FeatureCache,
        fingerprint: str,
        writer: RunWriter,
        run_info: dict,
        settings: SpeatSettings | None = None,
        seed: int = 0,
        layer_convention: str | None = None,
    ):
        self.manifest = manifest
        self.cache = cache
        self.fingerprint = fingerprint
        self.results = SpeatResults(
            bias_test, manifest, aggregation, writer, run_info, settings, seed, layer_convention
        )
        self.summary: dict | None = None

    def on_predict_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # collective calls first: every rank has written its cache entries, forwards summed over ranks
        n_local = torch.tensor(float(getattr(pl_module, "n_forward_clips", 0)))
        n_forward = int(trainer.strategy.reduce(n_local, reduce_op="sum").item())
        trainer.strategy.barrier()
        if not trainer.is_global_zero:
            return
        self.results.run_info["n_upstream_forwards"] = n_forward
        statistics = collected_statistics(pl_module, list(self.manifest["path"]), self.cache, self.fingerprint)
        self.summary = self.compute(statistics)

    def compute(self, statistics: StackedStatistics) -> dict:
        """The result row of ``statistics`` (in the manifest's order), its files written."""
        return self.results.compute(statistics)

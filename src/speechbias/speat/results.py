"""SpEAT of one run from its clips' stacked statistics, written through the run's writer; no torch, no Lightning.

:class:`SpeatResults` aggregates (N, L, D) statistics, tests association, computes the optional statistics
whose flag is true (:mod:`speechbias.speat.optional_statistics`: d per layer, the SE curve, ...), and writes
results.csv/json, each optional statistic's table and report.md (:mod:`speechbias.report.speat_report`), for
each pair of a SpEAT job (:mod:`speechbias.tasks.speat_pairs`), from statistics read from the cache
(extracted first where it lacks them). Its tables are lists of row dicts: a SpEAT run imports no pandas.
"""

from __future__ import annotations

import logging

from collections.abc import Mapping, Sequence

import numpy as np

from speechbias import stats
from speechbias.aggregation import Aggregation
from speechbias.speat import optional_statistics, progress
from speechbias.speat.optional_statistics import PairInputs, manifest_column
from speechbias.speat.settings import SpeatSettings
from speechbias.features.cached_statistics import StackedStatistics
from speechbias.report import speat_report
from speechbias.report.run_writer import RunWriter
from speechbias.roles import split_roles

log = logging.getLogger(__name__)


class SpeatResults:
    """Computes SpEAT for one bias test and aggregation and writes the results through ``writer``.

    ``manifest``: the bias test's clips (rows in the order of the statistics given to :meth:`compute`) as
    columns: ``{column: values}`` (:meth:`~speechbias.stimuli.bias_test.BiasTest.load_columns`) or a
    DataFrame; ``role`` is read, and ``pair_id`` / ``stratum`` for a paired / stratified SE curve;
    ``run_info``: the run's identity columns (:func:`speechbias.run_context.upstream_info`, plus
    ``n_upstream_forwards``); ``layer_convention``: the upstream's, for the layer axis of the layer profile.
    """

    def __init__(
        self,
        bias_test,
        manifest: Mapping[str, Sequence],
        aggregation: Aggregation,
        writer: RunWriter,
        run_info: dict,
        settings: SpeatSettings | None = None,
        seed: int = 0,
        layer_convention: str | None = None,
    ):
        self.bias_test = bias_test
        self.manifest = manifest
        self.aggregation = aggregation
        self.writer = writer
        self.run_info = dict(run_info)
        self.settings = settings or SpeatSettings()
        self.seed = int(seed)
        self.layer_convention = layer_convention

    def compute(self, statistics: StackedStatistics) -> dict:
        """The run's result row (results.csv), after its files are written; each optional statistic whose
        flag is true (:data:`~speechbias.speat.optional_statistics.OPTIONAL_STATISTICS`) computed and written."""
        optional = optional_statistics.chosen(self.settings)
        for statistic in optional:  # before any statistic (a built manifest was not checked before the run)
            if statistic.check is not None:
                statistic.check(self.manifest, self.bias_test)
        roles = manifest_column(self.manifest, "role")
        per_layer = statistics.stat(self.aggregation.temporal)
        emb = self.aggregation(per_layer)
        parts = split_roles(emb, roles)
        with progress.step(f"SpEAT permutation test ({self.settings.n_permutations:,} permutations)"):
            res = stats.speat(
                parts["X"],
                parts["Y"],
                parts["A"],
                parts["B"],
                n_permutations=self.settings.n_permutations,
                seed=self.seed,
            )
        row = {
            **self.run_info,
            "test": self.bias_test.name,
            "aggregation": self.aggregation.name,
            "temporal": self.aggregation.temporal,
            "layer": self.aggregation.layer,
            "d": res.d,
            "p": res.p,
            "n_x": res.n_x,
            "n_y": res.n_y,
            "n_a": int(len(parts["A"])),
            "n_b": int(len(parts["B"])),
            "n_permutations": res.n_permutations,
            "exact": res.exact,
            "statistics_layout": res.layout,  # how the sampled partitions were drawn (stats.permutation)
            "seed": self.seed,
            "human_iat_d": self.bias_test.human_iat_d,
            "num_layers": int(per_layer.shape[1]),
            "mean_frames": float(np.mean(statistics.n_frames)),
        }
        inputs = PairInputs(per_layer, emb, roles, self.manifest, self.bias_test, self.settings, self.seed)
        tables = {}
        for statistic in optional:
            tables[statistic.table], columns = statistic.rows_for(inputs, row)
            row.update(columns)
        speat_report.write_speat_outputs(
            self.writer,
            row,
            optional_statistics.computed_tables(tables),
            self.bias_test,
            layer_convention=self.layer_convention,
        )
        return row

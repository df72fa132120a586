"""SpEAT of one run from its clips' stacked statistics, written through the run's writer; no torch, no Lightning.

:class:`SpeatResults` aggregates (N, L, D) statistics, tests association, and writes results.csv/json,
layers.csv, the SE curve and report.md (:mod:`speechbias.report.speat_report`), for each pair of a SpEAT
job (:mod:`speechbias.tasks.speat_pairs`), from statistics read from the cache (extracted first where it
lacks them). Its tables (d per layer, the SE curve) are lists of row dicts: a SpEAT run imports no pandas.
"""

from __future__ import annotations

import logging

from collections.abc import Mapping, Sequence

import numpy as np

from speechbias import stats
from speechbias.aggregation import Aggregation
from speechbias.speat import progress
from speechbias.speat.settings import PER_LAYER_PERMUTATIONS, SpeatSettings
from speechbias.features.cached_statistics import StackedStatistics
from speechbias.report import speat_report
from speechbias.report.run_writer import RunWriter
from speechbias.roles import split_roles
from speechbias.stimuli.manifest import check_resampling_ids

log = logging.getLogger(__name__)


def speat_by_layer(per_layer: np.ndarray, roles: np.ndarray, n_permutations: int, seed: int) -> list[dict]:
    """SpEAT d and p at every single layer of (N, L, D) statistics, one row dict per layer; each row also
    says what its p came from (``n_permutations`` partitions, ``exact`` when that is all of them)."""
    rows = []
    with progress.step(f"SpEAT d at every layer ({n_permutations:,} permutations each)", per_layer.shape[1]) as done:
        for layer in range(per_layer.shape[1]):
            parts = split_roles(per_layer[:, layer, :], roles)
            res = stats.speat(parts["X"], parts["Y"], parts["A"], parts["B"], n_permutations=n_permutations, seed=seed)
            rows.append(
                {
                    "layer": layer,
                    "d": res.d,
                    "p": res.p,
                    "n_permutations": res.n_permutations,
                    "exact": res.exact,
                    "statistics_layout": res.layout,
                }
            )
            done()
    return rows


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
        if self.settings.se_curve:  # before any statistic (a built manifest was not checked before the run)
            source = str(getattr(self.bias_test, "manifest", None) or f"bias test {self.bias_test.name}")
            check_resampling_ids(self.manifest, self.bias_test.resampling, source)
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
        test = self.bias_test.name
        row = {
            **self.run_info,
            "test": test,
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
        layers = None
        if self.settings.per_layer:
            n_layer_permutations = min(self.settings.n_permutations, PER_LAYER_PERMUTATIONS)
            identity = {k: self.run_info[k] for k in ("family", "upstream") if k in self.run_info}
            identity.update(test=test, temporal=self.aggregation.temporal)
            layers = [{**identity, **r} for r in speat_by_layer(per_layer, roles, n_layer_permutations, self.seed)]
        se = None
        if self.settings.se_curve:
            curve, ci = self._se_curve(emb)
            row.update(ci)
            identity = {"upstream": self.run_info["upstream"]} if "upstream" in self.run_info else {}
            se = [{**identity, "test": test, **r} for r in curve]
        speat_report.write_speat_outputs(
            self.writer, row, layers, se, self.bias_test, layer_convention=self.layer_convention
        )
        return row

    def _se_curve(self, emb: np.ndarray) -> tuple[list[dict], dict]:
        """Bootstrap SE of d vs. number of targets with the test's resampling design, one row dict per
        size (+ full-size CI)."""
        parts = split_roles(emb, manifest_column(self.manifest, "role"))
        with progress.step(f"bootstrap SE of d ({self.settings.n_resamples:,} resamples per size)"):
            res = self._bootstrap(parts)
        fixed = {"design": res.design, "n_resamples": res.n_resamples, "seed": res.seed}
        curve = [
            {"n": n, "se": se, "n_valid": n_valid, **fixed}
            for n, se, n_valid in zip(np.asarray(res.sizes), np.asarray(res.se), np.asarray(res.n_valid))
        ]
        return curve, {"ci_low": res.ci_low, "ci_high": res.ci_high, "ci_level": res.ci_level, "se_design": res.design}

    def _bootstrap(self, parts: dict):
        m = self.manifest
        return stats.bootstrap_se(
            X=parts["X"],
            Y=parts["Y"],
            A=parts["A"],
            B=parts["B"],
            design=self.bias_test.resampling,
            n_resamples=self.settings.n_resamples,
            seed=self.seed,
            **_design_ids(m, self.bias_test.resampling),
        )


def manifest_column(manifest: Mapping[str, Sequence], name: str) -> np.ndarray:
    """One column of a manifest (``{column: values}`` or a DataFrame) as an object array of its values."""
    return np.asarray(manifest[name], dtype=object)


def _design_ids(m: Mapping[str, Sequence], design: str) -> dict:
    """The id arrays a resampling design needs, taken from the manifest's X and Y rows."""
    roles = manifest_column(m, "role")
    x, y = roles == "X", roles == "Y"
    if design == "paired":
        ids = manifest_column(m, "pair_id")
        return {"pair_ids_x": ids[x], "pair_ids_y": ids[y]}
    if design == "stratified":
        strata = manifest_column(m, "stratum")
        return {"strata_x": strata[x], "strata_y": strata[y]}
    return {}

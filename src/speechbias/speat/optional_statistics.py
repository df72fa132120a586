"""SpEAT's optional statistics: one entry each in :data:`OPTIONAL_STATISTICS` (no torch, no pandas).

An entry declares all a statistic needs: its flag (a boolean field of
:class:`~speechbias.speat.settings.SpeatSettings`, ``speat.<flag>``), the function computing its rows from a
pair's :class:`PairInputs`, the table it is written as (``<table>.csv/json`` through ``RunWriter.table``),
its tracker key, and its report.md section. :class:`~speechbias.speat.results.SpeatResults` computes the
entries whose flag is true, in the table's order; :func:`~speechbias.report.speat_report.write_speat_outputs`
writes each one the same way. Adding a statistic: its module (compute + section), an entry here, its flag in
settings.py and its default in conf/evaluate.yaml (ARCHITECTURE.md, "How to add").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from speechbias import stats
from speechbias.report import speat_report
from speechbias.roles import split_roles
from speechbias.speat import progress
from speechbias.speat.settings import PER_LAYER_PERMUTATIONS, SpeatSettings
from speechbias.stimuli.manifest import check_resampling_ids


@dataclass(frozen=True)
class PairInputs:
    """What an optional statistic is computed from, for one (bias test, aggregation) pair.

    per_layer: (N, L, D) the aggregation's temporal statistic of each clip at every layer; embeddings: (N, D)
    the aggregated embeddings the run's d is computed from; roles: (N,) X/Y/A/B of each row; manifest: the
    test's clips as ``{column: values}`` (or a DataFrame), rows in the same order; bias_test: the
    :class:`~speechbias.stimuli.bias_test.BiasTest`; settings: the run's ``speat.*``; seed: the run's seed.
    """

    per_layer: np.ndarray
    embeddings: np.ndarray
    roles: np.ndarray
    manifest: Mapping[str, Sequence]
    bias_test: Any
    settings: SpeatSettings
    seed: int


@dataclass(frozen=True)
class StatisticRows:
    """A statistic's table rows plus the columns it adds to the run's result row (results.csv)."""

    rows: list[dict]
    result_columns: dict = field(default_factory=dict)


@dataclass(frozen=True)
class TableFigure:
    """A figure drawn from a statistic's table: ``<name>.png``; ``draw(row, rows, layer_convention)``
    returns a matplotlib figure or None (nothing to draw); ``tracker_key``: formatted with ``test``."""

    name: str
    draw: Callable[[dict, list[dict], str | None], Any]
    tracker_key: str | None = None


@dataclass(frozen=True)
class OptionalStatistic:
    """One optional statistic of a SpEAT run.

    flag: the boolean field of ``SpeatSettings`` that turns it on. table: the stem of its files
    (``<table>.csv/json``). compute(inputs: PairInputs) -> its rows (row dicts) or a :class:`StatisticRows`.
    section(row, rows, layer_convention) -> report.md's ``(heading, markdown)``. identity: the result row's
    columns put first in each of its rows (those the row has). tracker_key: its table's key for the tracker
    (formatted with ``test``), or None. check(manifest, bias_test): raises a user error before any statistic
    (a built manifest was not checked before the run). absent_note: a paragraph of "How to read it" when not
    computed; reading_note(row, rows, layer_convention): one when computed ("" for none). figure: drawn from
    its rows, after its table.
    """

    flag: str
    table: str
    compute: Callable[[PairInputs], list[dict] | StatisticRows]
    section: Callable[[dict, list[dict], str | None], tuple[str, str]]
    identity: tuple[str, ...] = ("upstream", "test")
    tracker_key: str | None = None
    check: Callable[[Mapping[str, Sequence], Any], None] | None = None
    absent_note: str = ""
    reading_note: Callable[[dict, list[dict], str | None], str] | None = None
    figure: TableFigure | None = None

    def rows_for(self, inputs: PairInputs, row: dict) -> tuple[list[dict], dict]:
        """(its rows, each led by the ``identity`` columns of the result ``row``; the columns it adds to ``row``)."""
        computed = self.compute(inputs)
        rows, columns = (
            (computed.rows, computed.result_columns) if isinstance(computed, StatisticRows) else (computed, {})
        )
        identity = {k: row[k] for k in self.identity if k in row}
        return [{**identity, **r} for r in rows], dict(columns)


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


def layer_rows(inputs: PairInputs) -> list[dict]:
    """d and p at every layer (``speat.per_layer``), at most ``PER_LAYER_PERMUTATIONS`` permutations each."""
    n_permutations = min(inputs.settings.n_permutations, PER_LAYER_PERMUTATIONS)
    return speat_by_layer(inputs.per_layer, inputs.roles, n_permutations, inputs.seed)


def check_se_curve_ids(manifest: Mapping[str, Sequence], bias_test) -> None:
    """Every target clip carries what the test's resampling design resamples by (a ``ManifestError``)."""
    source = str(getattr(bias_test, "manifest", None) or f"bias test {bias_test.name}")
    check_resampling_ids(manifest, bias_test.resampling, source)


def se_curve_rows(inputs: PairInputs) -> StatisticRows:
    """Bootstrap SE of d vs. number of targets with the test's resampling design (``speat.se_curve``), one
    row per size; the full-size CI (and the design) as columns of the result row."""
    parts = split_roles(inputs.embeddings, inputs.roles)
    design = inputs.bias_test.resampling
    with progress.step(f"bootstrap SE of d ({inputs.settings.n_resamples:,} resamples per size)"):
        res = stats.bootstrap_se(
            X=parts["X"],
            Y=parts["Y"],
            A=parts["A"],
            B=parts["B"],
            design=design,
            n_resamples=inputs.settings.n_resamples,
            seed=inputs.seed,
            **_design_ids(inputs.manifest, inputs.roles, design),
        )
    fixed = {"design": res.design, "n_resamples": res.n_resamples, "seed": res.seed}
    rows = [
        {"n": n, "se": se, "n_valid": n_valid, **fixed}
        for n, se, n_valid in zip(np.asarray(res.sizes), np.asarray(res.se), np.asarray(res.n_valid))
    ]
    ci = {"ci_low": res.ci_low, "ci_high": res.ci_high, "ci_level": res.ci_level, "se_design": res.design}
    return StatisticRows(rows, ci)


def manifest_column(manifest: Mapping[str, Sequence], name: str) -> np.ndarray:
    """One column of a manifest (``{column: values}`` or a DataFrame) as an object array of its values."""
    return np.asarray(manifest[name], dtype=object)


def _design_ids(m: Mapping[str, Sequence], roles: np.ndarray, design: str) -> dict:
    """The id arrays a resampling design needs, taken from the manifest's X and Y rows."""
    x, y = roles == "X", roles == "Y"
    if design == "paired":
        ids = manifest_column(m, "pair_id")
        return {"pair_ids_x": ids[x], "pair_ids_y": ids[y]}
    if design == "stratified":
        strata = manifest_column(m, "stratum")
        return {"strata_x": strata[x], "strata_y": strata[y]}
    return {}


# the optional statistics, in the order they are computed, written and given report.md sections
OPTIONAL_STATISTICS: tuple[OptionalStatistic, ...] = (
    OptionalStatistic(
        flag="per_layer",
        table="layers",
        compute=layer_rows,
        section=speat_report.layers_section,
        identity=("family", "upstream", "test", "temporal"),
        tracker_key="speat/{test}/layers",
        reading_note=speat_report.single_layer_reading_note,
        figure=TableFigure("layer_profile", speat_report.layer_profile_figure, "speat/{test}/layer_profile"),
    ),
    OptionalStatistic(
        flag="se_curve",
        table="se_curve",
        compute=se_curve_rows,
        section=speat_report.se_curve_section,
        check=check_se_curve_ids,
        absent_note=speat_report.SE_CURVE_ABSENT_NOTE,
    ),
)


def chosen(settings: SpeatSettings) -> list[OptionalStatistic]:
    """The entries of :data:`OPTIONAL_STATISTICS` whose flag is true in ``settings``, in the table's order."""
    return [s for s in OPTIONAL_STATISTICS if getattr(settings, s.flag)]


def computed_tables(rows_by_table: Mapping[str, Any]) -> list[tuple[OptionalStatistic, Any]]:
    """``(entry, its rows or None)`` for every entry of :data:`OPTIONAL_STATISTICS`, the rows taken from
    ``rows_by_table`` by table name (None: not computed), as the report takes them."""
    return [(s, rows_by_table.get(s.table)) for s in OPTIONAL_STATISTICS]

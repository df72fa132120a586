"""The files and tracker entries of one SpEAT run (one upstream x bias test x aggregation).

Presentation only: the numbers come from :mod:`speechbias.speat.results` and its optional statistics
(:mod:`speechbias.speat.optional_statistics`, whose entries name their sections here); this module lays them
out as tables, report.md sections and the layer-profile figure, and writes them through the run's
:class:`~speechbias.report.run_writer.RunWriter` (which adds a demo run's caveat).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from speechbias.report import figures
from speechbias.report.run_writer import RunWriter, Table, is_missing, markdown_table, table_rows

if TYPE_CHECKING:  # for annotations only: speat.optional_statistics imports this module
    from speechbias.speat.optional_statistics import OptionalStatistic

# the columns of the result table in report.md (those the row has)
REPORT_COLUMNS = (
    "upstream",
    "test",
    "aggregation",
    "d",
    "p",
    "n_x",
    "n_y",
    "n_a",
    "n_b",
    "n_permutations",
    "exact",
    "human_iat_d",
)


def report_title(row: dict) -> str:
    """``SpEAT: <upstream> / <test> / <aggregation>``."""
    return f"SpEAT: {row.get('upstream', '')} / {row['test']} / {row['aggregation']}"


def report_sections(
    row: dict,
    tables: Sequence[tuple[OptionalStatistic, Table | None]],
    bias_test,
    layer_convention: str | None = None,
) -> list[tuple[str, str]]:
    """report.md's ``(heading, markdown)`` sections: the result, how to read it, then the section of each
    optional statistic computed. ``tables``: ``(entry, its rows or None when not computed)`` for every entry
    of ``OPTIONAL_STATISTICS`` (:func:`speechbias.speat.optional_statistics.computed_tables`); "How to read
    it" ends with the ``absent_note`` of each one not computed, then the ``reading_note`` of each computed."""
    shown = {c: row[c] for c in REPORT_COLUMNS if c in row}
    human_known = "human_iat_d" in shown and not is_missing(shown["human_iat_d"])
    if "human_iat_d" in shown and not human_known:
        shown["human_iat_d"] = "unknown"
    sections = [("Result", markdown_table([shown]))]
    interp = (
        f"d > 0: {bias_test.x_label} (X) is more associated with {bias_test.a_label} than "
        f"{bias_test.y_label} (Y) is; p is one-sided (H1: d > 0), "
        f"{'exact' if row['exact'] else 'sampled'} over {row['n_permutations']:,} partitions."
    )
    if "human_iat_d" in shown and not human_known:
        interp += (
            f"\n\nhuman_iat_d is unknown: no human IAT effect size is recorded for {row['test']} (the SpEAT "
            "paper's Table 1 gives one for its US tests; a bias test's `human_iat_d` sets it), so this run "
            "cannot say whether the model's d agrees with people's."
        )
    notes = [s.absent_note for s, rows in tables if rows is None]
    notes += [s.reading_note(row, rows, layer_convention) for s, rows in tables if rows is not None and s.reading_note]
    interp += "".join(f"\n\n{note}" for note in notes if note)
    sections.append(("How to read it", interp))
    sections += [s.section(row, rows, layer_convention) for s, rows in tables if rows is not None]
    return sections


def _single_layer(layers: Table, layer_convention: str | None) -> bool:
    return figures.is_single_layer([r["layer"] for r in table_rows(layers)], layer_convention)


def single_layer_reading_note(row: dict, layers: Table, layer_convention: str | None = None) -> str:
    """Per-layer statistic's note in "How to read it": the layer aggregation is moot on a one-layer upstream."""
    if not (_single_layer(layers, layer_convention) and "_" in str(row.get("aggregation", ""))):
        return ""
    temporal, layer_rule = str(row["aggregation"]).split("_", 1)
    return (
        f"The layer aggregation `{layer_rule}` has no effect here: {row.get('upstream') or 'this upstream'} "
        f"has one layer, so every `{temporal}_<layer>` aggregation gives this d."
    )


def layers_section(row: dict, layers: Table, layer_convention: str | None = None) -> tuple[str, str]:
    """The "d at every layer" section: ``layer_profile.png`` (or the line saying why a one-layer upstream has
    none), what its p came from, and the table."""
    note = figures.permutation_note(layers)
    floor = figures.sampled_p_floor_note(layers, float(row["p"]))
    image = (
        figures.single_layer_note(str(row.get("upstream", "")))
        if _single_layer(layers, layer_convention)
        else "![layer profile](layer_profile.png)"
    )
    origin = ""
    if note:
        run_p = f"{row['n_permutations']:,}{' partitions, exact' if row['exact'] else ' permutations'}"
        origin = f"{note[0].upper()}{note[1:]} (the run's p above: {run_p})." + (f" {floor}." if floor else "") + "\n\n"
    return ("d at every layer", image + "\n\n" + origin + markdown_table(layers))


def layer_profile_figure(row: dict, layers: Table, layer_convention: str | None = None):
    """layer_profile.png's figure (None for a one-layer upstream: report.md says why)."""
    title = f"{row['test']}: d per layer ({row['temporal']} over frames)"
    return figures.layer_profile(layers, title, layer_convention=layer_convention)


SE_CURVE_ABSENT_NOTE = (
    "Bootstrap standard error of d: not computed in this run (`speat.se_curve=true` adds the SE "
    "of d against the number of stimuli)."
)


def se_curve_section(row: dict, se: Table, layer_convention: str | None = None) -> tuple[str, str]:
    """The bootstrap SE curve's table."""
    return ("Bootstrap standard error of d vs. number of stimuli", markdown_table(se))


def write_speat_outputs(
    writer: RunWriter,
    row: dict,
    tables: Sequence[tuple[OptionalStatistic, Table | None]],
    bias_test,
    layer_convention: str | None = None,
) -> None:
    """Each computed optional statistic's table (``<table>.csv/json``) and figure, report.md, then
    results.csv/json, and for the tracker ``speat/<test>/d`` and ``/p``, the results table and each
    statistic's table and figure that has a tracker key.

    ``row``: the run's result (one row of results.csv); ``tables``: ``(entry, rows or None)`` for every
    entry of ``OPTIONAL_STATISTICS`` (row dicts, or DataFrames; None when not computed).
    ``layer_convention``: the upstream's (``fingerprint_fields()["layer_convention"]``), for the layer axis
    of ``layer_profile.png`` (not drawn for a one-layer upstream: report.md says why).
    """
    test = row["test"]
    for statistic, rows in tables:
        if rows is None:
            continue
        key = statistic.tracker_key
        writer.table(statistic.table, rows, tracker_key=key.format(test=test) if key else None)
        figure = statistic.figure
        if figure is not None:
            key = figure.tracker_key
            drawn = figure.draw(row, rows, layer_convention)
            writer.figure(figure.name, drawn, tracker_key=key.format(test=test) if key else None)
    writer.report(report_title(row), report_sections(row, tables, bias_test, layer_convention))
    writer.metrics({f"speat/{test}/d": row["d"], f"speat/{test}/p": row["p"]})
    # results.json last: its presence marks the run as finished (a rerun skips it), so a run killed
    # before this line leaves no results.json and is redone in full
    writer.table("results", [row], tracker_key=f"speat/{test}/results")

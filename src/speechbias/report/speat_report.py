"""The files and tracker entries of one SpEAT run (one upstream x bias test x aggregation).

Presentation only: the numbers come from :mod:`speechbias.callbacks.speat`; this module lays them out
as tables, report.md sections and the layer-profile figure, and writes them through the run's
:class:`~speechbias.report.run_writer.RunWriter` (which adds a demo run's caveat).
"""

from __future__ import annotations

import pandas as pd

from speechbias.report import figures
from speechbias.report.run_writer import RunWriter, markdown_table

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
    row: dict, layers: pd.DataFrame | None, se: pd.DataFrame | None, bias_test, layer_convention: str | None = None
) -> list[tuple[str, str]]:
    """report.md's ``(heading, markdown)`` sections: the result, how to read it, d at every layer
    (with ``layer_profile.png``, or the line saying why a one-layer upstream has none) and the
    bootstrap SE curve, the last two when computed."""
    results = pd.DataFrame([row])
    table = results[[c for c in REPORT_COLUMNS if c in results.columns]]
    sections = [("Result", markdown_table(table))]
    interp = (
        f"d > 0: {bias_test.x_label} ({'X'}) is more associated with {bias_test.a_label} than "
        f"{bias_test.y_label} (Y) is; p is one-sided (H1: d > 0), "
        f"{'exact' if row['exact'] else 'sampled'} over {row['n_permutations']:,} partitions."
    )
    sections.append(("How to read it", interp))
    if layers is not None:
        note = figures.permutation_note(layers)
        image = (
            figures.single_layer_note(str(row.get("upstream", "")))
            if figures.is_single_layer(layers["layer"], layer_convention)
            else "![layer profile](layer_profile.png)"
        )
        sections.append(
            (
                "d at every layer",
                image
                + "\n\n"
                + (
                    f"{note[0].upper()}{note[1:]} (the run's p above: {row['n_permutations']:,}"
                    f"{' partitions, exact' if row['exact'] else ' permutations'}).\n\n"
                    if note
                    else ""
                )
                + markdown_table(layers),
            )
        )
    if se is not None:
        sections.append(("Bootstrap standard error of d vs. number of stimuli", markdown_table(se)))
    return sections


def write_speat_outputs(
    writer: RunWriter,
    row: dict,
    layers: pd.DataFrame | None,
    se: pd.DataFrame | None,
    bias_test,
    layer_convention: str | None = None,
) -> None:
    """layers.csv/json, layer_profile.png, se_curve.csv/json, report.md, then results.csv/json, and
    for the tracker ``speat/<test>/d`` and ``/p``, the results and layers tables and the figure.

    ``row``: the run's result (one row of results.csv); ``layers`` / ``se``: d per layer and the
    bootstrap SE curve, or None when not computed. ``layer_convention``: the upstream's
    (``fingerprint_fields()["layer_convention"]``), for the layer axis of ``layer_profile.png`` (not
    drawn for a one-layer upstream: report.md says why).
    """
    test = row["test"]
    if layers is not None:
        writer.table("layers", layers, tracker_key=f"speat/{test}/layers")
        fig = figures.layer_profile(
            layers, f"{test}: d per layer ({row['temporal']} over frames)", layer_convention=layer_convention
        )
        writer.figure("layer_profile", fig, tracker_key=f"speat/{test}/layer_profile")
    if se is not None:
        writer.table("se_curve", se)
    writer.report(report_title(row), report_sections(row, layers, se, bias_test, layer_convention))
    writer.metrics({f"speat/{test}/d": row["d"], f"speat/{test}/p": row["p"]})
    # results.json last: its presence marks the run as finished (a rerun skips it), so a run killed
    # before this line leaves no results.json and is redone in full
    writer.table("results", pd.DataFrame([row]), tracker_key=f"speat/{test}/results")

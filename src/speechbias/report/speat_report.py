"""The files and tracker entries of one SpEAT run (one upstream x bias test x aggregation).

Presentation only: the numbers come from :mod:`speechbias.speat.results`; this module lays them out
as tables, report.md sections and the layer-profile figure, and writes them through the run's
:class:`~speechbias.report.run_writer.RunWriter` (which adds a demo run's caveat).
"""

from __future__ import annotations

from speechbias.report import figures
from speechbias.report.run_writer import RunWriter, Table, is_missing, markdown_table, table_rows

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
    layers: Table | None,
    se: Table | None,
    bias_test,
    layer_convention: str | None = None,
) -> list[tuple[str, str]]:
    """report.md's ``(heading, markdown)`` sections: the result, how to read it, d at every layer
    (with ``layer_profile.png``, or the line saying why a one-layer upstream has none) and the
    bootstrap SE curve, the last two when computed."""
    shown = {c: row[c] for c in REPORT_COLUMNS if c in row}
    human_known = "human_iat_d" in shown and not is_missing(shown["human_iat_d"])
    if "human_iat_d" in shown and not human_known:
        shown["human_iat_d"] = "unknown"
    sections = [("Result", markdown_table([shown]))]
    interp = (
        f"d > 0: {bias_test.x_label} ({'X'}) is more associated with {bias_test.a_label} than "
        f"{bias_test.y_label} (Y) is; p is one-sided (H1: d > 0), "
        f"{'exact' if row['exact'] else 'sampled'} over {row['n_permutations']:,} partitions."
    )
    if "human_iat_d" in shown and not human_known:
        interp += (
            f"\n\nhuman_iat_d is unknown: no human IAT effect size is recorded for {row['test']} (the SpEAT "
            "paper's Table 1 gives one for its US tests; a bias test's `human_iat_d` sets it), so this run "
            "cannot say whether the model's d agrees with people's."
        )
    if se is None:
        interp += (
            "\n\nBootstrap standard error of d: not computed in this run (`speat.se_curve=true` adds the SE "
            "of d against the number of stimuli)."
        )
    single_layer = layers is not None and figures.is_single_layer(
        [r["layer"] for r in table_rows(layers)], layer_convention
    )
    if single_layer and "_" in str(row.get("aggregation", "")):
        temporal, layer_rule = str(row["aggregation"]).split("_", 1)
        interp += (
            f"\n\nThe layer aggregation `{layer_rule}` has no effect here: {row.get('upstream') or 'this upstream'} "
            f"has one layer, so every `{temporal}_<layer>` aggregation gives this d."
        )
    sections.append(("How to read it", interp))
    if layers is not None:
        note = figures.permutation_note(layers)
        floor = figures.sampled_p_floor_note(layers, float(row["p"]))
        image = (
            figures.single_layer_note(str(row.get("upstream", "")))
            if single_layer
            else "![layer profile](layer_profile.png)"
        )
        sections.append(
            (
                "d at every layer",
                image
                + "\n\n"
                + (
                    f"{note[0].upper()}{note[1:]} (the run's p above: {row['n_permutations']:,}"
                    f"{' partitions, exact' if row['exact'] else ' permutations'})."
                    + (f" {floor}." if floor else "")
                    + "\n\n"
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
    layers: Table | None,
    se: Table | None,
    bias_test,
    layer_convention: str | None = None,
) -> None:
    """layers.csv/json, layer_profile.png, se_curve.csv/json, report.md, then results.csv/json, and
    for the tracker ``speat/<test>/d`` and ``/p``, the results and layers tables and the figure.

    ``row``: the run's result (one row of results.csv); ``layers`` / ``se``: d per layer and the
    bootstrap SE curve (row dicts, or DataFrames), or None when not computed. ``layer_convention``: the upstream's
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
    writer.table("results", [row], tracker_key=f"speat/{test}/results")

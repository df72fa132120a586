"""One folder with a sweep's results: tables (CSV, JSON, Parquet), the paper's figures (PNG) and a
report.md that embeds them, written through the run's :class:`~speechbias.report.run_writer.RunWriter`,
which also records the tables and figures for the W&B summary run.

Presentation only: the tables come computed (:class:`SweepTables`, built by the report task from
:mod:`speechbias.stats.sweep_analysis` and :mod:`speechbias.ser.sweep_propagation`); this module lays
them out, draws the figures (:mod:`.paper_figures`) and writes.

Files written into the writer's folder:

* ``results.csv/json/parquet``: every (model, test, aggregation) run with d, p, n and
  Bonferroni / Holm corrected p-values and significance (correction within each aggregation);
* ``appendix_d.csv`` (proportion of d > 0 per aggregation), ``anova.csv``, ``congruence.csv``,
  ``congruence_by_aggregation.csv``, ``layers.csv``, ``se_curves.csv``, ``propagation.csv``,
  ``propagation_agreement.csv``, ``paper_comparison.csv`` (when the paper's table is given);
* ``figure1_effect_sizes.png``, ``figure2_propagation.png``, ``figure3_se_curves.png``,
  ``appendix_d_positive.png``, ``layer_profiles.png``, ``significance_heatmap.png``,
  ``paper_comparison.png`` (when the paper's table is given);
* ``report.md`` and the marker file that keeps later collections from reading this folder as a run.

The report depends only on the runs' results, never on when or in which order they ran, so an
interrupted and resumed sweep gives the same report as an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from speechbias.report import paper_figures, sweep_tables
from speechbias.report.caveat import DEMO_CAVEAT, demo_tests_caveat, is_demo_test
from speechbias.report.markdown_escape import escaped_table, md_code, md_text
from speechbias.report.run_writer import RunWriter, markdown_table
from speechbias.results.sweep_results import REPORT_MARKER, SweepResults

log = logging.getLogger(__name__)


@dataclass
class SweepTables:
    """Every table of the report, computed from the collected runs.

    ``results``: every SpEAT run with corrected p-values and ``significance``; ``main``: its rows of
    the main aggregation; ``appendix_d``: proportion of d > 0 per strategy; ``anova`` (empty when not
    computable) and ``anova_note`` (its formula, or why not); ``congruence`` per test and
    ``congruence_totals`` (``n_congruent``, ``n_total``); ``congruence_by_aggregation``;
    ``propagation`` (SpEAT d vs. Cohen's d per learning rate and pooled) and
    ``propagation_agreement``; ``layers`` (one row per upstream, test, temporal, layer);
    ``se_curves``; ``paper_comparison`` (None without the paper's table). What they were computed with:
    ``aggregation``, the main table's (``task.main_aggregation``, or the sweep's most frequent when it has
    none of it); ``alpha``, the significance level; ``correction``, the first multiple-comparison method
    (it decides ``significance``'s "corrected").
    """

    results: pd.DataFrame
    main: pd.DataFrame
    aggregation: str
    alpha: float
    correction: str
    appendix_d: pd.DataFrame
    anova: pd.DataFrame
    anova_note: str
    congruence: pd.DataFrame
    congruence_totals: dict
    congruence_by_aggregation: pd.DataFrame
    propagation: pd.DataFrame
    propagation_agreement: pd.DataFrame
    layers: pd.DataFrame
    se_curves: pd.DataFrame
    paper_comparison: pd.DataFrame | None = None

    def files(self) -> dict[str, pd.DataFrame]:
        """The tables written beside ``results``, by file stem, in the order report.md lists them."""
        files = {
            "appendix_d": self.appendix_d,
            "anova": self.anova,
            "congruence": self.congruence,
            "congruence_by_aggregation": self.congruence_by_aggregation,
            "propagation": self.propagation,
            "propagation_agreement": self.propagation_agreement,
            "layers": self.layers,
            "se_curves": self.se_curves,
        }
        if self.paper_comparison is not None:
            files["paper_comparison"] = self.paper_comparison
        return files


@dataclass
class SweepReport:
    """What was written: figure paths by name, report sections and summary metrics."""

    figures: dict[str, Path]
    sections: list[tuple[str, str]]
    summary: dict


def sweep_caveat(tables: SweepTables) -> str | None:
    """The caveat report.md and every figure carry (``RunWriter.caveat``): the demo caveat when every
    test is a synthetic demo test, one naming the demo tests when they are mixed with real ones, else None."""
    tests = [
        str(v)
        for t in (tables.results, tables.propagation)
        if len(t) and "test" in t.columns
        for v in dict.fromkeys(t["test"])
    ]
    demo = [t for t in tests if is_demo_test(t)]
    if not demo:
        return None
    return DEMO_CAVEAT if len(demo) == len(tests) else demo_tests_caveat([md_text(t) for t in demo])


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _shown(tables: SweepTables) -> SweepTables:
    """The tables as figures and report.md show them: every model's family beside the tables that lack it."""
    info = sweep_tables.model_info(tables.results, tables.propagation)
    comparison = tables.paper_comparison
    return dataclasses.replace(
        tables,
        layers=sweep_tables.with_family(tables.layers, info),
        se_curves=sweep_tables.with_family(tables.se_curves, info),
        propagation=sweep_tables.with_family(tables.propagation, info),
        paper_comparison=None if comparison is None else sweep_tables.with_family(comparison, info),
    )


def _figures(tables: SweepTables, writer: RunWriter) -> dict[str, Path]:
    """Draw and write the figures that have data (a figure without rows is not drawn), by name; each is
    recorded for the tracker as ``report/<name>``."""
    main = tables.main
    info = sweep_tables.model_info(tables.results, tables.propagation)
    styles = paper_figures.model_styles(info) if len(info) else None
    temporal = str(main["temporal"].iloc[0]) if len(main) and "temporal" in main else "mean"
    n_per = int(tables.appendix_d["n"].max()) if len(tables.appendix_d) else None
    written: dict[str, Path] = {}

    def write(name: str, fig) -> None:
        path = writer.figure(name, fig, tracker_key=f"report/{name}", save=paper_figures.save)
        if path is not None:
            written[name] = path

    write(
        "figure1_effect_sizes",
        paper_figures.effect_sizes_figure(main, title=f"SpEAT d per bias test ({tables.aggregation})", styles=styles),
    )
    write(
        "figure2_propagation",
        paper_figures.propagation_figure(tables.propagation, tables.propagation_agreement, styles),
    )
    write("figure3_se_curves", paper_figures.se_curves_figure(tables.se_curves, styles))
    write("appendix_d_positive", paper_figures.positive_heatmap(sweep_tables.positive_pivot(tables.appendix_d), n_per))
    write("layer_profiles", paper_figures.layer_lines_figure(tables.layers, temporal, styles))
    write("significance_heatmap", paper_figures.significance_heatmap(main, tables.alpha, tables.correction, styles))
    if tables.paper_comparison is not None:
        write("paper_comparison", paper_figures.paper_comparison_figure(tables.paper_comparison, styles))
    return written


def _md_table(table: pd.DataFrame, **kwargs) -> str:
    """A markdown table of ``table`` whose names and text cells came from run folders: escaped
    (:func:`~speechbias.report.markdown_escape.escaped_table`)."""
    return markdown_table(escaped_table(table), **kwargs)


def _image(figs: dict[str, Path], name: str, alt: str, missing: str) -> str:
    """The markdown image of figure ``name``, or a line saying why it was not drawn."""
    if name in figs:
        return f"![{alt}]({figs[name].name})"
    return f"_No {alt}: {missing}._"


def _incomplete_lines(results: SweepResults) -> list[str]:
    """One bullet per incomplete job folder (the first 20) with its reason."""
    lines = []
    for d in results.incomplete[:20]:
        reason = results.incomplete_reasons.get(d, "")
        lines.append(f"  - {md_code(d)}: {md_text(reason)}" if reason else f"  - {md_code(d)}")
    if len(results.incomplete) > 20:
        lines.append(f"  - and {len(results.incomplete) - 20} more")
    return lines


def _untrusted_lines(results: SweepResults) -> list[str]:
    """Bullets for what the report left out of its tables: flagged rows (each), folders it could not read
    and pair folders of an earlier list (the first 20 of each)."""
    lines = []
    flagged = results.flagged
    if len(flagged):
        lines.append(
            f"- **{len(flagged)} result value(s) flagged and left out of the tables** (not a result a run computes):"
        )
        for r in flagged.head(20).itertuples():
            lines.append(f"  - {md_code(r.run_dir)}: {md_text(r.column)} = {md_code(r.value)} {md_text(r.why)}")
    bad = [(d, why) for d, why in results.malformed.items() if d not in results.incomplete_reasons]
    if bad:
        lines.append(f"- **{len(bad)} pair folder(s) could not be read and were skipped:**")
        lines += [f"  - {md_code(d)}: {md_text(why)}" for d, why in bad[:20]]
    if results.stale:
        lines.append(
            f"- {len(results.stale)} pair folder(s) of an earlier list of their job, not counted: "
            + ", ".join(md_code(d) for d in results.stale[:20])
            + (f" and {len(results.stale) - 20} more" if len(results.stale) > 20 else "")
        )
    return lines


def _no_layer_profiles_reason(layers: pd.DataFrame) -> str:
    if layers.empty:
        return "no per-layer results (speat.per_layer=false)"
    return (
        "every upstream of this sweep has a single layer ("
        + ", ".join(md_text(u) for u in dict.fromkeys(layers["upstream"].astype(str)))
        + "), whose one d per test is Figure 1's"
    )


def _no_heatmap_reason(appendix_d: pd.DataFrame) -> str:
    if appendix_d.empty:
        return "no SpEAT results in this sweep"
    r = appendix_d.iloc[0]
    return (
        f"one aggregation strategy in this sweep ({md_text(r['aggregation'])}: d > 0 in {int(r['n_positive'])} of "
        f"{int(r['n'])} results); the heat map compares strategies (experiment=paper_aggregation runs the paper's 30)"
    )


def _sections(results: SweepResults, tables: SweepTables, figs: dict[str, Path]) -> list[tuple[str, str]]:
    main, speat, agg = tables.main, tables.results, tables.aggregation
    sections = []  # the writer puts the demo caveat (RunWriter.caveat: sweep_caveat) first, once
    n_prop = results.propagation["run_dir"].nunique() if "run_dir" in results.propagation else 0
    counts = [
        _plural(speat[c].nunique() if len(speat) else 0, w)
        for c, w in (("upstream", "model"), ("test", "test"), ("aggregation", "aggregation"))
    ]
    lines = [
        f"- sweep folder(s): {', '.join(md_text(d) for d in results.sweep_dirs)}",
        f"- {results.completion()}",
        f"- SpEAT runs: {len(speat)} ({', '.join(counts)}); SER runs: {n_prop}",
    ]
    if results.duplicates:
        lines.append(f"- {results.duplicates} repeated SpEAT run(s) ignored (the newest of each is kept)")
    if results.incomplete:
        lines.append(
            f"- **{len(results.incomplete)} job folder(s) have no results yet** (failed or interrupted; "
            "the reason of each, from its `job_status.json` or log, below). Run the same sweep command "
            "again (same `hydra.sweep.dir`) to finish only these; finished jobs are skipped."
        )
        lines.extend(_incomplete_lines(results))
    lines.extend(_untrusted_lines(results))
    sections.append(("Sweep", "\n".join(lines)))
    sections.append(
        (
            "SpEAT effect sizes (Figure 1)",
            _image(figs, "figure1_effect_sizes", "Figure 1", "no SpEAT results in this sweep")
            + f"\n\nd per model and test ({agg}); `**` significant "
            f"after {tables.correction.capitalize()} correction over the {len(main)} model x test results of this "
            f"aggregation, `*` significant at alpha = {tables.alpha} uncorrected only. "
            "One-sided permutation p (H1: d > 0). All runs: `results.csv` / `results.parquet`.\n\n"
            + _md_table(sweep_tables.d_pivot(main)),
        )
    )
    sections.append(
        (
            "Significance",
            _image(figs, "significance_heatmap", "significance heat map", "no SpEAT results in this sweep"),
        )
    )
    agreement = tables.propagation_agreement
    if len(agreement):
        body = (
            _image(figs, "figure2_propagation", "Figure 2", "no SER propagation results") + "\n\n"
            "SpEAT d vs. Cohen's d of the valence head's predictions (X vs. Y); `pooled`: all heads' "
            "predictions pooled per group. Sign agreement:\n\n" + _md_table(agreement)
        )
    else:
        body = (
            "_No Figure 2: no SER propagation runs in this sweep (see `python train.py`, experiment "
            "paper_propagation)._"
        )
    sections.append(("Bias propagation to SER (Figure 2)", body))
    sections.append(
        (
            "Standard error vs. number of stimuli (Figure 3)",
            _image(
                figs,
                "figure3_se_curves",
                "Figure 3",
                "no SE curves: run the sweep with `speat.se_curve=true` (experiment paper_se_curves)",
            ),
        )
    )
    sections.append(
        (
            "SpEAT d at every layer",
            _image(figs, "layer_profiles", "layer-profile figure", _no_layer_profiles_reason(tables.layers))
            + "\n\nWhere in each network "
            "the association lives: d of each single layer's temporal statistic (`layers.csv`).",
        )
    )
    pivot = sweep_tables.positive_pivot(tables.appendix_d)
    sections.append(
        (
            "Proportion of positive d per aggregation strategy (appendix D)",
            _image(figs, "appendix_d_positive", "appendix D figure", _no_heatmap_reason(tables.appendix_d))
            + "\n\n"
            + (_md_table(pivot.reset_index(), floatfmt=".2f") if len(pivot) else "_(no rows)_"),
        )
    )
    anova = tables.anova
    sections.append(
        (
            "Two-way ANOVA: test x model family",
            tables.anova_note + ("\n\n" + _md_table(anova) if len(anova) else ""),
        )
    )
    cong, totals = tables.congruence, tables.congruence_totals
    body = (
        (
            f"{totals['n_congruent']} of {totals['n_total']} model x test effect sizes ({agg}) have the sign of "
            "the human IAT D of their test.\n\n" + _md_table(cong)
        )
        if totals["n_total"]
        else "_No test in this sweep has a human IAT D._"
    )
    by_agg = tables.congruence_by_aggregation
    if len(by_agg):
        body += (
            f"\n\nPer aggregation strategy: tests whose mean d over models has the IAT's sign "
            f"({int(by_agg['n_congruent'].sum())} of {int(by_agg['n_tests'].sum())} in all).\n\n" + _md_table(by_agg)
        )
    sections.append(("Congruence with human IAT signs", body))
    if tables.paper_comparison is not None:
        comp = tables.paper_comparison
        if len(comp):
            body = (
                _image(figs, "paper_comparison", "paper comparison figure", "no data")
                + "\n\nThe paper's published d (temporal mean, layer mean; the layer sum gives the same d) "
                "beside this sweep's d; `d_minus_paper` = this - paper. "
                f"Same sign in {int(comp['same_sign'].sum())} of {len(comp)}; mean |difference| "
                f"{comp['d_minus_paper'].abs().mean():.3f}.\n\n"
                + _md_table(comp.drop(columns=["model_id"], errors="ignore"))
            )
        else:
            body = "_No (model, test) of this sweep is in the paper's table._"
        sections.append(("Reproduction check: the paper's published results", body))
    return sections


def write_sweep_report(results: SweepResults, tables: SweepTables, writer: RunWriter, title: str) -> SweepReport:
    """Write the report folder (see the module docstring) through ``writer``, report.md titled ``title``
    and the sweep's completion; the summary metrics, the
    non-empty tables and the figures are recorded for the tracker under ``report/<name>``. A demo
    sweep's caveat (``writer.caveat``, set by the caller) heads report.md and is drawn on every figure."""
    writer.text(REPORT_MARKER, "speechbias sweep report: not a run folder\n")
    speat, files = tables.results, tables.files()
    totals = tables.congruence_totals
    summary = {
        "report/n_speat_runs": int(len(speat)),
        "report/n_propagation_rows": int(len(results.propagation)),
        "report/n_incomplete": len(results.incomplete),
        "report/n_jobs": results.n_jobs,
        "report/n_finished": len(results.finished),
        "report/human_congruent": totals["n_congruent"],
        "report/human_total": totals["n_total"],
    }
    writer.metrics(summary)
    writer.table("results", speat, tracker_key="report/results" if len(speat) else None, parquet=True)
    for name, table in files.items():
        writer.table(name, table, tracker_key=f"report/{name}" if len(table) else None)
    shown = _shown(tables)
    figs = _figures(shown, writer)
    sections = _sections(results, shown, figs)
    sections.append(
        (
            "Files",
            "\n".join(f"- `{name}.csv`" for name in ["results", *files])
            + "\n- `results.parquet`\n"
            + "\n".join(f"- `{p.name}`" for p in figs.values()),
        )
    )
    writer.report(f"{title}: {results.completion()}", sections)
    return SweepReport(figures=figs, sections=sections, summary=summary)

"""One folder with a sweep's results: tables (CSV, JSON, Parquet), the paper's figures (PNG), a
report.md that embeds them, and the same tables and figures in a W&B summary run.

Files written into ``output_dir``:

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

import logging
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from speechbias.atomic_file import atomic_write
from speechbias.report import paper_figures, sweep_tables, wandb_run
from speechbias.report.collect import REPORT_MARKER, SweepResults, model_order
from speechbias.report.caveat import DEMO_CAVEAT
from speechbias.report.paper_results import compare_with_paper
from speechbias.report.run_files import markdown_table, write_report, write_results

log = logging.getLogger(__name__)

SYNTHETIC_NOTE = ("**This sweep includes the synthetic demo tests (espeak-ng voices): their results check "
                  "the plumbing and are not findings about any model or group.**")


@dataclass(frozen=True)
class ReportOptions:
    """``main_aggregation``: the strategy of Figure 1, the heat map, ANOVA and congruence (the
    paper's temporal mean / layer sum); ``corrections``: multiple-comparison methods, the first
    decides the heat map's "corrected" level."""

    title: str = "SpEAT sweep report"
    alpha: float = 0.05
    corrections: tuple[str, ...] = ("bonferroni", "holm")
    main_aggregation: str = "mean_sum"
    paper_equivalent_aggregations: tuple[str, ...] = ("mean_mean", "mean_sum")


@dataclass
class SweepReport:
    """What was written: tables by name, figure paths by name, report sections and summary metrics."""

    output_dir: Path
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: dict[str, Path] = field(default_factory=dict)
    sections: list[tuple[str, str]] = field(default_factory=list)
    summary: dict = field(default_factory=dict)


def build_tables(results: SweepResults, options: ReportOptions, paper: pd.DataFrame | None = None) -> dict:
    """Every table of the report from the collected results (no I/O)."""
    speat = sweep_tables.add_significance(results.speat, options.alpha, options.corrections)
    main = sweep_tables.main_table(speat, options.main_aggregation)
    tables = {"results": speat, "main": main}
    tables["appendix_d"] = sweep_tables.positive_by_aggregation(speat)
    anova, anova_note = sweep_tables.family_anova(main)
    tables["anova"] = anova if anova is not None else pd.DataFrame()
    tables["_anova_note"] = anova_note
    congruence, totals = sweep_tables.human_congruence(main)
    tables["congruence"] = congruence
    tables["_congruence_totals"] = totals
    tables["congruence_by_aggregation"] = sweep_tables.aggregation_congruence(speat)
    prop = sweep_tables.propagation_table(results.propagation, results.predictions)
    tables["propagation"] = prop
    tables["propagation_agreement"] = sweep_tables.agreement_counts(prop)
    layers = results.layers
    key = [c for c in ("upstream", "test", "temporal", "layer") if c in layers.columns]
    tables["layers"] = layers.drop_duplicates(key).reset_index(drop=True) if len(key) == 4 else layers
    tables["se_curves"] = results.se_curves
    if paper is not None:
        comparison = compare_with_paper(speat, paper, options.paper_equivalent_aggregations)
        if not comparison.empty and "family" in speat.columns:
            fam = speat.drop_duplicates("upstream").set_index("upstream")["family"]
            comparison.insert(1, "family", comparison["upstream"].map(fam))
        tables["paper_comparison"] = comparison
    return tables


def d_pivot(main: pd.DataFrame) -> pd.DataFrame:
    """Models x tests table of d with ``**`` (significant after correction) / ``*`` (uncorrected)."""
    if main.empty:
        return pd.DataFrame()
    marks = {"corrected": "**", "uncorrected": "*", "none": ""}
    cells = main.assign(cell=[f"{d:+.2f}{marks.get(s, '')}" for d, s in zip(main["d"], main["significance"])])
    pivot = cells.pivot_table(index="upstream", columns="test", values="cell", aggfunc="first")
    pivot = pivot.loc[[m for m in model_order(main) if m in pivot.index], list(dict.fromkeys(main["test"]))]
    means = main.groupby("test", sort=False)["d"].mean()
    pivot.loc["mean over models"] = [f"{means[t]:+.2f}" for t in pivot.columns]
    if "human_iat_d" in main.columns:
        human = main.drop_duplicates("test").set_index("test")["human_iat_d"]
        pivot.loc["human IAT D"] = [f"{human[t]:+.2f}" if pd.notna(human[t]) else "" for t in pivot.columns]
    return pivot.reset_index().rename(columns={"upstream": "model"})


def model_info(tables: dict) -> pd.DataFrame:
    """One row per model (upstream, family, num_layers) from every table that has them."""
    parts = [tables[k][[c for c in ("upstream", "family", "num_layers") if c in tables[k].columns]]
             for k in ("results", "propagation") if len(tables[k]) and "upstream" in tables[k].columns]
    if not parts:
        return pd.DataFrame(columns=["upstream", "family", "num_layers"])
    info = pd.concat(parts, ignore_index=True)
    if "num_layers" in info:
        info = info.sort_values("num_layers", na_position="last", kind="stable")
    return info.drop_duplicates("upstream").reset_index(drop=True)


def has_demo_tests(tables: dict) -> bool:
    """True when a SpEAT or propagation result of the sweep is one of the synthetic demo tests."""
    return any(len(tables[k]) and "test" in tables[k].columns
               and tables[k]["test"].astype(str).str.startswith("demo").any() for k in ("results", "propagation"))


def _figures(tables: dict, out: Path, options: ReportOptions) -> dict[str, Path]:
    """The figures that have data (a figure without rows is not drawn), by name."""
    main = tables["main"]
    info = model_info(tables)
    for name in ("layers", "se_curves", "propagation", "paper_comparison"):
        t = tables.get(name)
        if t is not None and len(t) and "upstream" in t.columns and "family" not in t.columns:
            tables[name] = t.merge(info[["upstream", "family"]], on="upstream", how="left")
    styles = paper_figures.model_styles(info) if len(info) else None
    temporal = str(main["temporal"].iloc[0]) if len(main) and "temporal" in main else "mean"
    agg = str(main["aggregation"].iloc[0]) if len(main) else options.main_aggregation
    n_per = int(tables["appendix_d"]["n"].max()) if len(tables["appendix_d"]) else None
    caveat = DEMO_CAVEAT if has_demo_tests(tables) else None
    figs = {
        "figure1_effect_sizes": paper_figures.effect_sizes_figure(
            main, out / "figure1_effect_sizes.png", title=f"SpEAT d per bias test ({agg})", styles=styles,
            caveat=caveat),
        "figure2_propagation": paper_figures.propagation_figure(
            tables["propagation"], tables["propagation_agreement"], out / "figure2_propagation.png", styles,
            caveat=caveat),
        "figure3_se_curves": paper_figures.se_curves_figure(tables["se_curves"], out / "figure3_se_curves.png",
                                                            styles, caveat=caveat),
        "appendix_d_positive": paper_figures.positive_heatmap(
            sweep_tables.positive_pivot(tables["appendix_d"]), out / "appendix_d_positive.png", n_per,
            caveat=caveat),
        "layer_profiles": paper_figures.layer_lines_figure(tables["layers"], out / "layer_profiles.png", temporal,
                                                           styles, caveat=caveat),
        "significance_heatmap": paper_figures.significance_heatmap(
            main, out / "significance_heatmap.png", options.alpha, options.corrections[0], styles, caveat=caveat),
    }
    if "paper_comparison" in tables:
        figs["paper_comparison"] = paper_figures.paper_comparison_figure(
            tables["paper_comparison"], out / "paper_comparison.png", styles, caveat=caveat)
    return {name: path for name, path in figs.items() if path is not None}


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
        lines.append(f"  - `{d}`: {reason}" if reason else f"  - `{d}`")
    if len(results.incomplete) > 20:
        lines.append(f"  - and {len(results.incomplete) - 20} more")
    return lines


def _sections(results: SweepResults, tables: dict, options: ReportOptions,
              figs: dict[str, Path]) -> list[tuple[str, str]]:
    main, speat = tables["main"], tables["results"]
    agg = str(main["aggregation"].iloc[0]) if len(main) else options.main_aggregation
    method = options.corrections[0] if options.corrections else "none"
    sections = []
    if has_demo_tests(tables):
        sections.append(("Note", SYNTHETIC_NOTE))
    n_prop = results.propagation["run_dir"].nunique() if "run_dir" in results.propagation else 0
    lines = [f"- sweep folder(s): {', '.join(str(d) for d in results.sweep_dirs)}",
             f"- SpEAT runs: {len(speat)} ({speat['upstream'].nunique() if len(speat) else 0} models, "
             f"{speat['test'].nunique() if len(speat) else 0} tests, "
             f"{speat['aggregation'].nunique() if len(speat) else 0} aggregations); SER runs: {n_prop}"]
    if results.duplicates:
        lines.append(f"- {results.duplicates} repeated SpEAT run(s) ignored (the newest of each is kept)")
    if results.incomplete:
        lines.append(f"- **{len(results.incomplete)} job folder(s) have no results yet** (failed or interrupted; "
                     "the reason of each, from its `job_status.json` or log, below). Run the same sweep command "
                     "again (same `hydra.sweep.dir`) to finish only these; finished jobs are skipped.")
        lines.extend(_incomplete_lines(results))
    sections.append(("Sweep", "\n".join(lines)))
    sections.append(("SpEAT effect sizes (Figure 1)",
                     _image(figs, "figure1_effect_sizes", "Figure 1", "no SpEAT results in this sweep")
                     + f"\n\nd per model and test ({agg}); `**` significant "
                     f"after {method.capitalize()} correction over the {len(main)} model x test results of this "
                     f"aggregation, `*` significant at alpha = {options.alpha} uncorrected only. "
                     "One-sided permutation p (H1: d > 0). All runs: `results.csv` / `results.parquet`.\n\n"
                     + markdown_table(d_pivot(main))))
    sections.append(("Significance", _image(figs, "significance_heatmap", "significance heat map",
                                            "no SpEAT results in this sweep")))
    agreement = tables["propagation_agreement"]
    if len(agreement):
        body = (_image(figs, "figure2_propagation", "Figure 2", "no SER propagation results") + "\n\n"
                "SpEAT d vs. Cohen's d of the valence head's predictions (X vs. Y); `pooled`: all heads' "
                "predictions pooled per group. Sign agreement:\n\n" + markdown_table(agreement))
    else:
        body = ("_No Figure 2: no SER propagation runs in this sweep (see `python train.py`, experiment "
                "paper_propagation)._")
    sections.append(("Bias propagation to SER (Figure 2)", body))
    sections.append(("Standard error vs. number of stimuli (Figure 3)",
                     _image(figs, "figure3_se_curves", "Figure 3", "no SE curves: run the sweep with "
                            "`speat.se_curve=true` (experiment paper_se_curves)")))
    sections.append(("SpEAT d at every layer", _image(figs, "layer_profiles", "layer-profile figure",
                                                      "no per-layer results (speat.per_layer=false)")
                     + "\n\nWhere in each network "
                     "the association lives: d of each single layer's temporal statistic (`layers.csv`)."))
    pivot = sweep_tables.positive_pivot(tables["appendix_d"])
    sections.append(("Proportion of positive d per aggregation strategy (appendix D)",
                     _image(figs, "appendix_d_positive", "appendix D figure", "no SpEAT results in this sweep") + "\n\n"
                     + (markdown_table(pivot.reset_index(), floatfmt=".2f") if len(pivot) else "_(no rows)_")))
    anova = tables["anova"]
    sections.append(("Two-way ANOVA: test x model family",
                     tables["_anova_note"] + ("\n\n" + markdown_table(anova) if len(anova) else "")))
    cong, totals = tables["congruence"], tables["_congruence_totals"]
    body = (f"{totals['n_congruent']} of {totals['n_total']} model x test effect sizes ({agg}) have the sign of "
            "the human IAT D of their test.\n\n" + markdown_table(cong)) if totals["n_total"] else \
        "_No test in this sweep has a human IAT D._"
    by_agg = tables["congruence_by_aggregation"]
    if len(by_agg):
        body += (f"\n\nPer aggregation strategy: tests whose mean d over models has the IAT's sign "
                 f"({int(by_agg['n_congruent'].sum())} of {int(by_agg['n_tests'].sum())} in all).\n\n"
                 + markdown_table(by_agg))
    sections.append(("Congruence with human IAT signs", body))
    if "paper_comparison" in tables:
        comp = tables["paper_comparison"]
        if len(comp):
            body = (_image(figs, "paper_comparison", "paper comparison figure", "no data")
                    + "\n\nThe paper's published d (temporal mean, layer mean; the layer sum gives the same d) "
                    "beside this sweep's d; `d_minus_paper` = this - paper. "
                    f"Same sign in {int(comp['same_sign'].sum())} of {len(comp)}; mean |difference| "
                    f"{comp['d_minus_paper'].abs().mean():.3f}.\n\n"
                    + markdown_table(comp.drop(columns=["model_id"], errors="ignore")))
        else:
            body = "_No (model, test) of this sweep is in the paper's table._"
        sections.append(("Reproduction check: the paper's published results", body))
    return sections


def write_sweep_report(results: SweepResults, output_dir: str | Path, options: ReportOptions = ReportOptions(),
                       paper: pd.DataFrame | None = None, run=None) -> SweepReport:
    """Write the report folder (see the module docstring); log tables and figures to ``run`` if given."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / REPORT_MARKER).write_text("speechbias sweep report: not a run folder\n", encoding="utf-8")
    tables = build_tables(results, options, paper)
    speat = tables["results"]
    write_results(speat, out)
    atomic_write(out / "results.parquet", lambda tmp: speat.to_parquet(tmp, index=False))
    files = [k for k, v in tables.items() if not k.startswith("_") and k not in ("results", "main")
             and isinstance(v, pd.DataFrame)]
    for name in files:
        write_results(tables[name], out, stem=name)
    figs = _figures(tables, out, options)
    sections = _sections(results, tables, options, figs)
    sections.append(("Files", "\n".join(f"- `{name}.csv`" for name in ["results"] + files)
                     + "\n- `results.parquet`\n" + "\n".join(f"- `{p.name}`" for p in figs.values())))
    write_report(out, options.title, sections)
    totals = tables["_congruence_totals"]
    summary = {"report/n_speat_runs": int(len(speat)), "report/n_propagation_rows": int(len(results.propagation)),
               "report/n_incomplete": len(results.incomplete), "report/human_congruent": totals["n_congruent"],
               "report/human_total": totals["n_total"]}
    _log_wandb(run, tables, files, figs, summary)
    return SweepReport(output_dir=out, tables={k: v for k, v in tables.items() if not k.startswith("_")},
                       figures=figs, sections=sections, summary=summary)


def _log_wandb(run, tables: dict, files: list[str], figs: dict[str, Path], summary: dict) -> None:
    if run is None:
        return
    wandb_run.log_metrics(run, summary)
    wandb_run.log_table(run, "report/results", tables["results"])
    for name in files:
        if len(tables[name]):
            wandb_run.log_table(run, f"report/{name}", tables[name])
    wandb_run.log_images(run, {f"report/{k}": v for k, v in figs.items()})

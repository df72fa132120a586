"""Files and W&B entries of one SpEAT run (one upstream x bias test x aggregation)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from speechbias.report import figures, wandb_run
from speechbias.report.run_files import markdown_table, write_report, write_results

SYNTHETIC_NOTE = (
    "**The demo stimuli are synthetic (espeak-ng voices): this run checks the plumbing and is not a "
    "finding about any model or group.**"
)


def write_speat_outputs(output_dir: Path, row: dict, layers: pd.DataFrame | None, se: pd.DataFrame | None,
                        bias_test, run=None) -> None:
    """results.csv/json, layers.csv, se_curve.csv, report.md and figures; the same to W&B when on."""
    output_dir = Path(output_dir)
    results = pd.DataFrame([row])
    images = {}
    if layers is not None:
        write_results(layers, output_dir, stem="layers")
        images["layer_profile"] = figures.layer_profile(
            layers, f"{row['test']}: d per layer ({row['temporal']} over frames)", output_dir / "layer_profile.png")
    if se is not None:
        write_results(se, output_dir, stem="se_curve")
    test = row["test"]
    cols = ["upstream", "test", "aggregation", "d", "p", "n_x", "n_y", "n_a", "n_b", "n_permutations", "exact",
            "human_iat_d"]
    table = results[[c for c in cols if c in results.columns]]
    sections = [("Result", markdown_table(table))]
    interp = (f"d > 0: {bias_test.x_label} ({'X'}) is more associated with {bias_test.a_label} than "
              f"{bias_test.y_label} (Y) is; p is one-sided (H1: d > 0), "
              f"{'exact' if row['exact'] else 'sampled'} over {row['n_permutations']:,} partitions.")
    sections.append(("How to read it", interp))
    if str(test).startswith("demo"):
        sections.insert(0, ("Note", SYNTHETIC_NOTE))
    if layers is not None:
        sections.append(("d at every layer", "![layer profile](layer_profile.png)\n\n" + markdown_table(layers)))
    if se is not None:
        sections.append(("Bootstrap standard error of d vs. number of stimuli", markdown_table(se)))
    title = f"SpEAT: {row.get('upstream', '')} / {test} / {row['aggregation']}"
    write_report(output_dir, title, sections)
    # results.json last: its presence marks the run as finished (a rerun skips it), so a run killed
    # before this line leaves no results.json and is redone in full
    write_results(results, output_dir)
    wandb_run.log_metrics(run, {f"speat/{test}/d": row["d"], f"speat/{test}/p": row["p"]})
    wandb_run.log_table(run, f"speat/{test}/results", results)
    if layers is not None:
        wandb_run.log_table(run, f"speat/{test}/layers", layers)
    wandb_run.log_images(run, {f"speat/{test}/{k}": v for k, v in images.items()})

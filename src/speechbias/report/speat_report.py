"""Files and W&B entries of one SpEAT run (one upstream x bias test x aggregation)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from speechbias.report import figures, wandb_run
from speechbias.report.caveat import DEMO_CAVEAT, markdown_caveat
from speechbias.report.run_files import markdown_table, write_report, write_results


def is_demo_test(test: str) -> bool:
    """The shipped synthetic demo tests (``demo_voice``, ``demo_accent``, any ``demo_*``)."""
    return str(test).startswith("demo")


def write_speat_outputs(output_dir: Path, row: dict, layers: pd.DataFrame | None, se: pd.DataFrame | None,
                        bias_test, run=None, layer_convention: str | None = None) -> None:
    """results.csv/json, layers.csv, se_curve.csv, report.md and figures; the same to W&B when on.

    ``layer_convention``: the upstream's (``fingerprint_fields()["layer_convention"]``), for the
    layer axis of ``layer_profile.png``. Demo tests get the demo caveat in report.md and on figures.
    """
    output_dir = Path(output_dir)
    results = pd.DataFrame([row])
    demo = is_demo_test(row["test"])
    images = {}
    if layers is not None:
        write_results(layers, output_dir, stem="layers")
        images["layer_profile"] = figures.layer_profile(
            layers, f"{row['test']}: d per layer ({row['temporal']} over frames)", output_dir / "layer_profile.png",
            layer_convention=layer_convention, caveat=DEMO_CAVEAT if demo else None)
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
    if demo:
        sections.insert(0, ("Note", markdown_caveat(DEMO_CAVEAT)))
    if layers is not None:
        note = figures.permutation_note(layers)
        sections.append(("d at every layer", "![layer profile](layer_profile.png)\n\n"
                         + (f"{note[0].upper()}{note[1:]} (the run's p above: {row['n_permutations']:,}"
                            f"{' partitions, exact' if row['exact'] else ' permutations'}).\n\n" if note else "")
                         + markdown_table(layers)))
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

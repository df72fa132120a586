"""Build a bias test's manifest from the corpora under ``data_root`` (selection=ours or paper).

:func:`build_test` is the ``builder`` named by ``conf/bias_test/*.yaml``: it loads the corpora the
test needs, selects targets (X, Y) and attributes (A = pleasant, B = unpleasant), cuts interview
segments into their own files, and writes a sidecar report next to the manifest:
``<manifest stem>.report.json`` / ``.report.md`` (counts per cell, matching method, seed,
covariate balance before/after selection, clip length test, valence diagnostics) and ``<manifest stem>.valence_residuals.png``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from speechbias.stimuli.manifest import MANIFEST_COLUMNS
from speechbias.stimuli.selection.diagnostics import (
    cell_counts,
    length_test,
    valence_by_sex,
    valence_on_age,
    valence_residuals_figure,
)
from speechbias.stimuli.selection.result import Selection, name_groups
from speechbias.stimuli.selection.segments import cut_segments
from speechbias.stimuli.selection.sources import CorpusSources

log = logging.getLogger(__name__)
SELECTIONS = ("ours", "paper")


def sidecar_paths(manifest_path: str | Path) -> dict[str, Path]:
    """Files written beside ``manifest_path``: report JSON/markdown, residual plot, segment folder."""
    stem = Path(manifest_path).with_suffix("")
    return {
        "json": Path(f"{stem}.report.json"),
        "md": Path(f"{stem}.report.md"),
        "plot": Path(f"{stem}.valence_residuals.png"),
        "segments": Path(f"{stem}_segments"),
    }


def assemble_manifest(*parts: pd.DataFrame) -> pd.DataFrame:
    """Concatenate labelled clip tables; manifest columns first, other metadata after."""
    df = pd.concat(parts, ignore_index=True)
    for col in ("stratum", "pair_id"):
        df[col] = df[col].fillna("").astype(str)
    dup = df["clip_id"].duplicated(keep=False)
    if dup.any():
        raise ValueError(f"selection produced duplicate clip_id(s) {sorted(set(df.loc[dup, 'clip_id']))[:5]}")
    df = df.drop(columns=["listed_audio"], errors="ignore")
    return df[[*MANIFEST_COLUMNS, *[c for c in df.columns if c not in MANIFEST_COLUMNS]]]


def build_report(
    test: str,
    selection: str,
    seed: int | None,
    manifest: pd.DataFrame,
    targets: Selection,
    attributes: Selection,
    plot_path: Path | None,
    **context,
) -> dict:
    """The sidecar report as a JSON-ready dict."""
    pool = attributes.pool if attributes.pool is not None else manifest[manifest["role"].isin(["A", "B"])]
    on_age = valence_on_age(pool)
    fig = valence_residuals_figure(pool) if plot_path is not None else None
    if fig is not None:  # saved beside the manifest at 100 dpi
        import matplotlib.pyplot as plt

        plot_path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(plot_path, dpi=100)
        plt.close(fig)
        on_age["plot"] = str(plot_path)
    return {
        "test": test,
        "selection": selection,
        "seed": seed,
        **{k: (str(v) if v is not None else None) for k, v in context.items()},
        "targets_method": targets.method,
        "attributes_method": attributes.method,
        "notes": targets.notes + attributes.notes,
        "counts": cell_counts(manifest),
        "balance": targets.balance,
        "clip_length": length_test(manifest),
        "attribute_pool": {"n": int(len(pool)), "valence_by_sex": valence_by_sex(pool), "valence_on_age": on_age},
    }


def render_report(report: dict) -> str:
    """Human-readable markdown of :func:`build_report`'s dict."""
    c, cl = report["counts"], report["clip_length"]
    lines = [
        f"# Stimuli of bias test `{report['test']}` (selection={report['selection']}, seed={report['seed']})",
        "",
        f"- targets: {report['targets_method']}",
        f"- attributes: {report['attributes_method']}",
        "",
    ]
    lines += ["## Counts", "", "| cell | clips |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in {**c["per_group"], **c["per_stratum"]}.items()]
    lines += [
        "",
        f"matched pairs: {c['n_pairs']}",
        "",
        "## Clip length (s)",
        "",
        f"{cl['test']}: mean X {cl['mean_x_s']}, mean Y {cl['mean_y_s']}, t = {cl['t']}, p = {cl['p']}"
        + (f", pairs = {cl.get('n_pairs')}" if "n_pairs" in cl else ""),
        "",
    ]
    lines += render_balance(report.get("balance"))
    ap = report["attribute_pool"]
    vs, va = ap["valence_by_sex"], ap["valence_on_age"]
    lines += [
        "## Attribute corpus valence diagnostics",
        "",
        f"pool of {ap['n']} rated clips",
        "",
        f"- {vs['test']}: mean female {vs['mean_female']} (n={vs['n_female']}), mean male {vs['mean_male']} "
        f"(n={vs['n_male']}), t = {vs['t']}, df = {vs['df']}, p = {vs['p']}",
        f"- {va['model']}: slope {va['slope']} per year (p = {va['p_slope']}), R² = {va['r2']}, n = {va['n']}"
        + (f" — skipped: {va['skipped']}" if va.get("skipped") else "")
        + (f"; residual plot `{Path(va['plot']).name}`" if va.get("plot") else ""),
        "",
    ]
    if report["notes"]:
        lines += ["## Notes", ""] + [f"- {n}" for n in report["notes"]] + [""]
    return "\n".join(lines)


def _fmt(v: float | None, digits: int = 3) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"


def render_balance(balance: dict | None) -> list[str]:
    """Markdown lines of a selection's covariate balance (SMD before/after; a propensity model when there is one)."""
    if not balance:
        return []
    lines = [
        "## Covariate balance",
        "",
        f"{balance['method']}; treated = {balance['treated']}, control = {balance['control']}",
        "",
    ]
    if "caliper" in balance:
        lines += [f"caliper {balance['caliper']} on the {balance['caliper_scale']}", ""]
    if "model" in balance:
        coefs = ", ".join(f"{k} {v:.4g}" for k, v in balance.get("coefficients", {}).items())
        fit = f"{balance['model']}" + (f": logit coefficients {coefs}" if coefs else "")
        lines += [f"{fit} (n = {balance['n']})", ""]
    if "n_unmatched_treated" in balance:
        lines += [
            f"pairs: {balance['n_pairs']} ({balance['n_matched']} matched; {balance['n_unmatched_treated']} "
            "treated without a control within the caliper)",
            "",
        ]
    gaps = balance.get("pair_differences")
    head = "| covariate | SMD before | SMD after |" + (
        " mean \\|pair gap\\| | max \\|pair gap\\| | pairs equal |" if gaps else ""
    )
    lines += [head, "|---" * (6 if gaps else 3) + "|"]
    for k, v in balance["smd"].items():
        row = f"| {k} | {_fmt(v['before'])} | {_fmt(v['after'])} |"
        if gaps:
            g = gaps[k]
            row += f" {_fmt(g['mean_abs'], 2)} | {_fmt(g['max_abs'], 2)} | {g['n_equal']} |"
        lines.append(row)
    return lines + [
        "",
        "SMD = (mean treated - mean control) / pooled SD of the groups before selection"
        + ("; pair gap = |treated - control| within a pair." if gaps else "."),
        "",
    ]


def build_test(
    test: str,
    selection: str = "ours",
    data_root: str | Path | None = None,
    paper_lists_dir: str | Path | None = None,
    seed: int | None = 0,
    manifest_path: str | Path | None = None,
    segments_dir: str | Path | None = None,
    corpus_dirs: dict[str, str] | None = None,
    params: dict | None = None,
    allow_missing: bool = False,
) -> pd.DataFrame:
    """Manifest of ``test`` (X, Y, A, B rows; its recipe: :data:`speechbias.stimuli.registry.RECIPES`),
    plus its sidecar report.

    ``selection``: "ours" (the paper's procedures, seeded by ``seed``) or "paper" (the authors'
    published lists in ``paper_lists_dir``). ``params`` overrides a target selection's keyword
    arguments (e.g. ``n_pairs``, ``caliper_s``). ``segments_dir`` (default: beside the manifest)
    receives interview segments cut into WAV files. The report is written when ``manifest_path``
    is given.
    """
    from speechbias.stimuli import registry  # the registry names this builder's procedures

    recipe = registry.recipe(test)
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}")
    sources = CorpusSources(data_root, corpus_dirs)
    if selection == "ours":
        target_rng, attribute_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
        targets = recipe.select_targets(sources, target_rng, dict(params or {}))
        attributes = recipe.attributes.ours(sources.table(recipe.attributes.corpus), attribute_rng)
    else:
        from speechbias.stimuli.paper_lists import PaperListError, paper_targets

        if paper_lists_dir is None:
            raise ValueError(
                "selection=paper needs paper_lists_dir: a folder in the SpEAT authors' data/ layout "
                "(e.g. bias_test.builder.paper_lists_dir=/path/to/SpEAT/data)"
            )
        if recipe.paper_list is None:
            raise PaperListError(f"no published list for test {test!r}; published: {registry.published_tests()}")
        targets = paper_targets(recipe, paper_lists_dir, sources, allow_missing)
        attributes = recipe.attributes.paper(paper_lists_dir, sources, allow_missing)
    targets.clips = name_groups(targets.clips, recipe.groups)
    side = sidecar_paths(manifest_path) if manifest_path is not None else None
    if "start_s" in targets.clips.columns and targets.clips["start_s"].notna().any():
        seg_dir = segments_dir or (side["segments"] if side else None)
        if seg_dir is None:
            raise ValueError(f"test {test}: segments must be cut to files; give manifest_path or segments_dir")
        targets.clips = cut_segments(targets.clips, seg_dir)
    manifest = assemble_manifest(targets.clips, attributes.clips)
    report = build_report(
        test,
        selection,
        seed,
        manifest,
        targets,
        attributes,
        side["plot"] if side else None,
        data_root=data_root,
        paper_lists_dir=paper_lists_dir,
    )
    if side is not None:
        side["json"].parent.mkdir(parents=True, exist_ok=True)
        side["json"].write_text(json.dumps(report, indent=2))
        side["md"].write_text(render_report(report))
        log.info("stimulus report for %s in %s", test, side["md"])
    manifest.attrs["report"] = report
    return manifest

"""Human-readable forms of the WER disparity tables and the WER-by-group bar chart."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd


def _pct(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.2f}"


def table2_markdown(table2: pd.DataFrame, gaps: pd.DataFrame) -> str:
    """Paper form: per category, groups with WER % [95% CI], #utterances, #speakers; then the gap."""
    lines = ["| category | group | WER % | 95% CI | utterances | speakers | ref. words |",
             "|---|---|---:|---|---:|---:|---:|"]
    for cat, t in table2.groupby("category", sort=False):
        for r in t.itertuples():
            spk = "n/a" if pd.isna(r.speakers) else str(int(r.speakers))
            lines.append(f"| {cat} | {r.group} | {_pct(r.wer)} | [{_pct(r.wer_ci_low)}, {_pct(r.wer_ci_high)}] | "
                         f"{r.utterances} | {spk} | {r.ref_words} |")
        g = gaps[gaps.category == cat]
        if len(g):
            g = g.iloc[0]
            lines.append(f"| {cat} | *relative gap* ({g.highest_group} vs {g.lowest_group}) | "
                         f"{100 * g.relative_gap:.1f}% | | | | |")
    return "\n".join(lines)


def table3_markdown(table3: pd.DataFrame) -> str:
    """Paper form: per category, WER ratio group_a / group_b [95% CI], * when the CI excludes 1."""
    if table3.empty:
        return "_(no WER ratios: see notes)_"
    lines = ["| category | comparison | WER ratio | 95% CI | significant |", "|---|---|---:|---|:---:|"]
    for r in table3.itertuples():
        lines.append(f"| {r.category} | {r.group_a} / {r.group_b} | {r.wer_ratio:.3f} | "
                     f"[{r.ci_low:.3f}, {r.ci_high:.3f}] | {'*' if r.significant else ''} |")
    return "\n".join(lines)


def wer_bar_chart(table2: pd.DataFrame, path: str | Path, title: str = "WER by group") -> Path:
    """One panel per category: WER % per group with bootstrap CI error bars. Saved as PNG."""
    from speechbias.report.figures import plt, save

    cats = list(dict.fromkeys(table2["category"]))
    fig, axes = plt.subplots(1, max(1, len(cats)), figsize=(max(4.0, 3.2 * len(cats)), 3.8), squeeze=False)
    for ax, cat in zip(axes[0], cats):
        t = table2[table2.category == cat]
        wer = 100 * t["wer"].to_numpy(float)
        lo = 100 * t["wer_ci_low"].to_numpy(float)
        hi = 100 * t["wer_ci_high"].to_numpy(float)
        err = np.vstack([np.clip(wer - lo, 0, None), np.clip(hi - wer, 0, None)])
        err = np.nan_to_num(err)
        x = np.arange(len(t))
        ax.bar(x, wer, yerr=err, capsize=3, color="tab:blue", alpha=0.8)
        ax.set_xticks(x)
        ax.set_xticklabels([str(g)[:18] for g in t["group"]], rotation=45, ha="right", fontsize=8)
        ax.set_title(cat)
        ax.set_xlabel("group")
        ax.set_ylabel("WER (%)")
    fig.suptitle(f"{title} (error bars: 95% bootstrap CI)")
    return save(fig, path)


def results_table(result, run_info: dict) -> pd.DataFrame:
    """One long table for results.csv: kind = wer (per group), gap (per category), ratio (per pair)."""
    rows = []
    for r in result.table2.itertuples():
        rows.append({"kind": "wer", "category": r.category, "group": r.group, "value": r.wer, "ci_low": r.wer_ci_low,
                     "ci_high": r.wer_ci_high, "utterances": r.utterances, "speakers": r.speakers,
                     "ref_words": r.ref_words, "errors": r.errors})
    for r in result.gaps.itertuples():
        rows.append({"kind": "gap", "category": r.category, "group": f"{r.highest_group} vs {r.lowest_group}",
                     "value": r.relative_gap})
    for r in result.table3.itertuples():
        rows.append({"kind": "ratio", "category": r.category, "group": f"{r.group_a} / {r.group_b}",
                     "group_a": r.group_a, "group_b": r.group_b, "value": r.wer_ratio, "ci_low": r.ci_low,
                     "ci_high": r.ci_high, "significant": r.significant, "method": r.method, "sigma": r.sigma,
                     "n_resamples": r.n_resamples})
    df = pd.DataFrame(rows)
    for k, v in reversed(list(run_info.items())):
        df.insert(0, k, v)
    return df


def write_wer_outputs(result, output_dir: str | Path, run_info: dict, settings: dict) -> dict[str, Path]:
    """results.csv/json, table2.csv, table3.csv, utterances.csv, excluded.csv, wer_by_group.png, report.md."""
    from speechbias.report.run_files import markdown_table, write_report, write_results

    out = Path(output_dir)
    write_results(results_table(result, run_info), out)
    paths = {"results": out / "results.csv"}
    for stem, df in (("table2", result.table2), ("table3", result.table3), ("gaps", result.gaps),
                     ("excluded", result.excluded)):
        write_results(df, out, stem=stem)
        paths[stem] = out / f"{stem}.csv"
    keep = [c for c in ["utterance_id", "path", "speaker", *result.categories, "reference", "hypothesis",
                        "reference_norm", "hypothesis_norm", "ref_words", "hyp_words", "substitutions", "deletions",
                        "insertions", "hits", "errors"] if c in result.utterances.columns]
    tmp = out / ".utterances.csv.tmp"
    result.utterances[keep].to_csv(tmp, index=False)
    tmp.replace(out / "utterances.csv")
    paths["utterances"] = out / "utterances.csv"
    paths["figure"] = wer_bar_chart(result.table2, out / "wer_by_group.png",
                                    title=f"WER by group: {run_info.get('asr', '')}")
    n_utts = len(result.utterances)
    overall = result.utterances["errors"].sum() / result.utterances["ref_words"].sum()
    model_lines = []
    for cat, fit in result.fits.items():
        sig = "" if not fit.has_speaker_effect else f", speaker SD sigma = {fit.sigma:.3f} ({fit.n_speakers} speakers)"
        model_lines.append(f"- {cat}: {fit.method}, {fit.n_obs} utterances{sig}")
    method = (
        "errors_ij ~ Poisson(lambda_ij), log lambda_ij = log(words_ij) + mu_group + r_speaker"
        + (" + covariates" if settings.get("covariates") else "")
        + ", r ~ N(0, sigma^2); maximum likelihood "
        + ("(Laplace approximation, as glmer nAGQ=1)" if int(settings.get("n_agq", 1)) == 1
           else f"(adaptive Gauss-Hermite quadrature, {settings.get('n_agq')} nodes, as glmer nAGQ={settings.get('n_agq')})")
    )
    if result.speaker_column is None:
        method = ("No speaker column: errors_ij ~ Poisson(lambda_ij), log lambda_ij = log(words_ij) + mu_group"
                  + (" + covariates" if settings.get("covariates") else "") + " (Poisson GLM, no speaker random effect).")
    sections = [
        ("Run", "\n".join(f"- {k}: {v}" for k, v in run_info.items())
         + f"\n- utterances scored: {n_utts}; excluded: {len(result.excluded)}\n- overall WER: {100 * overall:.2f}%"
         + f"\n- text normalisation: {settings.get('normalizer')}"),
        ("Table 2: WER by group", table2_markdown(result.table2, result.gaps)
         + "\n\nWER = total errors (S + D + I) / total reference words of the group. CI: percentile bootstrap, "
         + ("speakers" if result.speaker_column else "utterances") + " resampled within the group. "
         + "Relative gap = (highest WER - lowest WER) / lowest WER."),
        ("Table 3: WER ratios (mixed-effects Poisson regression)", table3_markdown(result.table3)
         + f"\n\nModel: {method}\n\nWER ratio = exp(mu_a - mu_b); 95% percentile bootstrap CI over "
         + f"{settings.get('n_resamples')} resamples (seed {settings.get('seed')}), "
         + ("speakers resampled within each group (a speaker drawn twice counts as two speakers)"
            if result.speaker_column else "utterances resampled within each group (ignores speaker clustering)")
         + "; * = CI excludes 1.\n\n" + "\n".join(model_lines)),
        ("Figure", "![WER by group](wer_by_group.png)"),
        ("Notes", "\n".join(f"- {n}" for n in result.notes) if result.notes else "_none_"),
        ("Excluded utterances", (markdown_table(result.excluded.head(50))
                                 + (f"\n\n(first 50 of {len(result.excluded)}; all in excluded.csv)"
                                    if len(result.excluded) > 50 else "")) if len(result.excluded) else "_none_"),
    ]
    paths["report"] = write_report(out, f"ASR WER disparity: {run_info.get('asr', '')} on {run_info.get('corpus', '')}",
                                   sections)
    return paths

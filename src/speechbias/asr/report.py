"""Human-readable forms of a WER disparity result: report.md sections, the WER-by-group bar chart,
the long results table, the per-utterance table and the tracker metrics.

Presentation only: every function returns a string, a DataFrame, a dict or a matplotlib figure; the
task writes them through its :class:`~speechbias.report.run_writer.RunWriter`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from speechbias.report.run_writer import markdown_table


def _pct(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.2f}"


def table2_markdown(table2: pd.DataFrame, gaps: pd.DataFrame) -> str:
    """Paper form: per category, every level with WER % [95% CI], #utterances, #speakers, status; then the gap."""
    lines = [
        "| category | group | WER % | 95% CI | utterances | speakers | ref. words | status |",
        "|---|---|---:|---|---:|---:|---:|---|",
    ]
    for cat, t in table2.groupby("category", sort=False):
        for r in t.itertuples():
            spk = "n/a" if pd.isna(r.speakers) else str(int(r.speakers))
            ci = "n/a" if pd.isna(r.wer_ci_low) else f"[{_pct(r.wer_ci_low)}, {_pct(r.wer_ci_high)}]"
            lines.append(
                f"| {cat} | {r.group} | {_pct(r.wer)} | {ci} | {r.utterances} | {spk} | {r.ref_words} | {r.status} |"
            )
        g = gaps[gaps.category == cat]
        if len(g):
            g = g.iloc[0]
            lines.append(
                f"| {cat} | *relative gap* ({g.highest_group} vs {g.lowest_group}) | "
                f"{100 * g.relative_gap:.1f}% | | | | | over {g.n_groups} compared groups |"
            )
        else:
            lines.append(f"| {cat} | *relative gap* | n/a | | | | | fewer than two compared groups |")
    return "\n".join(lines)


def levels_markdown(levels: pd.DataFrame, spellings: pd.DataFrame) -> str:
    """Every level of every category: scored utterances, speakers, compared or why not, and the raw
    values of those utterances folded into it (their rows add up to the utterances)."""
    if levels.empty:
        return "_(no levels)_"
    lines = [
        "| category | level | utterances | speakers | status | raw values in the corpus file (scored rows) |",
        "|---|---|---:|---:|---|---|",
    ]
    for r in levels.itertuples():
        sp = spellings[(spellings["category"] == r.category) & (spellings["level"] == r.group)]
        raw = ", ".join(f"{v!r} ({n})" for v, n in zip(sp["raw_value"], sp["rows"]))
        spk = "n/a" if pd.isna(r.speakers) else str(int(r.speakers))
        lines.append(f"| {r.category} | {r.group} | {r.utterances} | {spk} | {r.status} | {raw.replace('|', '/')} |")
    return "\n".join(lines)


def drops_markdown(drops: pd.DataFrame) -> str:
    """Utterances of the corpus table not scored, per level, with the reasons (or a line saying there were none)."""
    if drops.empty:
        return "_No utterance of the corpus table was dropped before scoring._"
    lines = ["| category | level | dropped | reasons |", "|---|---|---:|---|"]
    lines += [
        f"| {r.category} | {r.group} | {r.dropped} | {str(r.reasons).replace('|', '/')} |" for r in drops.itertuples()
    ]
    return "\n".join(lines)


def table3_heading(fits: dict) -> str:
    """Table 3's heading, naming the model actually fitted: mixed-effects Poisson (speaker random
    intercept) or Poisson GLM (no speaker effect), or both when the categories differ."""
    mixed = {cat: fit.has_speaker_effect for cat, fit in fits.items()}
    if mixed and all(mixed.values()):
        model = "mixed-effects Poisson regression, speaker random intercept"
    elif mixed and not any(mixed.values()):
        model = "Poisson GLM, no speaker random effect"
    elif mixed:
        glm = ", ".join(c for c, m in mixed.items() if not m)
        model = f"mixed-effects Poisson regression; Poisson GLM for {glm}"
    else:
        model = "no model fitted"
    return f"Table 3: WER ratios ({model})"


def levels_console_lines(levels: pd.DataFrame) -> list[str]:
    """One line per category: ``category: level=n [status], ...`` for the console."""
    out = []
    for cat, t in levels.groupby("category", sort=False):
        parts = [
            f"{r.group}={r.utterances}" + ("" if r.compared else f" [{r.status.removeprefix('not compared: ')}]")
            for r in t.itertuples()
        ]
        out.append(f"{cat}: " + ", ".join(parts))
    return out


def table3_markdown(table3: pd.DataFrame) -> str:
    """Paper form: per category, WER ratio group_a / group_b [95% CI], * when a non-degenerate CI excludes 1."""
    if table3.empty:
        return "_(no WER ratios: see notes)_"
    lines = ["| category | comparison | WER ratio | 95% CI | significant |", "|---|---|---:|---|:---:|"]
    for r in table3.itertuples():
        sig = "degenerate CI" if r.degenerate else ("*" if r.significant else "")
        lines.append(
            f"| {r.category} | {r.group_a} / {r.group_b} | {r.wer_ratio:.3f} | "
            f"[{r.ci_low:.3f}, {r.ci_high:.3f}] | {sig} |"
        )
    return "\n".join(lines)


def wer_bar_chart(table2: pd.DataFrame, title: str = "WER by group"):
    """One panel per category: WER % per level with bootstrap CI error bars; levels not compared
    (undisclosed, too small) drawn hatched grey. Returns the figure (the writer saves it)."""
    from speechbias.report.figures import plt

    cats = list(dict.fromkeys(table2["category"]))
    fig, axes = plt.subplots(1, max(1, len(cats)), figsize=(max(4.0, 3.2 * len(cats)), 3.8), squeeze=False)
    for ax, cat in zip(axes[0], cats):
        t = table2[table2.category == cat]
        wer = 100 * t["wer"].to_numpy(float)
        lo = 100 * t["wer_ci_low"].to_numpy(float)
        hi = 100 * t["wer_ci_high"].to_numpy(float)
        err = np.vstack([np.clip(wer - lo, 0, None), np.clip(hi - wer, 0, None)])
        err = np.nan_to_num(err)
        compared = t["compared"].to_numpy(bool)
        x = np.arange(len(t))
        bars = ax.bar(x, wer, yerr=err, capsize=3, color=np.where(compared, "tab:blue", "lightgrey"), alpha=0.8)
        for b, c in zip(bars, compared):
            if not c:
                b.set_hatch("//")
        ax.set_xticks(x)
        ax.set_xticklabels(
            [str(g)[:18] + ("" if c else " (n.c.)") for g, c in zip(t["group"], compared)],
            rotation=45,
            ha="right",
            fontsize=8,
        )
        ax.set_title(cat)
        ax.set_xlabel("group")
        ax.set_ylabel("WER (%)")
    fig.suptitle(f"{title}\n(error bars: 95% bootstrap CI; n.c. = not compared: undisclosed or too small)", fontsize=10)
    return fig


def results_table(result, run_info: dict) -> pd.DataFrame:
    """One long table for results.csv: kind = wer (per group), gap (per category), ratio (per pair)."""
    rows = []
    for r in result.table2.itertuples():
        rows.append(
            {
                "kind": "wer",
                "category": r.category,
                "group": r.group,
                "value": r.wer,
                "ci_low": r.wer_ci_low,
                "ci_high": r.wer_ci_high,
                "utterances": r.utterances,
                "speakers": r.speakers,
                "ref_words": r.ref_words,
                "errors": r.errors,
                "compared": r.compared,
                "status": r.status,
            }
        )
    for r in result.gaps.itertuples():
        rows.append(
            {
                "kind": "gap",
                "category": r.category,
                "group": f"{r.highest_group} vs {r.lowest_group}",
                "value": r.relative_gap,
            }
        )
    for r in result.table3.itertuples():
        rows.append(
            {
                "kind": "ratio",
                "category": r.category,
                "group": f"{r.group_a} / {r.group_b}",
                "group_a": r.group_a,
                "group_b": r.group_b,
                "value": r.wer_ratio,
                "ci_low": r.ci_low,
                "ci_high": r.ci_high,
                "significant": r.significant,
                "degenerate": r.degenerate,
                "method": r.method,
                "sigma": r.sigma,
                "n_resamples": r.n_resamples,
            }
        )
    df = pd.DataFrame(rows)
    for k, v in reversed(list(run_info.items())):
        df.insert(0, k, v)
    return df


UTTERANCE_COLUMNS = (
    "utterance_id",
    "path",
    "speaker",
    "reference",
    "hypothesis",
    "reference_norm",
    "hypothesis_norm",
    "ref_words",
    "hyp_words",
    "substitutions",
    "deletions",
    "insertions",
    "hits",
    "errors",
)


def utterance_table(result) -> pd.DataFrame:
    """utterances.csv: id, path, speaker, the categories, texts (raw and normalised) and error counts."""
    keep = [
        c
        for c in [*UTTERANCE_COLUMNS[:3], *result.categories, *UTTERANCE_COLUMNS[3:]]
        if c in result.utterances.columns
    ]
    return result.utterances[keep]


def overall_wer(result) -> float:
    """Total errors / total reference words over every scored utterance."""
    return result.utterances["errors"].sum() / result.utterances["ref_words"].sum()


def wer_metrics(result) -> dict[str, float]:
    """Tracker metrics: ``wer/<category>/<group>``, ``wer/overall``, ``wer_gap/<category>``,
    ``wer_ratio/<category>/<a>_vs_<b>`` (fractions, not percent)."""
    metrics = {f"wer/{r.category}/{r.group}": float(r.wer) for r in result.table2.itertuples()}
    metrics["wer/overall"] = float(overall_wer(result))
    metrics.update({f"wer_gap/{r.category}": float(r.relative_gap) for r in result.gaps.itertuples()})
    metrics.update(
        {f"wer_ratio/{r.category}/{r.group_a}_vs_{r.group_b}": float(r.wer_ratio) for r in result.table3.itertuples()}
    )
    return metrics


def report_title(run_info: dict) -> str:
    return f"ASR WER disparity: {run_info.get('asr', '')} on {run_info.get('corpus', '')}"


def report_sections(result, run_info: dict, settings: dict) -> list[tuple[str, str]]:
    """report.md sections: run, levels, Table 2, Table 3 (with the model fitted), figure, notes,
    excluded utterances. ``settings``: normalizer, n_agq, n_resamples, seed, covariates."""
    n_utts = len(result.utterances)
    overall = overall_wer(result)
    model_lines = []
    for cat, fit in result.fits.items():
        sig = "" if not fit.has_speaker_effect else f", speaker SD sigma = {fit.sigma:.3f} ({fit.n_speakers} speakers)"
        model_lines.append(f"- {cat}: {fit.method}, {fit.n_obs} utterances{sig}")
    method = (
        "errors_ij ~ Poisson(lambda_ij), log lambda_ij = log(words_ij) + mu_group + r_speaker"
        + (" + covariates" if settings.get("covariates") else "")
        + ", r ~ N(0, sigma^2); maximum likelihood "
        + (
            "(Laplace approximation, as glmer nAGQ=1)"
            if int(settings.get("n_agq", 1)) == 1
            else f"(adaptive Gauss-Hermite quadrature, {settings.get('n_agq')} nodes, as glmer nAGQ={settings.get('n_agq')})"
        )
    )
    if result.speaker_column is None:
        method = (
            "No speaker column: errors_ij ~ Poisson(lambda_ij), log lambda_ij = log(words_ij) + mu_group"
            + (" + covariates" if settings.get("covariates") else "")
            + " (Poisson GLM, no speaker random effect)."
        )
    rule = result.rule
    return [
        (
            "Run",
            "\n".join(f"- {k}: {v}" for k, v in run_info.items())
            + f"\n- utterances scored: {n_utts}; excluded: {len(result.excluded)}\n- overall WER: {100 * overall:.2f}%"
            + f"\n- text normalisation: {settings.get('normalizer')}",
        ),
        (
            "Levels",
            levels_markdown(result.levels, result.spellings)
            + "\n\nEvery value of every category, after folding case and whitespace. Non-answers (blank, NaN, "
            + "'prefer not to say', ...) form the level 'undisclosed', which is "
            + ("compared like a group (include_undisclosed)" if rule.include_undisclosed else "never compared")
            + f". A compared group needs at least {rule.min_utterances} utterances"
            + (f" and {rule.min_speakers} speakers" if result.speaker_column else " (no speaker ids to count speakers)")
            + "; smaller levels are listed but set neither the gap nor a WER ratio. Counts are of the scored "
            + "utterances; those dropped before scoring are listed per level below.\n\n"
            + drops_markdown(result.drops),
        ),
        (
            "Table 2: WER by group",
            table2_markdown(result.table2, result.gaps)
            + "\n\nWER = total errors (S + D + I) / total reference words of the group. CI: percentile bootstrap, "
            + ("speakers" if result.speaker_column else "utterances")
            + " resampled within the group. "
            + "Relative gap = (highest WER - lowest WER) / lowest WER over the compared groups. "
            + "No CI (n/a) for a level with a single resampling unit.",
        ),
        (
            table3_heading(result.fits),
            table3_markdown(result.table3)
            + f"\n\nModel: {method}\n\nWER ratio = exp(mu_a - mu_b); 95% percentile bootstrap CI over "
            + f"{settings.get('n_resamples')} resamples (seed {settings.get('seed')}), "
            + (
                "speakers resampled within each group (a speaker drawn twice counts as two speakers)"
                if result.speaker_column
                else "utterances resampled within each group (ignores speaker clustering)"
            )
            + "; * = CI excludes 1; a degenerate CI (zero width, or a group with one resampling unit) is never "
            + "marked significant.\n\n"
            + "\n".join(model_lines),
        ),
        ("Figure", "![WER by group](wer_by_group.png)"),
        ("Notes", "\n".join(f"- {n}" for n in result.notes) if result.notes else "_none_"),
        (
            "Excluded utterances",
            (
                markdown_table(result.excluded.head(50))
                + (
                    f"\n\n(first 50 of {len(result.excluded)}; all in excluded.csv)"
                    if len(result.excluded) > 50
                    else ""
                )
            )
            if len(result.excluded)
            else "_none_",
        ),
    ]


def shard_title(shard_index: int, shard_count: int) -> str:
    return f"ASR transcription shard {shard_index}/{shard_count}"


def shard_sections(run_info: dict, counts: dict) -> list[tuple[str, str]]:
    """report.md of a transcription shard: what it transcribed, and how to analyse."""
    return [
        (
            "Shard",
            "Transcription only; rerun without task.shard_count to analyse from the cache.\n\n"
            + "\n".join(f"- {k}: {v}" for k, v in {**run_info, **counts}.items()),
        )
    ]

"""Dataset statistics of a Spoken StereoSet table: the paper's Table 2 and Fig. 1.

Per domain: speakers (distinct speaker names), instances (rows = spoken contexts), mean context
duration in seconds (from the WAV headers), mean continuation length in words (whitespace-separated
words over the distinct continuations of the domain's items), and the distribution of each
continuation's mean ROUGE-L F1 against all other continuations of its domain.

Continuations are counted once per distinct text within a domain. In the released CSVs every voice
has its own row *and its own id*, so keying by (id, kind, text) would count a text once per voice
(gender: 8,541 continuations for 1,411 distinct texts), giving the all-pairs ROUGE-L ~36x more
pairs; ``benchmarks/sllm_statistics.py`` times the statistics on a fixture of the released size.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import soundfile as sf

from speechbias.fileio.audio import AudioError
from speechbias.sllm import CONTINUATION_KINDS
from speechbias.sllm.rouge import mean_rouge_l_vs_others


def context_duration_s(path: str | Path) -> float:
    """Duration of an audio file in seconds, from its header (no decoding)."""
    try:
        return float(sf.info(str(path)).duration)
    except Exception as exc:  # libsndfile errors
        raise AudioError(path, f"cannot read audio header ({type(exc).__name__}: {exc})") from exc


def distinct_continuations(table: pd.DataFrame) -> pd.DataFrame:
    """One row per distinct (domain, text): columns domain, id, kind, text, where id and kind are those
    of the text's first occurrence (row order, then stereotypical, anti-stereotypical, irrelevant)."""
    long = table[["domain", "id", *CONTINUATION_KINDS]].melt(
        id_vars=["domain", "id"],
        value_vars=list(CONTINUATION_KINDS),
        var_name="kind",
        value_name="text",
        ignore_index=False,
    )
    # melt stacks kind by kind; restore row order so "first occurrence" means the first row that has it
    long = long.assign(_row=long.index).sort_values("_row", kind="stable").drop(columns="_row")
    return long.drop_duplicates(["domain", "text"]).reset_index(drop=True)


def continuation_rouge_l(table: pd.DataFrame, method: str = "rapidfuzz") -> pd.DataFrame:
    """Distinct continuations with ``mean_rouge_l``: mean ROUGE-L F1 against all others of the domain."""
    parts = []
    for _, conts in distinct_continuations(table).groupby("domain", sort=False):
        conts = conts.copy()
        conts["mean_rouge_l"] = mean_rouge_l_vs_others(conts["text"].tolist(), method=method)
        parts.append(conts)
    return (
        pd.concat(parts, ignore_index=True)
        if parts
        else pd.DataFrame(columns=["domain", "id", "kind", "text", "mean_rouge_l"])
    )


def dataset_statistics(table: pd.DataFrame, rouge: pd.DataFrame | None = None) -> pd.DataFrame:
    """Table 2: one row per domain (columns domain, speakers, instances, items, mean_context_duration_s,
    mean_continuation_words, mean_rouge_l, median_rouge_l). ``rouge`` from :func:`continuation_rouge_l`."""
    rows = []
    for domain, rows_d in table.groupby("domain", sort=False):
        conts = distinct_continuations(rows_d)
        row = {
            "domain": domain,
            "speakers": int(rows_d["speaker"].nunique()),
            "instances": int(len(rows_d)),
            "items": int(rows_d["id"].nunique()),
            "mean_context_duration_s": float(np.mean([context_duration_s(p) for p in rows_d["audio_path"]])),
            "mean_continuation_words": float(np.mean([len(str(t).split()) for t in conts["text"]])),
        }
        if rouge is not None:
            values = rouge.loc[rouge["domain"] == domain, "mean_rouge_l"].to_numpy(dtype=float)
            row["mean_rouge_l"] = float(np.nanmean(values)) if values.size else float("nan")
            row["median_rouge_l"] = float(np.nanmedian(values)) if values.size else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def plot_rouge_l_histogram(rouge: pd.DataFrame, bins: int = 30):
    """Fig. 1: histogram of each continuation's mean ROUGE-L against its domain, one colour per domain.
    Returns the figure (the run's writer saves it, with the demo caveat of a demo run)."""
    from matplotlib.ticker import MaxNLocator

    from speechbias.report.figures import plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    values = rouge["mean_rouge_l"].dropna()
    edges = np.linspace(0.0, max(float(values.max()) if len(values) else 1.0, 1e-3), bins + 1)
    for domain, part in rouge.groupby("domain", sort=False):
        ax.hist(part["mean_rouge_l"].dropna(), bins=edges, alpha=0.6, label=f"{domain} (n={len(part)})")
    ax.set_xlabel("mean ROUGE-L F1 against the other continuations of the domain")
    ax.set_ylabel("number of continuations")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts: no 0.5 ticks
    ax.set_title("Diversity of continuations")
    ax.legend()
    return fig

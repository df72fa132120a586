"""The sweep report's tables as shown: layouts of the computed tables for report.md and the figures
(pure functions on DataFrames; the numbers are computed in :mod:`speechbias.stats.sweep_analysis`
and :mod:`speechbias.ser.sweep_propagation`).

* :func:`d_pivot`: models x tests table of d with significance marks (report.md, Figure 1's table);
* :func:`positive_pivot`: appendix D's layer x temporal layout of the proportion of positive d;
* :func:`model_info`, :func:`with_family`: one row per model, and its family beside any table.
"""

from __future__ import annotations

import pandas as pd

from speechbias.aggregation import LAYER_CHOICES, TEMPORAL
from speechbias.results.sweep_results import model_order

LAYER_ROW_ORDER = ("sum", "mean", "min", "max", "first", "second", "q1", "q2", "q3", "penultimate", "last")


def positive_pivot(long: pd.DataFrame) -> pd.DataFrame:
    """Appendix D layout: one row per layer strategy, one column per temporal strategy (proportion)."""
    if long.empty:
        return pd.DataFrame()
    pivot = long.pivot(index="layer", columns="temporal", values="proportion_positive")
    rows = [v for v in LAYER_ROW_ORDER if v in pivot.index] + [v for v in pivot.index if v not in LAYER_CHOICES]
    cols = [t for t in TEMPORAL if t in pivot.columns]
    return pivot.loc[rows, cols]


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


def model_info(*tables: pd.DataFrame) -> pd.DataFrame:
    """One row per model (``upstream, family, num_layers``) from every given table that has them,
    shallowest model first."""
    parts = [
        t[[c for c in ("upstream", "family", "num_layers") if c in t.columns]]
        for t in tables
        if len(t) and "upstream" in t.columns
    ]
    if not parts:
        return pd.DataFrame(columns=["upstream", "family", "num_layers"])
    info = pd.concat(parts, ignore_index=True)
    if "num_layers" in info:
        info = info.sort_values("num_layers", na_position="last", kind="stable")
    return info.drop_duplicates("upstream").reset_index(drop=True)


def with_family(table: pd.DataFrame, info: pd.DataFrame) -> pd.DataFrame:
    """``table`` with the ``family`` of each upstream (from :func:`model_info`) when it lacks one."""
    if len(table) and "upstream" in table.columns and "family" not in table.columns:
        return table.merge(info[["upstream", "family"]], on="upstream", how="left")
    return table

"""Bias propagation from several heads: Cohen's d per head and with the heads' predictions pooled.

The SpEAT paper trains three heads per model (learning rates 1e-3, 1e-4, 1e-5) and pools all
three heads' predicted valence per group before computing Cohen's d. Input: the
``predictions.csv`` tables of several runs (one row per clip and head: ``upstream``, ``test``,
``lr``, ``role`` X/Y, ``predicted_valence``, ``ser_data``).

Precision: predictions are read as float64 and Cohen's d, means and CIs are computed in float64
(:func:`speechbias.stats.cohens_d`); only the predictions themselves carry the float32 rounding
of the head's forward pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from speechbias import stats

PREDICTION_COLUMNS = ("upstream", "test", "lr", "role", "predicted_valence", "ser_data")


def lr_label(lr) -> str:
    """1e-4 -> "1e-4": a learning rate as the paper writes it; other labels ("pooled") unchanged."""
    try:
        mantissa, exponent = f"{float(lr):e}".split("e")
    except (TypeError, ValueError):
        return str(lr)
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def read_predictions(tables: Iterable[pd.DataFrame | str | Path]) -> pd.DataFrame:
    """Concatenate prediction tables (DataFrames or CSV paths) and check their columns; ``source``
    names the tables and ``head`` numbers the trained heads: one per table, run folder (``run_dir``,
    when the table has it) and learning rate, since one run may train a head per learning rate."""
    frames = []
    for k, t in enumerate(tables):
        source = str(t) if not isinstance(t, pd.DataFrame) else "<DataFrame>"
        df = pd.read_csv(t) if not isinstance(t, pd.DataFrame) else t
        missing = [c for c in PREDICTION_COLUMNS if c not in df.columns]
        if missing:
            raise ValueError(f"{source}: predictions table lacks column(s) {missing}; has {list(df.columns)}")
        frames.append(df.assign(source=source, table=k))
    if not frames:
        raise ValueError("no prediction tables given")
    out = pd.concat(frames, ignore_index=True)
    keys = ["table"] + (["run_dir"] if "run_dir" in out.columns else []) + ["lr"]
    out["head"] = out.groupby(keys, sort=False, dropna=False).ngroup()
    bad = out.index[out["predicted_valence"].isna()]
    if len(bad):
        raise ValueError(f"{out.loc[bad[0], 'source']}: predicted_valence is empty in {len(bad)} row(s)")
    return out


def pooled_propagation(
    tables: Iterable[pd.DataFrame | str | Path], by: Sequence[str] = ("upstream", "test")
) -> pd.DataFrame:
    """Cohen's d of predicted valence X vs. Y, for every head and pooled over heads.

    One row per group of ``by`` and head (``lr`` = that learning rate) plus one pooled row
    (``lr`` = "pooled": all heads' X predictions vs. all heads' Y predictions). Columns:
    ``*by, lr, n_heads, n_x, n_y, mean_x, mean_y, cohens_d, ci_low, ci_high`` (95% CI). Heads trained on different
    valence sets (``ser_data``) are never pooled together: that is an error.
    """
    df = read_predictions(tables)
    rows = []
    for key, group in df.groupby(list(by), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        label = dict(zip(by, key))
        sets = sorted(group["ser_data"].astype(str).unique())
        if len(sets) > 1:
            raise ValueError(f"{label}: heads trained on different valence sets {sets} cannot be pooled")
        parts = [(str(lr), g) for lr, g in group.groupby(group["lr"].astype(float), sort=True)]
        parts.append(("pooled", group))
        for lr, g in parts:
            x = g.loc[g["role"] == "X", "predicted_valence"].to_numpy(float)
            y = g.loc[g["role"] == "Y", "predicted_valence"].to_numpy(float)
            if x.size < 2 or y.size < 2:
                raise ValueError(f"{label}, lr={lr}: need >= 2 X and >= 2 Y predictions, have {x.size} and {y.size}")
            res = stats.cohens_d(x, y)  # scipy imported at the first call, not with this module
            rows.append(
                {
                    **label,
                    "lr": lr,
                    "n_heads": int(g["head"].nunique()),
                    "n_x": int(x.size),
                    "n_y": int(y.size),
                    "mean_x": float(x.mean()),
                    "mean_y": float(y.mean()),
                    "cohens_d": res.d,
                    "ci_low": res.ci_low,
                    "ci_high": res.ci_high,
                }
            )
    return pd.DataFrame(rows)

"""Bias propagation over a sweep's SER runs: SpEAT d beside the heads' Cohen's d, per learning rate and
pooled over heads, and how often the two signs agree (pure functions on tables, no I/O).

Input: the SER runs' results rows (one per run and bias test: ``upstream``, ``test``, ``lr``,
``cohens_d``, ``speat_d``, ``family``) and their per-clip ``predictions.csv`` tables
(:func:`speechbias.results.sweep_results.collect` reads both). Learning rates are labelled as the paper
writes them (``1e-4``, :func:`speechbias.ser.pooling.lr_label`); ``pooled`` is all heads' predicted
valence pooled per group (:func:`speechbias.ser.pooling.pooled_propagation`).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from speechbias.ser.pooling import lr_label, pooled_propagation
from speechbias.stats.congruence import sign_agreement

log = logging.getLogger(__name__)


def propagation_table(propagation: pd.DataFrame, predictions: pd.DataFrame) -> pd.DataFrame:
    """SpEAT d and downstream Cohen's d per (upstream, test) and head: one row per learning rate and,
    when the per-clip predictions are there, one pooled row (``lr = "pooled"``: all heads' predicted
    valence pooled per group, with :func:`speechbias.ser.pooling.pooled_propagation`).

    Columns: ``upstream, family, test, lr, speat_d, cohens_d, agree``; several runs of one
    (upstream, test, lr), e.g. seeds, are averaged. Rows: pooled first, then learning rates from
    large to small.
    """
    cols = ["upstream", "family", "test", "lr", "speat_d", "cohens_d", "agree"]
    if propagation.empty:
        return pd.DataFrame(columns=cols)
    prop = propagation.assign(
        family=propagation["family"] if "family" in propagation else "other",
        speat_d=propagation["speat_d"] if "speat_d" in propagation else np.nan,
        lr=propagation["lr"].map(lr_label) if "lr" in propagation else "all",
    )
    info = (
        prop.groupby(["upstream", "test"], sort=False)
        .agg(family=("family", "first"), speat_d=("speat_d", "mean"))
        .reset_index()
    )
    table = prop.groupby(["upstream", "test", "lr"], sort=False)["cohens_d"].mean().reset_index()
    if not predictions.empty:
        try:
            pooled = pooled_propagation([predictions], by=("upstream", "test"))
        except ValueError as exc:
            log.warning("could not pool the heads' predictions: %s", exc)
        else:
            pooled = pooled[pooled["lr"] == "pooled"][["upstream", "test", "lr", "cohens_d"]]
            table = pd.concat([pooled, table], ignore_index=True)
    out = table.merge(info, on=["upstream", "test"], how="left")
    out["agree"] = np.sign(out["speat_d"]) == np.sign(out["cohens_d"])
    out = out.sort_values("lr", key=lambda lr: lr.map(lr_rank), kind="stable")
    return out[cols].reset_index(drop=True)


def agreement_counts(prop: pd.DataFrame) -> pd.DataFrame:
    """Per learning rate (and pooled) of a :func:`propagation_table`: how many (model, test) have
    SpEAT d and Cohen's d of equal sign (``lr, n_agree, n_total``)."""
    cols = ["lr", "n_agree", "n_total"]
    if prop.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for lr, g in prop.groupby("lr", sort=False):
        g = (
            g.dropna(subset=["speat_d", "cohens_d"])
            .groupby(["upstream", "test"], as_index=False)[["speat_d", "cohens_d"]]
            .mean()
        )
        if g.empty:
            continue
        g = g.rename(columns={"upstream": "model"})
        res = sign_agreement(g[["model", "test", "speat_d"]], g[["model", "test", "cohens_d"]])
        rows.append({"lr": lr, "n_agree": res.n_agree, "n_total": res.n_total})
    out = pd.DataFrame(rows, columns=cols)
    return out.sort_values("lr", key=lambda lr: lr.map(lr_rank), kind="stable").reset_index(drop=True)


def lr_rank(lr: str) -> float:
    """Sort key of a learning-rate label: pooled first, then learning rates from large to small."""
    if lr == "pooled":
        return -np.inf
    try:
        return -float(lr)
    except ValueError:
        return np.inf

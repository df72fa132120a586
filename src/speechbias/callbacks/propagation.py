"""Bias propagation after fit: the trained valence head's predictions for each bias test's targets.

For every configured bias test, on global rank 0 at the end of ``trainer.fit``:

1. each head, with its best-on-dev weights (the final weights of a head never validated), predicts
   the valence of the test's target clips X and Y from their cached per-layer temporal means;
2. Cohen's d (pooled SD) of predicted valence, X vs. Y (d > 0: X is predicted more positive), per
   head and, when the run trains several heads (``lr=[1e-3,1e-4,1e-5]``), with all heads'
   predictions pooled per group as in the SpEAT paper;
3. the SpEAT d of the same upstream and test, computed on the spot from the cached statistics
   (temporal ``mean``, layer ``sum`` by default) or read from a SpEAT ``results.csv``;
4. whether the two signs agree.

Writes through the run's :class:`~speechbias.report.run_writer.RunWriter`: ``results.csv/json``
(one row per head and test), ``pooled.csv`` (several heads: one row per test), ``predictions.csv``
(one row per head and target clip, to pool heads across runs with
:func:`speechbias.ser.pooling.pooled_propagation`), ``layer_weights.csv``, ``dev_curve.csv``,
figures (:mod:`speechbias.report.propagation_figures`) and ``report.md``; the writer's tracker
record gets the dev curve, the summary metrics, the tables and the figures (the task publishes it).
The writer pickles as its folder, so under ``ddp_spawn`` the worker's writes land in the run
folder and record. The runner extracts every clip before fitting, so here all statistics come
from the cache.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytorch_lightning as pl
import torch

from speechbias.aggregation import Aggregation
from speechbias.features.cache import FeatureCache
from speechbias.features.cached_statistics import StackedStatistics, load_statistics
from speechbias.report.propagation_figures import (
    dev_curve_figure,
    layer_weights_figure,
    layer_weights_markdown,
    predictions_figure,
    training_notes,
)
from speechbias.report.run_writer import RunWriter, markdown_table
from speechbias.roles import split_roles
from speechbias.ser.module import metric_key
from speechbias.ser.pooling import lr_label, pooled_propagation
from speechbias.stats import cohens_d
from speechbias.stats.associations import EqualAssociationsError, effect_size
from speechbias.ser.training_settings import SPEAT_RESULTS_COLUMNS

log = logging.getLogger(__name__)

# speat_source of a test whose SpEAT d is undefined (every target's association the same)
UNDEFINED_SPEAT_D = "undefined (equal associations)"


@dataclass
class PropagationTest:
    """A bias test and its validated manifest (clips with roles X, Y, A, B)."""

    bias_test: object
    manifest: pd.DataFrame

    @property
    def name(self) -> str:
        return str(self.bias_test.name)


def speat_d_from_results(path: str | Path, test: str, fingerprint: str, aggregation: str) -> float | None:
    """SpEAT d of ``test`` for this upstream fingerprint and aggregation from a SpEAT results.csv."""
    df = pd.read_csv(path)
    need = set(SPEAT_RESULTS_COLUMNS)
    if not need <= set(df.columns):
        raise ValueError(f"{path}: SpEAT results need columns {sorted(need)}; has {list(df.columns)}")
    hit = df[(df["test"] == test) & (df["fingerprint"] == fingerprint) & (df["aggregation"] == aggregation)]
    return float(hit["d"].iloc[0]) if len(hit) else None


class PropagationCallback(pl.Callback):
    """Measures bias propagation to the trained valence head (see the module docstring).

    Args:
        tests: the bias tests to evaluate.
        cache / fingerprint: where the per-layer statistics of every test clip are cached.
        writer: the run's writer (its folder, its demo caveat, its tracker record).
        run_info: identity columns written into every row (upstream, family, lr, seed, ser_data...).
        aggregation: temporal x layer aggregation for the SpEAT d (default mean over frames, layer sum).
        speat_results: optional SpEAT results.csv to read d from (falls back to computing it).
    """

    def __init__(
        self,
        tests: list[PropagationTest],
        cache: FeatureCache,
        fingerprint: str,
        writer: RunWriter,
        run_info: dict,
        aggregation: Aggregation | None = None,
        speat_results: str | Path | None = None,
    ):
        self.tests = list(tests)
        self.cache = cache
        self.fingerprint = fingerprint
        self.writer = writer
        self.run_info = dict(run_info)
        self.aggregation = aggregation or Aggregation("mean", "sum")
        self.speat_results = speat_results
        self.summary: dict | None = None
        # each test's statistics in manifest order, handed over by the task from its extraction loop
        # (then nothing is read from the cache again); a test without them is read from the cache
        self.statistics: dict[str, StackedStatistics] = {}

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        trainer.strategy.barrier()
        if not trainer.is_global_zero:
            return
        self.summary = self.compute(pl_module, trainer)

    # -- computation ------------------------------------------------------------------------
    def compute(self, module, trainer: pl.Trainer) -> dict:
        """Predict, compare and write; returns the summary metrics (:func:`summary_metrics`)."""
        heads = module.best_heads()
        lrs = list(module.lrs)
        results, predictions = [], []
        for test in self.tests:
            rows, preds = self._one_test(module, heads, lrs, test)
            results.extend(rows)
            predictions.append(preds)
        results_df = pd.DataFrame(results)
        predictions_df = pd.concat(predictions, ignore_index=True)
        layers_df = pd.concat(
            [
                pd.DataFrame({"lr": lr, "layer": np.arange(h.num_layers), "weight": h.layer_weights().detach().numpy()})
                for lr, h in zip(lrs, heads)
            ],
            ignore_index=True,
        )
        curve_df = pd.DataFrame(module.dev_history, columns=["step", "epoch", "lr", "mse", "r2", "n_dev"])
        best = pd.DataFrame([_best_dev(b) | {"lr": lr} for lr, b in zip(lrs, module.best)])
        reason = nan_dev_reason(module.best, trainer)
        if reason:
            log.warning(reason)
        results_df = results_df.merge(best, on="lr", how="left")
        pooled_df = pooled_table(results_df, predictions_df) if len(lrs) > 1 else pd.DataFrame()
        write_propagation_outputs(
            self.writer, results_df, predictions_df, layers_df, curve_df, self.run_info, pooled=pooled_df
        )
        return summary_metrics(results_df, pooled_df)

    def _one_test(self, module, heads, lrs: list[float], test: PropagationTest) -> tuple[list[dict], pd.DataFrame]:
        m = test.manifest
        stats = self.statistics.get(test.name) or load_statistics(list(m["path"]), self.cache, self.fingerprint)
        roles = m["role"].to_numpy()
        target = np.isin(roles, ["X", "Y"])
        pred = module.predict_valence(torch.from_numpy(stats.mean[target]), heads=heads).numpy()  # (K, n)
        speat_d, speat_source = self._speat_d(test, stats, roles)
        keep = [c for c in ("clip_id", "role", "group", "speaker", "pair_id", "path") if c in m.columns]
        rows, tables = [], []
        for lr, p in zip(lrs, pred):
            pred_x, pred_y = p[roles[target] == "X"], p[roles[target] == "Y"]
            res = cohens_d(pred_x, pred_y)
            rows.append(
                {
                    **self.run_info,
                    "lr": lr,
                    "test": test.name,
                    "n_x": int(pred_x.size),
                    "n_y": int(pred_y.size),
                    "mean_pred_x": float(pred_x.mean()),
                    "mean_pred_y": float(pred_y.mean()),
                    "cohens_d": res.d,
                    "cohens_d_ci_low": res.ci_low,
                    "cohens_d_ci_high": res.ci_high,
                    "speat_d": speat_d,
                    "speat_aggregation": self.aggregation.name,
                    "speat_source": speat_source,
                    "sign_agrees": _agrees(res.d, speat_d),
                    "x_label": getattr(test.bias_test, "x_label", "X"),
                    "y_label": getattr(test.bias_test, "y_label", "Y"),
                }
            )
            preds = m.loc[target, keep].reset_index(drop=True)
            preds.insert(0, "test", test.name)
            for k, v in reversed(list({**self.run_info, "lr": lr}.items())):
                preds.insert(0, k, v)
            preds["predicted_valence"] = p
            tables.append(preds)
        return rows, pd.concat(tables, ignore_index=True)

    def _speat_d(self, test: PropagationTest, stats, roles: np.ndarray) -> tuple[float, str]:
        if self.speat_results:
            d = speat_d_from_results(self.speat_results, test.name, self.fingerprint, self.aggregation.name)
            if d is not None:
                return d, str(self.speat_results)
            log.warning(
                "%s has no SpEAT d for %s / %s; computing it from the cache",
                self.speat_results,
                test.name,
                self.aggregation.name,
            )
        emb = self.aggregation(stats.stat(self.aggregation.temporal))
        parts = split_roles(emb, roles)
        try:
            return float(effect_size(parts["X"], parts["Y"], parts["A"], parts["B"])), "computed"
        except EqualAssociationsError:  # the trained heads' results stand; only the comparison is undefined
            log.warning(
                "SpEAT d of %s on %s (%s) is undefined: every target clip (X and Y) has the same association "
                "with A vs B (standard deviation 0); its speat_d is NaN and sign_agrees empty",
                test.name,
                self.run_info.get("upstream", "this upstream"),
                self.aggregation.name,
            )
            return float("nan"), UNDEFINED_SPEAT_D


def _agrees(d: float, speat_d: float) -> bool | None:
    return bool(np.sign(d) == np.sign(speat_d)) if np.isfinite(speat_d) and np.isfinite(d) else None


def nan_dev_reason(best: list[dict | None], trainer: pl.Trainer) -> str | None:
    """One line saying why a head's dev metrics (``ser/val/r2``, ``ser/val/mse``) are NaN, or None: no
    validation ran within the training steps (with how often it runs), or the dev valences are all equal
    (R2's variance is 0)."""
    if any(b is None for b in best):
        every = int(trainer.check_val_every_n_epoch or 1)
        # optimiser steps per epoch: the datamodule's count (a batch may take several steps)
        per_epoch = getattr(trainer.datamodule, "steps_per_epoch", None)
        steps = f" = every {every * per_epoch(trainer.world_size)} steps" if callable(per_epoch) else ""
        how = f" in its {trainer.global_step} training steps (validation every {every} epoch(s){steps})"
        return (
            f"ser/val/r2 and ser/val/mse are NaN: no validation ran{how}, so the predictions use the last "
            "weights; raise max_steps or lower ser_data.val_every_n_epochs"
        )
    if any(not np.isfinite(b["r2"]) for b in best):
        return "ser/val/r2 is NaN: the dev set's valences are all equal (R2 divides by their variance)"
    return None


def _best_dev(best: dict | None) -> dict:
    """A head's best validation (lowest dev MSE: the weights used for predictions)."""
    if best is None:
        return {"best_dev_mse": float("nan"), "best_dev_r2": float("nan"), "best_step": -1}
    return {"best_dev_mse": float(best["mse"]), "best_dev_r2": float(best["r2"]), "best_step": int(best["step"])}


def pooled_table(results: pd.DataFrame, predictions: pd.DataFrame) -> pd.DataFrame:
    """One row per test: Cohen's d of all heads' predictions pooled per group (the SpEAT paper's
    Figure 2 figure), with the SpEAT d and whether the signs agree. Columns (report.md shows them all):
    ``test, n_heads, n_x, n_y, mean_x, mean_y, cohens_d, ci_low, ci_high, speat_d, sign_agrees``."""
    pooled = pooled_propagation([predictions], by=("test",))
    pooled = pooled[pooled["lr"] == "pooled"].drop(columns="lr")
    order = {t: k for k, t in enumerate(dict.fromkeys(results["test"]))}
    pooled = pooled.sort_values("test", key=lambda t: t.map(order), kind="stable").reset_index(drop=True)
    speat = results.groupby("test", sort=False)["speat_d"].first()
    pooled["speat_d"] = pooled["test"].map(speat)
    pooled["sign_agrees"] = [_agrees(d, s) for d, s in zip(pooled["cohens_d"], pooled["speat_d"])]
    return pooled


def summary_metrics(results: pd.DataFrame, pooled: pd.DataFrame | None = None) -> dict:
    """The run's summary metrics from its results table (one row per head and test) and, for a
    several-head run, its pooled table: ``propagation/<test>/cohens_d`` (the pooled d when there
    are several heads, also given per head as ``propagation/<test>/cohens_d/lr=<lr>``), the sign
    agreement, and each head's best dev ``ser/val/r2`` and ``ser/val/mse`` (:func:`metric_key`)."""
    lrs = list(dict.fromkeys(float(v) for v in results["lr"]))
    n = len(lrs)
    summary = {}
    for lr, g in results.groupby(results["lr"].astype(float), sort=False):
        summary[metric_key("ser/val/r2", lr, n)] = float(g["best_dev_r2"].iloc[0])
        summary[metric_key("ser/val/mse", lr, n)] = float(g["best_dev_mse"].iloc[0])
        for r in g.itertuples():
            summary[metric_key(f"propagation/{r.test}/cohens_d", lr, n)] = float(r.cohens_d)
            summary[metric_key(f"propagation/{r.test}/sign_agrees", lr, n)] = r.sign_agrees
    if n > 1 and pooled is not None and not pooled.empty:
        for r in pooled.itertuples():
            summary[f"propagation/{r.test}/cohens_d"] = float(r.cohens_d)
            summary[f"propagation/{r.test}/sign_agrees"] = r.sign_agrees
    return summary


# -- outputs ---------------------------------------------------------------------------------
def write_propagation_outputs(
    writer: RunWriter,
    results: pd.DataFrame,
    predictions: pd.DataFrame,
    layers: pd.DataFrame,
    curve: pd.DataFrame,
    run_info: dict,
    pooled: pd.DataFrame,
) -> None:
    """Record the dev curve and the summary metrics for the tracker, then write predictions.csv,
    layer_weights.csv, dev_curve.csv, pooled.csv (several heads), figures, results.csv/json (last
    of the results: its presence marks the run as complete) and report.md. The writer's caveat (a
    demo run) goes on every figure and into report.md. ``pooled``: empty for a one-head run."""
    for metrics in dev_curve_metrics(curve):
        writer.metrics(metrics, step=None, history=True)
    metrics = summary_metrics(results, pooled)  # and each test's speat_d
    for r in results.groupby("test", sort=False).first().reset_index().itertuples():
        metrics[f"propagation/{r.test}/speat_d"] = r.speat_d
    writer.metrics(metrics)
    writer.table("predictions", predictions)
    writer.table("layer_weights", layers, tracker_key="ser/layer_weights")
    writer.table("dev_curve", curve, tracker_key="ser/dev_curve")
    if not pooled.empty:
        writer.table("pooled", pooled, tracker_key="propagation/pooled")
    writer.figure("dev_r2", dev_curve_figure(curve), tracker_key="ser/dev_r2")
    writer.figure("layer_weights", layer_weights_figure(layers), tracker_key="ser/layer_weights")
    for test, g in predictions.groupby("test", sort=False):
        rows = results.loc[results["test"] == test]
        d = (
            float(pooled.loc[pooled["test"] == test, "cohens_d"].iloc[0])
            if not pooled.empty
            else float(rows["cohens_d"].iloc[0])
        )
        writer.figure(
            f"propagation_{test}", predictions_figure(g, rows.iloc[0], d), tracker_key=f"propagation/{test}/predictions"
        )
    writer.table("results", results, tracker_key="propagation/results")
    sections = report_sections(results, pooled, layers, run_info)
    notes = training_notes(curve, predictions)  # not converged, predictions outside the rating scale
    if notes:
        sections.insert(0, ("Read this first", "\n".join(f"- {n}" for n in notes)))
    writer.report(report_title(results, run_info), sections)


def dev_curve_metrics(curve: pd.DataFrame) -> list[dict]:
    """The dev curve as tracker metrics, one dict per validation step in step order:
    ``trainer/step`` and each head's ``ser/val/r2``, ``ser/val/mse`` (:func:`metric_key`)."""
    n_heads = curve["lr"].nunique() if not curve.empty else 1
    entries = []
    for step, g in curve.groupby("step", sort=True):
        metrics = {"trainer/step": int(step)}
        for r in g.itertuples():
            metrics[metric_key("ser/val/r2", r.lr, n_heads)] = r.r2
            metrics[metric_key("ser/val/mse", r.lr, n_heads)] = r.mse
        entries.append(metrics)
    return entries


def summary_from_results(output_dir: str | Path) -> dict:
    """Summary metrics of a finished run folder (its results.csv and, for several heads, pooled.csv)."""
    pooled_path = Path(output_dir) / "pooled.csv"
    pooled = pd.read_csv(pooled_path) if pooled_path.is_file() else None
    return summary_metrics(pd.read_csv(Path(output_dir) / "results.csv"), pooled)


def report_title(results: pd.DataFrame, run_info: dict) -> str:
    """``SER bias propagation: <upstream> / lr=<rates>``."""
    lrs = list(dict.fromkeys(results["lr"]))
    return f"SER bias propagation: {run_info.get('upstream', '')} / lr={','.join(lr_label(v) for v in lrs)}"


def report_sections(
    results: pd.DataFrame, pooled: pd.DataFrame, layers: pd.DataFrame, run_info: dict
) -> list[tuple[str, str]]:
    """The (heading, markdown) sections of report.md (the writer puts a demo run's caveat first)."""
    cols = [
        "test",
        "lr",
        "n_x",
        "n_y",
        "mean_pred_x",
        "mean_pred_y",
        "cohens_d",
        "cohens_d_ci_low",
        "cohens_d_ci_high",
        "speat_d",
        "sign_agrees",
    ]
    first = results.iloc[0]
    lrs = list(dict.fromkeys(results["lr"]))
    sections = []
    if not pooled.empty:
        sections.append(
            (
                f"Bias propagation, {len(lrs)} heads pooled (the SpEAT paper's figure)",
                markdown_table(pooled),  # every column of pooled_table's
            )
        )
    sections.append(("Bias propagation" + (" per head" if len(lrs) > 1 else ""), markdown_table(results[cols])))
    sections.append(
        (
            "How to read it",
            (
                "Cohen's d (pooled SD, ddof = 1) compares the head's predicted valence of the X clips with the Y "
                "clips: d > 0 means X is predicted more positive. `speat_d` is the SpEAT effect size of the same "
                f"upstream and test ({first['speat_aggregation']}); d > 0 there means X is closer to pleasant than Y. "
                "`sign_agrees` says whether the intrinsic bias points the same way as the downstream one. "
                "Each head predicts with its weights of lowest dev MSE."
                + (
                    " Pooled: every head's predictions of X against every head's predictions of Y."
                    if len(lrs) > 1
                    else ""
                )
            ),
        )
    )
    heads = results.groupby("lr", sort=False).first().reset_index()
    sections.append(
        (
            "Valence head" + ("s" if len(lrs) > 1 else ""),
            markdown_table(
                pd.DataFrame(
                    {
                        "upstream": run_info.get("upstream"),
                        "lr": heads["lr"],
                        "ser_data": run_info.get("ser_data"),
                        "best_step": heads["best_step"].astype(int),
                        "dev_mse": heads["best_dev_mse"],
                        "dev_r2": heads["best_dev_r2"],
                    }
                )
            )
            + "\n\nDev MSE and R² are on the original rating scale.\n\n"
            "![dev R2](dev_r2.png)",
        )
    )
    wide = layers.pivot(index="layer", columns="lr", values="weight")[list(dict.fromkeys(layers["lr"]))]
    wide = wide.reset_index()
    wide.columns = ["layer"] + [f"weight lr={lr_label(c)}" for c in wide.columns[1:]]
    sections.append(("Layer weights", layer_weights_markdown(layers) + "\n\n" + markdown_table(wide)))
    sections.append(
        ("Predicted valence by group", "\n\n".join(f"![{t}](propagation_{t}.png)" for t in results["test"].unique()))
    )
    return sections

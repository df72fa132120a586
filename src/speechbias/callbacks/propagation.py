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

Writes ``results.csv/json`` (one row per head and test), ``pooled.csv`` (several heads: one row
per test), ``predictions.csv`` (one row per head and target clip, to pool heads across runs with
:func:`speechbias.ser.pooling.pooled_propagation`), ``layer_weights.csv``, ``dev_curve.csv``,
figures and ``report.md``; logs the same to W&B when a run is given. The runner extracts every
clip before fitting, so here all statistics come from the cache.
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
from speechbias.features.extraction import load_statistics
from speechbias.report import figures, wandb_run
from speechbias.report.caveat import DEMO_CAVEAT, markdown_caveat
from speechbias.report.run_files import markdown_table, write_report, write_results
from speechbias.ser.module import metric_key
from speechbias.ser.pooling import cohens_d, lr_label, pooled_propagation
from speechbias.stats.association import effect_size

log = logging.getLogger(__name__)



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
    need = {"test", "fingerprint", "aggregation", "d"}
    if not need <= set(df.columns):
        raise ValueError(f"{path}: SpEAT results need columns {sorted(need)}; has {list(df.columns)}")
    hit = df[(df["test"] == test) & (df["fingerprint"] == fingerprint) & (df["aggregation"] == aggregation)]
    return float(hit["d"].iloc[0]) if len(hit) else None


class PropagationCallback(pl.Callback):
    """Measures bias propagation to the trained valence head (see the module docstring).

    Args:
        tests: the bias tests to evaluate.
        cache / fingerprint: where the per-layer statistics of every test clip are cached.
        output_dir: the run folder.
        run_info: identity columns written into every row (upstream, family, lr, seed, ser_data...).
        aggregation: temporal x layer aggregation for the SpEAT d (default mean over frames, layer sum).
        speat_results: optional SpEAT results.csv to read d from (falls back to computing it).
        synthetic: the training set is synthetic (adds a warning to the report).
        wandb_run: a W&B run or None (never pickled into spawned DDP workers).
    """

    def __init__(self, tests: list[PropagationTest], cache: FeatureCache, fingerprint: str,
                 output_dir: str | Path, run_info: dict, aggregation: Aggregation | None = None,
                 speat_results: str | Path | None = None, synthetic: bool = False, wandb_run=None):
        self.tests = list(tests)
        self.cache = cache
        self.fingerprint = fingerprint
        self.output_dir = Path(output_dir)
        self.run_info = dict(run_info)
        self.aggregation = aggregation or Aggregation("mean", "sum")
        self.speat_results = speat_results
        self.synthetic = synthetic
        self.wandb_run = wandb_run
        self.summary: dict | None = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["wandb_run"] = None  # a W&B run cannot cross into spawned workers; rank 0 of the parent logs
        return state

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        trainer.strategy.barrier()
        if not trainer.is_global_zero:
            return
        self.summary = self.compute(pl_module)

    # -- computation ------------------------------------------------------------------------
    def compute(self, module) -> dict:
        """Predict, compare, write and log; returns the summary metrics (:func:`summary_metrics`)."""
        heads = module.best_heads()
        lrs = list(module.lrs)
        results, predictions = [], []
        for test in self.tests:
            rows, preds = self._one_test(module, heads, lrs, test)
            results.extend(rows)
            predictions.append(preds)
        results_df = pd.DataFrame(results)
        predictions_df = pd.concat(predictions, ignore_index=True)
        layers_df = pd.concat([pd.DataFrame({"lr": lr, "layer": np.arange(h.num_layers),
                                             "weight": h.layer_weights().detach().numpy()})
                               for lr, h in zip(lrs, heads)], ignore_index=True)
        curve_df = pd.DataFrame(module.dev_history, columns=["step", "epoch", "lr", "mse", "r2", "n_dev"])
        best = pd.DataFrame([_best_dev(b) | {"lr": lr} for lr, b in zip(lrs, module.best)])
        results_df = results_df.merge(best, on="lr", how="left")
        pooled_df = pooled_table(results_df, predictions_df) if len(lrs) > 1 else pd.DataFrame()
        write_propagation_outputs(self.output_dir, results_df, predictions_df, layers_df, curve_df,
                                  self.run_info, self.synthetic, self.wandb_run, pooled=pooled_df)
        return summary_metrics(results_df, pooled_df)

    def _one_test(self, module, heads, lrs: list[float], test: PropagationTest) -> tuple[list[dict], pd.DataFrame]:
        m = test.manifest
        stats = load_statistics(list(m["path"]), self.cache, self.fingerprint)
        roles = m["role"].to_numpy()
        target = np.isin(roles, ["X", "Y"])
        pred = module.predict_valence(torch.from_numpy(stats.mean[target]), heads=heads).numpy()  # (K, n)
        speat_d, speat_source = self._speat_d(test, stats, roles)
        keep = [c for c in ("clip_id", "role", "group", "speaker", "pair_id", "path") if c in m.columns]
        rows, tables = [], []
        for lr, p in zip(lrs, pred):
            pred_x, pred_y = p[roles[target] == "X"], p[roles[target] == "Y"]
            res = cohens_d(pred_x, pred_y)
            rows.append({**self.run_info, "lr": lr, "test": test.name, "n_x": int(pred_x.size),
                         "n_y": int(pred_y.size), "mean_pred_x": float(pred_x.mean()),
                         "mean_pred_y": float(pred_y.mean()), "cohens_d": res.d,
                         "cohens_d_ci_low": res.ci_low, "cohens_d_ci_high": res.ci_high,
                         "speat_d": speat_d, "speat_aggregation": self.aggregation.name,
                         "speat_source": speat_source, "sign_agrees": _agrees(res.d, speat_d),
                         "x_label": getattr(test.bias_test, "x_label", "X"),
                         "y_label": getattr(test.bias_test, "y_label", "Y")})
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
            log.warning("%s has no SpEAT d for %s / %s; computing it from the cache", self.speat_results,
                        test.name, self.aggregation.name)
        emb = self.aggregation(stats.stat(self.aggregation.temporal))
        parts = {r: emb[roles == r] for r in "XYAB"}
        return float(effect_size(parts["X"], parts["Y"], parts["A"], parts["B"])), "computed"


def _agrees(d: float, speat_d: float) -> bool | None:
    return bool(np.sign(d) == np.sign(speat_d)) if np.isfinite(speat_d) and np.isfinite(d) else None


def _best_dev(best: dict | None) -> dict:
    """A head's best validation (lowest dev MSE: the weights used for predictions)."""
    if best is None:
        return {"best_dev_mse": float("nan"), "best_dev_r2": float("nan"), "best_step": -1}
    return {"best_dev_mse": float(best["mse"]), "best_dev_r2": float(best["r2"]), "best_step": int(best["step"])}


def pooled_table(results: pd.DataFrame, predictions: pd.DataFrame) -> pd.DataFrame:
    """One row per test: Cohen's d of all heads' predictions pooled per group (the SpEAT paper's
    Figure 2 figure), with the SpEAT d and whether the signs agree."""
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
def write_propagation_outputs(output_dir: Path, results: pd.DataFrame, predictions: pd.DataFrame,
                              layers: pd.DataFrame, curve: pd.DataFrame, run_info: dict,
                              synthetic: bool = False, run=None, pooled: pd.DataFrame | None = None) -> None:
    """results.csv/json, pooled.csv (several heads), predictions.csv, layer_weights.csv,
    dev_curve.csv, figures, report.md; then W&B. A synthetic training set or a demo test puts the
    demo caveat in report.md and on every figure."""
    output_dir = Path(output_dir)
    pooled = pooled if pooled is not None else pd.DataFrame()
    caveat = DEMO_CAVEAT if is_demo_run(results, synthetic) else None
    write_results(predictions, output_dir, stem="predictions")
    write_results(layers, output_dir, stem="layer_weights")
    write_results(curve, output_dir, stem="dev_curve")
    if not pooled.empty:
        write_results(pooled, output_dir, stem="pooled")
    _dev_curve_figure(curve, output_dir / "dev_r2.png", caveat)
    _layer_weights_figure(layers, output_dir / "layer_weights.png", caveat)
    for test, g in predictions.groupby("test", sort=False):
        rows = results.loc[results["test"] == test]
        d = float(pooled.loc[pooled["test"] == test, "cohens_d"].iloc[0]) if not pooled.empty \
            else float(rows["cohens_d"].iloc[0])
        _predictions_figure(g, rows.iloc[0], d, output_dir / f"propagation_{test}.png", caveat)
    write_results(results, output_dir)  # last: its presence marks the run as complete
    _write_report(output_dir, results, pooled, layers, run_info, synthetic)
    log_propagation_to_wandb(run, output_dir)


def is_demo_run(results: pd.DataFrame, synthetic: bool) -> bool:
    """True for a synthetic training set or any demo bias test (``demo_*``)."""
    return bool(synthetic) or any(str(t).startswith("demo") for t in results["test"])


def read_run_tables(output_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A finished run folder's results.csv and pooled.csv (empty for a one-head run)."""
    output_dir = Path(output_dir)
    results = pd.read_csv(output_dir / "results.csv")
    pooled_path = output_dir / "pooled.csv"
    pooled = pd.read_csv(pooled_path) if pooled_path.is_file() else pd.DataFrame()
    return results, pooled


def log_propagation_to_wandb(run, output_dir: Path) -> None:
    """Log a finished run folder's propagation outputs to W&B: the dev curve of each head
    (``ser/val/r2``, ``ser/val/mse`` per step; per learning rate when there are several heads),
    :func:`summary_metrics`, ``propagation/<test>/speat_d``, tables and figures.

    Reads the files, so the process that holds the W&B run can log what a spawned worker wrote.
    """
    if run is None:
        return
    output_dir = Path(output_dir)
    results, pooled = read_run_tables(output_dir)
    curve = pd.read_csv(output_dir / "dev_curve.csv")
    layers = pd.read_csv(output_dir / "layer_weights.csv")
    n_heads = curve["lr"].nunique() if not curve.empty else 1
    for step, g in curve.groupby("step", sort=True):
        metrics = {"trainer/step": int(step)}
        for r in g.itertuples():
            metrics[metric_key("ser/val/r2", r.lr, n_heads)] = r.r2
            metrics[metric_key("ser/val/mse", r.lr, n_heads)] = r.mse
        wandb_run.log_metrics(run, metrics)
    metrics = summary_metrics(results, pooled)
    for r in results.groupby("test", sort=False).first().reset_index().itertuples():
        metrics[f"propagation/{r.test}/speat_d"] = r.speat_d
    wandb_run.log_metrics(run, metrics)
    wandb_run.log_table(run, "propagation/results", results)
    if not pooled.empty:
        wandb_run.log_table(run, "propagation/pooled", pooled)
    wandb_run.log_table(run, "ser/layer_weights", layers)
    wandb_run.log_table(run, "ser/dev_curve", curve)
    images = {"ser/dev_r2": output_dir / "dev_r2.png", "ser/layer_weights": output_dir / "layer_weights.png"}
    images.update({f"propagation/{t}/predictions": output_dir / f"propagation_{t}.png"
                   for t in results["test"].unique()})
    wandb_run.log_images(run, {k: v for k, v in images.items() if v.is_file()})


def _lr_groups(table: pd.DataFrame):
    """(label, rows) per learning rate; the label is empty for a one-head table."""
    groups = list(table.groupby(table["lr"].astype(float), sort=False)) if "lr" in table else [(None, table)]
    return [("" if len(groups) == 1 else f"lr={lr_label(lr)}", g) for lr, g in groups]


def _dev_curve_figure(curve: pd.DataFrame, path: Path, caveat: str | None = None) -> Path | None:
    if curve.empty:
        return None
    fig, ax = figures.plt.subplots(figsize=(5.6, 3.4))
    groups = _lr_groups(curve)
    for label, g in groups:
        ax.plot(g["step"], g["r2"], marker="o", ms=2, label=label or None)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("training step")
    ax.set_ylabel("dev R$^2$ (original rating scale)")
    ax.set_title("valence head: dev R$^2$ during training")
    if len(groups) > 1:
        ax.legend(fontsize=7)
    return figures.save(fig, path, caveat=caveat)


def _layer_weights_figure(layers: pd.DataFrame, path: Path, caveat: str | None = None) -> Path:
    fig, ax = figures.plt.subplots(figsize=(5.6, 3.4))
    groups = _lr_groups(layers)
    width = 0.8 / len(groups)
    for k, (label, g) in enumerate(groups):
        offset = (k - (len(groups) - 1) / 2) * width
        ax.bar(g["layer"] + offset, g["weight"], width=width, label=label or None)
    n_layers = int(layers["layer"].max()) + 1
    ax.axhline(1.0 / n_layers, color="black", lw=0.8, ls="--", label="initial (equal)")
    figures.layer_axis(ax, layers["layer"])
    ax.set_ylabel("softmax layer weight")
    ax.set_title("learned layer weights")
    ax.legend(fontsize=7)
    return figures.save(fig, path, caveat=caveat)


def _predictions_figure(preds: pd.DataFrame, row: pd.Series, d: float, path: Path,
                        caveat: str | None = None) -> Path:
    """Predicted valence of X and Y (all heads of the run pooled), titled with ``d``."""
    fig, ax = figures.plt.subplots(figsize=(4.2, 3.4))
    data = [preds.loc[preds["role"] == r, "predicted_valence"].to_numpy() for r in ("X", "Y")]
    ax.boxplot(data)
    ax.set_xticks([1, 2], [f"X: {row['x_label']}", f"Y: {row['y_label']}"], fontsize=7)
    for k, values in enumerate(data, start=1):
        ax.scatter(np.full(values.size, k) + np.linspace(-0.08, 0.08, values.size), values, s=8, alpha=0.6)
    ax.set_ylabel("predicted valence (original scale)")
    n_heads = preds["lr"].nunique() if "lr" in preds else 1
    pooled = f", {n_heads} heads pooled" if n_heads > 1 else ""
    ax.set_title(f"{row['test']}: Cohen's d = {d:.2f}{pooled}")
    return figures.save(fig, path, caveat=caveat)


def _write_report(output_dir: Path, results: pd.DataFrame, pooled: pd.DataFrame, layers: pd.DataFrame,
                  run_info: dict, synthetic: bool) -> None:
    cols = ["test", "lr", "n_x", "n_y", "mean_pred_x", "mean_pred_y", "cohens_d", "cohens_d_ci_low",
            "cohens_d_ci_high", "speat_d", "sign_agrees"]
    first = results.iloc[0]
    lrs = list(dict.fromkeys(results["lr"]))
    sections = []
    if is_demo_run(results, synthetic):
        sections.append(("Note", markdown_caveat(DEMO_CAVEAT)))
    if not pooled.empty:
        sections.append((f"Bias propagation, {len(lrs)} heads pooled (the SpEAT paper's figure)", markdown_table(
            pooled[["test", "n_heads", "n_x", "n_y", "mean_x", "mean_y", "cohens_d", "ci_low", "ci_high",
                    "speat_d", "sign_agrees"]])))
    sections.append(("Bias propagation" + (" per head" if len(lrs) > 1 else ""), markdown_table(results[cols])))
    sections.append(("How to read it", (
        "Cohen's d (pooled SD, ddof = 1) compares the head's predicted valence of the X clips with the Y "
        "clips: d > 0 means X is predicted more positive. `speat_d` is the SpEAT effect size of the same "
        f"upstream and test ({first['speat_aggregation']}); d > 0 there means X is closer to pleasant than Y. "
        "`sign_agrees` says whether the intrinsic bias points the same way as the downstream one. "
        "Each head predicts with its weights of lowest dev MSE."
        + (" Pooled: every head's predictions of X against every head's predictions of Y." if len(lrs) > 1
           else ""))))
    heads = results.groupby("lr", sort=False).first().reset_index()
    sections.append(("Valence head" + ("s" if len(lrs) > 1 else ""), markdown_table(pd.DataFrame({
        "upstream": run_info.get("upstream"), "lr": heads["lr"], "ser_data": run_info.get("ser_data"),
        "best_step": heads["best_step"].astype(int), "dev_mse": heads["best_dev_mse"],
        "dev_r2": heads["best_dev_r2"]})) + "\n\nDev MSE and R² are on the original rating scale.\n\n"
        "![dev R2](dev_r2.png)"))
    wide = layers.pivot(index="layer", columns="lr", values="weight")[list(dict.fromkeys(layers["lr"]))]
    wide = wide.reset_index()
    wide.columns = ["layer"] + [f"weight lr={lr_label(c)}" for c in wide.columns[1:]]
    sections.append(("Layer weights", "![layer weights](layer_weights.png)\n\n" + markdown_table(wide)))
    sections.append(("Predicted valence by group", "\n\n".join(
        f"![{t}](propagation_{t}.png)" for t in results["test"].unique())))
    title = f"SER bias propagation: {run_info.get('upstream', '')} / lr={','.join(lr_label(v) for v in lrs)}"
    write_report(output_dir, title, sections)

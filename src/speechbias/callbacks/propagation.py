"""Bias propagation after fit: the trained valence head's predictions for each bias test's targets.

For every configured bias test, on global rank 0 at the end of ``trainer.fit``:

1. the best-on-dev head (``best.ckpt``; the final weights when no checkpoint was kept) predicts
   the valence of the test's target clips X and Y from their cached per-layer temporal means;
2. Cohen's d (pooled SD) of predicted valence, X vs. Y (d > 0: X is predicted more positive);
3. the SpEAT d of the same upstream and test, computed on the spot from the cached statistics
   (temporal ``mean``, layer ``sum`` by default) or read from a SpEAT ``results.csv``;
4. whether the two signs agree.

Writes ``results.csv/json`` (one row per test), ``predictions.csv`` (one row per target clip, to
pool several heads with :func:`speechbias.ser.pooling.pooled_propagation`), ``layer_weights.csv``,
``dev_curve.csv``, figures and ``report.md``; logs the same to W&B when a run is given. The
runner extracts every clip before fitting, so here all statistics come from the cache.
"""

from __future__ import annotations

import copy
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
from speechbias.report.run_files import markdown_table, write_report, write_results
from speechbias.ser.pooling import cohens_d
from speechbias.stats.association import effect_size

log = logging.getLogger(__name__)

SYNTHETIC_NOTE = (
    "**Synthetic demo data (espeak-ng voices, made-up ratings): this run checks the plumbing and is "
    "not a finding about any model or group.**"
)


@dataclass
class PropagationTest:
    """A bias test and its validated manifest (clips with roles X, Y, A, B)."""

    bias_test: object
    manifest: pd.DataFrame

    @property
    def name(self) -> str:
        return str(self.bias_test.name)


def best_head_state(checkpoint_path: str | Path | None) -> dict | None:
    """The ``head.*`` weights of a Lightning checkpoint (loaded with ``weights_only=True``), or None."""
    if not checkpoint_path or not Path(checkpoint_path).is_file():
        return None
    ckpt = torch.load(str(checkpoint_path), map_location="cpu", weights_only=True)
    return {k[len("head."):]: v for k, v in ckpt["state_dict"].items() if k.startswith("head.")}


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
        ckpt = getattr(trainer.checkpoint_callback, "best_model_path", None)
        self.summary = self.compute(pl_module, ckpt)

    # -- computation ------------------------------------------------------------------------
    def compute(self, module, checkpoint_path: str | Path | None = None) -> dict:
        """Predict, compare, write and log; returns the summary metrics."""
        model = copy.deepcopy(module).cpu()
        state = best_head_state(checkpoint_path)
        if state is not None:
            model.head.load_state_dict(state)
        results, predictions = [], []
        for test in self.tests:
            row, preds = self._one_test(model, test)
            results.append(row)
            predictions.append(preds)
        results_df = pd.DataFrame(results)
        predictions_df = pd.concat(predictions, ignore_index=True)
        weights = model.head.layer_weights().detach().numpy()
        layers_df = pd.DataFrame({"layer": np.arange(weights.size), "weight": weights})
        curve_df = pd.DataFrame(model.dev_history, columns=["step", "epoch", "mse", "r2", "n_dev"])
        best = _best_dev(curve_df)
        for col, val in best.items():
            results_df[col] = val
        write_propagation_outputs(self.output_dir, results_df, predictions_df, layers_df, curve_df,
                                  self.run_info, self.synthetic, self.wandb_run)
        summary = {"ser/val/r2": best["best_dev_r2"], "ser/val/mse": best["best_dev_mse"]}
        for r in results:
            summary[f"propagation/{r['test']}/cohens_d"] = r["cohens_d"]
            summary[f"propagation/{r['test']}/sign_agrees"] = r["sign_agrees"]
        return summary

    def _one_test(self, model, test: PropagationTest) -> tuple[dict, pd.DataFrame]:
        m = test.manifest
        stats = load_statistics(list(m["path"]), self.cache, self.fingerprint)
        roles = m["role"].to_numpy()
        target = np.isin(roles, ["X", "Y"])
        pred = model.predict_valence(torch.from_numpy(stats.mean[target])).numpy()
        pred_x, pred_y = pred[roles[target] == "X"], pred[roles[target] == "Y"]
        res = cohens_d(pred_x, pred_y)
        d = res.d
        speat_d, speat_source = self._speat_d(test, stats, roles)
        row = {**self.run_info, "test": test.name, "n_x": int(pred_x.size), "n_y": int(pred_y.size),
               "mean_pred_x": float(pred_x.mean()), "mean_pred_y": float(pred_y.mean()), "cohens_d": d,
               "cohens_d_ci_low": res.ci_low, "cohens_d_ci_high": res.ci_high,
               "speat_d": speat_d, "speat_aggregation": self.aggregation.name, "speat_source": speat_source,
               "sign_agrees": bool(np.sign(d) == np.sign(speat_d)) if np.isfinite(speat_d) else None,
               "x_label": getattr(test.bias_test, "x_label", "X"), "y_label": getattr(test.bias_test, "y_label", "Y")}
        keep = [c for c in ("clip_id", "role", "group", "speaker", "pair_id", "path") if c in m.columns]
        preds = m.loc[target, keep].reset_index(drop=True)
        preds.insert(0, "test", test.name)
        for k, v in reversed(list(self.run_info.items())):
            preds.insert(0, k, v)
        preds["predicted_valence"] = pred
        return row, preds

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


def _best_dev(curve: pd.DataFrame) -> dict:
    """Dev metrics of the validation with the lowest MSE (what best.ckpt holds)."""
    if curve.empty:
        return {"best_dev_mse": float("nan"), "best_dev_r2": float("nan"), "best_step": -1}
    row = curve.loc[curve["mse"].idxmin()]
    return {"best_dev_mse": float(row["mse"]), "best_dev_r2": float(row["r2"]), "best_step": int(row["step"])}


# -- outputs ---------------------------------------------------------------------------------
def write_propagation_outputs(output_dir: Path, results: pd.DataFrame, predictions: pd.DataFrame,
                              layers: pd.DataFrame, curve: pd.DataFrame, run_info: dict,
                              synthetic: bool = False, run=None) -> None:
    """results.csv/json, predictions.csv, layer_weights.csv, dev_curve.csv, figures, report.md; then W&B."""
    output_dir = Path(output_dir)
    write_results(predictions, output_dir, stem="predictions")
    write_results(layers, output_dir, stem="layer_weights")
    write_results(curve, output_dir, stem="dev_curve")
    _dev_curve_figure(curve, output_dir / "dev_r2.png")
    _layer_weights_figure(layers, output_dir / "layer_weights.png")
    for test, g in predictions.groupby("test", sort=False):
        _predictions_figure(g, results.loc[results["test"] == test].iloc[0], output_dir / f"propagation_{test}.png")
    write_results(results, output_dir)  # last: its presence marks the run as complete
    _write_report(output_dir, results, layers, run_info, synthetic)
    log_propagation_to_wandb(run, output_dir)


def log_propagation_to_wandb(run, output_dir: Path) -> None:
    """Log a finished run folder's propagation outputs to W&B: the dev curve (``ser/val/r2``,
    ``ser/val/mse`` per step), ``propagation/<test>/cohens_d``, tables and figures.

    Reads the files, so the process that holds the W&B run can log what a spawned worker wrote.
    """
    if run is None:
        return
    output_dir = Path(output_dir)
    results = pd.read_csv(output_dir / "results.csv")
    curve = pd.read_csv(output_dir / "dev_curve.csv")
    layers = pd.read_csv(output_dir / "layer_weights.csv")
    for r in curve.itertuples():
        wandb_run.log_metrics(run, {"ser/val/r2": r.r2, "ser/val/mse": r.mse, "trainer/step": r.step})
    metrics = {"ser/val/r2": float(results["best_dev_r2"].iloc[0]),
               "ser/val/mse": float(results["best_dev_mse"].iloc[0])}
    for r in results.itertuples():
        metrics[f"propagation/{r.test}/cohens_d"] = r.cohens_d
        metrics[f"propagation/{r.test}/speat_d"] = r.speat_d
    wandb_run.log_metrics(run, metrics)
    wandb_run.log_table(run, "propagation/results", results)
    wandb_run.log_table(run, "ser/layer_weights", layers)
    wandb_run.log_table(run, "ser/dev_curve", curve)
    images = {"ser/dev_r2": output_dir / "dev_r2.png", "ser/layer_weights": output_dir / "layer_weights.png"}
    images.update({f"propagation/{t}/predictions": output_dir / f"propagation_{t}.png" for t in results["test"]})
    wandb_run.log_images(run, {k: v for k, v in images.items() if v.is_file()})


def _dev_curve_figure(curve: pd.DataFrame, path: Path) -> Path | None:
    if curve.empty:
        return None
    fig, ax = figures.plt.subplots(figsize=(5.6, 3.4))
    ax.plot(curve["step"], curve["r2"], marker="o", ms=2)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("training step")
    ax.set_ylabel("dev R$^2$ (original rating scale)")
    ax.set_title("valence head: dev R$^2$ during training")
    return figures.save(fig, path)


def _layer_weights_figure(layers: pd.DataFrame, path: Path) -> Path:
    fig, ax = figures.plt.subplots(figsize=(5.6, 3.4))
    ax.bar(layers["layer"], layers["weight"])
    ax.axhline(1.0 / len(layers), color="black", lw=0.8, ls="--", label="initial (equal)")
    ax.set_xlabel("layer (0 = input to first transformer block)")
    ax.set_ylabel("softmax layer weight")
    ax.set_title("learned layer weights")
    ax.legend(fontsize=7)
    return figures.save(fig, path)


def _predictions_figure(preds: pd.DataFrame, row: pd.Series, path: Path) -> Path:
    fig, ax = figures.plt.subplots(figsize=(4.2, 3.4))
    data = [preds.loc[preds["role"] == r, "predicted_valence"].to_numpy() for r in ("X", "Y")]
    ax.boxplot(data)
    ax.set_xticks([1, 2], [f"X: {row['x_label']}", f"Y: {row['y_label']}"], fontsize=7)
    for k, values in enumerate(data, start=1):
        ax.scatter(np.full(values.size, k) + np.linspace(-0.08, 0.08, values.size), values, s=8, alpha=0.6)
    ax.set_ylabel("predicted valence (original scale)")
    ax.set_title(f"{row['test']}: Cohen's d = {row['cohens_d']:.2f}")
    return figures.save(fig, path)


def _write_report(output_dir: Path, results: pd.DataFrame, layers: pd.DataFrame, run_info: dict,
                  synthetic: bool) -> None:
    cols = ["test", "n_x", "n_y", "mean_pred_x", "mean_pred_y", "cohens_d", "cohens_d_ci_low", "cohens_d_ci_high",
            "speat_d", "sign_agrees"]
    first = results.iloc[0]
    sections = []
    if synthetic or str(results["test"].iloc[0]).startswith("demo"):
        sections.append(("Note", SYNTHETIC_NOTE))
    sections.append(("Bias propagation", markdown_table(results[cols])))
    sections.append(("How to read it", (
        "Cohen's d (pooled SD, ddof = 1) compares the head's predicted valence of the X clips with the Y "
        "clips: d > 0 means X is predicted more positive. `speat_d` is the SpEAT effect size of the same "
        f"upstream and test ({first['speat_aggregation']}); d > 0 there means X is closer to pleasant than Y. "
        "`sign_agrees` says whether the intrinsic bias points the same way as the downstream one. "
        "Predictions use the head with the lowest dev MSE (best.ckpt).")))
    sections.append(("Valence head", markdown_table(pd.DataFrame([{
        "upstream": run_info.get("upstream"), "lr": run_info.get("lr"), "ser_data": run_info.get("ser_data"),
        "best_step": int(first["best_step"]), "dev_mse": first["best_dev_mse"], "dev_r2": first["best_dev_r2"],
    }])) + "\n\nDev MSE and R² are on the original rating scale.\n\n![dev R2](dev_r2.png)"))
    sections.append(("Layer weights", "![layer weights](layer_weights.png)\n\n" + markdown_table(layers)))
    sections.append(("Predicted valence by group", "\n\n".join(
        f"![{t}](propagation_{t}.png)" for t in results["test"])))
    title = f"SER bias propagation: {run_info.get('upstream', '')} / lr={run_info.get('lr')}"
    write_report(output_dir, title, sections)

"""LightningModule that trains valence heads on cached per-layer temporal means.

One module trains one head per learning rate in ``lr`` (a number, or a list such as the paper's
``[1e-3, 1e-4, 1e-5]``). The heads start from the same initial weights and see the same batches,
so each ends exactly where a separate run with that learning rate and seed would (bit for bit);
together they share each batch and pay Lightning's per-step overhead once.

The training step, on every device (CPU, GPU, DDP, mixed precision): autograd's backward of
:func:`~speechbias.ser.head.predict_with_heads` (DDP averages gradients in autograd's hooks) and
``torch.optim.Adam`` with a parameter group per head (:func:`adam_groups`). One CPU fast path: in one
process at full precision on a CPU (``step_kernel`` auto, where numba can be set up),
:class:`~speechbias.ser.heads_adam.HeadsAdam`'s ``step(batch=...)``, the heads' MSE gradients and Adam
updates in one numba-compiled pass (:mod:`~speechbias.ser.compiled_step`); the same estimator, values
equal up to float rounding.

Batches are dicts: ``target`` (B,) valence on [0, 1], ``index`` (B,) row numbers within the split
(used to de-duplicate dev rows that DDP's sampler repeats), and ``features`` (B, L, D) float32 or,
for training batches the compiled step reads in place, ``source`` (the split's (N, L, D) features;
:func:`~speechbias.ser.datamodule.batch_features`). Loss: each head's MSE on the [0, 1] scale (heads
share no parameter, so each head gets exactly its own MSE's gradient); one Adam with a parameter group
per head, stepped by hand (manual optimisation) once per batch of each training item, which is a list
of batches (``steps_per_call`` of the DataModule). After every validation run the module computes each
head's dev MSE and R^2 on the ORIGINAL rating scale over the whole dev split (gathered across
processes), logs them (:func:`metric_key`), appends them to :attr:`dev_history` and keeps each head's
best-on-dev weights (:attr:`best`); both are saved in checkpoints, so a resumed run still has the
whole curve and the best heads. No file I/O here.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
import pytorch_lightning as pl
import torch
from torch import nn

from speechbias.console_quieting import quiet_third_party_console
from speechbias.ser.datamodule import batch_features
from speechbias.ser.head import ValenceHead, predict_with_heads
from speechbias.ser.heads_adam import STEP_KERNELS, HeadsAdam, compiled_step_available
from speechbias.ser.training_settings import learning_rates
from speechbias.ser.pooling import lr_label

# spawned DDP workers import this module (unpickling it), not the trainer factory: quiet them too
quiet_third_party_console()


def r2_score(pred: torch.Tensor, target: torch.Tensor) -> float:
    """Coefficient of determination 1 - SS_res / SS_tot (NaN when the targets are all equal)."""
    ss_res = torch.sum((target - pred) ** 2)
    ss_tot = torch.sum((target - target.mean()) ** 2)
    return float(1.0 - ss_res / ss_tot) if float(ss_tot) > 0 else float("nan")


def per_head_mse(predictions: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Predictions (K, B) and targets (B,) on the [0, 1] scale -> each head's MSE (K,). The heads
    share no parameter, so the gradient of the sum is each head's own MSE gradient."""
    return ((predictions - target) ** 2).mean(dim=1)


def adam_groups(param_groups, lrs) -> torch.optim.Adam:
    """One ``torch.optim.Adam`` (default betas/eps, no weight decay) over several parameter groups,
    group k with learning rate ``lrs[k]``; each group's update is exactly that of its own Adam. The
    fused kernel (``fused=True``) where the parameters' device has one (CPU, CUDA): about 4x faster
    per step than the foreach kernel for this head on CPU."""
    groups = [{"params": list(ps), "lr": float(lr)} for ps, lr in zip(param_groups, lrs, strict=True)]
    fused = all(p.device.type in ("cpu", "cuda") for g in groups for p in g["params"])
    return torch.optim.Adam(groups, lr=groups[0]["lr"], fused=fused or None)


def metric_key(base: str, lr: float, n_heads: int) -> str:
    """``ser/val/r2`` for a one-head run; ``ser/val/r2/lr=1e-3`` per head when a run has several."""
    return base if n_heads == 1 else f"{base}/lr={lr_label(lr)}"


class ValenceRegressor(pl.LightningModule):
    """Valence heads + training logic. ``valence_range`` = (low, high) of the original rating scale."""

    def __init__(
        self,
        num_layers: int,
        input_size: int,
        hidden_size: int = 256,
        lr: float | Sequence[float] = 1e-4,
        valence_range: tuple[float, float] = (0.0, 100.0),
        step_kernel: str = "auto",
    ):
        super().__init__()
        self.save_hyperparameters()
        self.lrs = learning_rates(lr)
        if step_kernel not in STEP_KERNELS:
            raise ValueError(f"step_kernel must be one of {STEP_KERNELS}, got {step_kernel!r}")
        self.step_kernel = step_kernel
        low, high = (float(v) for v in valence_range)
        if not high > low:
            raise ValueError(f"valence_range needs high > low, got {valence_range}")
        self.low, self.high = low, high
        first = ValenceHead(num_layers, input_size, hidden_size)
        # every head starts from the same weights, as separate runs with the same seed would
        self.heads = nn.ModuleList([first] + [copy.deepcopy(first) for _ in self.lrs[1:]])
        # manual optimisation: a training item holds several optimiser steps (steps_per_call)
        self.automatic_optimization = False
        self.dev_history: list[dict] = []
        # per head: {"step", "epoch", "mse", "r2", "state"} of its best validation so far, or None
        self.best: list[dict | None] = [None] * len(self.lrs)
        self._train_loss_sum: torch.Tensor | np.ndarray | None = None  # (K,) since the last log
        self._train_loss_count = 0
        self._dev_parts: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        self._log_every: int | None = None  # the trainer's log_every_n_steps, read at the first step

    @property
    def head(self) -> ValenceHead:
        """The head of a one-learning-rate module (ValueError when it trains several)."""
        if len(self.heads) != 1:
            raise ValueError(f"this module trains {len(self.heads)} heads (lr={list(self.lrs)}); use .heads")
        return self.heads[0]

    def forward(self, layer_means: torch.Tensor) -> torch.Tensor:
        """(B, L, D) per-layer means -> (K, B) predictions on the [0, 1] scale, one row per head."""
        return predict_with_heads(self.heads, layer_means)

    def training_step(self, chunk: list[dict], batch_idx: int) -> None:
        """One optimiser step per batch of ``chunk`` (see
        :class:`~speechbias.ser.datamodule.LayerMeansDataModule`, ``steps_per_call``); stops at
        the trainer's ``max_steps`` even inside a chunk."""
        optimiser = self.optimizers()
        max_steps = self.trainer.max_steps
        fast_path = optimiser.optimizer if isinstance(optimiser.optimizer, HeadsAdam) else None
        for batch in chunk:
            if 0 <= max_steps <= self.global_step:
                break
            if fast_path is not None and fast_path.takes_batch(batch):  # the CPU fast path: one compiled pass
                per_head = optimiser.step(batch=batch)
            else:  # the general step (under DDP, autograd's backward averages the gradients)
                per_head = per_head_mse(self(batch_features(batch)), batch["target"])
                optimiser.zero_grad(set_to_none=True)
                self.manual_backward(per_head.sum())
                optimiser.step()
            self._log_train_mse(per_head.detach())

    def _log_train_mse(self, per_head: torch.Tensor) -> None:
        """Logs ``ser/train/mse`` (per head), the mean training loss of the last
        ``log_every_n_steps`` steps, once per window: ``self.log`` costs about 1.5 ms a call on CPU,
        more than a whole step of the heads, so it is not called on every step."""
        if per_head.device.type == "cpu":  # numpy's add costs a tenth of a torch op; no device sync here
            per_head = per_head.numpy().astype(np.float64)  # a copy
        if self._train_loss_sum is None:
            self._train_loss_sum = per_head.clone() if isinstance(per_head, torch.Tensor) else per_head
        else:
            self._train_loss_sum += per_head
        self._train_loss_count += 1
        if self._log_every is None:
            self._log_every = max(1, int(getattr(self.trainer, "log_every_n_steps", 1) or 1))
        if self._train_loss_count >= self._log_every:
            mean = [float(v) for v in self._train_loss_sum / self._train_loss_count]
            for lr, value in zip(self.lrs, mean):
                self.log(
                    metric_key("ser/train/mse", lr, len(self.lrs)), value, on_step=True, on_epoch=False, batch_size=1
                )
            self.log("step", float(self.global_step), on_step=True, on_epoch=False, batch_size=1)  # as above
            self._train_loss_sum, self._train_loss_count = None, 0

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        pred = self(batch["features"]).detach()
        self._dev_parts.append((batch["index"], pred, batch["target"]))

    def on_validation_epoch_start(self) -> None:
        self._dev_parts = []

    def on_validation_epoch_end(self) -> None:
        if not self._dev_parts:
            return
        index = torch.cat([p[0] for p in self._dev_parts])
        pred = torch.cat([p[1] for p in self._dev_parts], dim=1)  # (K, n)
        target = torch.cat([p[2] for p in self._dev_parts])
        self._dev_parts = []
        if self.trainer.world_size > 1:  # every rank gets the whole dev split, duplicates removed below
            index, target = (self.all_gather(t).reshape(-1) for t in (index, target))
            pred = self.all_gather(pred)  # (world, K, n)
            pred = pred.permute(1, 0, 2).reshape(len(self.heads), -1)
        order = torch.argsort(index)
        index, pred, target = index[order], pred[:, order], target[order]
        first = torch.ones_like(index, dtype=torch.bool)
        first[1:] = index[1:] != index[:-1]
        span = self.high - self.low
        target_orig = target[first].double() * span + self.low
        # Lightning's documented x-axis override: a logged ``step`` is the loggers' step (by default they
        # get the batches that stepped, and a batch here is a chunk of several optimiser steps)
        self.log("step", float(self.global_step), sync_dist=False)
        for k, lr in enumerate(self.lrs):
            pred_orig = pred[k, first].double() * span + self.low
            mse = float(torch.mean((pred_orig - target_orig) ** 2))
            r2 = r2_score(pred_orig, target_orig)
            self.log(metric_key("ser/val/mse", lr, len(self.lrs)), mse, sync_dist=False)
            self.log(metric_key("ser/val/r2", lr, len(self.lrs)), r2, sync_dist=False)
            if self.trainer.sanity_checking:
                continue
            entry = {
                "step": int(self.global_step),
                "epoch": int(self.current_epoch),
                "lr": lr,
                "mse": mse,
                "r2": r2,
                "n_dev": int(first.sum()),
            }
            self.dev_history.append(entry)
            best = self.best[k]
            if best is None or mse < best["mse"]:  # strictly better
                state = {n: t.detach().cpu().clone() for n, t in self.heads[k].state_dict().items()}
                self.best[k] = {**{c: entry[c] for c in ("step", "epoch", "mse", "r2")}, "state": state}

    def configure_optimizers(self):
        """``torch.optim.Adam`` over the heads' parameter groups (:func:`adam_groups`); on a CPU in one
        process at full precision, unless ``step_kernel`` is ``torch`` or numba cannot be set up,
        :class:`~speechbias.ser.heads_adam.HeadsAdam` (the same Adam, whose ``step(batch=...)`` is the
        compiled step of all heads)."""
        try:
            one_process_fp32 = self.trainer.world_size == 1 and str(self.trainer.precision) in ("32-true", "32")
        except RuntimeError:  # a module not attached to a Trainer
            one_process_fp32 = True
        cpu_fast_path = one_process_fp32 and self.device.type == "cpu"
        if self.step_kernel == "compiled" and not cpu_fast_path:
            raise ValueError(
                "step_kernel=compiled needs one process at 32-bit precision on a CPU (GPUs, DDP and "
                "mixed precision train with autograd)"
            )
        if cpu_fast_path and compiled_step_available(self.step_kernel):
            return HeadsAdam(self.heads, self.lrs)
        return adam_groups([list(h.parameters()) for h in self.heads], self.lrs)

    def on_fit_start(self) -> None:
        """The compiled step reads each batch's rows from the training features where they lie: ask the
        datamodule (if it can) not to gather them (before the fit loop builds its training loader)."""
        self._log_every = None
        optimiser = self.optimizers()
        datamodule = getattr(self.trainer, "datamodule", None)
        if isinstance(optimiser.optimizer, HeadsAdam) and hasattr(datamodule, "gather_training_rows"):
            datamodule.gather_training_rows = False

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["dev_history"] = list(self.dev_history)
        checkpoint["best_heads"] = list(self.best)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.dev_history = list(checkpoint.get("dev_history", []))
        best = list(checkpoint.get("best_heads", []))
        self.best = best if len(best) == len(self.lrs) else [None] * len(self.lrs)

    def best_heads(self) -> list[ValenceHead]:
        """Copies of the heads with their best-on-dev weights (the final weights of a head that was
        never validated), on the CPU."""
        heads = []
        for head, best in zip(self.heads, self.best):
            copy_ = copy.deepcopy(head).cpu()
            if best is not None:
                copy_.load_state_dict(best["state"])
            heads.append(copy_)
        return heads

    @torch.no_grad()
    def predict_valence(self, layer_means: torch.Tensor, heads: Sequence[ValenceHead] | None = None) -> torch.Tensor:
        """Predictions on the ORIGINAL rating scale, (K, N) for (N, L, D) means (eval mode, no grad);
        ``heads`` defaults to this module's current heads."""
        heads = list(heads) if heads is not None else list(self.heads)
        device = next(heads[0].parameters()).device
        pred = predict_with_heads(heads, layer_means.to(device, torch.float32))
        return pred.double().cpu() * (self.high - self.low) + self.low

"""The CPU fast path of the SER training step: Adam over K valence heads whose ``step(batch=...)``
also computes the gradients, in one numba-compiled pass (:mod:`~speechbias.ser.compiled_step`).

It exists because it makes the whole ``python train.py 'lr=[1e-3,1e-4,1e-5]'`` process on a CPU
(paper-sized workload: 1,800 clips, 25 x 1024, the default 20,000 steps) 1.69x faster in wall time
(77.2 s vs 130.3 s) and 2.36x in CPU time (39.0 s vs 92.0 s) than the general step (autograd +
``torch.optim.Adam``), best of 2 alternating runs side by side (``benchmarks/ser_bench.py --skip-a
--skip-b --c-steps 20000 --reference none``; at 4,000 steps 1.47x; house rule: >= 1.5x on what the
user runs).

:class:`HeadsAdam` is ``torch.optim.Adam`` (``fused=True``) with one parameter group per head.
``step()`` / ``step(closure)`` is Adam's own step on the gradients in ``.grad`` (the general step).
``step(batch=...)`` is the whole training step of every head on that batch (each head's MSE gradient
and Adam update, fused in :func:`~speechbias.ser.compiled_step.heads_adam_step`); call it only where
:meth:`HeadsAdam.takes_batch` says the compiled pass applies (CPU, float32, Adam without weight decay,
amsgrad, maximize, no gradient scaler). It returns each head's MSE on the batch (K,) and never writes
``.grad``; a closure passed with ``batch`` is not called (Lightning's runs the
``on_before_optimizer_step`` hooks that inspect gradients, and there are none).

Lightning's ``LightningOptimizer.step(**kwargs)`` passes ``batch`` through (so ``global_step`` and the
hooks stay Lightning's). The state is Adam's own (``exp_avg``, ``exp_avg_sq``, ``step`` per
parameter), kept as views of (K, ...) stacks the compiled pass updates in place, and the heads'
parameters are views of (K, ...) stacks too: ``state_dict``, checkpoints and resuming are unchanged;
after ``load_state_dict`` (resume) or anything that replaces a tensor the stacks are rebuilt from the
current values.

Batches are dicts with ``target`` (B,) and either ``features`` (B, L, D) or ``source`` (N, L, D) +
``index`` (B,) (rows of ``source``, read where they lie instead of gathered;
:class:`~speechbias.ser.datamodule.LayerMeansDataModule` serves such batches when
``gather_training_rows`` is False).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch

from speechbias.ser.head import ValenceHead
from speechbias.ser.training_settings import STEP_KERNELS

log = logging.getLogger(__name__)

# the parameters of a ValenceHead, in the order of ValenceHead.parameters()
PARAMETER_NAMES = ("layer_logits", "project.weight", "project.bias", "output.weight", "output.bias")
_compiled_missing: str | None = None  # None: not tried yet; "": set up; else why it cannot be
_missing_warned = False


def compiled_step_available(step_kernel: str = "auto") -> bool:
    """Whether the numba-compiled step can run (numba imports and can cache its code). ``step_kernel``:
    ``torch`` -> False; ``compiled`` -> True or raises; ``auto`` -> warns once and answers False when
    it cannot be set up."""
    global _compiled_missing, _missing_warned
    if step_kernel not in STEP_KERNELS:
        raise ValueError(f"step_kernel must be one of {STEP_KERNELS}, got {step_kernel!r}")
    if step_kernel == "torch":
        return False
    if _compiled_missing is None:
        try:
            import speechbias.ser.compiled_step  # noqa: F401
        except Exception as error:  # noqa: BLE001 - any failure to set up numba means: the general step
            _compiled_missing = f"{type(error).__name__}: {error}"
        else:
            _compiled_missing = ""
    if _compiled_missing and step_kernel == "compiled":
        raise RuntimeError(f"step_kernel=compiled: the compiled SER step is unavailable ({_compiled_missing})")
    if _compiled_missing and not _missing_warned:
        log.warning(
            "the compiled SER step is unavailable (%s); the heads train with the general step (autograd "
            "and torch.optim.Adam: the same estimator, slower on a CPU)",
            _compiled_missing,
        )
        _missing_warned = True
    return not _compiled_missing


class HeadsAdam(torch.optim.Adam):
    """Adam (default betas and eps, no weight decay, fused kernel) over ``heads``, head k with
    learning rate ``lrs[k]``; ``step(batch=...)`` the compiled step (see the module docstring)."""

    def __init__(self, heads: Sequence[ValenceHead], lrs: Sequence[float]):
        if len(heads) != len(lrs) or not heads:
            raise ValueError(f"need one learning rate per head, got {len(heads)} heads and {len(lrs)} lrs")
        shapes = {(h.num_layers, h.input_size, h.project.out_features) for h in heads}
        if len(shapes) != 1:
            raise ValueError(f"heads of different shapes cannot train in one step: {sorted(shapes)}")
        super().__init__(
            [{"params": list(h.parameters()), "lr": float(lr)} for h, lr in zip(heads, lrs)],
            lr=float(lrs[0]),
            fused=True,
        )
        self.heads = list(heads)
        # per parameter (kinds outer, heads inner): the parameter, its address, (state, exp_avg, exp_avg_sq, step)
        self._flat_params: list[torch.nn.Parameter] = []
        self._pointers: list[int] = []
        self._bound_state: list[tuple] | None = None
        self._arrays: tuple | None = None  # the kernel's parameter, moment and step arrays
        self._hyper_key: tuple | None = None
        self._hyper: tuple[np.ndarray, ...] = ()

    # ---- binding the heads' parameters and Adam's state to (K, ...) stacks -------------------------------

    def _bound(self) -> bool:
        """Whether the parameters are still views of the stacks and Adam's state is still ours (a few
        microseconds: identity and address checks only)."""
        if self._bound_state is None:
            return False
        for p, pointer, (state, exp_avg, exp_avg_sq, step) in zip(self._flat_params, self._pointers, self._bound_state):
            current = self.state.get(p)
            if (
                p.data_ptr() != pointer
                or current is not state
                or current.get("exp_avg") is not exp_avg
                or current.get("exp_avg_sq") is not exp_avg_sq
                or current.get("step") is not step
            ):
                return False
        return True

    def _bind(self) -> tuple:
        """The numpy views the compiled pass updates, bound afresh: each kind of parameter
        (``PARAMETER_NAMES`` order) made views of one (K, ...) stack of its current values, and Adam's
        state moved into (K, ...) stacks from its current values (zeros and step 0 where a parameter
        has none yet, as Adam initialises it)."""
        steps = torch.zeros((len(self.heads), len(PARAMETER_NAMES)), dtype=torch.float32)
        values, moments = [], []
        self._flat_params, self._pointers, self._bound_state = [], [], []
        for j, name in enumerate(PARAMETER_NAMES):
            kind = [h.get_parameter(name) for h in self.heads]
            values.append(torch.stack([p.detach() for p in kind]))
            states = [self.state.get(p) or {} for p in kind]
            exp_avg, exp_avg_sq = (
                torch.stack(
                    [
                        s[key].detach().to(torch.float32) if key in s else torch.zeros_like(p)
                        for s, p in zip(states, kind)
                    ]
                ).contiguous()
                for key in ("exp_avg", "exp_avg_sq")
            )
            moments += [exp_avg, exp_avg_sq]
            for k, (p, s) in enumerate(zip(kind, states)):
                p.data = values[j][k]
                steps[k, j] = float(s["step"]) if "step" in s else 0.0
                state = {"step": steps[k, j], "exp_avg": exp_avg[k], "exp_avg_sq": exp_avg_sq[k]}
                self.state[p] = state
                self._flat_params.append(p)
                self._pointers.append(p.data_ptr())
                self._bound_state.append((state, state["exp_avg"], state["exp_avg_sq"], state["step"]))
        self._arrays = (*(v.numpy() for v in values), *(m.numpy() for m in moments), steps.numpy())
        return self._arrays

    def _hyperparameters(self) -> tuple[np.ndarray, ...]:
        """(lrs, beta1s, beta2s, epss) (K,) float64 of the parameter groups (rebuilt when one changed)."""
        key = tuple((g["lr"], *g["betas"], g["eps"]) for g in self.param_groups)
        if key != self._hyper_key:
            self._hyper_key = key
            table = np.array(key, dtype=np.float64)
            self._hyper = tuple(np.ascontiguousarray(table[:, c]) for c in range(4))
        return self._hyper

    def load_state_dict(self, state_dict) -> None:
        super().load_state_dict(state_dict)
        self._arrays = None

    # ---- the step ---------------------------------------------------------------------------------------

    def _settings_allow_compiled(self) -> bool:
        """Whether the groups' options and the parameters suit the compiled pass (checked when binding)."""
        for group in self.param_groups:
            if (
                group["amsgrad"]
                or group["maximize"]
                or group["weight_decay"] != 0
                or group["capturable"]
                or group["differentiable"]
                or group.get("decoupled_weight_decay", False)
            ):
                return False
            if any(p.device.type != "cpu" or p.dtype != torch.float32 for p in group["params"]):
                return False
        return True

    def takes_batch(self, batch: dict) -> bool:
        """Whether ``step(batch=batch)`` can take the compiled pass (binds the stacks where something
        changed since the last step); where not, the caller takes the general step."""
        source = batch["source"] if "source" in batch else batch["features"]
        if not (
            source.device.type == "cpu"
            and source.dtype == torch.float32
            and getattr(self, "grad_scale", None) is None
            and getattr(self, "found_inf", None) is None
        ):
            return False
        if self._arrays is not None and self._bound():
            return True
        return self._settings_allow_compiled() and self._bind() is not None

    @torch.no_grad()
    def step(self, closure=None, batch: dict | None = None):
        """Adam's step on ``.grad`` (no ``batch``), or the compiled training step of every head on
        ``batch`` (returns each head's MSE on it, (K,) float64; :meth:`takes_batch` must hold)."""
        if batch is None:
            return super().step(closure)
        if not self.takes_batch(batch):
            raise ValueError("the compiled SER step does not apply to this batch or optimiser (see takes_batch)")
        from speechbias.ser.compiled_step import heads_adam_step

        source = batch["source"] if "source" in batch else batch["features"]
        rows = batch["index"] if "source" in batch else torch.arange(source.shape[0])
        mse = np.empty(len(self.heads), dtype=np.float64)
        heads_adam_step(
            source.contiguous().numpy(),
            rows.to(torch.int64).contiguous().numpy(),
            batch["target"].to(torch.float32).contiguous().numpy(),
            *self._arrays,
            *self._hyperparameters(),
            mse,
        )
        return torch.from_numpy(mse)

"""Adam over K valence heads whose ``step(batch=...)`` also computes the gradients: one compiled pass.

:class:`HeadsAdam` is ``torch.optim.Adam`` (fused kernel, via :class:`~speechbias.ser.fused_adam.ReusedListsAdam`)
with one parameter group per head. ``step()`` / ``step(closure)`` is Adam's step on the gradients
already in ``.grad``. ``step(batch=...)`` is the whole training step of every head on that batch: each
head's MSE gradient and Adam update, fused in :func:`~speechbias.ser.compiled_step.heads_adam_step`
(numba) when it applies (CPU, float32 parameters and features, Adam without weight decay, amsgrad,
maximize), else the closed-form gradients of :class:`~speechbias.ser.stacked_heads.StackedHeads` and
Adam's own step. It returns each head's MSE on the batch (K,). The compiled pass never writes
``.grad``; a closure passed with ``batch`` is not called (it would compute gradients, and Lightning's
runs the ``on_before_optimizer_step`` hooks that inspect them).

Lightning's ``LightningOptimizer.step(**kwargs)`` passes ``batch`` through (so ``global_step`` and the
hooks stay Lightning's). The state is Adam's own (``exp_avg``, ``exp_avg_sq``, ``step`` per
parameter), kept as views of (K, ...) stacks the compiled pass updates in place: ``state_dict``,
checkpoints and resuming are unchanged; after ``load_state_dict`` (resume) the stacks are rebuilt from
the loaded values.

Batches are dicts with ``target`` (B,) and either ``features`` (B, L, D) or ``source`` (N, L, D) +
``index`` (B,) (rows of ``source``: the compiled pass reads them where they lie instead of gathering
them; :class:`~speechbias.ser.datamodule.LayerMeansDataModule` serves such batches when
``gather_training_rows`` is False).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch

from speechbias.ser.datamodule import batch_features
from speechbias.ser.fused_adam import ReusedListsAdam
from speechbias.ser.head import ValenceHead
from speechbias.ser.stacked_heads import PARAMETER_NAMES, StackedHeads

log = logging.getLogger(__name__)

STEP_KERNELS = ("auto", "compiled", "torch")
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
        except Exception as error:  # noqa: BLE001 - any failure to set up numba means: the torch step
            _compiled_missing = f"{type(error).__name__}: {error}"
        else:
            _compiled_missing = ""
    if _compiled_missing and step_kernel == "compiled":
        raise RuntimeError(f"step_kernel=compiled: the compiled SER step is unavailable ({_compiled_missing})")
    if _compiled_missing and not _missing_warned:
        log.warning(
            "the compiled SER step is unavailable (%s); the heads train with the torch step (same "
            "estimator, ~2x slower)",
            _compiled_missing,
        )
        _missing_warned = True
    return not _compiled_missing


class HeadsAdam(ReusedListsAdam):
    """Adam (default betas and eps, no weight decay) over ``heads``, head k with learning rate ``lrs[k]``.

    ``compiled``: whether ``step(batch=...)`` may take the compiled pass (see the module docstring).
    """

    def __init__(self, heads: Sequence[ValenceHead], lrs: Sequence[float], compiled: bool = True):
        if len(heads) != len(lrs) or not heads:
            raise ValueError(f"need one learning rate per head, got {len(heads)} heads and {len(lrs)} lrs")
        super().__init__(
            [{"params": list(h.parameters()), "lr": float(lr)} for h, lr in zip(heads, lrs)], lr=float(lrs[0])
        )
        self.heads = list(heads)
        self.compiled = bool(compiled)
        self._stacked: StackedHeads | None = None
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

    def _stacked_heads(self) -> StackedHeads:
        """The heads' parameters as views of (K, ...) stacks (re-stacked where something replaced them)."""
        if self._stacked is None:
            self._stacked = StackedHeads(self.heads)
        self._stacked.bind()
        return self._stacked

    def _bind(self) -> tuple:
        """The numpy views the compiled pass updates, bound afresh: the parameters' (K, ...) stacks
        and Adam's state moved into (K, ...) stacks from its current values (zeros and step 0 where a
        parameter has none yet, as Adam initialises it)."""
        self._stacked_heads()
        kinds = [[h.get_parameter(name) for h in self.heads] for name in PARAMETER_NAMES]
        steps = torch.zeros((len(self.heads), len(PARAMETER_NAMES)), dtype=torch.float32)
        stacks = []
        for j, kind in enumerate(kinds):
            states = [self.state.get(p) or {} for p in kind]
            for key in ("exp_avg", "exp_avg_sq"):
                stacks.append(
                    torch.stack(
                        [
                            s[key].detach().to(torch.float32) if key in s else torch.zeros_like(p)
                            for s, p in zip(states, kind)
                        ]
                    ).contiguous()
                )
            for k, s in enumerate(states):
                if "step" in s:
                    steps[k, j] = float(s["step"])
        self._flat_params, self._pointers, self._bound_state = [], [], []
        for j, kind in enumerate(kinds):
            exp_avg, exp_avg_sq = stacks[2 * j], stacks[2 * j + 1]
            for k, p in enumerate(kind):
                state = {"step": steps[k, j], "exp_avg": exp_avg[k], "exp_avg_sq": exp_avg_sq[k]}
                self.state[p] = state
                self._flat_params.append(p)
                self._pointers.append(p.data_ptr())
                self._bound_state.append((state, state["exp_avg"], state["exp_avg_sq"], state["step"]))
        self._lists = None  # ReusedListsAdam's cached lists point at the replaced tensors
        values = [self._stacked.values[name].numpy() for name in PARAMETER_NAMES]
        self._arrays = (*values, *(m.numpy() for m in stacks), steps.numpy())
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

    def _compiled_arrays(self, source: torch.Tensor) -> tuple | None:
        """The compiled pass's arrays for a batch from ``source`` (bound afresh when something changed
        since the last step), or None where the compiled pass does not apply."""
        if not (
            self.compiled
            and source.device.type == "cpu"
            and source.dtype == torch.float32
            and getattr(self, "grad_scale", None) is None
            and getattr(self, "found_inf", None) is None
        ):
            return None
        if self._arrays is not None and self._bound():
            return self._arrays
        return self._bind() if self._settings_allow_compiled() else None

    @torch.no_grad()
    def predict(self, features: torch.Tensor) -> torch.Tensor | None:
        """Every head's predictions (K, N) on ``features`` (N, L, D), by the compiled pass's arithmetic;
        None where the compiled pass does not apply (the caller predicts with the heads)."""
        arrays = self._compiled_arrays(features)
        if arrays is None:
            return None
        from speechbias.ser.compiled_step import heads_predict

        out = np.empty((len(self.heads), features.shape[0]), dtype=np.float32)
        heads_predict(features.contiguous().numpy(), *arrays[:5], out)
        return torch.from_numpy(out)

    @torch.no_grad()
    def step(self, closure=None, batch: dict | None = None):
        """Adam's step on ``.grad`` (no ``batch``), or the whole training step of every head on ``batch``
        (returns each head's MSE on it, (K,), float64 from the compiled pass)."""
        if batch is None:
            return super().step(closure)
        # the closure is not called: it exists to compute gradients (Lightning's also runs the
        # on_before_optimizer_step hooks, which inspect them), and this step makes none in .grad
        source = batch["source"] if "source" in batch else batch["features"]
        arrays = self._compiled_arrays(source)
        if arrays is None:
            mse = self._stacked_heads().set_gradients(batch_features(batch), batch["target"])
            super().step()
            return mse
        from speechbias.ser.compiled_step import heads_adam_step

        rows = batch["index"] if "source" in batch else torch.arange(source.shape[0])
        mse = np.empty(len(self.heads), dtype=np.float64)
        heads_adam_step(
            source.contiguous().numpy(),
            rows.to(torch.int64).contiguous().numpy(),
            batch["target"].to(torch.float32).contiguous().numpy(),
            *arrays,
            *self._hyperparameters(),
            mse,
        )
        return torch.from_numpy(mse)

"""``torch.optim.Adam`` with the fused kernel, minus its per-step bookkeeping in Python.

Each ``Adam.step`` rebuilds, per parameter group, the lists of parameters, gradients, moments and
step counters and regroups them by device before it calls the fused kernel. When nothing changed
since the last step (the same parameter and gradient tensors, as in the SER heads' stacked step,
whose gradients are fixed buffers), :class:`ReusedListsAdam` calls the same kernel
(``torch._fused_adam_``, exactly what ``Adam.step`` calls) on the lists of the last step instead:
the same update, bit for bit (tests/ser/test_stacked_heads.py); measured 0.51-0.65 vs 0.70-0.78 ms
per step of the paper's three heads on one CPU core (25 x 1024 features), i.e. 2-4 s of 20,000
steps. Anything else (new gradient tensors, a parameter without state yet, a gradient scaler's
``grad_scale``/``found_inf``, options the shortcut does not cover) takes ``Adam.step``. A closure
(Lightning always passes one) is called first, as ``Adam.step`` calls it. The optimiser's state and
``state_dict`` are Adam's own, so checkpoints are unchanged.
"""

from __future__ import annotations

import torch


class ReusedListsAdam(torch.optim.Adam):
    """Fused Adam (``fused=True``) whose :meth:`step` reuses the previous step's tensor lists."""

    def __init__(self, params, **kwargs):
        super().__init__(params, fused=True, **kwargs)
        self._lists: list[tuple] | None = None

    def _reusable(self) -> bool:
        if self._lists is None or len(self._lists) != len(self.param_groups):
            return False
        return all(
            group["params"] is lists[0] and all(p.grad is g for p, g in zip(lists[0], lists[1]))
            for group, lists in zip(self.param_groups, self._lists)
        )

    def _collect(self) -> list[tuple] | None:
        """Per group (params, grads, exp_avgs, exp_avg_sqs, steps), or None when the shortcut does
        not apply (a parameter without gradient or state, options it does not handle)."""
        lists = []
        for group in self.param_groups:
            if (
                group["amsgrad"]
                or group["maximize"]
                or group["capturable"]
                or group["differentiable"]
                or group.get("decoupled_weight_decay", False)
                or not group["fused"]
            ):
                return None
            params = group["params"]
            states = [self.state.get(p) for p in params]
            if any(p.grad is None or p.grad.is_sparse or not s or "exp_avg" not in s for p, s in zip(params, states)):
                return None
            if len({(p.device, p.dtype) for p in params}) > 1:
                return None
            lists.append(
                (
                    params,
                    [p.grad for p in params],
                    [s["exp_avg"] for s in states],
                    [s["exp_avg_sq"] for s in states],
                    [s["step"] for s in states],
                )
            )
        return lists

    @torch.no_grad()
    def step(self, closure=None):
        scaled = getattr(self, "grad_scale", None) is not None or getattr(self, "found_inf", None) is not None
        if scaled or not hasattr(torch, "_fused_adam_"):
            self._lists = None
            return super().step(closure)
        loss = None
        if closure is not None:  # as Adam.step does (Lightning always passes one)
            with torch.enable_grad():
                loss = closure()
        if not self._reusable():
            super().step()  # initialises the state; its lists serve the next steps
            self._lists = self._collect()
            return loss
        for group, (params, grads, exp_avgs, exp_avg_sqs, steps) in zip(self.param_groups, self._lists):
            beta1, beta2 = group["betas"]
            torch._foreach_add_(steps, 1)
            torch._fused_adam_(
                params,
                grads,
                exp_avgs,
                exp_avg_sqs,
                [],
                steps,
                amsgrad=False,
                lr=group["lr"],
                beta1=beta1,
                beta2=beta2,
                weight_decay=group["weight_decay"],
                eps=group["eps"],
                maximize=False,
                grad_scale=None,
                found_inf=None,
            )
        return loss

    def load_state_dict(self, state_dict) -> None:
        super().load_state_dict(state_dict)
        self._lists = None

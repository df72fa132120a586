"""One training step's gradients for K valence heads at once, from their parameters stacked per kind.

Each :class:`~speechbias.ser.head.ValenceHead` is the linear map ``x -> sum_l w_l (v . x_l) + c`` with
``w = softmax(a)`` (L,), ``v = W2 W1`` (D,) and ``c = W2 b1 + b2``. :class:`StackedHeads` keeps the K heads'
parameters of each kind in one (K, ...) tensor, each head's ``nn.Parameter`` a view of its row (so the
heads, their ``state_dict``, checkpoints and the optimiser see ordinary per-head parameters), and
:meth:`StackedHeads.set_gradients` writes the gradient of each head's MSE on a batch into the heads'
``.grad`` (views of (K, ...) buffers), computed from the closed form below instead of by autograd:

    g = 2 (p - y) / B (B,)        dc = sum_b g_b       da = w * (dw - <w, dw>),  dw_l = sum_b g_b s_bl
    s_bl = v . x_bl               dv = sum_bl g_b w_l x_bl
    dW1 = W2^T dv   db1 = W2^T dc   dW2 = dv W1^T + dc b1^T   db2 = dc

It is the same estimator (each head's own MSE gradient, each head then its own Adam); the values
differ from autograd's by float rounding only (tests/ser/test_stacked_heads.py). Every operation
either runs per head (the product of the batch with v, in the shape autograd uses for one head),
or batches the heads along a leading dimension with no sum across it (dv: one (K, B*L) x (B*L, D)
product, whose rows round as K separate products do: tested), so a head's numbers do not
depend on which heads train beside it (3 heads in one run = 3 one-head runs, bit for bit; sums over
the batch or the layers are elementwise products + ``sum``, since ``bmm`` rounds them differently for
K = 1 and K = 3).

About 25 tensor operations a step instead of autograd's forward and backward graphs of three heads,
and no zeroing or reallocation of the 3 MB of gradients: measured side by side
(benchmarks/ser_bench.py, 3 x 20,000 steps of 25 x 1024 features, batch 32, 1 thread, 2 shared cores
at load average ~2.7), the plain loop took 65.7 s with this step vs 115.5 s with autograd's (1.76x).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from speechbias.ser.head import ValenceHead

# the parameters of a ValenceHead, in the order of ValenceHead.parameters()
PARAMETER_NAMES = ("layer_logits", "project.weight", "project.bias", "output.weight", "output.bias")


class StackedHeads:
    """K :class:`ValenceHead` of one shape whose parameters (and gradients) live in (K, ...) tensors.

    ``bind()`` (on construction, and by the training loops before each group of steps) makes every
    head parameter a view of its row of the stacked tensor of its kind, re-stacking from the heads'
    current values when something replaced them (moving the module to another device,
    ``param.data = ...``, ``zero_grad(set_to_none=True)``); loading a state dict copies in place and
    keeps the views. Gradients are views of (K, ...) buffers that each step overwrites.
    """

    def __init__(self, heads: Sequence[ValenceHead]):
        if not heads:
            raise ValueError("StackedHeads needs at least one head")
        shapes = {(h.num_layers, h.input_size, h.project.out_features) for h in heads}
        if len(shapes) != 1:
            raise ValueError(f"heads of different shapes cannot be stacked: {sorted(shapes)}")
        self.heads = list(heads)
        self.values: dict[str, torch.Tensor] = {}
        self.grads: dict[str, torch.Tensor] = {}
        self.bind()

    def _params(self, name: str) -> list[torch.nn.Parameter]:
        return [h.get_parameter(name) for h in self.heads]

    def _bound(self, name: str) -> bool:
        values, grads = self.values.get(name), self.grads.get(name)
        if values is None:
            return False
        return all(
            p.data_ptr() == values[k].data_ptr()
            and p.shape == values[k].shape
            and p.grad is not None
            and p.grad.data_ptr() == grads[k].data_ptr()
            for k, p in enumerate(self._params(name))
        )

    def bind(self) -> None:
        """Stack (again) every kind of parameter whose heads' tensors are not views of its stack."""
        for name in PARAMETER_NAMES:
            if self._bound(name):
                continue
            params = self._params(name)
            values = torch.stack([p.detach() for p in params])
            grads = torch.zeros_like(values)
            for k, p in enumerate(params):
                p.data = values[k]
                p.grad = grads[k]
            self.values[name], self.grads[name] = values, grads

    def set_gradients(self, features: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Per-layer means (B, L, D) and targets (B,) on [0, 1] -> each head's MSE (K,) (no grad); the
        gradient of each head's MSE is written into its parameters' ``.grad``. Call :meth:`bind`
        first whenever something may have replaced the heads' tensors since the last step (it is not
        checked here: the check costs about as much as the step's small operations)."""
        a, w1, b1, w2, b2 = (self.values[n] for n in PARAMETER_NAMES)
        da, dw1, db1, dw2, db2 = (self.grads[n] for n in PARAMETER_NAMES)
        n_heads, hidden, dim = w1.shape
        b, n_layers = features.shape[0], features.shape[1]
        if features.shape[1:] != (a.shape[1], dim) or target.shape != (b,):
            raise ValueError(
                f"expected features (B, {a.shape[1]}, {dim}) and target (B,), got "
                f"{tuple(features.shape)} and {tuple(target.shape)}"
            )
        with torch.no_grad():
            x = features.to(w1.dtype).reshape(b * n_layers, dim)  # (B*L, D)
            v = torch.bmm(w2, w1)  # (K, 1, D)
            c = torch.bmm(w2, b1.unsqueeze(2)).view(n_heads) + b2.view(n_heads)
            w = torch.softmax(a, dim=1)  # (K, L)
            # per head, in the shape autograd uses for one head, (1, D) x (D, B*L): one (K, D) product
            # rounds differently for K = 1 and K = 3
            s = torch.cat([v[k] @ x.T for k in range(n_heads)]).view(n_heads, b, n_layers)
            p = (s * w.unsqueeze(1)).sum(dim=2) + c.unsqueeze(1)  # (K, B)
            err = p - target.to(p.dtype)
            mse = (err * err).mean(dim=1)
            g = err * (2.0 / b)  # d MSE / d p, (K, B)
            dc = g.sum(dim=1)  # (K,)
            dw = (g.unsqueeze(2) * s).sum(dim=1)  # (K, L)
            torch.mul(w, dw - (w * dw).sum(dim=1, keepdim=True), out=da)
            ds = (g.unsqueeze(2) * w.unsqueeze(1)).view(n_heads, b * n_layers)
            dv = (ds @ x).unsqueeze(1)  # (K, 1, D)
            # (K, H, D) = W2^T dv, single products: a broadcast mul writes it ~2x faster than bmm
            torch.mul(w2.transpose(1, 2), dv, out=dw1)
            torch.mul(w2.view(n_heads, hidden), dc.unsqueeze(1), out=db1)
            torch.baddbmm(dc.view(n_heads, 1, 1) * b1.unsqueeze(1), dv, w1.transpose(1, 2), out=dw2)
            db2.copy_(dc.view(n_heads, 1))
        return mse

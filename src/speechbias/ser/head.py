"""The valence head (SUPERB emotion recipe, as in the SpEAT paper), in two equivalent forms.

    softmax-weighted layer sum -> Linear(D, 256) -> mean over frames -> Linear(256, 1)

There is no nonlinearity, so the mean over frames commutes with the layer sum and the first
Linear: ``head(frames) == head(per-layer temporal means)`` exactly (up to float rounding).
:meth:`ValenceHead.forward` takes the cached per-layer means (B, L, D);
:meth:`ValenceHead.forward_frames` takes full frame sequences and exists to prove the identity.
:func:`predict_with_heads` runs several heads (e.g. the paper's three learning rates) on one batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class ValenceHead(nn.Module):
    """Predicts valence on the [0, 1] training scale.

    ``layer_logits`` (L,) is a registered parameter initialised to zeros, so the softmax layer
    weights start equal (1/L each) and move with the optimiser on every device.
    """

    def __init__(self, num_layers: int, input_size: int, hidden_size: int = 256):
        super().__init__()
        if num_layers < 1 or input_size < 1 or hidden_size < 1:
            raise ValueError(
                f"num_layers, input_size, hidden_size must be >= 1, got {num_layers}, {input_size}, {hidden_size}"
            )
        self.num_layers = int(num_layers)
        self.input_size = int(input_size)
        self.layer_logits = nn.Parameter(torch.zeros(self.num_layers))
        self.project = nn.Linear(self.input_size, hidden_size)
        self.output = nn.Linear(hidden_size, 1)

    def layer_weights(self) -> torch.Tensor:
        """Softmax of the layer logits, (L,), summing to 1."""
        return torch.softmax(self.layer_logits, dim=0)

    def _check(self, x: torch.Tensor, layer_dim: int) -> None:
        if x.shape[layer_dim] != self.num_layers or x.shape[-1] != self.input_size:
            raise ValueError(
                f"expected {self.num_layers} layers of width {self.input_size}, got features of shape {tuple(x.shape)}"
            )

    def forward(self, layer_means: torch.Tensor) -> torch.Tensor:
        """Per-layer temporal means (B, L, D) -> predictions (B,).

        Evaluated in the re-associated order ``sum_l w_l * ((W2 W1) . x_l) + (W2 b1 + b2)``: the
        same linear function of the same parameters (autograd gives the same gradients, up to
        float rounding), but a step costs B*L*D + H*D multiply-adds instead of B*L*D + B*H*D and
        never materialises the (B, H) hidden layer: 3-4x faster per training step on CPU
        (benchmarks/ser_bench.py). ``forward_frames`` keeps the textbook order.
        """
        return predict_with_heads([self], layer_means)[0]  # checks the shape

    def forward_frames(
        self, hidden_states: list[torch.Tensor] | torch.Tensor, frame_lengths: torch.Tensor
    ) -> torch.Tensor:
        """Full sequences: a list of L tensors (B, T, D) (or one (B, L, T, D)) with valid frame
        counts (B,) -> predictions (B,). Frames at index >= ``frame_lengths[b]`` are padding."""
        states = torch.stack(list(hidden_states), dim=1) if isinstance(hidden_states, (list, tuple)) else hidden_states
        self._check(states, 1)
        mixed = torch.einsum("l,bltd->btd", self.layer_weights().to(states.dtype), states)
        projected = self.project(mixed)  # (B, T, H)
        t = projected.shape[1]
        lengths = frame_lengths.to(projected.device).long().clamp(max=t)
        valid = (torch.arange(t, device=projected.device)[None, :] < lengths[:, None]).to(projected.dtype)
        pooled = (projected * valid[..., None]).sum(dim=1) / lengths[:, None].to(projected.dtype)
        return self.output(pooled).squeeze(-1)


def predict_with_heads(heads: Sequence[ValenceHead], layer_means: torch.Tensor) -> torch.Tensor:
    """K heads of the same shape on one batch of per-layer means (B, L, D) -> predictions (K, B).

    Each head is the linear map ``x -> sum_l w_l * (v . x_l) + c`` with ``v = W2 W1`` (D,) and
    ``c = W2 b1 + b2``. Every head runs exactly the operations it runs alone, so K heads trained
    together take bit-for-bit the steps of K separate runs (one (K, D) x (D, B*L) product would
    read the batch once, but on CPU it is no faster for K = 3 and rounds differently, and 20,000
    Adam steps amplify rounding differences to ~1e-1 in the predictions).
    ``v @ features.T`` is used, not ``features @ v``: on CPU autograd's backward of the former is
    a fast (1, B*L) x (B*L, D) product, of the latter ~10x slower for a (B*L, D) x (D, K) product.
    """
    if not heads:
        raise ValueError("predict_with_heads needs at least one head")
    if layer_means.ndim != 3:
        raise ValueError(f"expected per-layer means (B, L, D), got shape {tuple(layer_means.shape)}")
    for head in heads:
        head._check(layer_means, 1)
    b, n_layers, dim = layer_means.shape
    dtype = heads[0].project.weight.dtype
    rows = layer_means.to(dtype).reshape(b * n_layers, dim).T  # (D, B*L)
    predictions = []
    for h in heads:
        direction = h.output.weight @ h.project.weight  # (1, D)
        offset = h.output.weight @ h.project.bias + h.output.bias  # (1,)
        per_layer = (direction @ rows).view(b, n_layers)  # (B, L): v . x_l
        predictions.append(per_layer @ h.layer_weights() + offset)  # (B,)
    return torch.stack(predictions)

"""The valence head (SUPERB emotion recipe, as in the SpEAT paper), in two equivalent forms.

    softmax-weighted layer sum -> Linear(D, 256) -> mean over frames -> Linear(256, 1)

There is no nonlinearity, so the mean over frames commutes with the layer sum and the first
Linear: ``head(frames) == head(per-layer temporal means)`` exactly (up to float rounding).
:meth:`ValenceHead.forward` takes the cached per-layer means (B, L, D);
:meth:`ValenceHead.forward_frames` takes full frame sequences and exists to prove the identity.
"""

from __future__ import annotations

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
            raise ValueError(f"num_layers, input_size, hidden_size must be >= 1, got "
                             f"{num_layers}, {input_size}, {hidden_size}")
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
            raise ValueError(f"expected {self.num_layers} layers of width {self.input_size}, "
                             f"got features of shape {tuple(x.shape)}")

    def forward(self, layer_means: torch.Tensor) -> torch.Tensor:
        """Per-layer temporal means (B, L, D) -> predictions (B,).

        Fast path: when ``layer_means`` is the (B, L, D) view of a (B, D, L)-contiguous tensor
        (how :class:`~speechbias.ser.datamodule.LayerMeansDataset` stores features), the layer
        mix is one matrix-vector product (B*D, L) @ (L,), about 2x faster on CPU than the einsum
        (forward + backward); the result is the same sum.
        """
        self._check(layer_means, 1)
        w = self.layer_weights().to(layer_means.dtype)
        by_layer_last = layer_means.transpose(1, 2)  # (B, D, L)
        if by_layer_last.is_contiguous():
            b, d, n_layers = by_layer_last.shape
            mixed = (by_layer_last.reshape(b * d, n_layers) @ w).reshape(b, d)
        else:
            mixed = torch.einsum("l,bld->bd", w, layer_means)
        return self.output(self.project(mixed)).squeeze(-1)

    def forward_frames(self, hidden_states: list[torch.Tensor] | torch.Tensor,
                       frame_lengths: torch.Tensor) -> torch.Tensor:
        """Full sequences: a list of L tensors (B, T, D) (or one (B, L, T, D)) with valid frame
        counts (B,) -> predictions (B,). Frames at index >= ``frame_lengths[b]`` are padding."""
        states = torch.stack(list(hidden_states), dim=1) if isinstance(hidden_states, (list, tuple)) \
            else hidden_states
        self._check(states, 1)
        mixed = torch.einsum("l,bltd->btd", self.layer_weights().to(states.dtype), states)
        projected = self.project(mixed)  # (B, T, H)
        t = projected.shape[1]
        lengths = frame_lengths.to(projected.device).long().clamp(max=t)
        valid = (torch.arange(t, device=projected.device)[None, :] < lengths[:, None]).to(projected.dtype)
        pooled = (projected * valid[..., None]).sum(dim=1) / lengths[:, None].to(projected.dtype)
        return self.output(pooled).squeeze(-1)

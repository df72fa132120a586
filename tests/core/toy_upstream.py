"""A tiny deterministic upstream for pipeline tests (independent of any model library)."""

from __future__ import annotations

import torch
from torch import nn

from speechbias.upstream.base import Upstream

HOP = 160


class ToyUpstream(Upstream):
    """Frames of 160 samples -> 3 layers of width 4; counts clips it has seen.

    With ``leaky_padding=True`` it subtracts the mean over the whole padded batch, so zero padding
    changes every clip's states: it then declares ``pad_invariant = False`` like group-norm models.
    """

    def __init__(self, leaky_padding: bool = False, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.proj = nn.Parameter(torch.randn(HOP, 4, generator=g) / HOP**0.5, requires_grad=False)
        self.mix = nn.Parameter(torch.randn(4, 4, generator=g) / 2, requires_grad=False)
        self.num_layers, self.hidden_size, self.frame_rate = 3, 4, 16_000 / HOP
        self.min_samples = HOP
        self.leaky_padding = leaky_padding
        self.pad_invariant = not leaky_padding
        self.seen = 0

    def forward(self, wavs, lengths):
        self.seen += wavs.shape[0]
        with torch.no_grad():
            t = wavs.shape[1] // HOP
            frames = wavs[:, : t * HOP].reshape(wavs.shape[0], t, HOP)
            if self.leaky_padding:
                frames = frames - frames.mean()
            h0 = frames @ self.proj
            h1 = torch.tanh(h0 @ self.mix)
            h2 = torch.tanh(h1 @ self.mix) + h0
        return [h0, h1, h2], torch.div(lengths, HOP, rounding_mode="floor")

    def fingerprint_fields(self):
        return {"name": "toy", "family": "toy", "leaky": self.leaky_padding, "version": 1}

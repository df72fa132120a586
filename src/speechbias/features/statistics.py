"""Per-layer temporal statistics over valid frames.

For hidden states (list of L tensors (B, T, D)) and valid frame counts (B,), returns tensors of
shape (B, L, D): the mean, min and max over each clip's valid frames, and the counts (B,).
Frames at index >= frame_lengths[b] are padding and never enter a statistic.
"""

from __future__ import annotations

import torch

STAT_NAMES = ("mean", "min", "max")


def temporal_statistics(hidden_states: list[torch.Tensor], frame_lengths: torch.Tensor) -> dict[str, torch.Tensor]:
    """Mean/min/max over valid frames for every layer, as float32 (B, L, D) tensors + ``n_frames`` (B,)."""
    if not hidden_states:
        raise ValueError("hidden_states is empty: the upstream returned no layers")
    states = torch.stack([h.float() for h in hidden_states], dim=1)  # (B, L, T, D)
    b, _, t, _ = states.shape
    lengths = frame_lengths.to(states.device).long().clamp(max=t)
    if bool((lengths < 1).any()):
        raise ValueError(f"every clip needs at least one valid frame; got frame_lengths={lengths.tolist()}")
    valid = torch.arange(t, device=states.device)[None, :] < lengths[:, None]  # (B, T)
    mask = valid[:, None, :, None]  # (B, 1, T, 1)
    total = torch.where(mask, states, torch.zeros((), device=states.device)).sum(dim=2)
    mean = total / lengths[:, None, None].float()
    big = torch.finfo(states.dtype).max
    minimum = torch.where(mask, states, torch.full((), big, device=states.device)).amin(dim=2)
    maximum = torch.where(mask, states, torch.full((), -big, device=states.device)).amax(dim=2)
    return {"mean": mean, "min": minimum, "max": maximum, "n_frames": lengths.clone()}

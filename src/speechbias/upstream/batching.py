"""Input checks and length-grouped forwards shared by the upstream families.

Shapes: ``wavs`` (B, S) float, ``lengths`` (B,) int64 valid samples per clip; states (B, T, D).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

StatesAndLengths = tuple[list[torch.Tensor], torch.Tensor]


def check_batch(
    wavs: torch.Tensor,
    lengths: torch.Tensor,
    *,
    min_samples: int,
    max_samples: int | None = None,
    upstream: str = "upstream",
) -> torch.Tensor:
    """Validate a batch; return ``lengths`` as int64 on ``wavs``' device. Bad input -> ValueError."""
    if not isinstance(wavs, torch.Tensor) or wavs.dim() != 2:
        raise ValueError(f"{upstream}: wavs must be a (B, S) tensor, got {getattr(wavs, 'shape', type(wavs))}")
    if not wavs.is_floating_point():
        raise ValueError(f"{upstream}: wavs must be floating point, got {wavs.dtype}")
    lengths = torch.as_tensor(lengths, device=wavs.device)
    if lengths.dim() != 1 or lengths.shape[0] != wavs.shape[0]:
        raise ValueError(
            f"{upstream}: lengths must have shape ({wavs.shape[0]},) to match wavs, got {tuple(lengths.shape)}"
        )
    lengths = lengths.long()
    if (lengths > wavs.shape[1]).any():
        bad = torch.nonzero(lengths > wavs.shape[1]).flatten().tolist()
        raise ValueError(f"{upstream}: lengths exceed the padded width {wavs.shape[1]} at batch rows {bad}")
    if (lengths < min_samples).any():
        bad = torch.nonzero(lengths < min_samples).flatten().tolist()
        raise ValueError(
            f"{upstream}: clips at batch rows {bad} have {lengths[bad].tolist()} samples, fewer than the "
            f"receptive field of {min_samples} samples (pad short clips before extraction)"
        )
    if max_samples is not None and (lengths > max_samples).any():
        bad = torch.nonzero(lengths > max_samples).flatten().tolist()
        raise ValueError(
            f"{upstream}: clips at batch rows {bad} have {lengths[bad].tolist()} samples, more than the "
            f"{max_samples}-sample window this model encodes (split long clips before extraction)"
        )
    return lengths


def zero_padding(wavs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``wavs`` with every sample at or past its clip's length set to 0 (a copy)."""
    valid = torch.arange(wavs.shape[1], device=wavs.device)[None, :] < lengths[:, None]
    return wavs * valid


def mask_frames(states: list[torch.Tensor], frame_lengths: torch.Tensor) -> list[torch.Tensor]:
    """Set frames at or past each clip's ``frame_lengths`` to 0 (padding frames carry no values)."""
    if not states:
        return states
    valid = torch.arange(states[0].shape[1], device=frame_lengths.device)[None, :] < frame_lengths[:, None]
    valid = valid[..., None]
    return [state * valid.to(state.dtype) for state in states]


def run_in_length_groups(
    forward_batch: Callable[[torch.Tensor, torch.Tensor], StatesAndLengths],
    wavs: torch.Tensor,
    lengths: torch.Tensor,
) -> StatesAndLengths:
    """Run ``forward_batch`` once per distinct clip length, each group cut to its own length.

    For models whose output changes under zero padding (group-norm feature extractors): no clip
    is ever padded, so its states never depend on the batch. Outputs are reassembled in batch
    order, zero past each clip's frames.
    """
    groups = torch.unique(lengths).tolist()
    if len(groups) == 1 and groups[0] == wavs.shape[1]:
        return forward_batch(wavs, lengths)
    parts = []
    for length in groups:
        rows = torch.nonzero(lengths == length).flatten()
        parts.append((rows, forward_batch(wavs[rows, :length], lengths[rows])))
    num_layers = len(parts[0][1][0])
    max_frames = max(states[0].shape[1] for _, (states, _) in parts)
    batch = wavs.shape[0]
    frame_lengths = torch.zeros(batch, dtype=torch.long, device=wavs.device)
    out: list[torch.Tensor] = []
    for layer in range(num_layers):
        ref = parts[0][1][0][layer]
        out.append(ref.new_zeros((batch, max_frames, ref.shape[-1])))
    for rows, (states, group_frames) in parts:
        frame_lengths[rows] = group_frames.to(frame_lengths.device)
        for layer, state in enumerate(states):
            out[layer][rows, : state.shape[1]] = state
    return out, frame_lengths


def forward_batch_invariant(
    forward_batch: Callable[[torch.Tensor, torch.Tensor], tuple[list[torch.Tensor], torch.Tensor]],
    wavs: torch.Tensor,
    lengths: torch.Tensor,
    *,
    pad_invariant: bool,
    min_samples: int,
    max_samples: int | None = None,
    upstream: str = "upstream",
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """The contract's ``forward`` around a family's ``forward_batch``: validate, no grad, never pad
    a padding-sensitive model (equal-length groups instead), zero the frames past each clip's end."""
    lengths = check_batch(wavs, lengths, min_samples=min_samples, max_samples=max_samples, upstream=upstream)
    with torch.no_grad():
        if pad_invariant:
            states, frame_lengths = forward_batch(wavs, lengths)
        else:
            states, frame_lengths = run_in_length_groups(forward_batch, wavs, lengths)
        return mask_frames(states, frame_lengths), frame_lengths

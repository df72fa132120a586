"""The same training as :class:`~speechbias.ser.module.ValenceRegressor` under Lightning, as a plain
torch loop over in-memory tensors: no hooks, loggers, checkpoints or DDP.

It draws the same batches (a permutation of the training rows seeded by ``seed + epoch``, as
:class:`~speechbias.ser.datamodule.EpochSeededSampler`), takes the same Adam steps on the same MSE,
so from the same initial weights it ends at the same weights (tested). Use it where Lightning's
per-step overhead dominates (many short runs on CPU, e.g. benchmarks/ser_bench.py); the runner
(``python train.py``) keeps Lightning for checkpoints, resume and DDP.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from speechbias.ser.head import ValenceHead
from speechbias.ser.heads_adam import HeadsAdam, compiled_step_available


def train_heads_in_memory(
    heads: Sequence[ValenceHead],
    lrs: Sequence[float],
    features: torch.Tensor,
    target: torch.Tensor,
    max_steps: int,
    batch_size: int = 32,
    seed: int = 0,
    step_kernel: str = "auto",
) -> list[ValenceHead]:
    """Train each head in place with its own learning rate and Adam on ``features`` (N, L, D) and
    ``target`` (N,) on [0, 1], for ``max_steps`` steps each.

    All heads see the same batches (as separate runs with the same seed would), and each step is
    :class:`~speechbias.ser.heads_adam.HeadsAdam`'s whole step on the batch's rows, as in the Lightning
    module: compiled (``step_kernel`` auto/compiled, where numba can be set up) or the closed-form
    stacked gradients and torch's fused Adam (``torch``); one parameter group per head, each with its
    own learning rate.
    """
    if features.ndim != 3 or target.shape != (features.shape[0],):
        raise ValueError(
            f"features must be (N, L, D) and target (N,), got {tuple(features.shape)}, {tuple(target.shape)}"
        )
    if len(heads) != len(lrs) or not heads:
        raise ValueError(f"need one learning rate per head, got {len(heads)} heads and {len(lrs)} lrs")
    if max_steps < 1 or batch_size < 1 or not all(lr > 0 for lr in lrs):
        raise ValueError(f"need max_steps >= 1, batch_size >= 1, lr > 0; got {max_steps}, {batch_size}, {list(lrs)}")
    features = features.contiguous()
    optimiser = HeadsAdam(heads, lrs, compiled=compiled_step_available(step_kernel))
    n = features.shape[0]
    step, epoch = 0, 0
    for h in heads:
        h.train()
    while step < max_steps:
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch))
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            optimiser.step(batch={"source": features, "index": idx, "target": target[idx]})
            step += 1
            if step >= max_steps:
                break
        epoch += 1
    return list(heads)


def train_head_in_memory(
    head: ValenceHead,
    features: torch.Tensor,
    target: torch.Tensor,
    max_steps: int,
    lr: float,
    batch_size: int = 32,
    seed: int = 0,
    step_kernel: str = "auto",
) -> ValenceHead:
    """Train one head in place (see :func:`train_heads_in_memory`)."""
    return train_heads_in_memory([head], [lr], features, target, max_steps, batch_size, seed, step_kernel)[0]

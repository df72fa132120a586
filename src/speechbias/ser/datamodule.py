"""DataModule over in-memory per-layer temporal means (read from the feature cache by the runner).

Batches are gathered by tensor indexing (``__getitems__``), not by collating B single items, so a
step costs one gather of (B, L, D) floats. The training order is a permutation seeded by
``(seed, epoch)``: the same seed gives the same batches, and a run resumed from an epoch-end
checkpoint continues with exactly the batches the uninterrupted run would have seen. The epoch is
read from the trainer when an epoch starts, not taken from ``set_epoch``: on resume Lightning
2.6 calls ``set_epoch`` with the next epoch's number plus one, which would change the order.
Under DDP a :class:`torch.utils.data.DistributedSampler` is seeded the same way and ``batch_size`` is
the global batch: each of W ranks takes ``batch_size / W`` rows of every batch, so the W ranks' rows of
a step are exactly the rows one process would use, and DDP's averaged gradient is the one-process
gradient (up to float summation order) when the training rows and ``batch_size`` divide by W (else
the sampler repeats up to W - 1 rows per epoch and rank batches differ in size by one).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, DistributedSampler, Sampler


class LayerMeansDataset(Dataset):
    """Rows of ``features`` (N, L, D) with ``target`` (N,); items and batches are dicts.

    Stored (N, L, D) contiguous; a batch is one ``index_select`` of whole rows (about 3x faster
    on CPU than advanced indexing for (32, 25, 1024) batches).
    """

    def __init__(self, features: torch.Tensor, target: torch.Tensor):
        if features.ndim != 3 or target.ndim != 1 or features.shape[0] != target.shape[0]:
            raise ValueError(
                f"features must be (N, L, D) and target (N,), got {tuple(features.shape)} and {tuple(target.shape)}"
            )
        self.features = features.contiguous()
        self.target = target

    def __len__(self) -> int:
        return self.features.shape[0]

    def __getitem__(self, i: int) -> dict:
        return {"features": self.features[i], "target": self.target[i], "index": torch.tensor(i)}

    def __getitems__(self, indices: list[int]) -> dict:
        idx = torch.as_tensor(indices, dtype=torch.long)
        if len(indices) > 1 and indices[-1] - indices[0] == len(indices) - 1 and bool((idx.diff() == 1).all()):
            # consecutive rows (the dev loader's batches): a view, not a copy; for the paper's dev split
            # (225 x 25 x 1024) a copy cost ~5 ms per validation, 400 validations a run
            start, stop = indices[0], indices[-1] + 1
            return {"features": self.features[start:stop], "target": self.target[start:stop], "index": idx}
        return {"features": gather_rows(self.features, idx), "target": self.target[idx], "index": idx}


def gather_rows(features: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Rows ``idx`` (B,) of contiguous ``features`` (N, L, D) -> (B, L, D), one ``index_select``
    over the flattened (N, L*D) view (whole rows are copied as blocks)."""
    n, n_layers, dim = features.shape
    return torch.index_select(features.view(n, n_layers * dim), 0, idx).view(len(idx), n_layers, dim)


def batch_features(batch: dict) -> torch.Tensor:
    """The (B, L, D) features of a training batch: ``features``, or the rows ``index`` of ``source``
    (N, L, D) when the batch was served ungathered (``LayerMeansDataModule.gather_training_rows``)."""
    if "features" in batch:
        return batch["features"]
    return gather_rows(batch["source"], batch["index"])


def already_collated(batch: dict) -> dict:
    """``collate_fn`` for datasets whose ``__getitems__`` returns a whole batch."""
    return batch


def as_one_step(batch: dict) -> list[dict]:
    """``collate_fn`` of the DDP training loader: a chunk of one optimiser step's batch."""
    return [batch]


class StepChunks(Dataset):
    """Training data served a chunk of optimiser steps at a time: item ``[b_1, ..., b_S]`` (lists
    of row indices) -> ``[batch_1, ..., batch_S]`` (dicts as :meth:`LayerMeansDataset.__getitems__`;
    with ``gather=False``, ``{"source": the dataset's (N, L, D) features, "index", "target"}``: the rows
    are not copied, see :func:`batch_features`)."""

    def __init__(self, dataset: LayerMeansDataset, gather: bool = True):
        self.dataset = dataset
        self.gather = bool(gather)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, chunk: list[list[int]]) -> list[dict]:
        if self.gather:
            return [self.dataset.__getitems__(indices) for indices in chunk]
        batches = []
        for indices in chunk:
            idx = torch.as_tensor(indices, dtype=torch.long)
            batches.append({"source": self.dataset.features, "index": idx, "target": self.dataset.target[idx]})
        return batches


class StepChunkSampler(Sampler[list[list[int]]]):
    """The batches of ``sampler`` (``batch_size`` indices each, the last of an epoch smaller), in
    order, grouped ``steps`` at a time; an epoch's last chunk may hold fewer batches."""

    def __init__(self, sampler: Sampler[int], batch_size: int, steps: int):
        if batch_size < 1 or steps < 1:
            raise ValueError(f"batch_size and steps must be >= 1, got {batch_size} and {steps}")
        self.sampler, self.batch_size, self.steps = sampler, int(batch_size), int(steps)

    def __iter__(self):
        chunk = []
        for batch in BatchSampler(self.sampler, self.batch_size, drop_last=False):
            chunk.append(batch)
            if len(chunk) == self.steps:
                yield chunk
                chunk = []
        if chunk:
            yield chunk

    def __len__(self) -> int:
        n_batches = math.ceil(len(self.sampler) / self.batch_size)
        return math.ceil(n_batches / self.steps)


class EpochSeededSampler(Sampler[int]):
    """A random permutation of ``range(n)`` drawn from ``seed + epoch``; the epoch comes from
    ``epoch_source()`` when given (the trainer's current epoch), else from ``set_epoch``."""

    def __init__(self, n: int, seed: int = 0, epoch_source: Callable[[], int] | None = None):
        self.n = int(n)
        self.seed = int(seed)
        self.epoch = 0
        self.epoch_source = epoch_source

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __iter__(self):
        if self.epoch_source is not None:
            self.epoch = int(self.epoch_source())
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        return iter(torch.randperm(self.n, generator=g).tolist())

    def __len__(self) -> int:
        return self.n


class TrainerEpochDistributedSampler(DistributedSampler):
    """:class:`DistributedSampler` whose epoch is read from ``epoch_source()`` when an epoch starts."""

    def __init__(self, dataset, epoch_source: Callable[[], int], **kwargs):
        super().__init__(dataset, **kwargs)
        self.epoch_source = epoch_source

    def __iter__(self):
        self.epoch = int(self.epoch_source())
        return super().__iter__()


class LayerMeansDataModule(pl.LightningDataModule):
    """Train/dev loaders over per-layer means.

    Args:
        features: (N, L, D) float array of per-layer temporal means, one row per rated clip.
        target: (N,) valence on the [0, 1] training scale.
        dev_mask: (N,) bool, True for dev clips.
        batch_size: training batch size (the paper: 32).
        seed: seeds the training order.
        steps_per_call: optimiser steps per training-loader item. Every training item is a list of
            batches (dicts) that :class:`~speechbias.ser.module.ValenceRegressor` steps through
            one by one, so Lightning's per-call overhead (~1-2 ms on CPU, more than a step of the
            head) is paid once per ``steps_per_call`` steps. The batches and their order do not
            depend on it (one difference: when ``max_steps`` ends inside an epoch's last group,
            that epoch ends and is validated). Under DDP it is always 1 (Lightning's distributed
            sampler is kept).

    Attribute ``gather_training_rows`` (default True): when False, the chunked training batches carry
    the training features whole (``source``) and the rows (``index``) instead of a gathered copy
    (:class:`StepChunks`; not with loader workers, which would pickle the source with every batch);
    :class:`~speechbias.ser.module.ValenceRegressor` turns it off when its compiled step reads the rows
    itself.
    """

    def __init__(
        self,
        features,
        target,
        dev_mask,
        batch_size: int = 32,
        seed: int = 0,
        num_workers: int = 0,
        steps_per_call: int = 1,
    ):
        super().__init__()
        features = torch.as_tensor(np.asarray(features, dtype=np.float32))
        target = torch.as_tensor(np.asarray(target, dtype=np.float32))
        dev = np.asarray(dev_mask, dtype=bool)
        if dev.shape != (features.shape[0],) or target.shape != (features.shape[0],):
            raise ValueError(
                f"features {tuple(features.shape)}, target {tuple(target.shape)} and dev_mask "
                f"{dev.shape} must agree on N"
            )
        if dev.all() or not dev.any():
            raise ValueError(f"dev_mask must hold some but not all clips, has {int(dev.sum())} of {dev.size}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if steps_per_call < 1:
            raise ValueError(f"steps_per_call must be >= 1, got {steps_per_call}")
        self.steps_per_call = int(steps_per_call)
        self.gather_training_rows = True
        dev_t = torch.from_numpy(dev)
        self.train_set = LayerMeansDataset(features[~dev_t], target[~dev_t].contiguous())
        self.dev_set = LayerMeansDataset(features[dev_t], target[dev_t].contiguous())
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.num_workers = int(num_workers)

    def rank_batch_size(self, world_size: int = 1) -> int:
        """Rows of a global batch that each of ``world_size`` ranks takes: ceil(batch_size / world_size)."""
        return math.ceil(self.batch_size / max(int(world_size), 1))

    def steps_per_epoch(self, world_size: int = 1) -> int:
        """Optimiser steps in one epoch: batches of :meth:`rank_batch_size` over this process's share
        of the training rows (a :class:`DistributedSampler` gives each of ``world_size`` processes
        ceil(N / world_size) rows); the same as one process's when N and batch_size divide by it."""
        rows = math.ceil(len(self.train_set) / max(int(world_size), 1))
        return math.ceil(rows / self.rank_batch_size(world_size))

    def _current_epoch(self) -> int:
        trainer = getattr(self, "trainer", None)
        return int(trainer.current_epoch) if trainer is not None else 0

    def _distributed(self) -> bool:
        trainer = getattr(self, "trainer", None)
        return trainer is not None and trainer.world_size > 1

    def train_dataloader(self) -> DataLoader:
        """Items are lists of batches (see ``steps_per_call``)."""
        if self._distributed():
            sampler = TrainerEpochDistributedSampler(
                self.train_set,
                self._current_epoch,
                num_replicas=self.trainer.world_size,
                rank=self.trainer.global_rank,
                shuffle=True,
                seed=self.seed,
            )
            return DataLoader(
                self.train_set,
                batch_size=self.rank_batch_size(self.trainer.world_size),
                sampler=sampler,
                collate_fn=as_one_step,
                num_workers=self.num_workers,
            )
        sampler = EpochSeededSampler(len(self.train_set), self.seed, self._current_epoch)
        # worker processes would send the whole source with every batch: they get gathered rows
        gather = self.gather_training_rows or self.num_workers > 0
        return DataLoader(
            StepChunks(self.train_set, gather=gather),
            batch_size=None,
            sampler=StepChunkSampler(sampler, self.batch_size, self.steps_per_call),
            collate_fn=already_collated,
            num_workers=self.num_workers,
        )

    def val_dataloader(self) -> DataLoader:
        sampler = None
        if self._distributed():
            sampler = DistributedSampler(
                self.dev_set, num_replicas=self.trainer.world_size, rank=self.trainer.global_rank, shuffle=False
            )
        return DataLoader(
            self.dev_set,
            batch_size=256,
            sampler=sampler,
            shuffle=False,
            collate_fn=already_collated,
            num_workers=self.num_workers,
        )

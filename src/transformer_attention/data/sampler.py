"""Length-bucketed batches: rows of similar length together, so little of a batch is padding. In a distributed run
Lightning rebuilds this batch sampler around a `DistributedSampler`: each rank buckets its own shard."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import BatchSampler, Sampler


def _lengths_of(sampler: Sampler[int]) -> Sequence[int] | np.ndarray:
    """The `lengths` of the dataset behind a RandomSampler / SequentialSampler / DistributedSampler."""
    dataset = getattr(sampler, "data_source", getattr(sampler, "dataset", None))
    lengths: Sequence[int] | np.ndarray | None = getattr(dataset, "lengths", None)
    if lengths is None:
        raise TypeError(
            f"BucketBatchSampler needs `lengths`, or a sampler over a dataset with a `lengths` attribute; "
            f"got {type(sampler).__name__} over {type(dataset).__name__}"
        )
    return lengths


class BucketBatchSampler(BatchSampler):
    """Each epoch: the indices `sampler` gives, cut into pools of `pool_batches` batches, each pool sorted by
    `lengths[i]` and cut into batches, all batches in an order drawn from `seed` + the epoch."""

    def __init__(
        self,
        sampler: Sampler[int],
        batch_size: int,
        drop_last: bool = False,
        lengths: Sequence[int] | np.ndarray | None = None,
        pool_batches: int = 50,
        seed: int = 0,
    ) -> None:
        super().__init__(sampler, batch_size, drop_last)
        self.lengths = lengths if lengths is not None else _lengths_of(sampler)
        self.pool_batches, self.seed, self.epoch = pool_batches, seed, 0

    def set_epoch(self, epoch: int) -> None:
        """Fix the epoch the next iteration shuffles batches for (it counts up on its own otherwise)."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[list[int]]:
        order = list(self.sampler)
        pool_size = self.batch_size * self.pool_batches
        batches: list[list[int]] = []
        for start in range(0, len(order), pool_size):
            pool = sorted(order[start : start + pool_size], key=self.lengths.__getitem__)
            batches += [pool[i : i + self.batch_size] for i in range(0, len(pool), self.batch_size)]
        if self.drop_last:
            batches = [b for b in batches if len(b) == self.batch_size]
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        self.epoch += 1
        for i in torch.randperm(len(batches), generator=g).tolist():
            yield batches[i]

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]  # torch's Sampler declares no __len__; the ones here have it
        pool_size = self.batch_size * self.pool_batches
        full_pools, rest = divmod(n, pool_size)
        if self.drop_last:
            return full_pools * self.pool_batches + rest // self.batch_size
        return full_pools * self.pool_batches + -(-rest // self.batch_size)

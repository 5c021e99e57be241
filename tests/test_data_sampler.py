"""Length-bucketed batching: each example once per epoch, reshuffled every epoch, less padding, DDP-ready."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from lightning.fabric.utilities.data import _replace_dunder_methods
from lightning.pytorch.utilities.data import _update_dataloader
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, RandomSampler, SequentialSampler

from transformer_attention.data import BucketBatchSampler, EncodedDataset, collate


def dataset(n: int = 1000, seed: int = 0) -> EncodedDataset:
    rng = np.random.default_rng(seed)
    ids = [np.full(int(k), 5, dtype=np.int32) for k in rng.integers(2, 200, size=n)]
    return EncodedDataset(ids, [i % 2 for i in range(n)])


def padded_fraction(batches: list[list[int]], lengths: np.ndarray) -> float:
    pad = sum(len(b) * lengths[b].max() - lengths[b].sum() for b in batches)
    return pad / sum(len(b) * lengths[b].max() for b in batches)


@pytest.mark.parametrize("n, batch_size, pool", [(1000, 16, 10), (37, 8, 2), (5, 8, 50)])
def test_every_example_exactly_once_per_epoch_and_len(n, batch_size, pool):
    ds = dataset(n)
    sampler = BucketBatchSampler(RandomSampler(ds), batch_size, lengths=ds.lengths, pool_batches=pool)
    for _ in range(3):
        batches = list(sampler)
        assert sorted(i for b in batches for i in b) == list(range(n))
        assert len(batches) == len(sampler)
        assert all(len(b) <= batch_size for b in batches)


def test_drop_last_keeps_full_batches_only():
    ds = dataset(100)
    sampler = BucketBatchSampler(RandomSampler(ds), 16, drop_last=True, lengths=ds.lengths, pool_batches=3)
    batches = list(sampler)
    assert all(len(b) == 16 for b in batches) and len(batches) == len(sampler) == 6


def test_reshuffles_between_epochs_and_replays_with_the_seed():
    ds = dataset()
    torch.manual_seed(0)
    sampler = BucketBatchSampler(RandomSampler(ds), 16, lengths=ds.lengths, pool_batches=10, seed=3)
    first, second = list(sampler), list(sampler)
    assert first != second
    assert sorted(map(sorted, first)) != sorted(map(sorted, second))  # new batch members, not just a new order
    sampler.set_epoch(0)  # Lightning calls set_epoch: the same epoch and inner order replay the same batches
    torch.manual_seed(0)
    assert list(sampler) == first


def test_bucketing_cuts_padding():
    ds = dataset()
    plain = list(torch.utils.data.BatchSampler(RandomSampler(ds), 16, drop_last=False))
    bucketed = list(BucketBatchSampler(RandomSampler(ds), 16, lengths=ds.lengths, pool_batches=20))
    assert padded_fraction(bucketed, ds.lengths) < padded_fraction(plain, ds.lengths) / 5
    # within a batch the lengths are close; across batches of the epoch they are not sorted
    assert np.median([np.ptp(ds.lengths[b]) for b in bucketed]) < 15
    firsts = [ds.lengths[b[0]] for b in bucketed]
    assert firsts != sorted(firsts)


def test_lengths_from_the_samplers_dataset_and_collate():
    ds = dataset(50)
    sampler = BucketBatchSampler(SequentialSampler(ds), 8, pool_batches=50)  # lengths found on ds
    loader = DataLoader(ds, batch_sampler=sampler, collate_fn=collate)
    total = 0
    for batch in loader:
        assert batch["attention_mask"][:, -1].any()
        total += int(batch["attention_mask"].sum())
    assert total == ds.lengths.sum()
    with pytest.raises(TypeError, match="needs `lengths`"):
        BucketBatchSampler(SequentialSampler(range(4)), 2)


@pytest.mark.parametrize("captured", [True, False])
def test_lightning_injects_a_distributed_sampler(captured):
    """What Lightning does under DDP (use_distributed_sampler=true): rebuild the batch sampler around a
    DistributedSampler per rank, from the init arguments it captured while the dataloader hook ran."""
    ds = dataset(203)
    with _replace_dunder_methods(DataLoader, "dataset"), _replace_dunder_methods(BatchSampler):
        sampler = BucketBatchSampler(RandomSampler(ds), 8, lengths=ds.lengths, pool_batches=4, seed=7)
    if not captured:
        sampler = BucketBatchSampler(RandomSampler(ds), 8, lengths=ds.lengths, pool_batches=4, seed=7)
    loader = DataLoader(ds, batch_sampler=sampler, collate_fn=collate)
    seen = []
    for rank in range(2):
        dist = DistributedSampler(ds, num_replicas=2, rank=rank, shuffle=True, seed=0)
        ranked = _update_dataloader(loader, dist).batch_sampler
        assert isinstance(ranked, BucketBatchSampler) and ranked.sampler is dist
        assert (ranked.pool_batches, ranked.seed) == ((4, 7) if captured else (50, 0))
        seen += [i for b in ranked for i in b]
    assert set(seen) == set(range(203)) and len(seen) == 204  # DistributedSampler pads one to even shards


def test_collate_pads_each_row_after_its_tokens_whatever_the_row_type():
    """Lists and int32 arrays of any length (one empty) give the row's tokens, then `pad_id`, and a mask that is True
    exactly on the tokens; the labels in order."""
    rows = [[5, 6, 7], np.array([9], dtype=np.int32), [], np.arange(10, 16), [4, 4]]
    batch = collate([{"input_ids": r, "labels": i % 2} for i, r in enumerate(rows)], pad_id=1)
    assert batch["input_ids"].dtype == torch.long and batch["input_ids"].shape == (5, 6)
    assert batch["attention_mask"].dtype == torch.bool
    for i, r in enumerate(rows):
        expected = [int(t) for t in r] + [1] * (6 - len(r))
        assert batch["input_ids"][i].tolist() == expected
        assert batch["attention_mask"][i].tolist() == [True] * len(r) + [False] * (6 - len(r))
    assert batch["labels"].tolist() == [0, 1, 0, 1, 0]

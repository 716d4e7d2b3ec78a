"""luminal.data's torch-style pieces, quickly: a list of samples, sampler=/batch_sampler=, batch_size=None, an
IterableDataset, random_split and the samplers (the edge cases: test_samplers_datasets_audit.py)."""

import numpy as np
import torch
import torch.utils.data as tud

from luminal.data import (
    BatchSampler,
    DataLoader,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    TensorDataset,
    WeightedRandomSampler,
    random_split,
)


def _samples(n=5):
    return [(np.full(2, i, np.float32), i) for i in range(n)]


def _rows(loader):
    return [[np.asarray(part).tolist() for part in batch] for batch in loader]


def test_a_list_of_pairs_and_a_sampler_batch_as_torchs():
    for kwargs in (dict(batch_size=2), dict(batch_size=2, sampler=[4, 0, 2]), dict(batch_sampler=[[1, 3], [0]]),
                   dict(batch_size=None)):
        ours, theirs = DataLoader(_samples(), **kwargs), tud.DataLoader(_samples(), **kwargs)
        assert len(ours) == len(theirs)
        assert _rows(ours) == _rows(theirs)


def test_an_iterable_dataset_batches_its_stream():
    class Count(IterableDataset):
        def __iter__(self):
            return iter(range(5))

    assert [b.tolist() for b in DataLoader(Count(), batch_size=2)] == [[0, 1], [2, 3], [4]]
    assert [b.tolist() for b in DataLoader(Count(), batch_size=2, drop_last=True)] == [[0, 1], [2, 3]]


def test_random_split_partitions_as_torchs_lengths():
    ds = TensorDataset(np.arange(10.0), np.arange(10))
    parts = random_split(ds, [0.7, 0.3], generator=0)
    theirs = tud.random_split(range(10), [0.7, 0.3], generator=torch.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [len(p) for p in theirs] == [7, 3]
    assert sorted(parts[0].indices + parts[1].indices) == list(range(10))


def test_samplers():
    assert list(SequentialSampler(range(4))) == list(tud.SequentialSampler(range(4)))
    assert sorted(RandomSampler(range(6), generator=1)) == list(range(6))
    assert list(BatchSampler(range(7), 3, drop_last=True)) == list(tud.BatchSampler(range(7), 3, drop_last=True))
    drawn = list(WeightedRandomSampler([0.0, 1.0, 0.0, 2.0], 200, generator=0))
    assert set(drawn) == {1, 3} and len(drawn) == 200

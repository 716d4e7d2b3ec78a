"""A DataLoader over a lone numpy array serves what torch's serves over a tensor: batches that are arrays
of its rows (and, unbatched or through a collate_fn, the rows themselves). It served 1-tuples
(``(batch,)``), so a port's ``for xb in DataLoader(x): model(xb)`` got a tuple. A tuple of arrays, or a
Dataset of one array (torch's TensorDataset), still gives tuples."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.utils.data as tud

from luminal import data
from luminal.data import DataLoader


def _as_numpy(b):
    if isinstance(b, torch.Tensor):
        return b.numpy()
    if isinstance(b, list):
        return [_as_numpy(x) for x in b]
    if isinstance(b, tuple):
        return tuple(_as_numpy(x) for x in b)
    return np.asarray(b)


@pytest.mark.parametrize("kwargs", [dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None),
                                    dict(batch_size=2, collate_fn=list), dict(batch_size=None, collate_fn=list),
                                    dict(batch_size=2, sampler=[4, 0, 2, 1]),
                                    dict(batch_sampler=[[1, 3], [0], [4, 2]])],
                         ids=["batched", "drop-last", "unbatched", "collate-list", "unbatched-list", "sampler",
                              "batch-sampler"])
@pytest.mark.parametrize("shape", [(5,), (5, 3)], ids=["1-d", "2-d"])
def test_an_arrays_loader_serves_what_torchs_serves(kwargs, shape):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    try:
        theirs = [_as_numpy(b) for b in tud.DataLoader(torch.from_numpy(x), **kwargs)]
    except TypeError:  # (list() of a 1-d array's 0-d row: torch's fails too)
        with pytest.raises(TypeError):
            list(DataLoader(x, **kwargs))
        return
    ours = list(DataLoader(x, **kwargs))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        assert type(a) is type(b) or (isinstance(a, np.ndarray | np.generic) and isinstance(b, np.ndarray)), \
            (type(a), type(b))
        if isinstance(a, list):
            assert len(a) == len(b)
            for u, v in zip(a, b, strict=True):
                np.testing.assert_array_equal(u, v)
        else:
            np.testing.assert_array_equal(a, b)
            assert np.shape(a) == np.shape(b)


def test_a_shuffled_arrays_batches_are_its_rows():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    batches = list(DataLoader(x, batch_size=4, shuffle=True, seed=3))
    assert [b.shape for b in batches] == [(4, 2), (2, 2)]
    np.testing.assert_array_equal(np.sort(np.concatenate(batches), axis=0), x)


def test_tuples_of_arrays_and_one_array_datasets_keep_their_tuples():
    x = np.arange(5, dtype=np.float32)
    [(b,)] = list(DataLoader((x,), batch_size=5))
    np.testing.assert_array_equal(b, x)
    [(b,)] = list(DataLoader(data.Dataset(x), batch_size=5))  # (torch's TensorDataset(x): 1-tuples too)
    np.testing.assert_array_equal(b, x)
    [t] = list(tud.DataLoader(tud.TensorDataset(torch.from_numpy(x)), batch_size=5))
    assert isinstance(t, list) and len(t) == 1

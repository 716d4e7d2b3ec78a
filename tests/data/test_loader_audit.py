"""luminal.data's DataLoader audited against torch 2.13's ``torch.utils.data``: map datasets (torch's
``__len__``/``__getitem__`` objects, Dataset subclasses that transform samples), ``default_collate``'s
shapes and dtypes, ``collate_fn``, and the batch/epoch semantics on them (sizes, ``drop_last``, shuffles
covering every index once, reproducible orders, empty datasets, bad arguments). Orders are never
compared with torch's random ones; unshuffled batches are compared value for value."""

import collections

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import luminal.data as data
from luminal.data import DataLoader, Dataset

Point = collections.namedtuple("Point", "x label")


class Samples:
    """A torch-style map dataset (not a luminal Dataset, not a Sequence): a dict per sample."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return {"x": np.full((2, 3), i, np.float32), "y": i, "w": float(i) / 2, "name": f"s{i}"}


class TorchSamples(tud.Dataset):
    def __init__(self, n):
        self.inner = Samples(n)

    def __len__(self):
        return len(self.inner)

    def __getitem__(self, i):
        return self.inner[i]


def _same(lm_batch, torch_batch):
    """A luminal batch equals torch's: the same containers (a tuple for torch's list of a tuple), and
    arrays of torch's shapes, dtypes and values."""
    if isinstance(torch_batch, torch.Tensor):
        assert isinstance(lm_batch, np.ndarray)
        assert lm_batch.shape == tuple(torch_batch.shape)
        assert lm_batch.dtype == torch_batch.numpy().dtype
        np.testing.assert_array_equal(lm_batch, torch_batch.numpy())
    elif isinstance(torch_batch, dict):
        assert isinstance(lm_batch, dict) and list(lm_batch) == list(torch_batch)
        for k in torch_batch:
            _same(lm_batch[k], torch_batch[k])
    elif isinstance(torch_batch, (list, tuple)) and not isinstance(torch_batch[0], str):
        assert isinstance(lm_batch, (list, tuple)) and len(lm_batch) == len(torch_batch)
        for a, b in zip(lm_batch, torch_batch):
            _same(a, b)
    else:
        assert lm_batch == torch_batch


@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (4, False), (4, True), (11, False), (11, True),
                                                  (20, False)])
def test_a_map_dataset_batches_as_torchs(batch_size, drop_last):
    """An object with __len__ and __getitem__ was refused ("expected a numpy array or a sequence of arrays")."""
    ours = DataLoader(Samples(11), batch_size=batch_size, drop_last=drop_last)
    theirs = tud.DataLoader(TorchSamples(11), batch_size=batch_size, drop_last=drop_last)
    assert len(ours) == len(theirs)
    got, want = list(ours), list(theirs)
    assert len(got) == len(want) == len(ours)
    for a, b in zip(got, want):
        _same(a, b)
    assert [len(b["y"]) for b in got] == [len(b["y"]) for b in want]
    for a, b in zip(list(ours), want):  # iterating again: the same epoch
        _same(a, b)


def test_a_dataset_subclass_that_transforms_samples_is_read_through_its_getitem():
    """torch's way to augment: override __getitem__. The loader sliced the arrays and skipped it."""

    class Scaled(Dataset):
        def __getitem__(self, i):
            x, y = super().__getitem__(i)
            return x * 100, y

    x, y = np.arange(10, dtype=np.float32).reshape(5, 2), np.arange(5)
    got = list(DataLoader(Scaled(x, y), batch_size=2))
    np.testing.assert_array_equal(np.concatenate([b[0] for b in got]), x * 100)
    np.testing.assert_array_equal(np.concatenate([b[1] for b in got]), y)
    assert [len(b[1]) for b in got] == [2, 2, 1]
    plain = list(DataLoader(Dataset(x, y), batch_size=2))  # the base class: the same batches, unscaled
    for a, b in zip(got, plain):
        np.testing.assert_array_equal(a[0], b[0] * 100)
        assert a[0].dtype == b[0].dtype and a[1].dtype == b[1].dtype


@pytest.mark.parametrize("seed", [3, None])
def test_a_map_dataset_shuffle_covers_every_index_once_per_epoch(seed):
    loader = DataLoader(Samples(23), batch_size=5, shuffle=True, seed=seed)
    epochs = []
    for _ in range(3):
        batches = list(loader)
        assert [len(b["y"]) for b in batches] == [5, 5, 5, 5, 3]
        ids = np.concatenate([b["y"] for b in batches])
        assert sorted(ids.tolist()) == list(range(23))
        for b in batches:  # each sample's fields stay together
            np.testing.assert_array_equal(b["x"][:, 0, 0], b["y"])
            assert b["name"] == [f"s{i}" for i in b["y"]]
        epochs.append(ids)
    assert not np.array_equal(epochs[0], epochs[1]) and not np.array_equal(epochs[1], epochs[2])
    if seed is not None:  # the same seed, the same orders; set_epoch resumes
        again = DataLoader(Samples(23), batch_size=5, shuffle=True, seed=seed)
        again.set_epoch(2)
        np.testing.assert_array_equal(np.concatenate([b["y"] for b in again]), epochs[2])
        arrays = DataLoader(np.arange(23), batch_size=5, shuffle=True, seed=seed)  # as an array's order
        np.testing.assert_array_equal(np.concatenate(list(arrays)), epochs[0])


def test_an_empty_map_dataset():
    for drop_last in (False, True):
        loader = DataLoader(Samples(0), batch_size=3, drop_last=drop_last)
        assert len(loader) == 0 == len(tud.DataLoader(TorchSamples(0), batch_size=3, drop_last=drop_last))
        assert list(loader) == [] and list(DataLoader(Samples(0), batch_size=3, shuffle=True, seed=0)) == []
    assert list(DataLoader(np.zeros((0, 3)), batch_size=2)) == []


def test_collate_fn():
    seen = []

    def keep(samples):
        seen.append(len(samples))
        return [s["y"] for s in samples]

    assert list(DataLoader(Samples(5), batch_size=2, collate_fn=keep)) == [[0, 1], [2, 3], [4]] and seen == [2, 2, 1]
    rows = list(DataLoader(np.arange(5) * 10, batch_size=3, collate_fn=list))  # an array: its rows, as torch's
    assert [[int(r) for r in b] for b in rows] == [[0, 10, 20], [30, 40]]
    with pytest.raises(TypeError, match="collate_fn must be callable, got int"):
        DataLoader(Samples(5), collate_fn=3)


# default_collate ---------------------------------------------------------------------------------------
COLLATE = {
    "arrays": [np.zeros((2, 3), np.float32), np.ones((2, 3), np.float32)],
    "uint8 arrays": [np.arange(4, dtype=np.uint8)] * 3,
    "0-d arrays": [np.array(1.5), np.array(2.5)],
    "numpy float64": [np.float64(1), np.float64(2)],
    "numpy int32": [np.int32(1), np.int32(2)],
    "numpy bool": [np.bool_(True), np.bool_(False)],
    "python float": [1.0, 2.5],
    "python int": [1, 2],
    "python bool": [True, False],
    "strings": ["a", "b"],
    "tuples": [(np.zeros(2), 1), (np.ones(2), 0)],
    "lists": [[1.0, 2], [3.0, 4]],
    "dicts": [{"x": np.zeros(3, np.float16), "y": 1, "s": "a"}, {"x": np.ones(3, np.float16), "y": 2, "s": "b"}],
    "namedtuples": [Point(np.zeros(2, np.float32), 1), Point(np.ones(2, np.float32), 2)],
    "nested": [{"a": (np.zeros(2), {"b": 1.0})}, {"a": (np.ones(2), {"b": 2.0})}],
}


@pytest.mark.parametrize("name", list(COLLATE))
def test_default_collate_as_torchs(name):
    batch = COLLATE[name]
    got = data.default_collate(batch)
    _same(got, tud.default_collate(batch))
    if name == "namedtuples":
        assert isinstance(got, Point)
    if name == "tuples":
        assert isinstance(got, tuple)  # (torch: a list; unpacks alike)


@pytest.mark.parametrize("batch,error,match", [
    ([None, None], TypeError, "default_collate: a batch must hold .* found NoneType"),
    ([np.zeros(2), np.zeros(3)], ValueError, r"the samples' arrays differ in shape \(\[\(2,\), \(3,\)"),
    ([(1, 2), (1,)], ValueError, r"default_collate: the samples differ in length \(\[1, 2\]\)"),
    ([np.array(["a"]), np.array(["b"])], TypeError, "default_collate: arrays of dtype <U1 cannot be batched"),
    ([], ValueError, "default_collate: got an empty batch"),
])
def test_default_collate_refusals(batch, error, match):
    if batch:
        with pytest.raises((TypeError, RuntimeError)):
            tud.default_collate(batch)
    with pytest.raises(error, match=match):
        data.default_collate(batch)


# bad arguments ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("batch_size", [0, -1, 2.5, True])
def test_bad_batch_sizes(batch_size):
    for dataset in (np.arange(4), Samples(4)):
        with pytest.raises(ValueError, match=f"DataLoader: batch_size must be an int >= 1, got {batch_size}"):
            DataLoader(dataset, batch_size=batch_size)


def test_a_dataset_subclass_holding_its_own_data():
    """torch's usual port: a subclass with its own __init__ (no arrays), __len__ and __getitem__. The loader
    read ``.arrays`` (AttributeError); one that lacks __getitem__ is refused naming it, as torch's base."""

    class Files(Dataset):
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            return np.full(2, i, np.float32), i

    loader = DataLoader(Files(5), batch_size=2, shuffle=True, seed=1)
    assert len(loader) == 3 and "Files(len=5)" in repr(loader)
    got = list(loader)
    assert sorted(np.concatenate([b[1] for b in got]).tolist()) == list(range(5))
    for x, i in got:
        assert x.dtype == np.float32 and i.dtype == np.int64
        np.testing.assert_array_equal(x[:, 0], i)

    class Bare(Dataset):
        def __init__(self):
            pass

        def __len__(self):
            return 3

    with pytest.raises(NotImplementedError):
        tud.Dataset()[0]
    with pytest.raises(NotImplementedError, match="Bare: a Dataset subclass .* must implement __getitem__"):
        list(DataLoader(Bare()))

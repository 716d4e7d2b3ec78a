"""luminal.data against torch 2.13's ``torch.utils.data`` beyond the earlier audit (test_loader_audit.py): a list
of samples as a dataset, ``batch_size=None``, ``sampler=``/``batch_sampler=``, iterable datasets, the worker
arguments, ``TensorDataset``/``Subset``/``ConcatDataset``/``random_split`` and the samplers. Sequential orders
are compared with torch's exactly; random ones by their multisets and distributions (luminal draws from
numpy, so never torch's stream); bad arguments by torch's conditions, with luminal's messages."""

import collections
import itertools
import math
import pickle
import warnings

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import luminal.data as data
from luminal.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    random_split,
)

Point = collections.namedtuple("Point", "x label")


def _same(lm, th):
    """A luminal batch or sample equals torch's: arrays for tensors (shape, dtype, values; a numpy scalar for
    a 0-d tensor indexed out of an array), a tuple for torch's list of a tuple, other values equal."""
    if isinstance(th, torch.Tensor) and isinstance(lm, np.generic) and th.ndim == 0:
        assert lm.dtype == th.numpy().dtype and lm == th.item()
    elif isinstance(th, torch.Tensor):
        assert isinstance(lm, np.ndarray), type(lm)
        assert lm.shape == tuple(th.shape) and lm.dtype == th.numpy().dtype
        np.testing.assert_array_equal(lm, th.numpy())
    elif isinstance(th, dict):
        assert isinstance(lm, dict) and list(lm) == list(th)
        for k in th:
            _same(lm[k], th[k])
    elif isinstance(th, (list, tuple)) and not (th and isinstance(th[0], str)):
        assert isinstance(lm, (list, tuple)) and len(lm) == len(th)
        for a, b in zip(lm, th):
            _same(a, b)
    else:
        assert type(lm) is type(th) and lm == th


def _all_same(ours, theirs):
    got, want = list(ours), list(theirs)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        _same(a, b)


def _tuples(n=7):
    return [(np.full(3, i, np.float32), i) for i in range(n)]


# a list of samples ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (3, False), (3, True), (7, True), (10, False)])
def test_a_list_of_sample_tuples_batches_as_torchs(batch_size, drop_last):
    """A list of (x, y) pairs was taken as a list of arrays: each pair became a 2-row array (or numpy refused
    the ragged pair), not torch's batches of xs and ys."""
    samples = _tuples()
    ours = DataLoader(samples, batch_size=batch_size, drop_last=drop_last)
    theirs = tud.DataLoader(samples, batch_size=batch_size, drop_last=drop_last)
    assert len(ours) == len(theirs)
    _all_same(ours, theirs)


def test_lists_of_numbers_dicts_and_arrays_are_lists_of_samples():
    for samples in ([(1.0, 0), (2.0, 1), (3.0, 0)], [{"a": i, "b": [i, 2 * i]} for i in range(5)],
                    [np.arange(3) + i for i in range(4)], list(range(5))):
        _all_same(DataLoader(samples, batch_size=2), tud.DataLoader(samples, batch_size=2))


def test_a_tuple_of_arrays_stays_the_arrays_spelling():
    """luminal's ``(x, y)``: arrays sharing their first dim, a batch a tuple of their rows (as batches())."""
    x, y = np.arange(10.0).reshape(5, 2), np.arange(5)
    got = list(DataLoader((x, y), batch_size=2))
    np.testing.assert_array_equal(got[0][0], x[:2])
    np.testing.assert_array_equal(got[2][1], y[4:])


def test_the_arguments_follow_torchs_positional_order():
    """DataLoader(ds, 2, False, sampler): torch's fourth argument is sampler. It was drop_last, so a sampler
    there silently dropped the last batch and was never used."""
    samples, sampler = _tuples(5), [4, 3, 2, 1, 0]
    ours, theirs = DataLoader(samples, 2, False, sampler), tud.DataLoader(samples, 2, False, sampler)
    assert len(ours) == len(theirs) == 3
    _all_same(ours, theirs)


def test_a_dataset_subclass_calling_super_init_as_torchs():
    """torch's idiom ``super().__init__()`` in a subclass's own __init__: Dataset() refused ("got no arrays")."""

    class Squares(Dataset):
        def __init__(self, n):
            super().__init__()
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            return np.float32(i * i)

    class TorchSquares(tud.Dataset):
        def __init__(self, n):
            super().__init__()
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            return np.float32(i * i)

    _all_same(DataLoader(Squares(5), batch_size=2), tud.DataLoader(TorchSquares(5), batch_size=2))
    with pytest.raises(NotImplementedError, match="Dataset: a Dataset subclass .* must implement __len__"):
        len(Dataset())


@pytest.mark.parametrize("dataset", ["abc", 3, None])
def test_what_is_not_a_dataset_is_refused(dataset):
    with pytest.raises(TypeError, match=f"DataLoader: dataset must be .* got {type(dataset).__name__}"):
        DataLoader(dataset)


# batch_size=None and default_convert --------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["tuples", "tensor dataset", "dicts"])
def test_batch_size_none_yields_converted_samples_as_torchs(name):
    """batch_size=None was refused ("batch_size must be an int >= 1"); torch reads one sample at a time."""
    x, y = np.arange(12, dtype=np.float32).reshape(6, 2), np.arange(6, dtype=np.int32)
    ours, theirs = {"tuples": (_tuples(), _tuples()),
                    "tensor dataset": (TensorDataset(x, y), tud.TensorDataset(torch.from_numpy(x),
                                                                               torch.from_numpy(y))),
                    "dicts": ([{"a": np.int16(i), "s": "t"} for i in range(4)],) * 2}[name]
    ours, theirs = DataLoader(ours, batch_size=None), tud.DataLoader(theirs, batch_size=None)
    assert len(ours) == len(theirs)
    _all_same(ours, theirs)
    shuffled = DataLoader(_tuples(), batch_size=None, shuffle=True, seed=0)
    assert sorted(s[1] for s in shuffled) == list(range(7))


def test_the_default_collate_fn_is_torchs_choice():
    """loader.collate_fn is the function in use, as torch's: default_collate when batching, else default_convert."""
    assert DataLoader(_tuples()).collate_fn is data.default_collate
    assert DataLoader(_tuples(), batch_size=None).collate_fn is data.default_convert
    assert DataLoader(_tuples(), batch_sampler=[[0]]).collate_fn is data.default_collate
    assert DataLoader(Stream(3), batch_size=None).collate_fn is data.default_convert
    assert tud.DataLoader(_tuples(), batch_size=None).collate_fn is tud.default_convert


CONVERT = {"array": np.arange(3), "numpy scalar": np.float32(2.5), "int": 3, "float": 1.5, "string": "s",
           "tuple": (np.zeros(2), 1), "list": [np.ones(2), 2.0], "dict": {"a": np.int64(1), "b": "x"},
           "namedtuple": Point(np.zeros(2), np.int32(1)), "string array": np.array(["a", "b"])}


@pytest.mark.parametrize("name", list(CONVERT))
def test_default_convert_as_torchs(name):
    sample = CONVERT[name]
    got, want = data.default_convert(sample), tud.default_convert(sample)
    if name == "string array":  # (torch leaves it a numpy array too)
        assert got is sample and want is sample
        return
    _same(got, want)
    if name == "namedtuple":
        assert isinstance(got, Point)


# sampler= and batch_sampler= ---------------------------------------------------------------------------------
@pytest.mark.parametrize("batch_size,drop_last", [(2, False), (2, True), (None, False)])
def test_a_sampler_orders_the_samples_as_torchs(batch_size, drop_last):
    x, y = np.arange(14, dtype=np.float32).reshape(7, 2), np.arange(7)
    order = [6, 0, 5, 1, 1, 3]
    for ours_ds, theirs_ds in ((_tuples(), _tuples()),
                               (TensorDataset(x, y), tud.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)))):
        ours = DataLoader(ours_ds, batch_size=batch_size, sampler=order, drop_last=drop_last)
        theirs = tud.DataLoader(theirs_ds, batch_size=batch_size, sampler=order, drop_last=drop_last)
        assert len(ours) == len(theirs)
        _all_same(ours, theirs)
    seq = DataLoader(_tuples(), batch_size=3, sampler=SequentialSampler(range(7)))
    _all_same(seq, tud.DataLoader(_tuples(), batch_size=3))


def test_a_batch_sampler_sets_the_batches_as_torchs():
    lists = [[3, 1], [0], [6, 5, 4]]
    x = np.arange(7, dtype=np.float64)
    for ours_ds, theirs_ds in ((_tuples(), _tuples()), (TensorDataset(x), tud.TensorDataset(torch.from_numpy(x)))):
        ours, theirs = DataLoader(ours_ds, batch_sampler=lists), tud.DataLoader(theirs_ds, batch_sampler=lists)
        assert len(ours) == len(theirs) == 3
        _all_same(ours, theirs)
    bs = BatchSampler(SequentialSampler(range(7)), 3, drop_last=True)
    ours = DataLoader(_tuples(), batch_sampler=bs)
    assert len(ours) == 2 and ours.batch_size is None and ours.batch_sampler is bs
    _all_same(ours, tud.DataLoader(_tuples(), batch_size=3, drop_last=True))


def test_getitems_reads_a_batch_at_once():
    """torch's fetcher asks a map dataset for a batch through __getitems__ when it has one (Subset does)."""
    calls = []

    class Batched:
        def __len__(self):
            return 5

        def __getitem__(self, i):
            raise AssertionError("read one at a time")

        def __getitems__(self, idx):
            calls.append(list(idx))
            return [np.float32(i) for i in idx]

    assert [b.tolist() for b in DataLoader(Batched(), batch_size=2)] == [[0, 1], [2, 3], [4]]
    assert calls == [[0, 1], [2, 3], [4]]
    sub = Subset(Batched(), [4, 0, 2])
    assert [b.tolist() for b in DataLoader(sub, batch_size=2)] == [[4, 0], [2]]
    assert calls[-2:] == [[4, 0], [2]]


def _torch_len(loader_kwargs, dataset):
    return len(tud.DataLoader(dataset, **loader_kwargs))


@pytest.mark.parametrize("kwargs", [dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None),
                                    dict(batch_size=4, shuffle=True), dict(batch_size=2, sampler=[0, 1, 2]),
                                    dict(batch_size=None, sampler=[5, 5]), dict(batch_sampler=[[0], [1, 2]]),
                                    dict(batch_size=3, sampler=RandomSampler(range(7), num_samples=11)),
                                    dict(batch_size=2, sampler=SubsetRandomSampler([1, 2, 3]), drop_last=True)])
def test_len_in_each_mode_as_torchs(kwargs):
    ours = DataLoader(_tuples(), **kwargs)
    theirs_kwargs = dict(kwargs)
    if isinstance(kwargs.get("sampler"), RandomSampler):
        theirs_kwargs["sampler"] = tud.RandomSampler(range(7), num_samples=11)
    if isinstance(kwargs.get("sampler"), SubsetRandomSampler):
        theirs_kwargs["sampler"] = tud.SubsetRandomSampler([1, 2, 3])
    assert len(ours) == _torch_len(theirs_kwargs, _tuples()) == len(list(ours))


def test_len_of_a_sampler_without_one():
    loader = DataLoader(_tuples(), sampler=iter([0, 1]))
    with pytest.raises(TypeError, match="DataLoader: len\\(\\) is the length of its sampler, and list_iterator"):
        len(loader)
    with pytest.raises(TypeError):
        len(tud.DataLoader(_tuples(), sampler=iter([0, 1])))


# bad arguments: torch's conditions ------------------------------------------------------------------------------
class Stream(IterableDataset):
    def __init__(self, n, with_len=False):
        self.n, self.with_len = n, with_len

    def __iter__(self):
        return iter(np.arange(self.n, dtype=np.float32))

    def __len__(self):
        if not self.with_len:
            raise TypeError("no len")
        return self.n


class TorchStream(tud.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(np.arange(self.n, dtype=np.float32))


BAD = [
    (dict(shuffle=True, sampler=[0]), ValueError, "sampler and shuffle=True both set the order"),
    (dict(batch_sampler=[[0]], batch_size=2), ValueError, "batch_sampler sets the batches.*batch_size=2"),
    (dict(batch_sampler=[[0]], shuffle=True), ValueError, "batch_sampler sets the batches"),
    (dict(batch_sampler=[[0]], sampler=[0]), ValueError, "batch_sampler sets the batches"),
    (dict(batch_sampler=[[0]], drop_last=True), ValueError, "batch_sampler sets the batches"),
    (dict(batch_size=None, drop_last=True), ValueError, "batch_size=None reads samples one at a time"),
    (dict(num_workers=-1), ValueError, "num_workers must be an int >= 0, got -1"),
    (dict(timeout=-1), ValueError, "timeout must be a number >= 0, got -1"),
    (dict(prefetch_factor=2), ValueError, "prefetch_factor applies to worker processes and needs num_workers > 0"),
    (dict(persistent_workers=True), ValueError, "persistent_workers applies to worker processes"),
    (dict(multiprocessing_context="spawn"), ValueError, "multiprocessing_context applies to worker processes"),
]


@pytest.mark.parametrize("kwargs,error,match", BAD)
def test_bad_arguments_are_refused_where_torchs_are(kwargs, error, match):
    with pytest.raises(ValueError):
        tud.DataLoader(_tuples(), **kwargs)
    with pytest.raises(error, match=match):
        DataLoader(_tuples(), **kwargs)


@pytest.mark.parametrize("kwargs", [dict(shuffle=True), dict(sampler=[0, 1]), dict(batch_sampler=[[0]])])
def test_an_iterable_dataset_refuses_an_order(kwargs):
    with pytest.raises(ValueError, match="expected unspecified"):
        tud.DataLoader(TorchStream(3), **kwargs)
    name = next(iter(kwargs))
    with pytest.raises(ValueError, match=f"an iterable dataset \\(Stream\\) comes in its own order, so {name} must"):
        DataLoader(Stream(3), **kwargs)


def test_a_timeout_without_workers():
    """torch refuses it when iterated (an AssertionError of its single-process iterator); here when built."""
    with pytest.raises(AssertionError, match="timeout == 0"):
        list(tud.DataLoader(_tuples(), timeout=2))
    with pytest.raises(ValueError, match="timeout applies to worker processes and needs num_workers > 0"):
        DataLoader(_tuples(), timeout=2)


def test_worker_arguments():
    """num_workers > 0 reads in this process (the batches torch's workers give in order); worker_init_fn would
    never run, so it is refused with workers; torch ignores it without, as here."""
    x = np.arange(10, dtype=np.float32)
    kwargs = dict(batch_size=3, num_workers=2, prefetch_factor=4, persistent_workers=True, timeout=5.0,
                  multiprocessing_context="spawn", pin_memory=True, pin_memory_device="cpu", in_order=False)
    ours = DataLoader(list(x), **kwargs)
    _all_same(ours, tud.DataLoader(list(x), batch_size=3))
    assert ours.num_workers == 2 and ours.pin_memory
    _all_same(DataLoader(list(x), worker_init_fn=print), tud.DataLoader(list(x), worker_init_fn=print))
    with pytest.raises(NotImplementedError, match="worker_init_fn runs in worker processes.*num_workers=2 starts none"):
        DataLoader(list(x), num_workers=2, worker_init_fn=print)
    with pytest.raises(ValueError, match="num_workers must be an int >= 0, got 1.5"):
        DataLoader(list(x), num_workers=1.5)
    with pytest.raises(ValueError, match="prefetch_factor must be an int >= 0, got -1"):
        DataLoader(list(x), num_workers=1, prefetch_factor=-1)


def test_the_generator_argument():
    """torch's generator= is its shuffle's randomness: here a numpy Generator or int, the same as seed=."""
    a = [b[1].tolist() for b in DataLoader(_tuples(), batch_size=3, shuffle=True, generator=5)]
    b = [b[1].tolist() for b in DataLoader(_tuples(), batch_size=3, shuffle=True, seed=5)]
    assert a == b and sorted(itertools.chain(*a)) == list(range(7))
    g = DataLoader(_tuples(), batch_size=7, shuffle=True, generator=np.random.default_rng(1))
    assert sorted(next(iter(g))[1].tolist()) == list(range(7))
    with pytest.raises(TypeError, match="generator must be an int, a numpy Generator or None, got torch._C.Generator "
                                        "\\(luminal shuffles with numpy"):
        DataLoader(_tuples(), shuffle=True, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="as seed= or generator=, not both"):
        DataLoader(_tuples(), shuffle=True, seed=1, generator=np.random.default_rng(1))
    with pytest.raises(TypeError, match="seed must be an int, a numpy Generator or None, got builtins.bool"):
        DataLoader(_tuples(), shuffle=True, seed=True)


# iterable datasets ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (3, False), (3, True), (None, False), (9, True)])
def test_an_iterable_dataset_batches_as_torchs(batch_size, drop_last):
    """An IterableDataset (no __getitem__) was refused; torch batches its samples in the order they come."""
    ours = DataLoader(Stream(7), batch_size=batch_size, drop_last=drop_last)
    theirs = tud.DataLoader(TorchStream(7), batch_size=batch_size, drop_last=drop_last)
    _all_same(ours, theirs)
    _all_same(ours, theirs)  # every epoch iterates the dataset again


def test_len_of_an_iterable_dataset_as_torchs():
    class Sized(TorchStream):
        def __len__(self):
            return self.n

    for batch_size, drop_last in ((3, False), (3, True), (None, False)):
        assert len(DataLoader(Stream(7, with_len=True), batch_size=batch_size, drop_last=drop_last)) == \
            len(tud.DataLoader(Sized(7), batch_size=batch_size, drop_last=drop_last))
    with pytest.raises(TypeError):
        len(tud.DataLoader(TorchStream(7)))

    class Bare(IterableDataset):
        def __iter__(self):
            return iter(range(3))

    with pytest.raises(TypeError, match="over an iterable dataset is its __len__'s, and Bare has none"):
        len(DataLoader(Bare()))
    gen = (np.float32(i) for i in range(5))  # any iterable without __getitem__: one pass, as a stream
    assert [b.tolist() for b in DataLoader(gen, batch_size=2)] == [[0, 1], [2, 3], [4]]
    with pytest.raises(NotImplementedError, match="IterableDataset subclass must implement __iter__"):
        list(DataLoader(IterableDataset()))


def test_an_iterable_dataset_with_a_getitem_is_still_a_stream():
    """torch decides by the class: an IterableDataset is iterated even if it also defines __getitem__."""

    class Both(Stream):
        def __getitem__(self, i):
            raise AssertionError("indexed")

    class TorchBoth(TorchStream):
        def __getitem__(self, i):
            raise AssertionError("indexed")

    _all_same(DataLoader(Both(5), batch_size=2), tud.DataLoader(TorchBoth(5), batch_size=2))
    with pytest.raises(ValueError, match="an iterable dataset \\(Both\\)"):
        DataLoader(Both(5), shuffle=True)


def test_an_iterable_dataset_with_a_collate_fn():
    assert list(DataLoader(Stream(5), batch_size=2, collate_fn=len)) == [2, 2, 1]
    assert list(DataLoader(Stream(3), batch_size=None, collate_fn=float)) == [0.0, 1.0, 2.0]


# TensorDataset, Subset, ConcatDataset, random_split ---------------------------------------------------------
def _pair(n=10):
    x, y = np.arange(2 * n, dtype=np.float32).reshape(n, 2), np.arange(n, dtype=np.int64)
    return TensorDataset(x, y), tud.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))


def test_tensor_dataset_as_torchs():
    ours, theirs = _pair()
    assert len(ours) == len(theirs) and isinstance(ours, Dataset)
    for i in (0, 3, -1, slice(2, 5), [4, 1]):
        _same(ours[i], theirs[i])
    with pytest.raises(AssertionError, match="Size mismatch"):
        tud.TensorDataset(torch.zeros(3), torch.zeros(2))
    with pytest.raises(ValueError, match="TensorDataset: the arrays differ in length \\(first dims \\[3, 2\\]\\)"):
        TensorDataset(np.zeros(3), np.zeros(2))
    assert "TensorDataset(float32[10, 2], int64[10])" == repr(ours)


def test_subset_as_torchs():
    ours, theirs = _pair()
    idx = [7, 2, 2, 9]
    a, b = Subset(ours, idx), tud.Subset(theirs, idx)
    assert len(a) == len(b) == 4
    for i in (0, 2, -1, [3, 0]):
        _same(a[i], b[i])
    _all_same(DataLoader(a, batch_size=3), tud.DataLoader(b, batch_size=3))
    assert repr(a) == "Subset(len=4)"


def test_concat_dataset_as_torchs():
    (a, ta), (b, tb) = _pair(4), _pair(3)
    ours, theirs = ConcatDataset([a, b, a]), tud.ConcatDataset([ta, tb, ta])
    assert len(ours) == len(theirs) == 11 and ours.cumulative_sizes == theirs.cumulative_sizes == [4, 7, 11]
    for i in list(range(11)) + [-1, -4, -11]:
        _same(ours[i], theirs[i])
    _all_same(DataLoader(ours, batch_size=4), tud.DataLoader(theirs, batch_size=4))
    plus = a + b
    assert isinstance(plus, ConcatDataset) and len(plus) == 7 and len(ta + tb) == 7
    with pytest.raises(IndexError, match="ConcatDataset: index 11 is out of range for 11 samples"):
        ours[11]
    with pytest.raises(IndexError, match="index -12 is out of range"):
        ours[-12]
    with pytest.raises((AssertionError, ValueError)):
        tud.ConcatDataset([])
    with pytest.raises(ValueError, match="ConcatDataset: got no datasets"):
        ConcatDataset([])
    with pytest.raises(AssertionError):
        tud.ConcatDataset([ta, TorchStream(3)])
    with pytest.raises(TypeError, match="ConcatDataset: dataset 1 \\(Stream\\) is an iterable-style dataset"):
        ConcatDataset([a, Stream(3)])
    with pytest.raises(TypeError, match="ConcatDataset: an index must be an int, got slice"):
        ours[1:3]
    empty = ConcatDataset([Subset(a, [])])
    assert len(empty) == 0 and list(DataLoader(empty)) == []


@pytest.mark.parametrize("n,lengths", [(10, [3, 7]), (10, [0, 10]), (10, [0.5, 0.5]), (10, [0.33, 0.33, 0.34]),
                                       (7, [0.1, 0.2, 0.7]), (5, [0.25, 0.25, 0.25, 0.25]), (3, [1.0]),
                                       (1, [0.5, 0.5])])
def test_random_split_lengths_as_torchs_and_a_partition(n, lengths):
    ours_ds, theirs_ds = _pair(n)
    with warnings.catch_warnings(record=True) as ours_warned:
        warnings.simplefilter("always")
        ours = random_split(ours_ds, lengths, generator=3)
    with warnings.catch_warnings(record=True) as theirs_warned:
        warnings.simplefilter("always")
        theirs = tud.random_split(theirs_ds, lengths, generator=torch.Generator().manual_seed(3))
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    assert len(ours_warned) == len(theirs_warned)  # an empty split from fractions is warned of, as torch's
    assert all("random_split: split" in str(w.message) for w in ours_warned)
    assert sorted(itertools.chain(*(s.indices for s in ours))) == list(range(n))
    for s in ours:
        for i in range(len(s)):
            _same(s[i], theirs_ds[s.indices[i]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = random_split(ours_ds, lengths, generator=3)  # an int seed: the same split
    assert [s.indices for s in again] == [s.indices for s in ours]


def test_random_split_randomness():
    ds, _ = _pair(40)
    rng = np.random.default_rng(0)
    a, b = random_split(ds, [20, 20], generator=rng), random_split(ds, [20, 20], generator=rng)
    assert a[0].indices != b[0].indices  # a Generator advances
    assert random_split(ds, [20, 20], generator=1)[0].indices != random_split(ds, [20, 20], generator=2)[0].indices
    assert sorted(random_split(ds, [40])[0].indices) == list(range(40))  # None: fresh entropy
    np.testing.assert_array_equal(list(itertools.chain(*(s.indices for s in random_split(ds, [10, 30], generator=7)))),
                                  np.random.default_rng(7).permutation(40))  # the documented draw
    with pytest.raises(TypeError, match="random_split: generator must be a numpy Generator, an int seed .* got "
                                        "torch._C.Generator"):
        random_split(ds, [20, 20], generator=torch.Generator())


@pytest.mark.parametrize("lengths,match", [
    ([3, 6], "the lengths \\[3, 6\\] must be >= 0 and sum to the dataset's length 10"),
    ([11, -1], "must be >= 0"),
    ([0.5, 0.4], "fractions must each lie in \\[0, 1\\] and sum to 1"),
    ([1.5, -0.5], "fractions must each lie in \\[0, 1\\]"),
    ([0.5, 0.6], "sum to 1"),
])
def test_random_split_bad_lengths(lengths, match):
    ours_ds, theirs_ds = _pair(10)
    if min(lengths) >= 0:  # (torch's sum check passes a negative length through)
        with pytest.raises(ValueError):
            tud.random_split(theirs_ds, lengths)
    with pytest.raises(ValueError, match="random_split: .*" + match):
        random_split(ours_ds, lengths)


def test_random_split_bad_length_types():
    ds, _ = _pair(4)
    for lengths in ([], [True, 3], ["2", 2], 4):
        with pytest.raises(TypeError, match="random_split: lengths must be a non-empty sequence of ints or fractions"):
            random_split(ds, lengths)


# samplers -----------------------------------------------------------------------------------------------------
def test_sequential_sampler_as_torchs():
    for n in (0, 1, 6):
        s, t = SequentialSampler(range(n)), tud.SequentialSampler(range(n))
        assert list(s) == list(t) and len(s) == len(t) == n


@pytest.mark.parametrize("n,num_samples", [(6, None), (6, 4), (6, 15), (1, 3)])
def test_random_sampler_without_replacement(n, num_samples):
    s = RandomSampler(range(n), num_samples=num_samples, generator=0)
    t = tud.RandomSampler(range(n), num_samples=num_samples)
    assert len(s) == len(t)
    k = len(s)
    for _ in range(3):
        got = list(s)
        assert len(got) == k and all(type(i) is int for i in got)
        whole = k // n  # whole permutations, then the head of one more (torch's structure)
        for j in range(whole):
            assert sorted(got[j * n:(j + 1) * n]) == list(range(n))
        assert len(set(got[whole * n:])) == k % n


def test_random_sampler_epochs_and_seeds():
    s = RandomSampler(range(50), generator=4)
    a, b = list(s), list(s)
    assert a != b and sorted(a) == sorted(b) == list(range(50))  # successive epochs differ
    assert list(RandomSampler(range(50), generator=4)) == a  # a seeded run is reproducible
    assert sorted(RandomSampler(range(5))) == list(range(5))  # None: fresh entropy


def test_random_sampler_with_replacement_is_uniform():
    s = RandomSampler(range(5), replacement=True, num_samples=50_000, generator=0)
    assert len(s) == len(tud.RandomSampler(range(5), replacement=True, num_samples=50_000)) == 50_000
    counts = np.bincount(list(s), minlength=5)
    assert counts.sum() == 50_000 and len(counts) == 5
    np.testing.assert_allclose(counts / 50_000, 0.2, atol=5 * math.sqrt(0.2 * 0.8 / 50_000))
    assert len(list(RandomSampler(range(3), replacement=True, generator=0))) == 3


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(replacement=1), TypeError, "RandomSampler: replacement must be a bool, got 1"),
    (dict(num_samples=0), ValueError, "RandomSampler: num_samples must be a positive int, got 0"),
    (dict(num_samples=2.5), ValueError, "num_samples must be a positive int, got 2.5"),
    (dict(num_samples=-3), ValueError, "num_samples must be a positive int, got -3"),
])
def test_random_sampler_bad_arguments(kwargs, error, match):
    with pytest.raises((TypeError, ValueError)):
        tud.RandomSampler(range(4), **kwargs)
    with pytest.raises(error, match=match):
        RandomSampler(range(4), **kwargs)


def test_random_sampler_on_an_empty_source():
    """torch refuses an empty source (num_samples 0) when built; so does this, naming the length."""
    with pytest.raises(ValueError):
        tud.RandomSampler([])
    with pytest.raises(ValueError, match="num_samples \\(the dataset's length when not given\\) must be a positive "
                                         "int, got 0"):
        RandomSampler([])
    grow = []
    s = RandomSampler(grow, num_samples=3, generator=0)
    with pytest.raises(ValueError, match="RandomSampler: cannot draw 3 indices from an empty data source"):
        list(s)
    grow.extend([1, 2])
    assert sorted(set(s)) <= [0, 1]


def test_subset_random_sampler():
    idx = [9, 3, "k", 3]
    s = SubsetRandomSampler(idx, generator=2)
    assert len(s) == len(tud.SubsetRandomSampler(idx)) == 4
    epochs = [list(s) for _ in range(4)]
    assert all(collections.Counter(e) == collections.Counter(idx) for e in epochs)
    assert any(e != epochs[0] for e in epochs[1:])
    loader = DataLoader(_tuples(10), batch_size=2, sampler=SubsetRandomSampler([1, 5, 8], generator=0))
    assert len(loader) == 2 and sorted(np.concatenate([b[1] for b in loader]).tolist()) == [1, 5, 8]


def test_weighted_random_sampler_with_replacement_follows_the_weights():
    w = [0.1, 0.0, 0.4, 2.0, 0.5]
    n = 60_000
    s = WeightedRandomSampler(w, n, generator=0)
    assert len(s) == len(tud.WeightedRandomSampler(w, n)) == n
    p = np.array(w) / sum(w)
    for counts in (np.bincount(list(s), minlength=5),
                   np.bincount(list(tud.WeightedRandomSampler(w, n, generator=torch.Generator().manual_seed(0))),
                               minlength=5)):
        assert counts[1] == 0
        np.testing.assert_allclose(counts / n, p, atol=5 * np.sqrt(p * (1 - p) / n).max())


def test_weighted_random_sampler_without_replacement_is_successive_sampling():
    """torch.multinomial without replacement: each draw from the remaining weights, renormalized. The ordered
    pairs' frequencies against the exact p_a p_b / (1 - p_a), for ours and torch's."""
    w = np.array([1.0, 2.0, 3.0, 4.0])
    p = w / w.sum()
    exact = {(a, b): p[a] * p[b] / (1 - p[a]) for a in range(4) for b in range(4) if a != b}
    trials = 20_000
    s = WeightedRandomSampler(w, 2, replacement=False, generator=1)
    g = torch.Generator().manual_seed(1)
    for draw in (lambda: tuple(s), lambda: tuple(tud.WeightedRandomSampler(w, 2, replacement=False, generator=g))):
        freq = collections.Counter(draw() for _ in range(trials))
        assert set(freq) <= set(exact)
        for pair, q in exact.items():
            assert abs(freq[pair] / trials - q) < 5 * math.sqrt(q * (1 - q) / trials), (pair, freq[pair], q)
    full = list(WeightedRandomSampler([0.0, 1.0, 5.0, 0.0, 2.0], 3, replacement=False, generator=0))
    assert sorted(full) == [1, 2, 4]


@pytest.mark.parametrize("args,kwargs,error,match", [
    (([1.0, 2.0], 0), {}, ValueError, "WeightedRandomSampler: num_samples must be a positive int, got 0"),
    (([1.0, 2.0], True), {}, ValueError, "num_samples must be a positive int, got True"),
    (([1.0, 2.0], 2), dict(replacement="yes"), ValueError, "replacement must be a bool, got 'yes'"),
    (([[1.0, 2.0]], 2), {}, ValueError, "weights must be a 1-d sequence, got shape \\(1, 2\\)"),
])
def test_weighted_random_sampler_bad_arguments_as_torchs(args, kwargs, error, match):
    with pytest.raises(ValueError):
        tud.WeightedRandomSampler(*args, **kwargs)
    with pytest.raises(error, match=match):
        WeightedRandomSampler(*args, **kwargs)


@pytest.mark.parametrize("weights,num_samples,replacement,match", [
    ([1.0, -1.0], 1, True, "weights must be finite and >= 0 with a positive sum, got \\[1.0, -1.0\\]"),
    ([0.0, 0.0], 1, True, "with a positive sum"),
    ([1.0, float("nan")], 1, True, "must be finite"),
    ([1.0, float("inf")], 1, True, "must be finite"),
    ([1.0, 0.0, 2.0], 3, False, "cannot draw num_samples=3 without replacement from 2 nonzero weights"),
])
def test_weighted_random_sampler_bad_weights(weights, num_samples, replacement, match):
    """torch refuses these when iterated (torch.multinomial's RuntimeError); here when built. Past the nonzero
    weights without replacement torch 2.13 draws an index of weight 0 (probability 0): refused here."""
    if replacement:
        with pytest.raises(RuntimeError):
            list(tud.WeightedRandomSampler(weights, num_samples, replacement))
    with pytest.raises(ValueError, match="WeightedRandomSampler: .*" + match):
        WeightedRandomSampler(weights, num_samples, replacement)


@pytest.mark.parametrize("n,batch_size,drop_last", [(10, 3, False), (10, 3, True), (9, 3, True), (0, 2, False),
                                                    (2, 5, True), (2, 5, False)])
def test_batch_sampler_as_torchs(n, batch_size, drop_last):
    ours = BatchSampler(SequentialSampler(range(n)), batch_size, drop_last)
    theirs = tud.BatchSampler(tud.SequentialSampler(range(n)), batch_size, drop_last)
    assert list(ours) == list(theirs) and len(ours) == len(theirs)
    assert list(BatchSampler(iter(range(n)), batch_size, drop_last)) == list(theirs)  # any iterable


@pytest.mark.parametrize("batch_size,drop_last,error,match", [
    (0, False, ValueError, "BatchSampler: batch_size must be a positive int, got 0"),
    (2.0, False, ValueError, "batch_size must be a positive int, got 2.0"),
    (True, False, ValueError, "batch_size must be a positive int, got True"),
    (2, 1, ValueError, "BatchSampler: drop_last must be a bool, got 1"),
])
def test_batch_sampler_bad_arguments(batch_size, drop_last, error, match):
    with pytest.raises(ValueError):
        tud.BatchSampler(range(4), batch_size, drop_last)
    with pytest.raises(error, match=match):
        BatchSampler(range(4), batch_size, drop_last)


def test_sampler_base_and_shuffle_sampler():
    class Evens(data.Sampler):
        def __iter__(self):
            return iter([0, 2, 4])

    assert [b[1].tolist() for b in DataLoader(_tuples(), batch_size=2, sampler=Evens())] == [[0, 2], [4]]
    with pytest.raises(NotImplementedError, match="Sampler subclass must implement __iter__"):
        iter(data.Sampler())
    loader = DataLoader(_tuples(), batch_size=3, shuffle=True, seed=9)
    assert len(loader.sampler) == 7 and len(loader.batch_sampler) == 3
    upcoming = list(loader.sampler)  # the order of the epoch served next
    assert np.concatenate([b[1] for b in loader]).tolist() == upcoming


def test_samplers_pickle():
    """Loader state goes to worker processes and checkpoints in torch code; samplers stay plain objects."""
    for s in (SequentialSampler(range(3)), RandomSampler(range(3), generator=0), BatchSampler(range(5), 2, False),
              WeightedRandomSampler([1.0, 2.0], 3, generator=0), SubsetRandomSampler([1, 2], generator=0)):
        t = pickle.loads(pickle.dumps(s))
        assert list(t) == list(s) and len(t) == len(s)

"""A second review of luminal.data against torch 2.13's ``torch.utils.data``: default_collate keeping every
value of a batch that mixes number types (torch promotes; a cast to the first sample's dtype truncated
2.5 to 2), mappings that cannot be rebuilt from a dict (a defaultdict keeps its kind and default, as
torch's copy-and-update), and ``batches`` refusing a dataset with no arrays to slice by name."""

import collections

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import luminal.data as data


@pytest.mark.parametrize("batch,dtype", [
    ([1, 2.5], np.float64),  # (torch: float32, its default dtype)
    ([0, 1, 0.5], np.float64),
    ([True, 2], np.int64),
    ([True, 2.5], np.float64),
    ([np.int64(1), np.float64(2.5)], np.float64),
    ([np.int32(1), np.int64(2**40)], np.int64),
    ([np.float32(1.5), np.float64(1e-50)], np.float64),
    ([np.float32(1.5), np.float32(2.5)], np.float32),
    ([np.int16(3), np.int16(-4)], np.int16),
])
def test_default_collate_keeps_every_value_of_mixed_numbers(batch, dtype):
    got = data.default_collate(batch)
    assert got.dtype == dtype
    want = tud.default_collate(batch)
    np.testing.assert_array_equal(got, want.numpy().astype(dtype))
    np.testing.assert_array_equal(got, np.array([float(v) for v in batch]).astype(dtype))


def test_default_collate_mixed_numbers_inside_samples():
    batch = [{"y": 0, "p": (1, np.float32(0.25))}, {"y": 0.5, "p": (2, np.float64(1e-40))}]
    got = data.default_collate(batch)
    np.testing.assert_array_equal(got["y"], [0.0, 0.5])
    assert got["p"][1].dtype == np.float64 and got["p"][1][1] == 1e-40


def test_a_defaultdict_keeps_its_kind_and_default():
    batch = [collections.defaultdict(list, a=1, b=np.zeros(2)), collections.defaultdict(list, a=2, b=np.ones(2))]
    want = tud.default_collate(batch)
    for got in (data.default_collate(batch), data.default_convert(batch[0])):
        assert type(got) is type(want) and got.default_factory is list
        assert list(got) == ["a", "b"] and got["missing"] == []
    np.testing.assert_array_equal(data.default_collate(batch)["a"], [1, 2])
    assert isinstance(data.default_convert({"a": np.float32(1)})["a"], np.ndarray)


def test_the_collated_mapping_is_a_copy():
    sample = collections.OrderedDict(a=1)
    got = data.default_collate([sample])
    assert type(got) is collections.OrderedDict and got is not sample and sample["a"] == 1


def test_batches_refuses_a_dataset_without_arrays():
    d = data.Dataset(np.arange(6))
    for bad in (data.Subset(d, [0, 1]), data.ConcatDataset([d, d])):
        with pytest.raises(TypeError, match=f"batches: a {type(bad).__name__} holds no arrays to slice"):
            data.batches(bad, 2)
    assert [b[0].tolist() for b in data.batches(d, 4)] == [[0, 1, 2, 3], [4, 5]]


@pytest.mark.parametrize("seed,error", [(-1, TypeError), (1.5, TypeError), (torch.Generator(), TypeError)])
def test_batches_names_itself_for_a_bad_seed(seed, error):
    with pytest.raises(error, match="batches: generator must be"):
        list(data.batches(np.arange(4), 2, shuffle=True, seed=seed))
    assert [b[0].tolist() for b in data.batches(np.arange(4), 2, shuffle=True, seed=[0, 1])] == \
        [b[0].tolist() for b in data.batches(np.arange(4), 2, shuffle=True, seed=np.random.default_rng([0, 1]))]


@pytest.mark.filterwarnings("ignore::UserWarning")  # (empty splits, warned by both)
@pytest.mark.parametrize("n", [7, 100, 1001])
@pytest.mark.parametrize("fractions", [
    # torch's float sum is 1 - 1 ulp (accepted); the exact sum is above 1
    [0.04596718957227974, 0.0635888710534693, 0.0349365929335294, 0.2687663713233496, 0.067606507020359,
     0.5191344680970131],
    [0.1] * 10,
    [1 / 3] * 3,
])
def test_random_split_accepts_the_fractions_torch_accepts(n, fractions):
    want = [len(s) for s in tud.random_split(range(n), fractions)]
    got = data.random_split(range(n), fractions, generator=0)
    assert [len(s) for s in got] == want
    assert sorted(i for s in got for i in s.indices) == list(range(n))


@pytest.mark.parametrize("batch", [[np.float32(1), "a"], [np.int64(1), None], [np.float64(1), b"x"]])
def test_numpy_scalars_with_non_numbers_are_refused(batch):
    with pytest.raises((TypeError, ValueError, RuntimeError)):
        tud.default_collate(batch)
    with pytest.raises(TypeError, match="default_collate: a batch of numpy scalars must hold numbers only"):
        data.default_collate(batch)


@pytest.mark.parametrize("kwargs", [{}, {"drop_last": True}, {"shuffle": True, "seed": 0}])
def test_a_dataset_subclass_with_its_own_len_is_read_to_that_len(kwargs):
    """A subclass that keeps Dataset's arrays but narrows ``__len__`` has that many samples, as torch reads it
    (slicing the arrays read every row: 3 batches for a len of 2)."""

    class First3(data.Dataset):
        def __len__(self):
            return 3

    class TorchFirst3(tud.TensorDataset):
        def __len__(self):
            return 3

    loader = data.DataLoader(First3(np.arange(5), np.arange(5) * 10), batch_size=2, **kwargs)
    kwargs.pop("seed", None)
    want = tud.DataLoader(TorchFirst3(torch.arange(5), torch.arange(5) * 10), batch_size=2, **kwargs)
    got = list(loader)
    assert len(loader) == len(want) == len(got)
    assert sorted(np.concatenate([b[0] for b in got]).tolist()) == \
        sorted(torch.cat([b[0] for b in want]).tolist())
    for x, y in got:
        np.testing.assert_array_equal(y, x * 10)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("lengths", [np.array([0.8, 0.2]), np.array([7, 3]), np.array([7, 3], np.int32),
                                     np.array([0.5, 0.5], np.float32), [np.int64(7), np.int64(3)]])
def test_random_split_takes_numpy_lengths_as_torchs(lengths):
    want = [len(s) for s in tud.random_split(range(10), lengths)]
    got = data.random_split(range(10), lengths, generator=0)
    assert [len(s) for s in got] == want
    assert sorted(i for s in got for i in s.indices) == list(range(10))
    with pytest.raises(TypeError, match="random_split: lengths must be a non-empty sequence"):
        data.random_split(range(10), np.array([[7, 3]]))

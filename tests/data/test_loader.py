"""luminal.data: batches, Dataset, DataLoader and the MNIST loader (the shipped subset, IDX files)."""

import gzip
import struct

import numpy as np
import pytest

from luminal.data import IDX_FILES, SUBSET_PATH, DataLoader, Dataset, batches, load_idx, load_mnist


def _xy(n=23):
    x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    return x, np.arange(n, dtype=np.int32)


def _ids(batch_list):
    return np.concatenate([b[1] for b in batch_list])


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop_last", [False, True])
def test_batches_pair_rows_and_cover_each_once(shuffle, drop_last):
    x, y = _xy()
    out = list(batches((x, y), 5, shuffle=shuffle, drop_last=drop_last, seed=3))
    assert all(isinstance(b, tuple) and len(b) == 2 for b in out)
    for xb, yb in out:
        np.testing.assert_array_equal(xb[:, 0], 2 * yb)  # rows stay paired
    sizes = [len(b[1]) for b in out]
    assert sizes == ([5] * 4 if drop_last else [5] * 4 + [3])
    ids = _ids(out)
    assert len(set(ids.tolist())) == len(ids)
    if shuffle:
        assert not np.array_equal(ids, np.sort(ids))
    else:
        np.testing.assert_array_equal(ids, np.arange(len(ids)))


def test_batches_seed_semantics():
    x, y = _xy(40)
    a = _ids(list(batches((x, y), 8, shuffle=True, seed=[1, 0])))
    b = _ids(list(batches((x, y), 8, shuffle=True, seed=[1, 0])))
    c = _ids(list(batches((x, y), 8, shuffle=True, seed=[1, 1])))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    np.testing.assert_array_equal(a, np.random.default_rng([1, 0]).permutation(40))  # documented order
    rng = np.random.default_rng(5)  # a Generator advances: successive epochs differ
    e0 = _ids(list(batches((x, y), 8, shuffle=True, seed=rng)))
    e1 = _ids(list(batches((x, y), 8, shuffle=True, seed=rng)))
    assert not np.array_equal(e0, e1)


def test_batches_single_array_and_errors():
    x, y = _xy(7)
    out = list(batches(x, 3))
    assert [len(b) for b in out] == [1, 1, 1] and [len(b[0]) for b in out] == [3, 3, 1]
    with pytest.raises(ValueError, match="differ in length"):
        list(batches((x, y[:-1]), 2))
    with pytest.raises(ValueError, match="batch_size"):
        batches((x, y), 0)
    with pytest.raises(ValueError, match="batch_size"):
        batches((x, y), True)
    with pytest.raises(TypeError, match="sequence of arrays"):
        batches({"x": x}, 2)
    with pytest.raises(ValueError, match="0-d"):
        batches((np.float32(1.0),), 2)


def test_dataset_indexing():
    x, y = _xy(5)
    ds = Dataset(x, y)
    assert len(ds) == 5
    xi, yi = ds[3]
    np.testing.assert_array_equal(xi, x[3]) and np.testing.assert_array_equal(yi, 3)
    xs, ys = ds[np.array([4, 0])]
    np.testing.assert_array_equal(ys, [4, 0])
    assert "float32[5, 2]" in repr(ds)
    with pytest.raises(ValueError, match="differ in length"):
        Dataset(x, y[:2])


@pytest.mark.parametrize("drop_last,expect", [(False, 5), (True, 4)])
def test_dataloader_len_matches_iteration(drop_last, expect):
    x, y = _xy(23)
    loader = DataLoader(Dataset(x, y), batch_size=5, drop_last=drop_last)
    assert len(loader) == expect == len(list(loader))


def test_dataloader_shuffles_per_epoch_reproducibly_and_resumes():
    x, y = _xy(30)
    a = DataLoader((x, y), batch_size=4, shuffle=True, seed=11)
    epochs = [_ids(list(a)) for _ in range(3)]
    assert all(len(set(e.tolist())) == 30 for e in epochs)
    assert not np.array_equal(epochs[0], epochs[1]) and not np.array_equal(epochs[1], epochs[2])
    b = DataLoader((x, y), batch_size=4, shuffle=True, seed=11)
    np.testing.assert_array_equal(_ids(list(b)), epochs[0])  # same seed, same run
    c = DataLoader((x, y), batch_size=4, shuffle=True, seed=11)
    c.set_epoch(2)  # resuming at epoch 2 sees epoch 2's batches
    np.testing.assert_array_equal(_ids(list(c)), epochs[2])
    assert c.epoch == 3
    d = DataLoader((x, y), batch_size=4, shuffle=True, seed=12)
    assert not np.array_equal(_ids(list(d)), epochs[0])


def test_dataloader_generator_seed_and_unshuffled():
    x, y = _xy(12)
    g = DataLoader((x, y), batch_size=5, shuffle=True, seed=np.random.default_rng(0))
    e0, e1 = _ids(list(g)), _ids(list(g))
    assert not np.array_equal(e0, e1) and sorted(e0.tolist()) == list(range(12))
    plain = DataLoader(x, batch_size=5)
    np.testing.assert_array_equal(np.concatenate(list(plain)), x)  # (an array's batches: arrays, as torch's)
    with pytest.raises(TypeError, match="seed"):
        DataLoader((x, y), seed="0")
    with pytest.raises(ValueError, match="seed"):
        DataLoader((x, y), seed=-1)
    with pytest.raises(ValueError, match="set_epoch"):
        plain.set_epoch(-1)


def test_shipped_subset_is_package_data():
    assert SUBSET_PATH.parent.name == "data" and SUBSET_PATH.parent.parent.name == "luminal"
    ds = load_mnist()
    assert ds.train_images.shape == (4000, 784) and ds.test_images.shape == (1000, 784)
    assert ds.train_images.dtype == np.float32 and ds.train_labels.dtype == np.int32
    assert 0.0 == ds.train_images.min() and ds.train_images.max() == 1.0
    np.testing.assert_array_equal(np.bincount(ds.test_labels, minlength=10), np.full(10, 100))


@pytest.mark.parametrize("gz", [False, True])
def test_load_mnist_from_idx_dir(tmp_path, gz):
    rng = np.random.default_rng(0)
    arrays = {"train_images": rng.integers(0, 256, (6, 28, 28), dtype=np.uint8),
              "train_labels": rng.integers(0, 10, 6, dtype=np.uint8),
              "test_images": rng.integers(0, 256, (2, 28, 28), dtype=np.uint8),
              "test_labels": rng.integers(0, 10, 2, dtype=np.uint8)}
    for key, stem in IDX_FILES.items():
        a = arrays[key]
        raw = bytes([0, 0, 0x08, a.ndim]) + struct.pack(f">{a.ndim}I", *a.shape) + a.tobytes()
        path = tmp_path / (stem + (".gz" if gz else ""))
        path.write_bytes(gzip.compress(raw) if gz else raw)
    ds = load_mnist(tmp_path)
    np.testing.assert_allclose(ds.train_images, arrays["train_images"].reshape(6, 784) / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(ds.test_labels, arrays["test_labels"])
    np.testing.assert_array_equal(load_idx(tmp_path / (IDX_FILES["test_labels"] + (".gz" if gz else ""))),
                                  arrays["test_labels"])
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte"):
        load_mnist(tmp_path / "nowhere")


def test_a_shuffle_without_a_seed_in_a_process_alone_touches_no_mpi():
    """Under a launcher of several ranks a seedless shuffle takes rank 0's entropy (a broadcast:
    tests/distributed); a process alone draws its own and never imports mpi4py."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys, numpy as np\nfrom luminal.data import DataLoader, batches\n"
            "a = np.concatenate(list(DataLoader(np.arange(10), batch_size=3, shuffle=True)))\n"
            "b = np.concatenate([b[0] for b in batches(np.arange(10), 3, shuffle=True)])\n"
            "print(sorted(a.tolist()) == sorted(b.tolist()) == list(range(10)), 'mpi4py' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k not in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK",
                                                          "MV2_COMM_WORLD_SIZE")}
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=root,
                          env={**env, "PYTHONPATH": str(root)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[0] == "True False"

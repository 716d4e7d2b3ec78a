"""Data: minibatches over numpy arrays and the MNIST loader (``luminal.data``).

Everything here is numpy on the host; a batch is handed to a compiled program as its inputs.

* :func:`batches`: one epoch of minibatches over a few arrays that share their first dim.
* :class:`Dataset` and :class:`DataLoader`: torch's ``TensorDataset`` + ``DataLoader`` over numpy
  arrays (``len``, iteration, a seeded shuffle per epoch, ``drop_last``); a DataLoader also reads a
  torch-style map dataset, joining its samples with :func:`default_collate` (or a ``collate_fn``).
* :func:`load_mnist`: the small real-MNIST subset shipped with the package (4,000 train / 1,000
  held-out digits) or the standard IDX files from a directory; :func:`load_idx` reads one IDX file.

Layer rule: this package reads only numpy (and may read ``luminal.core``); it never imports the
frontend, the compiler, ``nn``, ``train`` or a backend (an import-linter contract in pyproject.toml).
"""

from luminal.data.loader import DataLoader, Dataset, batches, default_collate
from luminal.data.mnist import IDX_FILES, MNIST, SUBSET_PATH, load_idx, load_mnist

__all__ = ["IDX_FILES", "MNIST", "SUBSET_PATH", "DataLoader", "Dataset", "batches", "default_collate", "load_idx",
           "load_mnist"]

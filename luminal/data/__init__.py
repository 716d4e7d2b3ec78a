"""Data: minibatches over numpy arrays and the MNIST loader (``luminal.data``), in torch's ``torch.utils.data`` terms.

Everything here is numpy on the host; a batch is handed to a compiled program as its inputs. Nothing
starts worker processes: a :class:`DataLoader` reads its samples in the calling process.

* :func:`batches`: one epoch of minibatches over a few arrays that share their first dim.
* :class:`Dataset` (:class:`TensorDataset`) and :class:`DataLoader`: torch's ``TensorDataset`` +
  ``DataLoader`` over numpy arrays (``len``, iteration, a seeded shuffle per epoch, ``drop_last``); a
  DataLoader also reads a torch-style map dataset (a list of samples included) or an
  :class:`IterableDataset`, joining samples with :func:`default_collate` (or a ``collate_fn``), takes
  ``sampler=``/``batch_sampler=``, and ``batch_size=None`` (each sample through :func:`default_convert`).
* :class:`Subset`, :class:`ConcatDataset`, :func:`random_split`: datasets made of others (``datasets.py``).
* :class:`SequentialSampler`, :class:`RandomSampler`, :class:`SubsetRandomSampler`,
  :class:`WeightedRandomSampler`, :class:`BatchSampler` (``samplers.py``): their randomness is numpy's,
  from an int seed or a numpy Generator (``seeding.py``), never torch's stream.
* :func:`load_mnist`: the small real-MNIST subset shipped with the package (4,000 train / 1,000
  held-out digits) or the standard IDX files from a directory; :func:`load_idx` reads one IDX file.

Layer rule: this package reads only numpy (and may read ``luminal.core``); it never imports the
frontend, the compiler, ``nn``, ``train`` or a backend (an import-linter contract in pyproject.toml).
"""

from luminal.data.datasets import ConcatDataset, IterableDataset, Subset, TensorDataset, random_split
from luminal.data.loader import DataLoader, Dataset, batches, default_collate, default_convert
from luminal.data.mnist import IDX_FILES, MNIST, SUBSET_PATH, load_idx, load_mnist
from luminal.data.samplers import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = ["IDX_FILES", "MNIST", "SUBSET_PATH", "BatchSampler", "ConcatDataset", "DataLoader", "Dataset",
           "IterableDataset", "RandomSampler", "Sampler", "SequentialSampler", "Subset", "SubsetRandomSampler",
           "TensorDataset", "WeightedRandomSampler", "batches", "default_collate", "default_convert", "load_idx",
           "load_mnist", "random_split"]

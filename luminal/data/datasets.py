"""Datasets, as torch's ``torch.utils.data`` has them: :class:`Dataset` (arrays sharing their first dim, and
the base of map datasets; :class:`TensorDataset` is torch's name for it), :class:`IterableDataset` (a stream),
and datasets built from others: :class:`Subset`, :class:`ConcatDataset`, :func:`random_split`.

A map dataset is anything with ``__len__`` and ``__getitem__`` (``dataset[i]`` is sample ``i``); the
wrappers hold their datasets and read them on demand, copying no data.
"""

from __future__ import annotations

import bisect
import itertools
import math
import numbers
import warnings
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from luminal.data.seeding import checked_generator


def _as_arrays(arrays, who: str) -> tuple[np.ndarray, ...]:
    """A single array or a sequence of arrays -> a tuple of arrays sharing their first dim."""
    if isinstance(arrays, Dataset):
        if "arrays" not in vars(arrays):  # (a Subset, a ConcatDataset, a subclass holding its own data)
            raise TypeError(f"{who}: a {type(arrays).__name__} holds no arrays to slice; read its samples with "
                            f"DataLoader(dataset, batch_size) instead")
        return arrays.arrays
    if isinstance(arrays, np.ndarray):
        arrays = (arrays,)
    if isinstance(arrays, (str, bytes)) or not isinstance(arrays, Sequence):
        raise TypeError(f"{who}: expected a numpy array or a sequence of arrays, got {type(arrays).__name__}")
    if not arrays:
        raise ValueError(f"{who}: got no arrays")
    out = tuple(np.asarray(a) for a in arrays)
    for i, a in enumerate(out):
        if a.ndim == 0:
            raise ValueError(f"{who}: array {i} is 0-d; every array needs a first (example) dim")
    lengths = [len(a) for a in out]
    if len(set(lengths)) != 1:
        raise ValueError(f"{who}: the arrays differ in length (first dims {lengths})")
    return out


def _is_iterable_style(dataset) -> bool:
    """A stream of samples (torch's ``IterableDataset``): an :class:`IterableDataset` (whatever else it defines,
    as torch decides), or an iterable with no ``__getitem__`` to index it."""
    return isinstance(dataset, IterableDataset) or (hasattr(dataset, "__iter__")
                                                    and not hasattr(dataset, "__getitem__"))


class Dataset:
    """A dataset of numpy arrays sharing their first dim (torch's ``TensorDataset``), and the base class of
    map datasets (torch's ``Dataset``).

    Args:
        *arrays: the arrays, e.g. ``Dataset(images, labels)``; ``dataset[i]`` is the tuple of their
            ``i``-th rows (``i`` may also be a slice or an index array). None: a subclass's base, as
            torch's ``Dataset`` (``super().__init__()``), that defines ``__len__`` and ``__getitem__``.

    ``a + b`` is their :class:`~luminal.data.ConcatDataset`, as torch's.
    """

    def __init__(self, *arrays):
        if arrays:
            self.arrays = _as_arrays(list(arrays), type(self).__name__)

    def _held(self, method: str) -> tuple[np.ndarray, ...]:
        """The arrays, or torch's refusal for a subclass that holds none (its own ``__init__`` did not pass
        any to this one's) and did not define ``method`` itself, as a torch map dataset must."""
        if "arrays" not in vars(self):
            raise NotImplementedError(f"{type(self).__name__}: a Dataset subclass that does not pass arrays to "
                                      f"Dataset.__init__ must implement {method} (torch's map dataset)")
        return self.arrays

    def __len__(self) -> int:
        return len(self._held("__len__")[0])

    def __getitem__(self, index) -> tuple[np.ndarray, ...]:
        return tuple(a[index] for a in self._held("__getitem__"))

    def __add__(self, other):
        return ConcatDataset([self, other])

    def __repr__(self):
        if "arrays" not in vars(self):  # (a subclass holding its own data)
            return f"{type(self).__name__}(len={len(self)})"
        shapes = ", ".join(f"{a.dtype}{list(a.shape)}" for a in self.arrays)
        return f"{type(self).__name__}({shapes})"


class TensorDataset(Dataset):
    """torch's name for :class:`~luminal.data.Dataset` over arrays: ``TensorDataset(x, y)[i]`` is
    ``(x[i], y[i])``; the arrays must share their first (example) dim."""


class IterableDataset:
    """A stream of samples (torch's ``IterableDataset``): a subclass defines ``__iter__``, and ``__len__`` only
    if ``len(DataLoader)`` is wanted. A :class:`~luminal.data.DataLoader` batches the samples in the order
    they come, so it refuses ``shuffle``, ``sampler`` and ``batch_sampler`` for one, as torch's. Any object
    with ``__iter__`` and no ``__getitem__`` is read the same way."""

    def __iter__(self) -> Iterator:
        raise NotImplementedError(f"{type(self).__name__}: an IterableDataset subclass must implement __iter__")


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order (torch's ``Subset``): ``Subset(d, idx)[i]`` is
    ``d[idx[i]]``.

    Args:
        dataset: a map dataset.
        indices: a sequence of its indices (repeats allowed).
    """

    def __init__(self, dataset, indices: Sequence):
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list) -> list:
        """A batch's samples (what :class:`~luminal.data.DataLoader` asks for): through the dataset's own
        ``__getitems__`` when it has one, as torch's."""
        picked = [self.indices[i] for i in indices]
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__(picked)
        return [self.dataset[i] for i in picked]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """The samples of several map datasets one after another (torch's ``ConcatDataset``; ``a + b`` for
    two :class:`~luminal.data.Dataset` s).

    Args:
        datasets: an iterable of map datasets, at least one; their lengths are read once, here.

    Attributes:
        cumulative_sizes: the running totals of the lengths (the last is ``len(self)``).
    """

    def __init__(self, datasets: Iterable):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: got no datasets (datasets must be a non-empty iterable)")
        for i, d in enumerate(self.datasets):
            if _is_iterable_style(d):
                raise TypeError(f"ConcatDataset: dataset {i} ({type(d).__name__}) is an iterable-style dataset; "
                                f"only map datasets (__len__ and __getitem__) can be concatenated, as torch's")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if not isinstance(idx, numbers.Integral):
            raise TypeError(f"ConcatDataset: an index must be an int, got {type(idx).__name__}")
        n = len(self)
        if not -n <= idx < n:
            raise IndexError(f"ConcatDataset: index {idx} is out of range for {n} samples")
        idx = int(idx) % n
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        return self.datasets[which][idx - (self.cumulative_sizes[which - 1] if which else 0)]


def _split_lengths(n: int, lengths: Sequence) -> list[int]:
    """random_split's lengths: ints summing to ``n``, or fractions summing to 1 (each ``floor(n f)``, the
    remainder handed out one by one from the first split on, as torch's); a 1-d numpy array of them too."""
    if isinstance(lengths, np.ndarray) and lengths.ndim == 1 and lengths.dtype.kind in "iuf":
        lengths = lengths.tolist()
    if not isinstance(lengths, Sequence) or isinstance(lengths, (str, bytes)) or not lengths or \
            any(isinstance(v, bool) or not isinstance(v, numbers.Real) for v in lengths):
        raise TypeError(f"random_split: lengths must be a non-empty sequence of ints or fractions, got {lengths!r}")
    if all(isinstance(v, numbers.Integral) for v in lengths):
        counts = [int(v) for v in lengths]
        if min(counts) < 0 or sum(counts) != n:
            raise ValueError(f"random_split: the lengths {counts} must be >= 0 and sum to the dataset's length {n}")
        return counts
    # torch's test is on the float sum, whose rounding depends on the order; the exact sum accepts the
    # fractions torch refuses only by that rounding, and neither refuses what torch accepts
    total = math.fsum(lengths)
    if not any(math.isclose(t, 1) and t <= 1 for t in (total, sum(lengths))) or \
            not all(0 <= f <= 1 for f in lengths):
        raise ValueError(f"random_split: fractions must each lie in [0, 1] and sum to 1, got {list(lengths)} "
                         f"(sum {total}); or give ints summing to the dataset's length {n}")
    counts = [math.floor(n * f) for f in lengths]
    for i in range(n - sum(counts)):
        counts[i % len(counts)] += 1
    for i, c in enumerate(counts):
        if c == 0:
            warnings.warn(f"random_split: split {i} is empty ({lengths[i]} of {n} samples)", stacklevel=3)
    return counts


def random_split(dataset, lengths: Sequence, generator=None) -> list[Subset]:
    """Split ``dataset`` at random into non-overlapping :class:`Subset` s of the given lengths (torch's
    ``random_split``): together they hold every index once.

    Args:
        dataset: a map dataset.
        lengths: ints summing to ``len(dataset)``, or fractions summing to 1 (``floor(len * f)`` each, the
            remainder given one by one to the first splits, as torch's): a sequence or a 1-d numpy array.
        generator: the permutation's randomness: a numpy Generator, an int seed (the same split every run)
            or None (fresh entropy, rank 0's on every rank of an MPI launch: :mod:`luminal.data.seeding`).
            torch's ``Generator`` is refused: its stream is not numpy's.

    Returns:
        A list of :class:`Subset` s, one per length.

    Example::

        train, val = random_split(Dataset(x, y), [0.8, 0.2], generator=0)
    """
    counts = _split_lengths(len(dataset), lengths)
    order = checked_generator(generator, "random_split").permutation(len(dataset)).tolist()
    ends = list(itertools.accumulate(counts))
    return [Subset(dataset, order[end - c:end]) for end, c in zip(ends, counts)]

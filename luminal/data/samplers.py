"""Samplers: the order in which a :class:`~luminal.data.DataLoader` reads a map dataset (torch's
``torch.utils.data`` samplers, drawing from numpy).

A sampler is an iterable of dataset indices (a :class:`BatchSampler`: of lists of them), usually with a
``len``; :class:`~luminal.data.DataLoader` takes one as ``sampler=`` (or ``batch_sampler=``). The random
ones take ``generator=``: a numpy Generator (used and advanced), an int seed (one Generator made at
construction, so a run is reproducible and successive epochs still differ), or None (fresh entropy, the
same on every rank of an MPI launch: :mod:`luminal.data.seeding`). Their orders are numpy's, never
torch's stream; their distributions are torch's.
"""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Iterable, Iterator, Sequence, Sized

import numpy as np

from luminal.data.seeding import checked_generator


def _positive_int(value, what: str, who: str) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, (bool, np.bool_)) or value <= 0:
        raise ValueError(f"{who}: {what} must be a positive int, got {value!r}")
    return int(value)


def _bool(value, what: str, who: str, error: type[Exception] = TypeError) -> bool:
    """``value`` as a bool; anything else raises ``error``: torch's type for that sampler's check
    (RandomSampler's is a TypeError, WeightedRandomSampler's and BatchSampler's a ValueError)."""
    if not isinstance(value, (bool, np.bool_)):
        raise error(f"{who}: {what} must be a bool, got {value!r}")
    return bool(value)


class Sampler:
    """The base of samplers (torch's ``Sampler``): a subclass defines ``__iter__`` (the indices) and, for
    ``len(DataLoader)``, ``__len__``. Any iterable of indices serves as a sampler too."""

    def __iter__(self) -> Iterator:
        raise NotImplementedError(f"{type(self).__name__}: a Sampler subclass must implement __iter__")


class SequentialSampler(Sampler):
    """The indices ``0, 1, ..., len(data_source) - 1`` in order (torch's ``SequentialSampler``).

    Args:
        data_source: anything with a ``len`` (a dataset); its length is read at each iteration.
    """

    def __init__(self, data_source: Sized):
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """Random indices into ``data_source`` (torch's ``RandomSampler``).

    Without replacement each epoch is a permutation (``num_samples`` beyond the length: whole permutations,
    then the head of one more, as torch's); with replacement, ``num_samples`` independent uniform draws.

    Args:
        data_source: anything with a ``len``.
        replacement: draw with replacement (a bool).
        num_samples: indices per epoch, a positive int (default ``len(data_source)``, read at each use).
        generator: a numpy Generator, an int seed or None (module docstring).
    """

    def __init__(self, data_source: Sized, replacement: bool = False, num_samples: int | None = None,
                 generator=None):
        self.data_source = data_source
        self.replacement = _bool(replacement, "replacement", "RandomSampler")
        self._num_samples = None if num_samples is None else _positive_int(num_samples, "num_samples",
                                                                           "RandomSampler")
        _positive_int(self.num_samples, "num_samples (the dataset's length when not given)", "RandomSampler")
        self.generator = checked_generator(generator, "RandomSampler")

    @property
    def num_samples(self) -> int:
        """The indices per epoch: the one given, else the dataset's length."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n, k = len(self.data_source), self.num_samples
        if n == 0:
            raise ValueError(f"RandomSampler: cannot draw {k} indices from an empty data source")
        if self.replacement:
            return iter(self.generator.integers(0, n, k).tolist())
        whole = [self.generator.permutation(n) for _ in range(k // n)]
        return iter(np.concatenate(whole + [self.generator.permutation(n)[:k % n]]).tolist())

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, each once, in a random order every epoch (torch's ``SubsetRandomSampler``).

    Args:
        indices: a sequence of dataset indices (yielded as they are).
        generator: a numpy Generator, an int seed or None (module docstring).
    """

    def __init__(self, indices: Sequence, generator=None):
        self.indices = indices
        self.generator = checked_generator(generator, "SubsetRandomSampler")

    def __iter__(self) -> Iterator:
        return (self.indices[i] for i in self.generator.permutation(len(self.indices)).tolist())

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices into ``range(len(weights))``, each drawn with probability proportional to its
    weight (torch's ``WeightedRandomSampler``, i.e. ``torch.multinomial``); without replacement a drawn index
    leaves the pool and the rest are renormalized (successive sampling, as torch's).

    Args:
        weights: a 1-d sequence of finite weights >= 0, not all 0 (they need not sum to 1).
        num_samples: indices per epoch, a positive int; without replacement at most the number of nonzero
            weights (torch raises that when iterated; here at construction).
        replacement: draw with replacement (a bool).
        generator: a numpy Generator, an int seed or None (module docstring).
    """

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True, generator=None):
        who = "WeightedRandomSampler"
        self.num_samples = _positive_int(num_samples, "num_samples", who)
        self.replacement = _bool(replacement, "replacement", who, ValueError)
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError(f"{who}: weights must be a 1-d sequence, got shape {w.shape}")
        if not np.isfinite(w).all() or (w < 0).any() or not w.sum() > 0:
            raise ValueError(f"{who}: weights must be finite and >= 0 with a positive sum, got {w.tolist()}")
        if not self.replacement and self.num_samples > np.count_nonzero(w):
            raise ValueError(f"{who}: cannot draw num_samples={self.num_samples} without replacement from "
                             f"{np.count_nonzero(w)} nonzero weights")
        self.weights = w
        self.generator = checked_generator(generator, who)

    def __iter__(self) -> Iterator[int]:
        p = self.weights / self.weights.sum()
        return iter(self.generator.choice(len(p), self.num_samples, replace=self.replacement, p=p).tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of ``batch_size`` consecutive indices of ``sampler`` (torch's ``BatchSampler``); the last list
    is shorter, or dropped with ``drop_last``.

    Args:
        sampler: a sampler or any iterable of indices.
        batch_size: indices per list, a positive int.
        drop_last: drop a final short list (a bool).

    Example::

        list(BatchSampler(SequentialSampler(range(10)), 3, drop_last=False))  # [[0, 1, 2], ..., [9]]
    """

    def __init__(self, sampler: Iterable, batch_size: int, drop_last: bool):
        self.sampler = sampler
        self.batch_size = _positive_int(batch_size, "batch_size", "BatchSampler")
        self.drop_last = _bool(drop_last, "drop_last", "BatchSampler", ValueError)

    def __iter__(self) -> Iterator[list]:
        indices = iter(self.sampler)
        while batch := list(itertools.islice(indices, self.batch_size)):
            if len(batch) < self.batch_size and self.drop_last:
                return
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

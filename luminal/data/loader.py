"""Minibatches over numpy arrays: :func:`batches` (one epoch), :class:`Dataset` and :class:`DataLoader`.

A :class:`DataLoader` also takes a torch-style map dataset (any object with ``__len__`` and
``__getitem__`` that is not an array or a list/tuple of arrays, or a :class:`Dataset` subclass that
overrides ``__getitem__``): it reads ``dataset[i]`` for each index and joins a batch's samples with
``collate_fn``, :func:`default_collate` (torch's ``default_collate`` in numpy) unless given.

The shuffle order comes only from the ``seed`` given (an int, a sequence of ints, or a numpy
``Generator``), so a seeded run sees the same batches on every machine. A :class:`DataLoader` with an
int seed draws epoch ``e``'s order from ``np.random.default_rng([seed, e])``: each epoch is shuffled
differently, and a run resumed at epoch ``e`` (``set_epoch``) sees exactly the batches it would have.

**Several ranks.** Under an MPI launcher with more than one rank (``luminal.distributed``), a shuffle
with ``seed=None`` draws its fresh entropy on rank 0 and every rank takes it (a broadcast, when the
loader is built or ``batches`` called: every rank must build it, as it builds the model). Each rank
then sees the same order, so that ``dist.shard`` splits the same global batches and an epoch covers
every example once, as in one process; rank-drawn orders would repeat some examples and skip others.
A ``Generator`` seed is used as it is: give every rank one seeded alike.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np

from luminal import distributed


def _as_arrays(arrays, who: str) -> tuple[np.ndarray, ...]:
    """A single array or a sequence of arrays -> a tuple of arrays sharing their first dim."""
    if isinstance(arrays, Dataset):
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


def _check_batch_size(batch_size, who: str) -> int:
    if not isinstance(batch_size, numbers.Integral) or isinstance(batch_size, (bool, np.bool_)) or batch_size < 1:
        raise ValueError(f"{who}: batch_size must be an int >= 1, got {batch_size!r}")
    return int(batch_size)


def _generator(seed) -> np.random.Generator:
    """A numpy Generator from ``seed``: a Generator is used as is (it advances), anything else seeds one;
    None (fresh entropy) is rank 0's on every rank of a launch of several (``_agreed_entropy``)."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(_agreed_entropy() if seed is None else seed)


def _agreed_entropy() -> np.ndarray | None:
    """Fresh entropy for a shuffle, the same on every rank: rank 0's, broadcast, under a launcher of
    several ranks; None (numpy draws its own) for a process alone, which touches no MPI."""
    if distributed.world_size() == 1:
        return None
    words = np.random.SeedSequence().generate_state(4, np.uint64) if distributed.rank() == 0 else \
        np.zeros(4, np.uint64)
    return distributed.broadcast(words, root=0)


def _epoch(arrays: tuple[np.ndarray, ...], batch_size: int, order: np.ndarray | None,
           drop_last: bool) -> Iterator[tuple[np.ndarray, ...]]:
    n = len(arrays[0])
    stop = n - n % batch_size if drop_last else n
    for start in range(0, stop, batch_size):
        if order is None:
            yield tuple(a[start:start + batch_size] for a in arrays)
        else:
            idx = order[start:start + batch_size]
            yield tuple(a[idx] for a in arrays)


def batches(arrays, batch_size: int, shuffle: bool = False, drop_last: bool = False,
            seed=None) -> Iterator[tuple[np.ndarray, ...]]:
    """Yield one epoch of minibatches, each a tuple with one batch per array.

    Args:
        arrays: a numpy array or a sequence of arrays sharing their first (example) dim, e.g.
            ``(images, labels)``; the rows of all arrays stay paired.
        batch_size: examples per batch (an int >= 1); the last batch may be shorter.
        shuffle: visit the examples in a random order (a permutation: each exactly once).
        drop_last: skip a final short batch (a compiled graph with a fixed batch dim wants this).
        seed: the shuffle's randomness: an int or a sequence of ints seeds a fresh generator (the
            same order every time), a ``np.random.Generator`` is used and advanced (successive epochs
            differ), None draws fresh entropy (rank 0's on every rank of an MPI launch: module docstring).

    Returns:
        An iterator of tuples of arrays (unshuffled batches are views of the inputs; shuffled ones copies).

    Example::

        for xb, yb in batches((x, y), 64, shuffle=True, seed=[0, epoch]):
            loss = step(x=xb, y=yb)
    """
    arrays = _as_arrays(arrays, "batches")
    batch_size = _check_batch_size(batch_size, "batches")
    order = _generator(seed).permutation(len(arrays[0])) if shuffle else None
    return _epoch(arrays, batch_size, order, bool(drop_last))


def default_collate(batch: Sequence):
    """Join a batch's samples as torch's ``default_collate`` does, with numpy arrays for its tensors.

    By the first sample's type: arrays (or array-likes with ``__array__``) are stacked on a new first
    dim (equal shapes needed); numpy scalars become an array of their dtype, Python floats a float64
    array, Python ints an int64 one (bools a bool one); strings and bytes stay a list; a mapping
    gives a mapping of the collated values per key; a namedtuple, tuple or list gives one of the same
    kind with each position collated (torch returns a list for a plain tuple: a tuple here, as
    :class:`DataLoader` yields for arrays; either unpacks alike). Anything else is refused, as torch's.

    Args:
        batch: the samples, a non-empty sequence.

    Returns:
        The batch, its samples joined.

    Example::

        default_collate([{"x": np.zeros(3), "y": 1}, {"x": np.ones(3), "y": 0}])
        # {"x": array of shape (2, 3), "y": array([1, 0])}
    """
    if not len(batch):
        raise ValueError("default_collate: got an empty batch (no samples to join)")
    elem = batch[0]
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, np.generic):
        return np.array(batch, dtype=elem.dtype)
    if isinstance(elem, bool):
        return np.array(batch)
    if isinstance(elem, numbers.Integral):
        return np.array(batch, dtype=np.int64)
    if isinstance(elem, numbers.Real):
        return np.array(batch, dtype=np.float64)
    if isinstance(elem, np.ndarray) or hasattr(elem, "__array__"):
        arrays = [np.asarray(a) for a in batch]
        if arrays[0].dtype.kind in "SUOV":
            raise TypeError(f"default_collate: arrays of dtype {arrays[0].dtype} cannot be batched (numbers "
                            f"only, as torch's)")
        shapes = {a.shape for a in arrays}
        if len(shapes) > 1:
            raise ValueError(f"default_collate: the samples' arrays differ in shape ({sorted(shapes)}); stacking "
                             f"needs one shape (pad them, or pass a collate_fn)")
        return np.stack(arrays)
    if isinstance(elem, Mapping):
        out = {key: default_collate([sample[key] for sample in batch]) for key in elem}
        try:
            return type(elem)(out)
        except TypeError:  # (a mapping type that cannot be built from a dict)
            return out
    if isinstance(elem, Sequence):
        lengths = {len(sample) for sample in batch}
        if len(lengths) > 1:
            raise ValueError(f"default_collate: the samples differ in length ({sorted(lengths)}); each position "
                             f"is collated across the batch, so every sample needs the same number")
        columns = [default_collate(column) for column in zip(*batch)]
        if hasattr(elem, "_fields"):  # a namedtuple
            return type(elem)(*columns)
        return tuple(columns) if isinstance(elem, tuple) else columns
    raise TypeError(f"default_collate: a batch must hold numpy arrays, numbers, strings, dicts or lists; found "
                    f"{type(elem).__name__}")


def _is_map_style(dataset) -> bool:
    """A torch-style map dataset: indexable with a length, but not an array or a list/tuple of arrays."""
    return (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")
            and not isinstance(dataset, (np.ndarray, Sequence)))


class Dataset:
    """A dataset of numpy arrays sharing their first dim (torch's ``TensorDataset``).

    Args:
        *arrays: the arrays, e.g. ``Dataset(images, labels)``; ``dataset[i]`` is the tuple of their
            ``i``-th rows (``i`` may also be a slice or an index array).
    """

    def __init__(self, *arrays):
        self.arrays = _as_arrays(list(arrays), "Dataset")

    def _held(self, method: str) -> tuple[np.ndarray, ...]:
        """The arrays, or torch's refusal for a subclass that holds none (its own ``__init__`` did not call
        this one's) and did not define ``method`` itself, as a torch map dataset must."""
        if "arrays" not in vars(self):
            raise NotImplementedError(f"{type(self).__name__}: a Dataset subclass that does not pass arrays to "
                                      f"Dataset.__init__ must implement {method} (torch's map dataset)")
        return self.arrays

    def __len__(self) -> int:
        return len(self._held("__len__")[0])

    def __getitem__(self, index) -> tuple[np.ndarray, ...]:
        return tuple(a[index] for a in self._held("__getitem__"))

    def __repr__(self):
        if "arrays" not in vars(self):  # (a subclass holding its own data)
            return f"{type(self).__name__}(len={len(self)})"
        shapes = ", ".join(f"{a.dtype}{list(a.shape)}" for a in self.arrays)
        return f"{type(self).__name__}({shapes})"


class DataLoader:
    """Iterate minibatches of a :class:`Dataset` (or of arrays), epoch after epoch (torch's ``DataLoader``).

    Each ``iter(loader)`` is one epoch; ``len(loader)`` is its number of batches. With ``shuffle`` each
    epoch has its own order: from ``np.random.default_rng([seed, epoch])`` for an int seed (so epoch
    ``e`` is the same in every run, and ``set_epoch(e)`` resumes there), from one generator made at
    construction otherwise (a ``Generator`` seed is used as is; None draws fresh entropy, rank 0's on
    every rank of an MPI launch of several: the module docstring).

    Args:
        dataset: a :class:`Dataset`, a numpy array or a list/tuple of arrays sharing their first dim (the
            rows are sliced out together); or a map dataset, any other object with ``__len__`` and
            ``__getitem__`` (a :class:`Dataset` subclass that overrides ``__getitem__`` too), read one
            sample at a time as torch's ``DataLoader`` reads it. A list of samples is taken as a list of
            arrays, so wrap samples in such an object.
        batch_size: examples per batch (an int >= 1).
        shuffle: a new random order every epoch.
        drop_last: skip each epoch's final short batch.
        seed: an int (per-epoch seeded orders), a ``np.random.Generator``, or None.
        collate_fn: joins a map dataset's samples into a batch (default :func:`default_collate`); given
            for arrays, it receives their rows' tuples as a map dataset's samples.

    Example::

        loader = DataLoader(Dataset(x, y), batch_size=64, shuffle=True, seed=0)
        for epoch in range(3):
            for xb, yb in loader:
                step(x=xb, y=yb)
    """

    def __init__(self, dataset, batch_size: int = 1, shuffle: bool = False, drop_last: bool = False, seed=None,
                 collate_fn: Callable | None = None):
        if not (isinstance(dataset, Dataset) or _is_map_style(dataset)):
            dataset = Dataset(*_as_arrays(dataset, "DataLoader"))
        self.dataset = dataset
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError(f"DataLoader: collate_fn must be callable, got {type(collate_fn).__name__}")
        self.collate_fn = collate_fn
        # slicing the arrays serves a plain Dataset; a subclass's own __getitem__ (torch's way to transform
        # samples) was bypassed by it, so such a dataset, like any map dataset, is read sample by sample
        self._arrays = dataset._held("__getitem__") if collate_fn is None and isinstance(dataset, Dataset) and \
            type(dataset).__getitem__ is Dataset.__getitem__ else None
        self.batch_size = _check_batch_size(batch_size, "DataLoader")
        self.shuffle, self.drop_last = bool(shuffle), bool(drop_last)
        if seed is not None and not isinstance(seed, (numbers.Integral, np.random.Generator)):
            raise TypeError(f"DataLoader: seed must be an int, a numpy Generator or None, got {type(seed).__name__}")
        if isinstance(seed, numbers.Integral) and seed < 0:
            raise ValueError(f"DataLoader: seed must be >= 0, got {seed}")
        self.seed = seed
        # (None: fresh entropy, agreed over the ranks only when it is used, for a shuffle)
        self._rng = None if isinstance(seed, numbers.Integral) else \
            _generator(seed) if self.shuffle else np.random.default_rng(seed)
        self.epoch = 0  # the epoch the next iteration serves

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration epoch ``epoch`` (0-based): with an int seed, its order is the one a
        run from the start would have seen then (for resuming)."""
        if not isinstance(epoch, numbers.Integral) or epoch < 0:
            raise ValueError(f"DataLoader.set_epoch: epoch must be an int >= 0, got {epoch!r}")
        self.epoch = int(epoch)

    def __len__(self) -> int:
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Iterator[tuple[np.ndarray, ...]]:
        order = None
        if self.shuffle:
            rng = self._rng if self._rng is not None else np.random.default_rng([int(self.seed), self.epoch])
            order = rng.permutation(len(self.dataset))
        self.epoch += 1
        if self._arrays is not None:
            return _epoch(self._arrays, self.batch_size, order, self.drop_last)
        return self._samples(order)

    def _samples(self, order: np.ndarray | None) -> Iterator:
        """One epoch of a map dataset: ``collate_fn`` of ``dataset[i]`` for each batch's indices ``i``."""
        n = len(self.dataset)
        order = np.arange(n) if order is None else order
        collate = self.collate_fn or default_collate
        stop = n - n % self.batch_size if self.drop_last else n
        for start in range(0, stop, self.batch_size):
            yield collate([self.dataset[int(i)] for i in order[start:start + self.batch_size]])

    def __repr__(self):
        return (f"DataLoader({self.dataset!r}, batch_size={self.batch_size}, shuffle={self.shuffle}, "
                f"drop_last={self.drop_last}, seed={self.seed!r})")

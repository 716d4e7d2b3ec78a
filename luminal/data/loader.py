"""Minibatches over numpy arrays: :func:`batches` (one epoch) and :class:`DataLoader` (torch's, in numpy).

A :class:`DataLoader` slices arrays (a :class:`~luminal.data.Dataset`, an array, a tuple of arrays) a
batch at a time; it also takes a torch-style map dataset (any other object with ``__len__`` and
``__getitem__``, a list of samples among them, or a :class:`~luminal.data.Dataset` subclass that overrides
``__getitem__``), reading ``dataset[i]`` for each index of its sampler and joining a batch's samples with
``collate_fn``, :func:`default_collate` (torch's ``default_collate`` in numpy) unless given; and an
iterable dataset (``__iter__``, no ``__getitem__``), batching its samples in the order they come.
Samples are read in the calling process: ``num_workers`` and the other worker arguments start nothing
(``DataLoader``'s docstring).

The shuffle order comes only from the ``seed`` given (an int or a numpy ``Generator``; :func:`batches`
also takes a sequence of ints), so a seeded run sees the same batches on every machine. A :class:`DataLoader` with an
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

import copy
import itertools
import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence

import numpy as np

from luminal.data.datasets import Dataset, _as_arrays, _is_iterable_style
from luminal.data.samplers import BatchSampler, SequentialSampler
from luminal.data.seeding import _generator, checked_generator


def _check_batch_size(batch_size, who: str) -> int:
    if not isinstance(batch_size, numbers.Integral) or isinstance(batch_size, (bool, np.bool_)) or batch_size < 1:
        raise ValueError(f"{who}: batch_size must be an int >= 1, got {batch_size!r}")
    return int(batch_size)


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
    order = checked_generator(seed, "batches").permutation(len(arrays[0])) if shuffle else None
    return _epoch(arrays, batch_size, order, bool(drop_last))


def _same_mapping(like: Mapping, values: dict) -> Mapping:
    """``values`` in a mapping of ``like``'s kind, as torch's collate and convert build it: a mutable mapping
    copied and updated (a defaultdict keeps its default, a subclass its attributes), another rebuilt from
    the dict, else the dict itself."""
    if isinstance(like, MutableMapping):
        out = copy.copy(like)
        out.update(values)
        return out
    try:
        return type(like)(values)
    except TypeError:  # (a mapping type that cannot be built from a dict)
        return values


def default_collate(batch: Sequence):
    """Join a batch's samples as torch's ``default_collate`` does, with numpy arrays for its tensors.

    By the first sample's type: arrays (or array-likes with ``__array__``) are stacked on a new first
    dim (equal shapes needed); numpy scalars become an array of their dtype (promoted over the batch, as
    ``torch.as_tensor``: int32 with int64 gives int64, an int with a float a float), Python ints an int64
    array and Python floats a float64 one (ints with a float among them too; torch: its default float32),
    bools a bool one; strings and bytes stay a list; a mapping gives a mapping of the
    collated values per key (of its kind: a mutable one copied and updated, as torch's, so a defaultdict
    keeps its default); a namedtuple, tuple or list gives one of the same
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
    if isinstance(elem, np.generic):  # (numpy's promotion over the batch, as torch.as_tensor: no value cast away)
        out = np.array(batch)
        if out.dtype.kind not in "biufc":
            raise TypeError(f"default_collate: a batch of numpy scalars must hold numbers only, got "
                            f"{sorted({type(s).__name__ for s in batch})} (joined as dtype {out.dtype})")
        return out
    if isinstance(elem, bool) and all(isinstance(s, (bool, np.bool_)) for s in batch):
        return np.array(batch, dtype=bool)
    if isinstance(elem, numbers.Integral) and all(isinstance(s, (numbers.Integral, np.bool_)) for s in batch):
        return np.array(batch, dtype=np.int64)
    if isinstance(elem, numbers.Real):  # (floats, or ints with a float among them: torch.tensor's float)
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
        return _same_mapping(elem, {key: default_collate([sample[key] for sample in batch]) for key in elem})
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


def default_convert(data):
    """A sample as torch's ``default_convert`` leaves it, in numpy: what a :class:`DataLoader` with
    ``batch_size=None`` (no batching) yields for each sample unless given a ``collate_fn``.

    Arrays stay as they are; numpy scalars become 0-d arrays (torch: 0-d tensors); mappings, namedtuples,
    tuples and lists keep their kind with each element converted (torch returns a list for a plain tuple:
    a tuple here, as :func:`default_collate`); anything else (Python numbers, strings, objects) is returned
    unchanged.
    """
    if isinstance(data, np.generic) and not isinstance(data, (np.str_, np.bytes_)):
        return np.asarray(data)
    if isinstance(data, Mapping):
        return _same_mapping(data, {key: default_convert(value) for key, value in data.items()})
    if isinstance(data, tuple):
        items = [default_convert(d) for d in data]
        return type(data)(*items) if hasattr(data, "_fields") else tuple(items)
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        items = [default_convert(d) for d in data]
        try:
            return type(data)(items)
        except TypeError:
            return items
    return data


class _EpochShuffle:
    """``shuffle=True``'s sampler (``loader.sampler``): with an int seed, the order of the epoch the loader
    serves next; otherwise a draw from the loader's generator, which advances it (``DataLoader._order``)."""

    def __init__(self, loader: DataLoader):
        self.loader = loader

    def __iter__(self) -> Iterator[int]:
        return iter(self.loader._order(self.loader.epoch).tolist())

    def __len__(self) -> int:
        return len(self.loader.dataset)


def _nonneg_int(value, what: str) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, (bool, np.bool_)) or value < 0:
        raise ValueError(f"DataLoader: {what} must be an int >= 0, got {value!r}")
    return int(value)


class DataLoader:
    """Iterate minibatches of a dataset, epoch after epoch (torch's ``DataLoader``, its arguments in torch's order).

    Each ``iter(loader)`` is one epoch; ``len(loader)`` is its number of batches (with ``batch_size=None``,
    of samples; for an iterable dataset, from its ``len``). With ``shuffle`` each epoch has its own order:
    from ``np.random.default_rng([seed, epoch])`` for an int seed (so epoch ``e`` is the same in every run,
    and ``set_epoch(e)`` resumes there), from one generator made at construction otherwise (a ``Generator``
    is used as is; None draws fresh entropy, rank 0's on every rank of an MPI launch: the module docstring).

    Args:
        dataset: a :class:`Dataset`, a numpy array (a batch is an array of its rows, as torch's) or a tuple
            of arrays sharing their first dim (the rows are sliced out together, and a batch is a tuple of
            arrays); a map dataset, any other object with
            ``__len__`` and ``__getitem__`` (a list of samples, e.g. ``[(x0, y0), (x1, y1), ...]``, or a
            :class:`Dataset` subclass overriding ``__getitem__``), read a sample at a time (a batch at a time
            through its ``__getitems__`` if it has one), as torch reads it; or an iterable dataset (an
            :class:`~luminal.data.IterableDataset`, any object with ``__iter__`` and no ``__getitem__``),
            its samples batched in the order they come.
        batch_size: samples per batch (an int >= 1), or None: no batching, each sample passed through
            ``collate_fn`` (default :func:`default_convert`) on its own.
        shuffle: a new random order every epoch (refused with ``sampler``, ``batch_sampler`` or an iterable
            dataset, as torch's).
        sampler: the order of a map dataset's indices, a :mod:`~luminal.data.samplers` sampler or any
            iterable of indices.
        batch_sampler: the batches' index lists, e.g. a :class:`~luminal.data.BatchSampler`; it replaces
            ``batch_size``, ``shuffle``, ``sampler`` and ``drop_last`` (refused with them, as torch's).
        num_workers: an int >= 0. Samples are read in the calling process whatever it is (the batches are
            those torch's workers give in order); ``worker_init_fn`` is refused with workers, as it would not
            run, and ``prefetch_factor``, ``persistent_workers``, ``multiprocessing_context`` and ``timeout``
            need ``num_workers > 0``, as torch's, where they change nothing here.
        collate_fn: joins a batch's samples (default :func:`default_collate`; unbatched,
            :func:`default_convert`); given for arrays, it receives their rows' tuples as a map dataset's samples.
        pin_memory, pin_memory_device, in_order: accepted and change nothing: batches are host numpy
            arrays, handed to a compiled program as its inputs, and always come in order.
        drop_last: skip each epoch's final short batch.
        generator, seed: the shuffle's randomness, given as either: an int (per-epoch seeded orders), a
            ``np.random.Generator``, or None. torch's ``Generator`` is refused (its stream is not numpy's).

    Example::

        loader = DataLoader(Dataset(x, y), batch_size=64, shuffle=True, seed=0)
        for epoch in range(3):
            for xb, yb in loader:
                step(x=xb, y=yb)
    """

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool | None = None, sampler=None,
                 batch_sampler=None, num_workers: int = 0, collate_fn: Callable | None = None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable | None = None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False, pin_memory_device: str = "",
                 in_order: bool = True, seed=None):
        self._check_workers(num_workers, timeout, worker_init_fn, multiprocessing_context, prefetch_factor,
                            persistent_workers)
        self.num_workers, self.pin_memory, self.timeout = int(num_workers), bool(pin_memory), timeout
        self._iterable = _is_iterable_style(dataset)
        # a lone array's samples are its rows and its batches arrays, as torch's (not 1-tuples: a tuple of
        # arrays, or a Dataset of one array, TensorDataset's, gives tuples)
        self._bare = isinstance(dataset, np.ndarray)
        if not self._iterable and not isinstance(dataset, Dataset):
            if isinstance(dataset, (np.ndarray, tuple)):
                dataset = Dataset(*_as_arrays(dataset, "DataLoader"))
            elif isinstance(dataset, (str, bytes)) or not (hasattr(dataset, "__len__") and
                                                            hasattr(dataset, "__getitem__")):
                raise TypeError(f"DataLoader: dataset must be a Dataset, arrays, a map dataset (__len__ and "
                                f"__getitem__) or an iterable dataset (__iter__), got {type(dataset).__name__}")
        self.dataset = dataset
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError(f"DataLoader: collate_fn must be callable, got {type(collate_fn).__name__}")
        shuffle = bool(shuffle)
        if self._iterable:
            for name, value in (("shuffle", shuffle or None), ("sampler", sampler), ("batch_sampler", batch_sampler)):
                if value is not None:
                    raise ValueError(f"DataLoader: an iterable dataset ({type(dataset).__name__}) comes in its own "
                                     f"order, so {name} must be left unset, as torch's; got {name}={value!r}")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler and shuffle=True both set the order: give one (sampler=... "
                             "or shuffle=True), as torch's")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(f"DataLoader: batch_sampler sets the batches, so batch_size, shuffle, sampler and "
                                 f"drop_last must keep their defaults, as torch's; got batch_size={batch_size!r}, "
                                 f"shuffle={shuffle}, sampler={sampler!r}, drop_last={drop_last!r}")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("DataLoader: batch_size=None reads samples one at a time, so there is no short last "
                             "batch for drop_last=True to drop (torch refuses the pair too)")
        if batch_size is not None:
            batch_size = _check_batch_size(batch_size, "DataLoader")
        self.batch_size, self.shuffle, self.drop_last = batch_size, shuffle, bool(drop_last)
        # (torch's defaults: batches are collated, unbatched samples converted)
        self.collate_fn = collate_fn or (default_convert if batch_size is None and batch_sampler is None
                                         else default_collate)
        self.seed = self._the_seed(seed, generator)
        # (None: fresh entropy, agreed over the ranks only when it is used, for a shuffle)
        self._rng = None if isinstance(self.seed, numbers.Integral) else \
            _generator(self.seed) if self.shuffle else np.random.default_rng(self.seed)
        self.epoch = 0  # the epoch the next iteration serves
        self._own_order = sampler is None and batch_sampler is None  # (the fast path for arrays may slice)
        if self._iterable:
            self.sampler = None
        else:
            self.sampler = sampler if sampler is not None else _EpochShuffle(self) if shuffle else \
                SequentialSampler(dataset)
        self.batch_sampler = batch_sampler if batch_sampler is not None or batch_size is None or self._iterable \
            else BatchSampler(self.sampler, batch_size, self.drop_last)
        # slicing the arrays serves a plain Dataset; a subclass's own __getitem__ (torch's way to transform
        # samples) or __len__ (fewer samples than rows) was bypassed by it, so such a dataset, like any map
        # dataset, is read sample by sample
        self._arrays = dataset.arrays if collate_fn is None and isinstance(dataset, Dataset) and \
            type(dataset).__getitem__ is Dataset.__getitem__ and type(dataset).__len__ is Dataset.__len__ and \
            "arrays" in vars(dataset) else None

    @staticmethod
    def _check_workers(num_workers, timeout, worker_init_fn, multiprocessing_context, prefetch_factor,
                       persistent_workers) -> None:
        """torch's conditions on the worker arguments; samples are read in this process, so a worker hook
        that would not run (``worker_init_fn``) is refused rather than skipped."""
        workers = _nonneg_int(num_workers, "num_workers")
        if not isinstance(timeout, numbers.Real) or timeout < 0:
            raise ValueError(f"DataLoader: timeout must be a number >= 0, got {timeout!r}")
        given = {"timeout": timeout > 0, "prefetch_factor": prefetch_factor is not None,
                 "persistent_workers": bool(persistent_workers), "multiprocessing_context": multiprocessing_context
                 is not None}
        for name, set_ in given.items():
            if set_ and workers == 0:
                raise ValueError(f"DataLoader: {name} applies to worker processes and needs num_workers > 0, as "
                                 f"torch's (num_workers=0)")
        if prefetch_factor is not None:
            _nonneg_int(prefetch_factor, "prefetch_factor")
        if worker_init_fn is not None and workers > 0:
            raise NotImplementedError(f"DataLoader: worker_init_fn runs in worker processes, and this loader reads "
                                      f"samples in the calling process (num_workers={workers} starts none), so it "
                                      f"would never run; do its setup before the loop and drop worker_init_fn")

    @staticmethod
    def _the_seed(seed, generator):
        """The shuffle's randomness, given as ``seed=`` or as torch's ``generator=`` (either takes an int, a
        numpy Generator or None; a torch Generator cannot drive numpy's shuffle)."""
        if seed is not None and generator is not None:
            raise ValueError("DataLoader: give the shuffle's randomness once, as seed= or generator=, not both")
        name, value = ("seed", seed) if generator is None else ("generator", generator)
        if value is not None and (not isinstance(value, (numbers.Integral, np.random.Generator))
                                  or isinstance(value, (bool, np.bool_))):
            hint = " (luminal shuffles with numpy; pass the torch Generator's seed as an int)" \
                if type(value).__module__.startswith("torch") else ""
            raise TypeError(f"DataLoader: {name} must be an int, a numpy Generator or None, got "
                            f"{type(value).__module__}.{type(value).__name__}{hint}")
        if isinstance(value, numbers.Integral) and value < 0:
            raise ValueError(f"DataLoader: {name} must be >= 0, got {value}")
        return value

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration epoch ``epoch`` (0-based): with an int seed, its order is the one a
        run from the start would have seen then (for resuming)."""
        if not isinstance(epoch, numbers.Integral) or epoch < 0:
            raise ValueError(f"DataLoader.set_epoch: epoch must be an int >= 0, got {epoch!r}")
        self.epoch = int(epoch)

    def _order(self, epoch: int) -> np.ndarray:
        """The shuffle's order for ``epoch`` (drawn from the loader's generator unless the seed is an int)."""
        rng = self._rng if self._rng is not None else np.random.default_rng([int(self.seed), epoch])
        return rng.permutation(len(self.dataset))

    def __len__(self) -> int:
        if self._iterable:
            if not hasattr(self.dataset, "__len__"):
                raise TypeError(f"DataLoader: len() of a loader over an iterable dataset is its __len__'s, and "
                                f"{type(self.dataset).__name__} has none")
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        counted = self.sampler if self.batch_sampler is None else self.batch_sampler
        try:
            return len(counted)
        except TypeError:
            which = "sampler" if self.batch_sampler is None else "batch_sampler"
            if isinstance(counted, BatchSampler):  # (its length is its sampler's)
                which, counted = "sampler", counted.sampler
            raise TypeError(f"DataLoader: len() is the length of its {which}, and {type(counted).__name__} has "
                            f"none") from None

    def __iter__(self) -> Iterator:
        epoch, self.epoch = self.epoch, self.epoch + 1
        if self._iterable:
            return self._stream()
        order = self._order(epoch) if self.shuffle else None
        if self._arrays is not None and self._own_order and self.batch_size is not None:
            batches = _epoch(self._arrays, self.batch_size, order, self.drop_last)  # (slices: views when in order)
            return (b for (b,) in batches) if self._bare else batches
        if not self._own_order:
            indices = self.sampler if self.batch_sampler is None else self.batch_sampler
        else:
            indices = range(len(self.dataset)) if order is None else order.tolist()
            if self.batch_size is not None:
                indices = BatchSampler(indices, self.batch_size, self.drop_last)
        return self._fetch(indices)

    def _fetch(self, indices: Iterable) -> Iterator:
        """A map dataset's epoch: each index list's samples collated (or, unbatched, each sample converted)."""
        sample = (lambda i: self.dataset.arrays[0][i]) if self._bare else self.dataset.__getitem__
        if self.batch_size is None and self.batch_sampler is None:
            return (self.collate_fn(sample(i)) for i in indices)
        if self._arrays is not None:
            rows = (tuple(a[np.asarray(idx, dtype=np.intp)] for a in self._arrays) for idx in indices)
            return (b for (b,) in rows) if self._bare else rows
        getitems = getattr(self.dataset, "__getitems__", None)
        if callable(getitems):
            return (self.collate_fn(getitems(list(idx))) for idx in indices)
        return (self.collate_fn([sample(i) for i in idx]) for idx in indices)

    def _stream(self) -> Iterator:
        """An iterable dataset's epoch: its samples, batched in the order they come."""
        samples = iter(self.dataset)
        if self.batch_size is None:
            yield from map(self.collate_fn, samples)
            return
        while batch := list(itertools.islice(samples, self.batch_size)):
            if len(batch) < self.batch_size and self.drop_last:
                return
            yield self.collate_fn(batch)

    def __repr__(self):
        return (f"DataLoader({self.dataset!r}, batch_size={self.batch_size}, shuffle={self.shuffle}, "
                f"drop_last={self.drop_last}, seed={self.seed!r})")

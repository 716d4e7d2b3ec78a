"""Ranks and collectives on host numpy arrays, through MPI.

Arrays travel through the buffer protocol (mpi4py's capitalised methods): no pickling and no copy, and
each result is written into the array given. Every collective is started non-blocking and waited for
with a deadline (``mpi.wait``). A process alone (world size 1) touches no MPI at all: reductions and
broadcasts leave the array as it is.

**Agreement first.** MPI trusts every rank to pass the same count and type: an ``all_reduce`` of 3
floats on one rank and 4 on another, or of float32 against float64, returns garbage without a word, and
a rank in ``barrier`` while another is in ``all_reduce`` is undefined. So each collective here first
exchanges one number per rank, a digest of what it is about to do (the call, its op or root, the
array's dtype and shape); when they differ every rank raises the same
:class:`~luminal.distributed.errors.DistributedError`, naming what each rank called, and nothing is
sent. It costs one small message's latency per call (microseconds on one machine).
"""

from __future__ import annotations

import hashlib

import numpy as np

from luminal.distributed import mpi
from luminal.distributed.errors import DistributedError


def rank() -> int:
    """This process's rank, 0 to ``world_size() - 1`` (0 for a process alone)."""
    c = mpi.comm()
    return 0 if c is None else c.Get_rank()


def world_size() -> int:
    """How many processes the launcher started (1 for a process alone)."""
    c = mpi.comm()
    return 1 if c is None else c.Get_size()


def barrier() -> None:
    """Return once every rank has called it (and every rank's call is a barrier: checked)."""
    c = mpi.comm()
    if c is not None and c.Get_size() > 1:
        agree(c, "barrier()", "barrier")  # (the agreement's exchange is itself a barrier)


def _buffer(name: str, array, kinds: str = "fiu") -> np.ndarray:
    """``array`` checked to be a buffer MPI can write in place, of a dtype of ``kinds``."""
    verb = "reduced" if name == "all_reduce" else "overwritten"
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name}: expected a numpy array (it is {verb} in place), got {type(array).__name__}")
    if not (array.flags.c_contiguous and array.flags.writeable):
        raise ValueError(f"{name}: the array must be C-contiguous and writeable (it is {verb} in place), got "
                         f"one of shape {array.shape} that is not (np.ascontiguousarray makes a copy that is)")
    if array.dtype.kind not in kinds:
        can = "a float or integer" if kinds == "fiu" else "a bool, integer, float or complex"
        raise TypeError(f"{name}: cannot {'sum' if name == 'all_reduce' else 'send'} a {array.dtype} array; use "
                        f"{can} dtype")
    return array


def _what(call: str, array: np.ndarray) -> str:
    return f"{call} of an array of shape {tuple(array.shape)} and dtype {array.dtype}"


def agree(c, mine: str, what: str) -> None:
    """Check that every rank of communicator ``c`` is making the same call ``mine`` (in words: the
    collective, its op or root, the array's shape and dtype), or raise on every rank a
    :class:`DistributedError` naming each rank's. One float per rank travels (a 48-bit digest of the
    words); the words themselves only when they differ."""
    digest = float(int.from_bytes(hashlib.blake2b(mine.encode(), digest_size=6).digest(), "big"))
    table = gather_rows(np.array([digest]), f"{what} (the ranks' agreement on the call)", c)
    if len(set(table[:, 0])) == 1:
        return
    texts = [b.decode() for b in gather_bytes(mine.encode(), f"{what} (the ranks' calls)", c)]
    said = "; ".join(f"rank {r}: {t}" for r, t in enumerate(texts))
    raise DistributedError(f"luminal.distributed: the ranks made different collective calls ({said}); every rank "
                           f"must call the same collectives in the same order, with arrays of the same shape and "
                           f"dtype (this is rank {c.Get_rank()}; nothing was sent)")


def all_reduce(array: np.ndarray, op: str = "sum") -> np.ndarray:
    """Sum (``op="sum"``) or average (``op="mean"``, float arrays) ``array`` over all ranks, in place;
    returns it. Every rank passes an array of the same shape and dtype and gets the same result.

    Args:
        array: a C-contiguous, writeable numpy array (float or integer).
        op: ``"sum"`` or ``"mean"``.
    """
    if op not in ("sum", "mean"):
        raise ValueError(f"all_reduce: op must be 'sum' or 'mean', got {op!r}")
    _buffer("all_reduce", array)
    if op == "mean" and array.dtype.kind != "f":
        raise TypeError(f"all_reduce: op='mean' needs a float array (the mean of integers is not one), "
                        f"got {array.dtype}")
    c = mpi.comm()
    if c is None or c.Get_size() == 1:
        return array
    what = _what(f"all_reduce(op={op!r})", array)
    agree(c, what, what)
    mpi.wait([start_sum(array, c)], what)
    if op == "mean":
        np.divide(array, c.Get_size(), out=array, casting="unsafe")
    return array


def broadcast(array: np.ndarray, root: int = 0) -> np.ndarray:
    """Overwrite ``array`` on every rank with rank ``root``'s, in place; returns it.

    Args:
        array: a C-contiguous, writeable numpy array (bool, integer, float or complex) of the same shape
            and dtype on every rank.
        root: the rank whose values every rank gets.
    """
    _buffer("broadcast", array, "biufc")
    size = world_size()
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= root < size:
        raise ValueError(f"broadcast: root must be a rank in [0, {size}), got {root!r}")
    if size > 1:
        what = _what(f"broadcast(root={int(root)})", array)
        c = mpi.comm()
        agree(c, what, what)
        mpi.wait([start_broadcast(array, int(root), c)], what)
    return array


# what the train step builds on: on its own communicator (``mpi.internal()``) unless given another ------
def start_sum(array: np.ndarray, c=None):
    """Start an in-place sum of ``array`` over the ranks; the request to ``mpi.wait`` for."""
    MPI = mpi.mpi()
    return (c or mpi.internal()).Iallreduce(MPI.IN_PLACE, array, op=MPI.SUM)


def start_broadcast(array: np.ndarray, root: int = 0, c=None):
    """Start an in-place broadcast of ``array`` from ``root``; the request to ``mpi.wait`` for. (A bool
    array travels as its bytes.)"""
    buf = array.reshape(-1).view(np.uint8) if array.dtype.kind == "b" else array
    return (c or mpi.internal()).Ibcast(buf, root=root)


def gather_rows(row: np.ndarray, what: str, c=None) -> np.ndarray:
    """Every rank's ``row`` (a 1-d float64 array of the same length on all), as a (world size, n) table
    every rank gets: the small status each rank reports at each step. (``c``: the communicator.)"""
    row = np.ascontiguousarray(row, dtype=np.float64)
    c = c or mpi.internal()
    if c is None or c.Get_size() == 1:
        return row[None, :].copy()
    table = np.empty((c.Get_size(), row.size), np.float64)
    mpi.wait([c.Iallgather(row, table)], what)
    return table


def gather_bytes(data: bytes, what: str, c=None, sizes=None) -> list[bytes]:
    """Every rank's ``data`` (any length), in rank order, on every rank: descriptions and error messages,
    sent as bytes (no pickle: nothing a rank receives is run). (``c``: the communicator; ``sizes``: every
    rank's length, when an exchange before told them, else one more exchange does.)"""
    c = c or mpi.internal()
    if c is None or c.Get_size() == 1:
        return [data]
    if sizes is None:
        sizes = gather_rows(np.array([len(data)], np.float64), what, c)[:, 0]
    sizes = np.asarray(sizes).astype(np.int64)
    out = np.empty(int(sizes.sum()), np.uint8)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    MPI = mpi.mpi()
    mine = np.frombuffer(data, np.uint8) if data else np.empty(0, np.uint8)
    mpi.wait([c.Iallgatherv(mine, [out, sizes.tolist(), offsets.tolist(), MPI.BYTE])], what)
    return [out[o:o + n].tobytes() for o, n in zip(offsets, sizes)]

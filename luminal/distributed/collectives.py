"""Ranks and collectives on host numpy arrays, through MPI.

Arrays travel through the buffer protocol (mpi4py's capitalised methods): no pickling and no copy, and
each result is written into the array given. Every collective is started non-blocking and waited for
with a deadline (``mpi.wait``). A process alone (world size 1) touches no MPI at all: reductions and
broadcasts leave the array as it is.
"""

from __future__ import annotations

import numpy as np

from luminal.distributed import mpi


def rank() -> int:
    """This process's rank, 0 to ``world_size() - 1`` (0 for a process alone)."""
    c = mpi.comm()
    return 0 if c is None else c.Get_rank()


def world_size() -> int:
    """How many processes the launcher started (1 for a process alone)."""
    c = mpi.comm()
    return 1 if c is None else c.Get_size()


def barrier() -> None:
    """Return once every rank has called it."""
    c = mpi.comm()
    if c is not None and c.Get_size() > 1:
        mpi.wait([c.Ibarrier()], "barrier")


def _buffer(name: str, array) -> np.ndarray:
    """``array`` checked to be a buffer MPI can write in place."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name}: expected a numpy array (it is reduced in place), got {type(array).__name__}")
    if not (array.flags.c_contiguous and array.flags.writeable):
        raise ValueError(f"{name}: the array must be C-contiguous and writeable (it is written in place), got "
                         f"one of shape {array.shape} that is not (np.ascontiguousarray makes a copy that is)")
    if array.dtype.kind not in "fiu":
        raise TypeError(f"{name}: cannot reduce or send a {array.dtype} array; use a float or integer dtype")
    return array


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
    mpi.wait([start_sum(array)], f"all_reduce({op}) of {array.shape} {array.dtype}")
    if op == "mean":
        np.divide(array, c.Get_size(), out=array, casting="unsafe")
    return array


def broadcast(array: np.ndarray, root: int = 0) -> np.ndarray:
    """Overwrite ``array`` on every rank with rank ``root``'s, in place; returns it.

    Args:
        array: a C-contiguous, writeable numpy array of the same shape and dtype on every rank.
        root: the rank whose values every rank gets.
    """
    _buffer("broadcast", array)
    size = world_size()
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= root < size:
        raise ValueError(f"broadcast: root must be a rank in [0, {size}), got {root!r}")
    if size > 1:
        mpi.wait([start_broadcast(array, int(root))], f"broadcast of {array.shape} {array.dtype} from rank {root}")
    return array


# what the train step builds on ------------------------------------------------------------------------
def start_sum(array: np.ndarray):
    """Start an in-place sum of ``array`` over the ranks; the request to ``mpi.wait`` for."""
    MPI = mpi.mpi()
    return mpi.comm().Iallreduce(MPI.IN_PLACE, array, op=MPI.SUM)


def start_broadcast(array: np.ndarray, root: int = 0):
    """Start an in-place broadcast of ``array`` from ``root``; the request to ``mpi.wait`` for."""
    return mpi.comm().Ibcast(array, root=root)


def gather_rows(row: np.ndarray, what: str) -> np.ndarray:
    """Every rank's ``row`` (a 1-d float64 array of the same length on all), as a (world size, n) table
    every rank gets: the small status each rank reports at each step."""
    row = np.ascontiguousarray(row, dtype=np.float64)
    c = mpi.comm()
    if c is None or c.Get_size() == 1:
        return row[None, :].copy()
    table = np.empty((c.Get_size(), row.size), np.float64)
    mpi.wait([c.Iallgather(row, table)], what)
    return table


def gather_bytes(data: bytes, what: str) -> list[bytes]:
    """Every rank's ``data`` (any length), in rank order, on every rank: descriptions and error messages,
    sent as bytes (no pickle: nothing a rank receives is run)."""
    c = mpi.comm()
    if c is None or c.Get_size() == 1:
        return [data]
    sizes = gather_rows(np.array([len(data)], np.float64), what).astype(np.int64)[:, 0]
    out = np.empty(int(sizes.sum()), np.uint8)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    MPI = mpi.mpi()
    mine = np.frombuffer(data, np.uint8) if data else np.empty(0, np.uint8)
    mpi.wait([c.Iallgatherv(mine, [out, sizes.tolist(), offsets.tolist(), MPI.BYTE])], what)
    return [out[o:o + n].tobytes() for o, n in zip(offsets, sizes)]

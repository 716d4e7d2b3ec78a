"""Gradient buckets: many arrays as views into a few flat buffers.

Summing every gradient over the ranks one array at a time costs one message (and its latency) per
parameter: a transformer has hundreds. Laid out as views into a few flat buffers of one dtype each, a
bucket is one message, reduced in place: the compiled program writes each gradient into its view, MPI
sums the buffer where it lies, and the update program reads the views. No copy on either side.
Buckets are capped (``BUCKET_BYTES``) so that a huge model is a few messages that are all in flight
together rather than one that a transport must split anyway. Views start at multiples of 64 bytes
into their buffer, so no two gradients share a cache line.
"""

from __future__ import annotations

import numpy as np

from luminal.distributed import mpi
from luminal.distributed.collectives import start_sum

BUCKET_BYTES = 32 << 20
ALIGN = 64


class Buckets:
    """Flat buffers holding arrays of the given (shape, dtype) specs as views (``arrays``, in order).

    Args:
        specs: ``(shape, numpy dtype)`` of each array.
        cap: the most bytes a bucket holds (an array larger than it gets a bucket of its own).
    """

    def __init__(self, specs, cap: int = BUCKET_BYTES):
        placed = []  # (bucket index, offset in bytes) per spec
        sizes: list[int] = []  # bytes used per bucket
        kinds: list[np.dtype] = []
        open_for: dict = {}  # dtype -> the bucket still taking arrays of it
        for shape, dtype in specs:
            dtype = np.dtype(dtype)
            nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            b = open_for.get(dtype)
            if b is None or (sizes[b] and sizes[b] + nbytes > cap):
                b = open_for[dtype] = len(sizes)
                sizes.append(0)
                kinds.append(dtype)
            placed.append((b, sizes[b]))
            sizes[b] += -(-nbytes // ALIGN) * ALIGN
        self.flats = [np.zeros(n // k.itemsize, k) for n, k in zip(sizes, kinds)]
        self.arrays = []
        for (shape, _), (b, offset) in zip(specs, placed):
            flat = self.flats[b]
            start = offset // flat.itemsize
            self.arrays.append(flat[start:start + int(np.prod(shape, dtype=np.int64))].reshape(shape))

    def sum_over_ranks(self, what: str) -> None:
        """Sum every bucket over the ranks, in place: all buckets in flight at once, then one wait."""
        c = mpi.internal()  # (the train step's own communicator: the user's collectives keep COMM_WORLD)
        if c is None or c.Get_size() == 1:
            return
        mpi.wait([start_sum(f, c) for f in self.flats], what)

    @property
    def nbytes(self) -> int:
        return sum(f.nbytes for f in self.flats)

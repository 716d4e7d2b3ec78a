"""Each rank's share of a global batch."""

from __future__ import annotations

from luminal.distributed.collectives import rank, world_size


def shard(*arrays):
    """This rank's contiguous share of ``arrays`` along their first dim: rank ``r`` of ``N`` takes rows
    ``[n*r//N, n*(r+1)//N)``, so the shares differ in size by at most one and, in rank order, are the
    whole batch. A data-parallel step weights each rank by its share's size, so a batch that does not
    divide evenly (an epoch's last) still gives the gradient of the whole batch. One array in, one
    array out; several in, a tuple out.

    Args:
        *arrays: arrays (or sequences) with the same first dim: a global batch's inputs.
    """
    if not arrays:
        raise TypeError("shard: expected at least one array")
    n = len(arrays[0])
    if any(len(a) != n for a in arrays):
        raise ValueError(f"shard: the arrays' first dims differ ({[len(a) for a in arrays]}); they must be one batch")
    r, size = rank(), world_size()
    lo, hi = n * r // size, n * (r + 1) // size
    out = tuple(a[lo:hi] for a in arrays)
    return out[0] if len(out) == 1 else out

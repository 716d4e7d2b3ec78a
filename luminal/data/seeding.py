"""The randomness of luminal.data's shuffles, splits and samplers: numpy Generators from the seed a user gives.

torch draws from a ``torch.Generator``; luminal.data draws from numpy, so its ``seed``/``generator``
arguments take an int (or a sequence of ints) seeding a fresh ``np.random.Generator``, a Generator used
as it is (it advances), or None for fresh entropy. Under an MPI launcher of several ranks, None's entropy
is rank 0's, broadcast to every rank (``luminal.distributed``), so that all ranks draw the same orders and
splits: each rank must then make the object (a loader, a split, a sampler) as it builds the model.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np

from luminal import distributed


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


def checked_generator(generator, who: str) -> np.random.Generator:
    """``_generator`` of a ``generator=`` argument, refusing what numpy cannot seed from, a torch
    ``Generator`` first among them (its stream is torch's: luminal draws from numpy)."""
    ok = generator is None or isinstance(generator, np.random.Generator) or (
        isinstance(generator, numbers.Integral) and not isinstance(generator, bool) and generator >= 0) or (
        isinstance(generator, Sequence) and not isinstance(generator, (str, bytes)) and generator and all(
            isinstance(s, numbers.Integral) and not isinstance(s, bool) and s >= 0 for s in generator))
    if not ok:
        raise TypeError(f"{who}: generator must be a numpy Generator, an int seed >= 0 (or a sequence of them) or "
                        f"None, got {type(generator).__module__}.{type(generator).__name__} (luminal draws from "
                        f"numpy, so a torch.Generator cannot seed it: pass its seed as an int)")
    return _generator(generator)

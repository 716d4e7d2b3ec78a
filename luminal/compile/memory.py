"""The memory plan: which ``temp`` buffers of a kernel graph may share storage.

A temp buffer lives from the kernel that writes it to the last kernel that reads it; program outputs
and update sources live to the end (the caller reads them after the run). Two buffers whose lives do
not overlap may share a *slot*. A slot is raw bytes: buffers of any dtypes share it, and its size is
the largest of its buffers' byte sizes under a binding of the symbolic dims, so one plan serves every
binding. A buffer is never placed in the slot of a buffer that the same kernel reads: a backend may
then write a kernel's outputs while it still reads its inputs.

Slots are handed out by a linear scan in kernel order (best fit on sizes estimated with every
symbolic dim at ``_PROBE``; the estimate only steers the choice, it never sizes anything).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass

from ..frontend.symbolic import evaluate, free_vars, prod
from .kernel_graph import Buffer, KernelGraph

_PROBE = 64  # stand-in value of every symbolic dim when comparing sizes at plan time


def storage_itemsize(dtype) -> int:
    """Bytes per element as stored (numpy keeps bfloat16 in float32)."""
    return dtype.np.itemsize


def logical_itemsize(dtype) -> int:
    """Bytes per element of the dtype itself (bfloat16: 2), as a device backend stores it."""
    return dtype.itemsize


def nbytes(buf: Buffer, env: dict[str, int], itemsize=logical_itemsize) -> int:
    return evaluate(prod(buf.shape), env) * itemsize(buf.dtype)


@dataclass
class MemoryPlan:
    slot_of: dict  # {temp buffer id: slot index}
    slots: list  # [[Buffer]]: the temps sharing each slot, in the order they were placed
    temps: list  # [Buffer]: every temp buffer of the graph

    def slot_bytes(self, env: dict[str, int], itemsize=logical_itemsize) -> list[int]:
        """Bytes of each slot under ``env``: its largest buffer."""
        return [max((nbytes(b, env, itemsize) for b in bufs), default=0) for bufs in self.slots]

    def peak_bytes(self, env: dict[str, int], itemsize=logical_itemsize) -> int:
        """Temp storage with reuse (the sum of the slots)."""
        return sum(self.slot_bytes(env, itemsize))

    def no_reuse_bytes(self, env: dict[str, int], itemsize=logical_itemsize) -> int:
        """Temp storage if every temp had its own allocation."""
        return sum(nbytes(b, env, itemsize) for b in self.temps)


def lifetimes(kg: KernelGraph) -> dict[int, tuple[int, int]]:
    """{temp buffer id: (index of the kernel writing it, index of its last reader)}; outputs and
    update sources end at ``len(kg.kernels)``."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for i, k in enumerate(kg.kernels):
        for b, _ in list(k.inputs) + list(k.epilogue_inputs):
            last[b.id] = i
        for b, _ in k.outputs:
            first.setdefault(b.id, i)
    end = len(kg.kernels)
    for b, _ in kg.outputs:
        last[b.id] = end
    for _, b, _ in kg.updates:
        last[b.id] = end
    return {b.id: (first[b.id], max(first[b.id], last.get(b.id, first[b.id])))
            for b in kg.buffers if b.kind == "temp" and b.id in first}


def plan_memory(kg: KernelGraph) -> MemoryPlan:
    life = lifetimes(kg)
    temps = [b for b in kg.buffers if b.id in life]
    size = _probe_sizes(temps)
    written_at: dict[int, list[Buffer]] = {}
    ending_at: dict[int, list[Buffer]] = {}
    for b in temps:
        start, end = life[b.id]
        written_at.setdefault(start, []).append(b)
        ending_at.setdefault(end, []).append(b)

    slots: list[list[Buffer]] = []
    est: list[int] = []  # estimated bytes of each slot
    slot_of: dict[int, int] = {}
    free: list[tuple[int, int]] = []  # (estimated bytes, slot) of the free slots, sorted
    for i in range(len(kg.kernels) + 1):
        for b in written_at.get(i, ()):
            need = size[b.id]
            s = _best_fit(free, need)
            if s is None:
                s = len(slots)
                slots.append([])
                est.append(0)
            slots[s].append(b)
            est[s] = max(est[s], need)
            slot_of[b.id] = s
        # freed only after kernel i: its outputs never share storage with what it reads
        for b in ending_at.get(i, ()):
            s = slot_of[b.id]
            insort(free, (est[s], s))
    return MemoryPlan(slot_of, slots, temps)


def _probe_sizes(temps) -> dict[int, int]:
    """{buffer id: estimated bytes}, each distinct (shape, dtype) evaluated once (symbolic
    arithmetic is slow, and deep graphs have thousands of buffers of a few shapes)."""
    probe = {v: _PROBE for shape in {b.shape for b in temps} for d in shape for v in free_vars(d)}
    by_kind: dict[tuple, int] = {}
    out = {}
    for b in temps:
        key = (b.shape, b.dtype)
        n = by_kind.get(key)
        if n is None:
            n = by_kind[key] = nbytes(b, probe)
        out[b.id] = n
    return out


def _best_fit(free: list[tuple[int, int]], need: int) -> int | None:
    """Take the smallest free slot that holds ``need`` bytes, else the largest free one (it grows);
    ties go to the lowest slot. ``free`` is sorted by (bytes, slot), so both are one bisection."""
    if not free:
        return None
    i = bisect_left(free, (need, -1))
    if i == len(free):  # none fits: the first slot of the largest size
        i = bisect_left(free, (free[-1][0], -1))
    return free.pop(i)[1]

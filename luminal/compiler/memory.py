"""The memory plan: which ``temp`` buffers of a kernel graph may share storage.

A temp buffer lives from the kernel that writes it to the last kernel that reads it; program outputs
and update sources live to the end (the caller reads them after the run). The source of an
*expanding copy* (an elementwise kernel copying a view of a buffer into a larger one: a
convolution's im2col matrix, its image repeated kh * kw times) lives as long as the copy, so a
backend may read the source in place of the copy (the CPU backend's gathered products:
``backends/cpu/gathered.py``); that keeps a buffer alive that is smaller than the copy. It lives
one kernel longer still: the CPU backend folds a product and the sum over images after it into one
(``backends/cpu/fold.py``), which then writes the sum while it reads the source.

Two buffers whose lives do not overlap may share a *slot*. A slot is raw bytes: buffers of any
dtypes share it, and its size is the largest of its buffers' byte sizes under a binding of the
symbolic dims, so one plan serves every binding. A buffer is never placed in the slot of a buffer
that the same kernel reads: a backend may then write a kernel's outputs while it still reads its
inputs.

Slots are handed out by a linear scan in kernel order (best fit on sizes estimated with every
symbolic dim at ``_PROBE``; the estimate only steers the choice, it never sizes anything).

A ``call`` kernel reads its inputs and writes its outputs like any kernel. The scratch of its body
(``kernel_graph.Body``) is planned once, by the same scan over the body's kernels, into the *body's
slots*; each of them then takes part in the program's scan as one buffer living from
the body's first call to its last, so every call of the body reuses the same storage (calls
run one after another) and the plan costs the bodies once, not once per call.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from heapq import heappop, heappush

from luminal.core.kernel_graph import KernelGraph, MemoryPlan, copy_source, nbytes

_PROBE = 64  # stand-in value of every symbolic dim when comparing sizes at plan time


def lifetimes(kg: KernelGraph) -> dict[int, tuple[int, int]]:
    """{temp buffer id: (index of the kernel writing it, index of its last reader)}; outputs and
    update sources end at ``len(kg.kernels)``."""
    return {b.id: span for b, span in _program_spans(kg).items()}


def _program_spans(kg: KernelGraph) -> dict:
    ends = [b for b, _ in kg.outputs] + [b for _, b, _ in kg.updates]
    return _spans(kg.kernels, ends, len(kg.kernels))


def _spans(kernels, ends=(), end=0) -> dict:
    """{temp Buffer: (index of the kernel writing it, index of its last reader)} over ``kernels``
    (kernels write temps alone, and read them only after); the buffers in ``ends`` are read at
    ``end``. (Keyed by the buffers themselves: they hash by identity, which is cheaper than reading
    their ids, and a deep program has thousands.)"""
    first: dict = {}
    last: dict = {}
    for i, k in enumerate(kernels):
        for b, _ in k.inputs:
            last[b] = i
        for b, _ in k.epilogue_inputs:
            last[b] = i
        for b, _ in k.outputs:
            if b not in first:
                first[b] = i
    for b in ends:
        last[b] = end
    get = last.get
    for k in kernels:  # an expanding copy's source lives as long as the copy, and one kernel longer
        src = copy_source(k)
        if src is not None and src[0] in first and expanding(k):
            copy = k.outputs[0][0]
            if get(copy, 0) >= get(src[0], 0):
                last[src[0]] = max(last[src[0]], min(last[copy] + 1, max(end, len(kernels))))
    return {b: (s, get(b, s)) for b, s in first.items()}


def expanding(k) -> bool:
    """Whether copy kernel ``k`` (``copy_source``) writes more than twice the elements of the buffer it
    reads (with every symbolic dim at the probe value)."""
    probe = _Probe()
    return nbytes(k.outputs[0][0], probe) > 2 * nbytes(k.inputs[0][0], probe)


def plan_memory(kg: KernelGraph) -> MemoryPlan:
    life = _program_spans(kg)
    temps = [b for b in kg.buffers if b in life]
    call_at: dict[int, list[int]] = {}  # id(body) -> indices of its calls
    for i, k in enumerate(kg.kernels):
        if k.kind == "call":
            call_at.setdefault(id(k.body), []).append(i)
    bodies = kg.bodies()
    scratch = [b for body in bodies for b in body.scratch]
    size = _probe_sizes(temps + scratch)
    items = [(*life[b], size[b], [b]) for b in temps]
    repeats: dict[int, int] = {}
    for body in bodies:
        at = call_at[id(body)]
        spans = _spans(body.kernels)
        body_slots = _scan([(*spans[b], size[b], [b]) for b in body.scratch if b in spans])
        items += [(at[0], at[-1], est, bufs) for est, bufs in body_slots]
        repeats.update((b.id, len(at)) for b in body.scratch)
    slots = [bufs for _, bufs in _scan(items)]
    slot_of = {b.id: s for s, bufs in enumerate(slots) for b in bufs}
    return MemoryPlan(slot_of, slots, temps + scratch, repeats)


def _scan(items: list) -> list[tuple[int, list]]:
    """The linear scan: ``items`` are ``(first step, last step, estimated bytes, buffers)``, each placed
    in a slot at its first step and freeing it after its last. Returns ``[(estimated bytes, buffers)]``
    per slot."""
    written_at: dict[int, list] = {}
    ending_at: dict[int, list] = {}
    for i, item in enumerate(items):
        written_at.setdefault(item[0], []).append(i)
        ending_at.setdefault(item[1], []).append(i)
    slots: list[list] = []
    est: list[int] = []  # estimated bytes of each slot
    slot_of: list[int] = [0] * len(items)
    free = _Free()
    for i in sorted(written_at.keys() | ending_at.keys()):
        for j in written_at.get(i, ()):
            _, _, need, bufs = items[j]
            s = free.best_fit(need)
            if s is None:
                s = len(slots)
                slots.append([])
                est.append(0)
            slots[s] += bufs
            if need > est[s]:
                est[s] = need
            slot_of[j] = s
        # freed only after step i: a kernel's outputs never share storage with what it reads
        for j in ending_at.get(i, ()):
            s = slot_of[j]
            free.add(est[s], s)
    return list(zip(est, slots))


class _Free:
    """The free slots by estimated size: a heap of slot indices per size, and the sizes present,
    sorted (a deep graph frees thousands of slots of a few dozen sizes)."""

    def __init__(self):
        self.sizes: list[int] = []
        self.slots: dict[int, list[int]] = {}

    def add(self, size: int, slot: int) -> None:
        heap = self.slots.get(size)
        if heap is None:
            heap = self.slots[size] = []
            insort(self.sizes, size)
        heappush(heap, slot)

    def best_fit(self, need: int) -> int | None:
        """Take the smallest free slot that holds ``need`` bytes, else the largest free one (it grows);
        ties go to the lowest slot."""
        sizes = self.sizes
        if not sizes:
            return None
        i = bisect_left(sizes, need)
        size = sizes[i] if i < len(sizes) else sizes[-1]
        heap = self.slots[size]
        slot = heappop(heap)
        if not heap:
            del self.slots[size]
            sizes.remove(size)
        return slot


class _Probe(dict):
    """An environment binding every symbolic dim to ``_PROBE``."""

    def __missing__(self, name: str) -> int:
        return _PROBE


def _probe_sizes(temps) -> dict:
    """{Buffer: estimated bytes}, each distinct (shape, dtype) evaluated once (symbolic arithmetic
    is slow, and deep graphs have thousands of buffers of a few shapes: most share the shape object
    itself, so it is looked up by identity first)."""
    probe = _Probe()
    by_id: dict[tuple, int] = {}  # (id(shape), dtype) -> bytes
    by_kind: dict[tuple, int] = {}  # (shape, dtype) -> bytes
    out = {}
    for b in temps:
        n = by_id.get((id(b.shape), b.dtype))
        if n is None:
            key = (b.shape, b.dtype)
            n = by_kind.get(key)
            if n is None:
                n = by_kind[key] = nbytes(b, probe)
            by_id[(id(b.shape), b.dtype)] = n
        out[b] = n
    return out

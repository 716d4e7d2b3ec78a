"""Where each buffer of one binding lives on the device: one arena, laid out by the memory plan.

The arena is one allocation, in regions, every buffer at a 256-byte aligned offset:

- ``temps``: the memory plan's slots (every temp and every body's scratch in its slot);
- ``inputs``: the input and random buffers, together, so one copy from one pinned staging buffer of
  the same layout uploads them all;
- ``iota`` buffers (0..n-1 for the bound n, written once), and each launch's own scratch (one per
  name, dtype and size, shared by the launches of a kernel, as the lowering asks);
- ``flags``: one 8-byte error flag slot per launch of a run, read back once per call;
- ``commit``: a copy of each update whose value is another State's device copy, so that all writes
  of a run land after all reads (a swap of two States stays a swap).

States are not in the arena (each has one device copy of its own, shared by every program), nor are
constants (one allocation per program, shared by its bindings). A pack part (``buf.base``) lives
inside its pack.
"""

from __future__ import annotations

from luminal.core.kernel_graph import logical_itemsize
from luminal.core.symbolic import evaluate, prod

ALIGN = 256


def aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def buffer_bytes(buf, env: dict) -> int:
    return evaluate(prod(buf.shape), env) * logical_itemsize(buf.dtype)


class ArenaLayout:
    """Offsets of one binding's buffers (module docstring): ``offset[buffer id]``, ``scratch[key]``,
    ``regions[name] = (start, end)`` and ``size``. ``runs``: the launches of one run, as (step,
    launch), in order (a rolled body's launches once per call)."""

    def __init__(self, kg, plan, env: dict, runs: list):
        self.size = 0
        self.offset: dict[int, int] = {}
        self.regions: dict[str, tuple[int, int]] = {}

        start = self.size
        slot_at = [self._place(n) for n in plan.slot_bytes(env)]
        for buf in kg.buffers:
            if buf.kind == "temp":
                self.offset[buf.id] = slot_at[plan.slot_of[buf.id]]
        for body in kg.bodies():
            for buf in body.scratch:
                self.offset[buf.id] = slot_at[plan.slot_of[buf.id]]
        self.regions["temps"] = (start, self.size)

        start = self.size
        for buf in kg.buffers:
            if buf.kind in ("input", "random"):
                self.offset[buf.id] = self._place(buffer_bytes(buf, env))
        self.regions["inputs"] = (start, self.size)

        start = self.size
        for buf in kg.buffers:
            if buf.kind == "iota":
                self.offset[buf.id] = self._place(buffer_bytes(buf, env))
        self.scratch: dict[tuple, int] = {}
        for _, launch in runs:
            for name, (dtype, count) in launch.scratch.items():
                key = (name, dtype.name, evaluate(count, env))
                if key not in self.scratch:
                    self.scratch[key] = self._place(key[2] * logical_itemsize(dtype))
        self.regions["fixed"] = (start, self.size)

        self.flags_at = self.size
        self.size += aligned(8 * len(runs))
        self.regions["flags"] = (self.flags_at, self.size)

        start = self.size
        self.commit: dict[int, int] = {}  # update index -> where its value waits
        for i, (_, buf, _) in enumerate(kg.updates):
            if buf.kind == "state":
                self.commit[i] = self._place(buffer_bytes(buf, env))
        self.regions["commit"] = (start, self.size)

    def _place(self, nbytes: int) -> int:
        at = self.size
        self.size += aligned(nbytes)
        return at

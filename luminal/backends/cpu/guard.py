"""Guard mode: out-of-bounds writes of the compiled CPU backend found where they happen.

Generated kernels, the driver's GEMMs and hand-written kernels write memory through raw pointers. A
write past the end of its storage often leaves every result right (it lands in an allocation's slack,
or in a buffer read before it), so comparing values does not see it; the heap may break much later
(glibc's "free(): invalid size" at exit). ``LUMINAL_CPU_GUARD`` (read once, at import) turns on a
mode that sees it at the call that does it:

- ``LUMINAL_CPU_GUARD=1``: every storage a binding allocates (the memory plan's slots, scratch,
  error cells, masked views' padded copies, constants: ``steps.Storage``) is its own allocation with
  ``BYTES`` (64) bytes of a known pattern right before and right after it (the storage starts at the
  same alignment as without the guard). Each call also runs on guarded copies of the caller's arrays
  (inputs, states, random draws), and copies back the states written in place.
- ``LUMINAL_CPU_GUARD=N`` (an integer above 64): guards of ``N`` bytes (rounded up to 64).
- unset, empty, ``0``: off. A binding then allocates and runs as it always does: no per-call work.
- ``LUMINAL_CPU_GUARD_STRICT=1`` as well: every temp gets a storage of its own instead of its slot of
  the memory plan (``plan.Planner._allocate_all``), so that a write just past a buffer smaller than its
  slot (into the slot's slack, or a later buffer's place) hits a guard too. More memory.

Each native step is its own entry of the binding's run (``driver.build`` per step instead of per run
of steps). After each one, the guards of the storages and caller arrays the step names are compared
with the pattern; after the whole call (and after a failed one) every guard is. A changed guard
raises a :class:`GuardError` (a RuntimeError) naming the storage (what lives there), the bytes that
changed, the step that ran last, and the steps that write that storage. Memory no step may write is
compared after each call too: the caller's arrays but the states written in place (the guarded copy
with the caller's array) and the constants (with their data): a store into the wrong buffer, in its
bounds, changes them. ``Binding.run_steps`` (the Python path) checks the same way.

Tests turn it on per binding by setting :data:`BYTES` (``monkeypatch.setattr(guard, "BYTES", 64)``):
it is read when a binding is made.
"""
from __future__ import annotations

import ctypes
import os

import numpy as np

PATTERN = bytes((0xFD, 0xA5, 0x5A, 0xC3, 0x3C, 0x96, 0x69, 0xDB))  # no float or int a kernel is likely to write


def bytes_from(value: str | None) -> int:
    """The guard size ``LUMINAL_CPU_GUARD``'s value asks for: 0 (off), else a multiple of 64, at least 64."""
    v = (value or "").strip().lower()
    if v in ("", "0", "false", "no", "off"):
        return 0
    try:
        n = int(v)
    except ValueError:
        n = 1
    if n <= 0:
        return 0
    return max(64, -(-n // 64) * 64)


BYTES = bytes_from(os.environ.get("LUMINAL_CPU_GUARD"))
# ``LUMINAL_CPU_GUARD_STRICT=1`` (with the guard): every temp a storage of its own instead of its slot of the
# memory plan, so that a write past a buffer smaller than its slot hits a guard too (more memory)
STRICT = bytes_from(os.environ.get("LUMINAL_CPU_GUARD_STRICT")) > 0


class GuardError(RuntimeError):
    """A guard around a storage of a CPU program changed: something wrote out of its bounds."""


class Guarded:
    """One guarded allocation: ``array`` (the memory the program uses: ``nbytes`` bytes, zeros or
    ``fill`` of ``dtype`` or a copy of ``data``) with ``guard`` bytes of :data:`PATTERN` right before
    and right after it; ``what`` says what it holds."""

    __slots__ = ("array", "raw", "what", "guard", "nbytes", "_head", "_tail", "_tail_len", "_want_tail")

    def __init__(self, nbytes: int, guard: int, what: str, dtype=None, fill=None, data=None):
        nbytes = int(nbytes)
        words = (guard + -(-nbytes // 8) * 8 + guard) // 8
        raw = np.empty(words, np.float64).view(np.uint8)  # (8-byte aligned, as Storage.allocate)
        pattern = np.frombuffer(PATTERN, np.uint8)
        raw[:] = np.tile(pattern, words)
        inner = raw[guard:guard + nbytes]
        if data is not None:
            data = np.ascontiguousarray(data)
            inner[:] = data.reshape(-1).view(np.uint8)
            array = inner.view(data.dtype)
        elif fill is not None:
            array = inner.view(np.dtype(dtype))
            array[...] = fill
        else:
            inner[:] = 0
            array = inner
        self.array, self.raw, self.what, self.guard, self.nbytes = array, raw, what, guard, nbytes
        base = raw.ctypes.data
        self._head = base
        self._tail = base + guard + nbytes
        self._tail_len = len(raw) - guard - nbytes
        self._want_tail = bytes(raw[guard + nbytes:])

    def intact(self) -> bool:
        return ctypes.string_at(self._head, self.guard) == _head(self.guard) and \
            ctypes.string_at(self._tail, self._tail_len) == self._want_tail

    def damage(self) -> str:
        """Where the guards changed, in words: byte ranges relative to the storage's start."""
        got = bytes(self.raw)
        want = (PATTERN * (len(got) // 8 + 1))[:len(got)]
        bad = [i for i in range(len(got)) if not self.guard <= i < self.guard + self.nbytes and got[i] != want[i]]
        runs: list = []
        for i in bad:
            if runs and runs[-1][1] == i:
                runs[-1][1] = i + 1
            else:
                runs.append([i, i + 1])
        parts = []
        for lo, hi in runs[:8]:
            rel = (lo - self.guard, hi - self.guard)
            side = "before its start" if lo < self.guard else "past its end"
            parts.append(f"bytes [{rel[0]}, {rel[1]}) ({side}; now {got[lo:hi][:16].hex()})")
        more = f" and {len(runs) - 8} more runs" if len(runs) > 8 else ""
        return ", ".join(parts) + more

    def restore(self) -> None:
        """The guards put back (after a report: a later check sees only new damage)."""
        want = np.frombuffer((PATTERN * (len(self.raw) // 8 + 1))[:len(self.raw)], np.uint8)
        self.raw[:self.guard] = want[:self.guard]
        self.raw[self.guard + self.nbytes:] = want[self.guard + self.nbytes:]


_HEADS: dict = {}


def _head(guard: int) -> bytes:
    got = _HEADS.get(guard)
    if got is None:
        got = _HEADS[guard] = (PATTERN * (guard // 8 + 1))[:guard]
    return got


def storage(s, guard: int, what: str) -> Guarded:
    """A guarded allocation of ``steps.Storage`` ``s`` (its data copied: a constant is read only)."""
    if s.data is not None:
        return Guarded(s.nbytes, guard, what, data=s.data)
    if s.fill is not None:
        return Guarded(s.nbytes, guard, what, dtype=s.dtype, fill=s.fill)
    return Guarded(s.nbytes, guard, what)


def caller(a, shape, dtype, guard: int, name: str) -> Guarded:
    """A guarded copy of caller array ``name`` (converted to its ``shape`` and ``dtype`` as a rebind would)."""
    arr = np.asarray(a, dtype)
    if arr.shape != tuple(shape):
        raise ValueError(f"array {name!r} has shape {arr.shape}, expected {tuple(shape)}")
    g = Guarded(arr.nbytes, guard, f"caller array {name!r} {tuple(shape)} {np.dtype(dtype)}",
                data=np.ascontiguousarray(arr).reshape(-1) if arr.size else np.empty(0, dtype))
    g.array = g.array.reshape(shape)
    return g


def writes(step) -> tuple[set, set]:
    """``(spaces it writes, spaces it may touch)`` of a schedule step (``steps.py``, a ``Split``'s parts
    together): a generated kernel writes its buffers of access "w"/"rw"; a hand-written one may write
    any of its buffers; a Gemm its ``out``, a Copy its ``dst``, a Round its array, an IndexCheck its
    cell."""
    from luminal.backends.cpu.parallel import Split
    from luminal.backends.cpu.steps import Copy, Gemm, IndexCheck, Kernel, Ref, Round

    if isinstance(step, Split):
        w, t = set(), set()
        for part in step.parts:
            for x in part:
                a, b = writes(x)
                w |= a
                t |= b
        return w, t
    if isinstance(step, Kernel):
        spaces = [space for space, _ in step.buffers]
        bufs = getattr(step.kernel, "buffers", None)
        if bufs is None or len(bufs) != len(spaces):
            return set(spaces), set(spaces)
        return {s for s, b in zip(spaces, bufs) if "w" in b.access}, set(spaces)
    refs = [x for x in getattr(step, "args", ()) if type(x) is Ref]
    touched = {r.space for r in refs}
    out = {Gemm: "out", Copy: "dst", Round: "array", IndexCheck: "cell"}.get(type(step))
    target = getattr(step, out, None) if out else None
    return ({target.space} if type(target) is Ref else touched), touched


def describe(step) -> str:
    """A step in a few words: its kind and, for a kernel, its name and items."""
    from luminal.backends.cpu.parallel import Split
    from luminal.backends.cpu.steps import Kernel

    if isinstance(step, Split):
        inner = {describe(x) for part in step.parts for x in part}
        return f"split over {len(step.parts)} threads of [{'; '.join(sorted(inner))}]"
    if isinstance(step, Kernel):
        k = step.kernel
        name = getattr(k, "name", None) or repr(k)
        schedule = getattr(k, "notes", {}).get("schedule") if hasattr(k, "notes") else None
        return f"kernel {name}" + (f" ({schedule})" if schedule else "")
    return type(step).__name__.lower()

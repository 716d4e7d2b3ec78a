"""The emulator: runs one kernel of the kernel IR (``codegen/ir.py``) on the CPU with numpy.

It is the executable definition of the IR's semantics. The CUDA C renderer must agree with it, CI
(which has no GPU) runs every generated GPU kernel through it, and because it also runs CPU kernels
(``block == ()``) it is the reference for the LLVM target's tests.

**Lanes.** One launch is one set of numpy arrays with a row per lane, and every statement runs for
all lanes at once, in lockstep, under a mask of the active lanes. Lanes are numbered
``block * threads_per_block + thread``. Threads are linearised x fastest, then y and z, and blocks
the same way. A CPU kernel's lanes are its work items, from the flattened grid with the last axis
fastest. There are no Python loops over threads. Python loops only run the statements, the trips of
a ``Loop``, and the ranks of duplicate indices in a bfloat16 ``AtomicAdd``.

**Values.** A value is an array of all lanes in its compute dtype: float16 and bfloat16 values are
float32 arrays that hold values already rounded to their type, INDEX is int64, bool is ``np.bool_``,
and other dtypes are themselves. The elementwise primitives call the ufuncs of
``core/numpy_ops.py``, the primitive records' own, so the semantics match the reference interpreter
exactly: Max is IEEE maximum (NaN-propagating, -0 < +0), Mod is fmod, bool Add/Mul are or/and,
int32 wraps. A 16-bit float result is computed in float32 and rounded once per op (bfloat16 to
nearest even). ``cast`` is ``numpy_ops.cast``, the Cast primitive's rule: float->int truncates toward
zero (a NaN is 0, a value past int32's range saturates, as the GPU converts) and ->bool is ``x != 0``.
``Div`` is floor division. The IR only promises ``a >= 0, b > 0`` for it, and there C's ``/`` agrees.
Inactive lanes compute too, but their values are never observed: loads, stores and atomics skip
them, and shuffles and ``Mma`` refuse to read them.

**Storage.** A buffer is a flat 1-d array in the target's storage. On a GPU: float16 as
``np.float16``, bfloat16 as ``np.uint16`` bit patterns, and float32, float64, int32 and bool
(1 byte) as themselves. A CPU kernel keeps bfloat16 in float32 storage. :func:`device_array` and
:func:`host_array` convert. ``run`` checks every array's dtype and shape and updates the arrays in
place.

**Strictness.** The checks below catch lowering bugs that a GPU would hide or make
nondeterministic. Each one raises :class:`EmulatorError`, which names the kernel, the statement (as
:func:`ir.show` prints it), the index and the lane.

- A load, store or atomic at an index outside ``[0, len)`` on an active lane where ``valid`` holds.
- A load, store or atomic whose value dtype is not the buffer's (no implicit conversions), a store
  to an ``"r"`` buffer, or a load from a ``"w"`` one.
- A register reassigned with a different dtype, or read as a ``var`` of another dtype.
- A barrier reached by only part of a block (divergent; undefined on a GPU).
- A shuffle whose source lane is inactive, or in a block whose thread count is not a multiple of
  32. An ``Mma`` or ``LdMatrix`` run by part of a warp.
- A ``WideLoad`` whose address (the buffer array's, plus the index's bytes) is not 16-byte aligned:
  a GPU faults on it (device buffers start 256-byte aligned, ``backends/cuda/arena.py``).
- **Races.** Lockstep execution would hide a missing barrier, so every written buffer and every
  shared array records who last wrote each element and who has read it since, and in which phase
  (a stretch of one block between two barriers). A read and a write of one element by different
  lanes race unless they are in the same block with a barrier between. Threads of different blocks
  never synchronise within a launch. An atomic add counts as a read and a write, but two atomics
  never race with each other. Two plain stores are not reported: the later one in lane and program
  order wins (a GPU keeps an unspecified one), which suits deliberate races such as an error flag
  that every failing thread sets. A write that is lost this way leaves some other element
  unwritten, and the poison there shows it.

**Control flow.** ``If`` narrows the mask. A ``Store`` or ``AtomicAdd`` with ``valid`` is
``if (valid) buffer[index] = value``: its index and value are evaluated, and their loads read, only
where ``valid`` holds. ``Loop`` evaluates ``start``, ``stop`` and ``step`` once, when it is entered
(Python's ``range``; a renderer must not re-evaluate them), and runs trips until no lane is active.
Each lane gets its own trip count, and a zero step on an active lane is an error. ``Assign`` keeps
the old value on inactive lanes. A register declared in a body (a Loop trip or an If) goes out of
scope when that body ends, as in C. ``Barrier`` is a no-op in lockstep apart from the checks above.
Shared memory is one array per block, poisoned with 0xFF bytes (NaN for floats, -1 for int32) at
launch, so that nothing passes by reading zeros.

**Atomics** apply in lane order, one rounding to the buffer's dtype per addition (``np.add.at``; a
loop over the ranks of duplicate indices for bfloat16).

**Mma** is ``mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32``, per warp, with PTX's
fragment layout (:func:`mma_layout`). It computes in float64, where the 16-bit products are exact,
and rounds once to float32. The tensor cores' own accumulation order and intermediate precision are
unspecified by PTX, so they may differ from this in the last bits of float32.

**Async copies** (``cp.async``): an ``AsyncCopy`` reads its source when issued and poisons its
16 bytes of shared memory (recorded as the lane's write); ``AsyncCommit`` makes the lane's copies in
flight a group; ``AsyncWait(n)`` lands every group of the lane but its ``n`` most recent, writing
the values then (as the lane's write, so another lane needs a barrier before reading them). A read
before the wait sees NaN, as a GPU would see some byte of the copy or the old contents. A copy's
addresses must be 16-byte aligned, its count 0 to a 16-byte vector's elements, and only those read.

**LdMatrix** (``ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16``) gathers per warp the four 8x8
matrices whose rows the lanes address (16-byte aligned) and hands each lane its fragment elements
(``ir.LdMatrix``); run by part of a warp it is refused, as ``Mma`` is.
"""

from __future__ import annotations

import numpy as np

from luminal.codegen import ir
from luminal.core import dtype as dt
from luminal.core import numpy_ops

WARP = 32
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_LANE = np.int64(0xFFFFFFFF)  # race records: the lane field of a tag (lane + 1; 0: none; _SEVERAL: several)
_SEVERAL = np.int64(0xFFFFFFFF)
_INVARIANT_LEAVES = frozenset({"const", "param", "thread", "block", "item"})
_VARIANT = frozenset({"var", "load", "shfl_xor"})
_PENDING_READS = 1 << 24  # reads held for lazy recording (of 8-byte positions) before they are folded in
_INVARIANT_BUDGET = 256 << 20  # bytes of lane-invariant values kept across statements (loops reuse them)


class EmulatorError(RuntimeError):
    """A kernel did something undefined or out of bounds while running in the emulator. The message names
    the kernel, the statement (as ``ir.show`` prints it), the index and the lane."""


# storage ------------------------------------------------------------------------------------------

def _bf16_bits(x) -> np.ndarray:
    """float32 values -> bfloat16 bit patterns (round to nearest even; a NaN stays a quiet NaN)."""
    x = np.asarray(x, dtype=np.float32)
    u = (dt.round_bf16(x).view(np.uint32) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        u[nan] |= np.uint16(0x0040)  # a NaN whose payload was in the low half would read as inf
    return u


def _bf16_values(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns -> their float32 values (exact)."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def device_array(a: np.ndarray, dtype: dt.DType) -> np.ndarray:
    """Host values ``a`` (the project's numpy carrier: bfloat16 in float32) as the flat storage a GPU
    buffer of ``dtype`` holds: a fresh 1-d array, bfloat16 as ``np.uint16`` bit patterns."""
    dtype = dt.as_dtype(dtype)
    if dtype is dt.bfloat16:
        return _bf16_bits(np.asarray(a, dtype=np.float32).ravel())
    return np.array(a, dtype=dtype.np).ravel()


def host_array(flat: np.ndarray, dtype: dt.DType, shape) -> np.ndarray:
    """The inverse of :func:`device_array`: the flat storage of a buffer of ``dtype`` as host values of
    ``shape`` (a fresh array; bfloat16 as float32, the project's carrier). A float32 ``flat`` for
    bfloat16 is taken to be a CPU kernel's buffer and copied as it is."""
    dtype = dt.as_dtype(dtype)
    flat = np.asarray(flat)
    if dtype is dt.bfloat16 and flat.dtype == np.uint16:
        out = _bf16_values(flat)
    else:
        out = np.array(flat, dtype=dtype.np)
    return out.reshape(shape)


def _storage(d: dt.DType, gpu: bool) -> np.dtype:
    if d is dt.bfloat16:
        return np.dtype(np.uint16 if gpu else np.float32)
    return np.dtype(d.np)


def _compute(d: dt.DType) -> np.dtype:
    return np.dtype(np.float32) if d in (dt.float16, dt.bfloat16) else np.dtype(d.np)


def _from_storage(raw: np.ndarray, d: dt.DType, gpu: bool) -> np.ndarray:
    if d is dt.float16:
        return raw.astype(np.float32)
    if d is dt.bfloat16:
        return _bf16_values(raw) if gpu else raw.astype(np.float32)
    if d.kind == "b":
        return raw.view(np.uint8) != 0  # poisoned shared memory holds 0xFF bytes
    return raw


def _to_storage(vals: np.ndarray, d: dt.DType, gpu: bool) -> np.ndarray:
    if d is dt.float16:
        return vals.astype(np.float16)
    if d is dt.bfloat16:
        return _bf16_bits(vals) if gpu else dt.round_bf16(vals)
    return vals.astype(d.np, copy=False)


def _round(vals: np.ndarray, d: dt.DType) -> np.ndarray:
    """Values computed in float32 rounded to the 16-bit float ``d`` (other dtypes: unchanged)."""
    if d is dt.float16:
        return np.asarray(vals).astype(np.float16).astype(np.float32)
    if d is dt.bfloat16:
        return dt.round_bf16(vals)
    return vals


def _const(value, d: dt.DType, n: int) -> np.ndarray:
    if d is dt.float16:
        v = np.float32(np.float16(value))
    elif d is dt.bfloat16:
        v = dt.round_bf16(np.float32(value))
    else:
        v = np.asarray(value).astype(_compute(d))
    return np.full(n, v, dtype=_compute(d))


# the mma fragment layout --------------------------------------------------------------------------

def mma_layout() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Where each lane's fragment elements of ``mma.m16n8k16`` (f16/bf16 inputs, f32 accumulators) sit
    in the matrices: ``{"a": (rows, cols), "b": ..., "c": ...}``, each array of shape (32 lanes,
    elements) (a: 8, b: 4, c and d: 4); A is 16x16 (row-major operand), B 16x8 (``.col``), C/D 16x8.

    From the PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type", with
    ``groupID = laneid >> 2`` and ``threadID_in_group = laneid % 4``:

    - A, a0..a7: row = groupID for a_i with ``0 <= i < 2 || 4 <= i < 6``, else groupID + 8;
      col = threadID_in_group * 2 + (i & 1), + 8 for ``i >= 4``.
    - B, b0..b3: row = threadID_in_group * 2 + (i & 1), + 8 for ``i >= 2``; col = groupID.
    - C and D, c0..c3: row = groupID for ``i < 2``, else groupID + 8; col = threadID_in_group * 2 + (i & 1).
    """
    lane = np.arange(WARP)[:, None]
    g, t = lane >> 2, lane % 4
    i8, i4 = np.arange(8)[None, :], np.arange(4)[None, :]
    a_rows = g + 8 * ((i8 >> 1) & 1)
    a_cols = t * 2 + (i8 & 1) + 8 * (i8 >= 4)
    b_rows = t * 2 + (i4 & 1) + 8 * (i4 >= 2)
    b_cols = np.broadcast_to(g, (WARP, 4))
    c_rows = g + 8 * (i4 >= 2)
    c_cols = np.broadcast_to(t * 2 + (i4 & 1), (WARP, 4))
    return {"a": (a_rows, a_cols), "b": (b_rows, np.array(b_cols)), "c": (np.array(c_rows), np.array(c_cols))}


_MMA = mma_layout()


# race records -------------------------------------------------------------------------------------

class _Track:
    """The race records of one written buffer or shared array, per element: the last write's tag and
    whether it was atomic, and the tag of the reads since. A tag is ``phase << 32 | lane + 1``.
    A phase is a stretch of one block between barriers, numbered across the launch. Phase 0 means
    several blocks. The lane field is 0 for no access and ``_SEVERAL`` for several lanes."""

    def __init__(self, size: int):
        self.w = np.zeros(size, np.int64)
        self.wa = np.zeros(size, bool)
        self.r = np.zeros(size, np.int64)
        self.s1 = np.zeros(size, np.int64)  # scratch for finding repeated elements
        self.s2 = np.zeros(size, np.int64)
        self.pending: list = []  # reads not yet folded into ``r``: (positions, (lane fields, blocks, phases))
        self.pending_size = 0


# the run ------------------------------------------------------------------------------------------

def run(kernel: ir.Kernel, buffers: dict[str, np.ndarray], params: dict[str, int] | None = None) -> None:
    """Run ``kernel`` once over flat 1-d arrays ``buffers`` (by Buf name; updated in place)."""
    ir.check(kernel)
    _Run(kernel, buffers, dict(params or {})).go()


class _Run:
    def __init__(self, k: ir.Kernel, buffers: dict, params: dict):
        self.k, self.gpu = k, k.gpu
        self.stmt = None
        missing = [p for p in k.params if p not in params]
        if missing:
            raise self.error(f"no value for parameter(s) {', '.join(missing)}")
        self.params = {p: int(params[p]) for p in k.params}
        grid = [self._dim(g, "grid") for g in k.grid]
        if self.gpu:
            blk = [self._dim(b, "block") for b in k.block]
            self.gdims, self.bdims = (grid + [1, 1, 1])[:3], (blk + [1, 1, 1])[:3]
            self.T = int(np.prod(self.bdims))
            self.nblocks = int(np.prod(self.gdims))
        else:
            self.gdims, self.T = grid, 1
            self.nblocks = int(np.prod(grid)) if grid else 1
        self.n = self.nblocks * self.T
        self.lanes = np.arange(self.n, dtype=np.int64)
        self.lane_block = self.lanes // self.T
        self.ids: dict = {}  # ("thread" | "block" | "item", axis) -> per-lane index, made when first used

        self.bufs: dict[str, np.ndarray] = {}
        self.dtypes: dict[str, dt.DType] = {}
        self.access: dict[str, str] = {}
        self.shared: dict[str, int] = {}
        for b in k.buffers:
            if b.name not in buffers:
                raise self.error(f"no array for buffer {b.name!r}")
            a = buffers[b.name]
            want = _storage(b.dtype, self.gpu)
            if not isinstance(a, np.ndarray) or a.ndim != 1 or a.dtype != want:
                got = f"{a.dtype}[{a.shape}]" if isinstance(a, np.ndarray) else type(a).__name__
                raise self.error(f"buffer {b.name!r} ({b.dtype.name}) needs a flat 1-d {want} array, got {got}")
            if "w" in b.access and not a.flags.writeable:
                raise self.error(f"buffer {b.name!r} is written but its array is read-only")
            self.bufs[b.name], self.dtypes[b.name], self.access[b.name] = a, b.dtype, b.access
        for s in k.shared:
            if s.name in self.bufs:
                raise self.error(f"shared array {s.name!r} has the name of a buffer")
            a = np.empty(self.nblocks * s.size, _storage(s.dtype, self.gpu))
            a.view(np.uint8).fill(0xFF)  # poison: NaN for every float, -1 for int32
            self.bufs[s.name], self.dtypes[s.name], self.access[s.name] = a, s.dtype, "rw"
            self.shared[s.name] = s.size
        self.tracks: dict[str, _Track] = {}
        self.phase = np.arange(1, self.nblocks + 1, dtype=np.int64)  # each block's current phase
        self.phase_block = np.arange(-1, self.nblocks, dtype=np.int64)  # each phase's block (phase 0: none)
        self.lane_phase = self.phase[self.lane_block]
        self.lane_field = self.lanes + 1
        self.in_flight: list = []  # async copies issued, not yet in a group: (lanes, positions, storage values)
        self.groups: list = []  # committed groups of async copies: [lanes (bool per lane), [copies]]
        self.regs: dict[str, tuple] = {}  # name -> (dtype, values)
        self.inv: dict[int, np.ndarray] = {}  # lane-invariant values, kept across statements
        self.inv_bytes = 0

    def index(self, kind: str, axis: int) -> np.ndarray:
        """Every lane's ``thread``, ``block`` or ``item`` index along ``axis``."""
        key = (kind, axis)
        if key not in self.ids:
            if kind == "item":  # the flattened grid, last axis fastest
                inner = int(np.prod(self.gdims[axis + 1:]))
                ids = (self.lanes // inner) % self.gdims[axis] if axis else self.lanes // inner
            else:  # x fastest
                dims = self.bdims if kind == "thread" else self.gdims
                base = self.lanes % self.T if kind == "thread" else self.lane_block
                inner = int(np.prod(dims[:axis]))
                ids = base // inner if inner > 1 else base
                ids = ids % dims[axis] if axis < 2 and dims[axis] < int(np.prod(dims[axis:])) else ids
            self.ids[key] = ids
        return self.ids[key]

    # reporting ------------------------------------------------------------------------------------

    def where(self, lane: int) -> str:
        """Lane ``lane`` in words: its block and thread, or its work item."""
        if lane < 0:
            return "several threads"
        if not self.gpu:
            return f"item ({', '.join(str(int(self.index('item', a)[lane])) for a in range(len(self.gdims)))})"
        nb, nt = max(1, len(self.k.grid)), max(1, len(self.k.block))
        b = ", ".join(str(int(self.index("block", a)[lane])) for a in range(nb))
        t = ", ".join(str(int(self.index("thread", a)[lane])) for a in range(nt))
        return f"block ({b}) thread ({t})"

    def error(self, msg: str, lane: int | None = None) -> EmulatorError:
        where = ""
        if self.stmt is not None:
            out: list = []
            ir._lines([self.stmt], 0, out)  # the statement's first line, as ir.show prints it
            where = f" at `{out[0]}`"
        at = "" if lane is None else f" ({self.where(int(lane))})"
        return EmulatorError(f"kernel {self.k.name}{where}: {msg}{at}")

    def _dim(self, v, what: str) -> int:
        """A launch dimension (an int or an INDEX value of params and constants)."""
        if isinstance(v, (int, np.integer)):
            n = int(v)
        else:
            ops = {"Add": lambda a, b: a + b, "Mul": lambda a, b: a * b, "Div": lambda a, b: a // b,
                   "Mod": lambda a, b: int(np.fmod(a, b)), "Max": max}

            def ev(x):
                if x.op == "const":
                    return int(x.arg)
                if x.op == "param":
                    return self.params[x.arg]
                if x.op in ops:
                    return ops[x.op](*(ev(a) for a in x.args))
                raise self.error(f"{what} dimension {ir.show_value(v)} is not made of params and constants")

            n = ev(v)
        if n < 0:
            raise self.error(f"{what} dimension {n} < 0")
        return n

    # values ---------------------------------------------------------------------------------------

    def _get(self, v, memo):
        r = self.inv.get(id(v))
        return memo.get(id(v)) if r is None else r

    def value(self, root: ir.V, memo: dict, mask: np.ndarray) -> np.ndarray:
        """``root`` for every lane (loads read only on ``mask``); ``memo`` caches within one statement."""
        got = self._get(root, memo)
        if got is not None:
            return got
        stack = [root]
        while stack:
            v = stack[-1]
            if self._get(v, memo) is not None:
                stack.pop()
                continue
            todo = [a for a in v.args if self._get(a, memo) is None]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            r = self._op(v, [self._get(a, memo) for a in v.args], mask)
            invariant = v.op in _INVARIANT_LEAVES or (
                v.op not in _VARIANT and bool(v.args) and all(id(a) in self.inv for a in v.args))
            if invariant and self.inv_bytes + r.nbytes <= _INVARIANT_BUDGET:
                self.inv[id(v)] = r
                self.inv_bytes += r.nbytes
            else:
                memo[id(v)] = r
        return self._get(root, memo)

    def cond(self, v: ir.V, memo: dict, mask: np.ndarray) -> np.ndarray:
        """A condition (an If's, a store's ``valid``): a bool value."""
        if v.dtype is not dt.bool_:
            raise self.error(f"condition {ir.show_value(v)} is {v.dtype.name}, not bool")
        return self.value(v, memo, mask)

    def _op(self, v: ir.V, args: list, mask: np.ndarray) -> np.ndarray:
        op = v.op
        if op == "const":
            return _const(v.arg, v.dtype, self.n)
        if op == "param":
            return np.full(self.n, self.params[v.arg], np.int64)
        if op in ("thread", "block", "item"):
            return self.index(op, v.arg)
        if op == "var":
            if v.arg not in self.regs:
                raise self.error(f"register {v.arg!r} read where it is not assigned")
            d, vals = self.regs[v.arg]
            if d is not v.dtype:
                raise self.error(f"register {v.arg!r} is {d.name}, read as {v.dtype.name}")
            return vals
        if op == "load":
            return self._load(v, args, mask)
        if op == "cast":
            return self._cast(args[0], v.args[0].dtype, v.dtype)
        if op == "shfl_xor":
            return self._shfl(v, args[0], mask)
        if op == "Div":
            return np.floor_divide(args[0], args[1])
        if op == "And":
            return np.logical_and(args[0], args[1])
        if op == "Or":
            return np.logical_or(args[0], args[1])
        if op == "Not":
            return np.logical_not(args[0])
        if op == "Where":
            return numpy_ops.where(*args)
        if op in ir.PRIMITIVE_OPS:
            return _round(numpy_ops.ufunc(op, v.args[0].dtype)(*args), v.dtype)
        raise self.error(f"unknown value op {op!r}")

    @staticmethod
    def _cast(x, src: dt.DType, dst: dt.DType) -> np.ndarray:
        if dst is ir.INDEX:
            return (np.trunc(x) if src.is_float else x).astype(np.int64)
        r = numpy_ops.cast(x, src, dst)  # float16 comes back as float16, bfloat16 rounded in float32
        return r.astype(np.float32) if dst is dt.float16 else r

    def _shfl(self, v: ir.V, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
        self._need_warps("shfl_xor")
        if not 0 <= v.arg < WARP:
            raise self.error(f"shfl_xor lane mask {v.arg} outside [0, {WARP})")
        src = self.lanes ^ v.arg  # blocks hold whole warps, so this stays in the lane's warp
        bad = mask & ~mask[src]
        if bad.any():
            j = int(np.argmax(bad))
            raise self.error(f"shfl_xor reads lane {int(src[j]) % WARP} of the warp, which is inactive", j)
        return x[src]

    def _need_warps(self, what: str):
        if self.T % WARP:
            raise self.error(f"{what} needs whole warps: a block of {self.T} threads is not a multiple of {WARP}")

    # memory ---------------------------------------------------------------------------------------

    def _buffer(self, name: str, d: dt.DType, write: bool, what: str):
        if d is not self.dtypes[name]:
            raise self.error(f"{what} of {d.name} on {name!r}, a {self.dtypes[name].name} buffer")
        if ("w" if write else "r") not in self.access[name]:
            raise self.error(f"{what} on buffer {name!r}, declared {self.access[name]!r}")

    def _positions(self, name: str, idx: np.ndarray, lanes: np.ndarray) -> np.ndarray:
        """Bounds-checked flat positions of ``idx`` on ``lanes`` (shared arrays: in each lane's block)."""
        if idx.dtype.kind not in "iu":
            raise self.error(f"index into {name!r} is {idx.dtype}, not an integer")
        i = idx if len(lanes) == self.n else idx[lanes]
        size = self.shared.get(name, len(self.bufs[name]))
        if i.size and (i.min() < 0 or i.max() >= size):
            j = int(np.argmax((i < 0) | (i >= size)))
            raise self.error(f"index {int(i[j])} out of range for {name!r} of {size} elements", lanes[j])
        if name in self.shared:
            return self.lane_block[lanes] * size + i
        return i

    def _track(self, name: str) -> _Track | None:
        if "w" not in self.access[name]:
            return None  # never written: nothing to race with
        if name not in self.tracks:
            self.tracks[name] = _Track(len(self.bufs[name]))
        return self.tracks[name]

    def _others(self, tags, shared: bool, fl, blocks, now, consider=None) -> np.ndarray:
        """Which accesses (lane fields ``fl``, in ``blocks``, now in phases ``now``) are unordered with the
        recorded ``tags``: another lane's, in another block or in this block's current phase."""
        pp = tags >> 32
        if shared:  # one block: unordered means in the current phase (phase 0 never occurs)
            cand = pp == now
        else:
            pf = tags & _LANE
            cand = (pf != 0) & (pf != fl)
        if consider is not None:
            cand &= consider
        j = np.flatnonzero(cand)
        if j.size:
            pf, pj = tags[j] & _LANE, pp[j]
            ok = (pf == 0) | (pf == fl[j]) | ((self.phase_block[pj] == blocks[j]) & (pj != now[j]))
            cand[j[ok]] = False
        return cand

    def _check(self, name, pos, lanes, tags, shared, who, kind, consider=None):
        bad = self._others(tags, shared, *who, consider)
        if bad.any():
            j = int(np.argmax(bad))
            size = self.shared.get(name)
            p = int(pos[j]) if size is None else int(pos[j]) % size
            f = int(tags[j] & _LANE)
            raise self.error(f"race on {name}[{p}]: {kind} {self.where(f - 1 if f != _SEVERAL else -1)} "
                             "with no barrier between", lanes[j])

    def _repeated(self, tr: _Track, pos: np.ndarray):
        """Which accesses share their element with another access of this statement (None: none do)."""
        k = self.lanes[:len(pos)]
        tr.s1[pos] = k
        lost = tr.s1[pos] != k
        if not lost.any():
            return None
        tr.s2[pos] = 0
        tr.s2[pos[lost]] = 1
        return tr.s2[pos] == 1

    @staticmethod
    def _spread(tr: _Track, pos: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Per access: whether the accesses of its element disagree on ``x`` (int64)."""
        tr.s1[pos] = np.iinfo(np.int64).max
        tr.s2[pos] = np.iinfo(np.int64).min
        np.minimum.at(tr.s1, pos, x)
        np.maximum.at(tr.s2, pos, x)
        return tr.s1[pos] != tr.s2[pos]

    def _tags(self, tr: _Track, shared: bool, pos, who, rep, prev=None, consider=None):
        """The records after these accesses: this lane in this phase, or several lanes (``_SEVERAL``) where
        the element is accessed by several lanes of this statement (``rep``), or by one recorded in
        ``prev`` (where ``consider``) that is unordered with now; phase 0 where several blocks."""
        fl, blocks, now = who
        t = (now << 32) | fl
        if prev is not None:
            other = np.flatnonzero(self._others(prev, shared, fl, blocks, now, consider))
            if other.size:  # unordered and in another phase: another block's, so phase 0
                t[other] = np.where((prev[other] >> 32) == now[other], now[other] << 32, 0) | _SEVERAL
        if rep is not None:
            j = np.flatnonzero(rep)
            t[j] |= _SEVERAL
            if not shared:  # a shared array's element belongs to one block
                several = self._spread(tr, pos[j], blocks[j]) | self._spread(tr, pos[j], t[j] >> 32)
                t[j[several]] = _SEVERAL
        return t

    def _who(self, lanes: np.ndarray):
        """The lanes' (lane fields, blocks, current phases)."""
        if len(lanes) == self.n:
            return self.lane_field, self.lane_block, self.lane_phase
        return lanes + 1, self.lane_block[lanes], self.lane_phase[lanes]

    def _read(self, name: str, pos: np.ndarray, lanes: np.ndarray):
        tr = self._track(name)
        if tr is None:
            return
        who = self._who(lanes)
        self._check(name, pos, lanes, tr.w[pos], name in self.shared, who, "a read of what was written by")
        tr.pending.append((pos, who))  # recorded lazily: a barrier usually makes them moot first
        tr.pending_size += len(pos)
        if tr.pending_size > _PENDING_READS:
            self._fold(name, tr)

    def _fold(self, name: str, tr: _Track):
        """Fold the pending reads into the read records, in order."""
        for pos, who in tr.pending:
            tr.r[pos] = self._tags(tr, name in self.shared, pos, who, self._repeated(tr, pos), tr.r[pos])
        tr.pending.clear()
        tr.pending_size = 0

    def _write(self, name: str, pos: np.ndarray, lanes: np.ndarray, raw: np.ndarray | None):
        """Race checks and records for a store (``raw``: the stored storage values) or an atomic (None)."""
        tr = self._track(name)
        self._fold(name, tr)
        who, shared, atomic = self._who(lanes), name in self.shared, raw is None
        w, wa = tr.w[pos], tr.wa[pos]
        self._check(name, pos, lanes, tr.r[pos], shared, who, "a write after a read by")
        if atomic:  # an atomic reads: it races with another thread's store; stores race only with atomics
            self._check(name, pos, lanes, w, shared, who, "an atomic add after a store by", ~wa)
        else:
            self._check(name, pos, lanes, w, shared, who, "a store after an atomic add by", wa)
        rep = self._repeated(tr, pos)
        tr.w[pos] = self._tags(tr, shared, pos, who, rep, *((w, wa) if atomic else ()))
        tr.wa[pos] = atomic
        tr.r[pos] = 0

    def _load(self, v: ir.V, args: list, mask: np.ndarray) -> np.ndarray:
        name, pad = v.arg
        self._buffer(name, v.dtype, False, "a load")
        if len(args) == 2 and v.args[1].dtype is not dt.bool_:
            raise self.error(f"load's valid {ir.show_value(v.args[1])} is {v.args[1].dtype.name}, not bool")
        m = mask if len(args) == 1 else mask & args[1]
        lanes = self.lanes if m.all() else np.flatnonzero(m)
        if lanes.size:
            pos = self._positions(name, args[0], lanes)
            self._read(name, pos, lanes)
            vals = _from_storage(self.bufs[name][pos], v.dtype, self.gpu)
            if len(lanes) == self.n:
                return vals
        out = _const(pad, v.dtype, self.n)
        if lanes.size:
            out[lanes] = vals
        return out

    def _access(self, s, mask):
        """A Store's or AtomicAdd's (active lanes, positions, values)."""
        memo: dict = {}
        what = "a store" if isinstance(s, ir.Store) else "an atomic add"
        self._buffer(s.buffer, s.value.dtype, True, what)
        m = mask if s.valid is None else mask & self.cond(s.valid, memo, mask)
        idx = self.value(s.index, memo, m)  # as ``if (valid) buffer[index] = value``: loads only where valid
        val = self.value(s.value, memo, m)
        lanes = self.lanes if m.all() else np.flatnonzero(m)
        if not lanes.size:
            return None
        return lanes, self._positions(s.buffer, idx, lanes), val[lanes]

    def _atomic_add(self, name: str, pos: np.ndarray, vals: np.ndarray):
        buf, d = self.bufs[name], self.dtypes[name]
        if d.kind == "b":
            np.logical_or.at(buf, pos, vals)
        elif d is not dt.bfloat16:
            np.add.at(buf, pos, _to_storage(vals, d, self.gpu))  # float16: numpy rounds after every addition
        else:  # one rounding per addition, in lane order: one pass per rank among equal indices
            order = np.argsort(pos, kind="stable")
            sp, sv = pos[order], vals[order]
            k = np.arange(len(sp))
            rank = k - np.maximum.accumulate(np.where(np.r_[True, sp[1:] != sp[:-1]], k, 0))
            for r in range(int(rank.max()) + 1):
                sel = rank == r
                p = sp[sel]
                cur = _from_storage(buf[p], d, self.gpu)
                buf[p] = _to_storage(dt.round_bf16(cur + sv[sel]), d, self.gpu)

    # statements -----------------------------------------------------------------------------------

    def go(self):
        if self.n == 0:
            return
        with np.errstate(all="ignore"):  # inactive lanes compute garbage; IEEE results are the semantics
            self.body(self.k.body, np.ones(self.n, bool))

    def assign(self, name: str, d: dt.DType, val: np.ndarray, mask: np.ndarray, declared: list):
        old = self.regs.get(name)
        if old is None:
            declared.append(name)
            self.regs[name] = (d, val)
            return
        if old[0] is not d:
            raise self.error(f"register {name!r} is {old[0].name}, assigned a {d.name} value")
        self.regs[name] = (d, val if mask.all() else np.where(mask, val, old[1]))

    def body(self, stmts, mask: np.ndarray):
        declared: list = []
        try:
            for s in stmts:
                if not mask.any():
                    return
                self.stmt = s
                if isinstance(s, ir.Assign):
                    self.assign(s.name, s.value.dtype, self.value(s.value, {}, mask), mask, declared)
                elif isinstance(s, ir.Store):
                    got = self._access(s, mask)
                    if got is not None:
                        lanes, pos, vals = got
                        raw = _to_storage(vals, self.dtypes[s.buffer], self.gpu)
                        self._write(s.buffer, pos, lanes, raw)
                        self.bufs[s.buffer][pos] = raw
                elif isinstance(s, ir.AtomicAdd):
                    got = self._access(s, mask)
                    if got is not None:
                        lanes, pos, vals = got
                        self._write(s.buffer, pos, lanes, None)
                        self._atomic_add(s.buffer, pos, vals)
                elif isinstance(s, ir.If):
                    self.body(s.body, mask & self.cond(s.cond, {}, mask))
                elif isinstance(s, ir.Loop):
                    self.loop(s, mask)
                elif isinstance(s, ir.Barrier):
                    self.barrier(mask)
                elif isinstance(s, ir.Mma):
                    self.mma(s, mask, declared)
                elif isinstance(s, ir.WideLoad):
                    self.wide(s, mask, declared)
                elif isinstance(s, ir.AsyncCopy):
                    self.async_copy(s, mask)
                elif isinstance(s, ir.AsyncCommit):
                    self.async_commit(mask)
                elif isinstance(s, ir.AsyncWait):
                    self.async_wait(s.pending, mask)
                elif isinstance(s, ir.LdMatrix):
                    self.ldmatrix(s, mask, declared)
                else:
                    raise self.error(f"not a statement: {s!r}")
        finally:
            for name in declared:
                del self.regs[name]

    def loop(self, s: ir.Loop, mask: np.ndarray):
        memo: dict = {}
        bounds = (s.start, s.stop) + (() if s.step is None else (s.step,))
        for b in bounds:
            if b.dtype is not ir.INDEX:
                raise self.error(f"loop bound {ir.show_value(b)} is {b.dtype.name}, not index")
        start, stop = self.value(s.start, memo, mask), self.value(s.stop, memo, mask)
        if s.step is None:
            step = 1
            go = lambda i: i < stop
        else:
            step = self.value(s.step, memo, mask)
            zero = mask & (step == 0)
            if zero.any():
                raise self.error("loop step 0", int(np.argmax(zero)))
            up = step > 0
            go = lambda i: np.where(up, i < stop, i > stop)
        saved = self.regs.get(s.var)
        i = start
        m = mask & go(i)
        try:
            while m.any():
                self.regs[s.var] = (ir.INDEX, i)
                self.body(s.body, m)
                self.stmt = s
                i = i + step
                m = m & go(i)
        finally:
            if saved is None:
                self.regs.pop(s.var, None)
            else:
                self.regs[s.var] = saved

    def barrier(self, mask: np.ndarray):
        counts = mask.reshape(self.nblocks, self.T).sum(1)
        partial = (counts > 0) & (counts < self.T)
        if partial.any():
            b = int(np.argmax(partial))
            lane = b * self.T + int(np.argmin(mask[b * self.T:(b + 1) * self.T]))
            raise self.error(f"divergent barrier: {int(counts[b])} of the block's {self.T} threads reach it, "
                             "not the one named", lane)
        full = np.flatnonzero(counts == self.T)
        if full.size:  # each block through the barrier starts a new phase
            self.phase[full] = len(self.phase_block) + np.arange(full.size)
            self.phase_block = np.concatenate([self.phase_block, full])
            self.lane_phase = self.phase[self.lane_block]
        for name, tr in self.tracks.items():  # reads before a barrier of every block race with no later write
            if name in self.shared and full.size == self.nblocks:
                tr.pending.clear()
                tr.pending_size = 0

    def wide(self, s: ir.WideLoad, mask: np.ndarray, declared: list):
        """A 16-byte load into ``ir.wide_lanes`` registers: refused (as a GPU faults) where its address
        (the buffer's array's, plus the index's bytes) is not 16-byte aligned."""
        if s.dtype not in ir.WIDE_DTYPES or len(s.d) != ir.wide_lanes(s.dtype):
            raise self.error(f"a wide load is 4 float32 or 8 float16/bfloat16 registers, got {len(s.d)} of "
                             f"{s.dtype.name}")
        self._buffer(s.buffer, s.dtype, False, "a wide load")
        idx = self.value(s.index, {}, mask)
        if idx.dtype.kind not in "iu":
            raise self.error(f"index into {s.buffer!r} is {idx.dtype}, not an integer")
        lanes = self.lanes if mask.all() else np.flatnonzero(mask)
        i = idx if len(lanes) == self.n else idx[lanes]
        self._aligned(s.buffer, i, lanes, "wide load")
        for e, name in enumerate(s.d):
            out = _const(0, s.dtype, self.n)
            if lanes.size:
                pos = self._positions(s.buffer, idx + e, lanes)
                self._read(s.buffer, pos, lanes)
                out[lanes] = _from_storage(self.bufs[s.buffer][pos], s.dtype, self.gpu)
            self.assign(name, s.dtype, out, mask, declared)

    def _aligned(self, name: str, i: np.ndarray, lanes: np.ndarray, what: str):
        """Refuse an access whose address is not 16-byte aligned (a shared array starts aligned)."""
        a = self.bufs[name]
        address = i * a.itemsize + (0 if name in self.shared else a.ctypes.data)
        if (address % 16).any():
            j = int(np.argmax(address % 16 != 0))
            raise self.error(f"{what} of {name!r} at index {int(i[j])}: not 16-byte aligned", lanes[j])

    def async_copy(self, s: ir.AsyncCopy, mask: np.ndarray):
        """Issue a 16-byte copy into shared memory: the source is read now; the destination holds
        poison (NaN) until the copy lands (:meth:`async_wait`), so a read before then gives no value."""
        if s.dtype not in ir.WIDE_DTYPES:
            raise self.error(f"an async copy moves float32, float16 or bfloat16, not {s.dtype.name}")
        self._buffer(s.buffer, s.dtype, False, "an async copy")
        self._buffer(s.shared, s.dtype, True, "an async copy")
        memo: dict = {}
        sidx, idx, count = (self.value(v, memo, mask) for v in (s.sindex, s.index, s.count))
        lanes = self.lanes if mask.all() else np.flatnonzero(mask)
        if not lanes.size:
            return
        w = ir.wide_lanes(s.dtype)
        n = count[lanes]
        if ((n < 0) | (n > w)).any():
            j = int(np.argmax((n < 0) | (n > w)))
            raise self.error(f"async copy of {int(n[j])} elements (0 to {w})", lanes[j])
        self._aligned(s.shared, sidx[lanes], lanes, "async copy into")
        reading = n > 0
        if reading.any():
            self._aligned(s.buffer, idx[lanes[reading]], lanes[reading], "async copy")
        shared = self.bufs[s.shared]
        raw = np.zeros((len(lanes), w), shared.dtype)
        dst = np.empty((len(lanes), w), np.int64)
        poison = np.full(shared.itemsize, 0xFF, np.uint8).view(shared.dtype)[0]
        for e in range(w):
            some = np.flatnonzero(n > e)
            if some.size:
                pos = self._positions(s.buffer, idx + e, lanes[some])
                self._read(s.buffer, pos, lanes[some])
                raw[some, e] = self.bufs[s.buffer][pos]
            dst[:, e] = self._positions(s.shared, sidx + e, lanes)
            self._write(s.shared, dst[:, e], lanes, raw[:, e])
            shared[dst[:, e]] = poison
        self.in_flight.append((s.shared, lanes, dst, raw))

    def async_commit(self, mask: np.ndarray):
        """Each lane's copies in flight become one group of its own."""
        group, rest = [], []
        for name, lanes, dst, raw in self.in_flight:
            mine = mask[lanes]
            if mine.any():
                group.append((name, lanes[mine], dst[mine], raw[mine]))
            if not mine.all():
                rest.append((name, lanes[~mine], dst[~mine], raw[~mine]))
        self.in_flight = rest
        self.groups.append((mask.copy(), group))

    def async_wait(self, pending: int, mask: np.ndarray):
        """Land each lane's groups but its ``pending`` most recent ones: their values written now, by
        the lane (another thread sees them after a barrier)."""
        newer = np.zeros(self.n, np.int64)
        kept = []
        for lanes_of, copies in reversed(self.groups):
            land = lanes_of & mask & (newer >= pending)
            newer += lanes_of
            if land.any():
                left = []
                for name, lanes, dst, raw in copies:
                    now = land[lanes]
                    if now.any():
                        for e in range(dst.shape[1]):
                            self._write(name, dst[now, e], lanes[now], raw[now, e])
                            self.bufs[name][dst[now, e]] = raw[now, e]
                    if not now.all():
                        left.append((name, lanes[~now], dst[~now], raw[~now]))
                lanes_of, copies = lanes_of & ~land, left
            if lanes_of.any():
                kept.append((lanes_of, copies))
        self.groups = kept[::-1]

    def ldmatrix(self, s: ir.LdMatrix, mask: np.ndarray, declared: list):
        """Four 8x8 matrices per warp: lane ``8 i + r`` addresses row ``r`` of matrix ``i``; each lane
        receives two elements of each (``ir.LdMatrix``)."""
        self._need_warps("ldmatrix")
        if s.dtype not in (dt.float16, dt.bfloat16) or len(s.d) != 8:
            raise self.error(f"ldmatrix.x4 gives 8 float16/bfloat16 registers, got {len(s.d)} of {s.dtype.name}")
        self._buffer(s.shared, s.dtype, False, "ldmatrix")
        self._whole_warps(mask, "ldmatrix")
        idx = self.value(s.index, {}, mask)
        lanes = self.lanes if mask.all() else np.flatnonzero(mask)
        if not lanes.size:
            return
        self._aligned(s.shared, idx[lanes], lanes, "ldmatrix row")
        rows = np.empty((len(lanes), 8), np.float32)
        for e in range(8):
            pos = self._positions(s.shared, idx + e, lanes)
            self._read(s.shared, pos, lanes)
            rows[:, e] = _from_storage(self.bufs[s.shared][pos], s.dtype, self.gpu)
        m = rows.reshape(-1, 4, 8, 8)  # (warps, matrix, row, column): the rows as the lanes gave them
        lane = np.arange(WARP)
        g, t = lane // 4, lane % 4
        out = np.empty((m.shape[0], WARP, 8), np.float32)
        for i in range(4):
            for half in range(2):
                r, c = (2 * t + half, g) if s.trans else (g, 2 * t + half)
                out[:, :, 2 * i + half] = m[:, i, r, c]
        out = out.reshape(-1, 8)
        for e, name in enumerate(s.d):
            vals = _const(0, s.dtype, self.n)
            vals[lanes] = out[:, e]
            self.assign(name, s.dtype, vals, mask, declared)

    def _whole_warps(self, mask: np.ndarray, what: str):
        """Refuse a warp-wide operation (``Mma``, ``LdMatrix``) that part of a warp runs."""
        warps = mask.reshape(-1, WARP)
        part = warps.any(1) & ~warps.all(1)
        if part.any():
            w = int(np.argmax(part))
            raise self.error(f"{what} run by part of a warp", w * WARP + int(np.argmin(warps[w])))

    def mma(self, s: ir.Mma, mask: np.ndarray, declared: list):
        self._need_warps("mma")
        if s.dtype not in (dt.float16, dt.bfloat16):
            raise self.error(f"mma of {s.dtype.name} (float16 or bfloat16 only)")
        for xs, want, what in ((s.a, s.dtype, "a"), (s.b, s.dtype, "b"), (s.c, dt.float32, "c")):
            for x in xs:
                if x.dtype is not want:
                    raise self.error(f"mma operand {what} {ir.show_value(x)} is {x.dtype.name}, not {want.name}")
        self._whole_warps(mask, "mma")
        memo: dict = {}
        nw = self.n // WARP

        def frag(xs):  # (warps, 32 lanes, elements) in float64
            return np.stack([self.value(x, memo, mask) for x in xs], -1).astype(np.float64).reshape(nw, WARP, len(xs))

        a = np.zeros((nw, 16, 16))
        b = np.zeros((nw, 16, 8))
        c = np.zeros((nw, 16, 8))
        a[:, _MMA["a"][0], _MMA["a"][1]] = frag(s.a)
        b[:, _MMA["b"][0], _MMA["b"][1]] = frag(s.b)
        c[:, _MMA["c"][0], _MMA["c"][1]] = frag(s.c)
        d = (np.matmul(a, b) + c).astype(np.float32)
        d = d[:, _MMA["c"][0], _MMA["c"][1]].reshape(self.n, 4)
        for i, name in enumerate(s.d):
            self.assign(name, dt.float32, np.ascontiguousarray(d[:, i]), mask, declared)

"""The compiled CPU backend: runs a kernel graph with numpy as a flat list of precomputed calls.

For each binding of the symbolic dims a :class:`Binding` allocates every buffer once (temps in the
memory plan's slots), precomputes every view as a numpy strided array over those buffers and lowers
every kernel (``lowering.py``) to ``(function, args)`` calls with ``out=`` arguments. A run is then
``for f, args in calls: f(*args)``: no graph walking, no allocation on the hot path. The kernel
graph's calls of rolled loop bodies are expanded into their kernels first (once per program).

Caller arrays (inputs, states, random draws) are read in place, not copied: the calls that read
them hold :class:`InputView` placeholders, resolved into numpy views of the caller's array and
patched into those calls only when a name's array object differs from the previous run's (a
State's array stays the same object across steps, so in steady state nothing is rebuilt).
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict

import numpy as np

from luminal.backends.cpu import blas, layout
from luminal.backends.cpu.exprs import rewrite, shape_of, topo
from luminal.backends.cpu.gemm import Strided
from luminal.backends.cpu.lowering import lower
from luminal.backends.cpu.parallel import Split, split_rows, thread_count
from luminal.core import numpy_ops as ops
from luminal.core.gc_paused import gc_paused
from luminal.core.kernel_graph import MemoryPlan, dims_needed, expand_calls
from luminal.core.symbolic import evaluate, prod
from luminal.core.view import contiguous_strides

CALLER_KINDS = ("input", "state", "random")
MAX_BINDINGS = 8  # bindings kept per program (each holds all of its buffers)
_NO_CONTEXT = contextlib.nullcontext()


def storage_itemsize(dtype) -> int:
    """Bytes per element as stored (numpy keeps bfloat16 in float32)."""
    return dtype.np.itemsize


class CpuProgram:
    """``prog(arrays, env) -> (outputs, updates)``: ``arrays`` maps every input/state/random buffer's
    name to its array, ``env`` binds the symbolic dims. ``outputs`` are fresh C-contiguous arrays
    (the caller keeps them); ``updates`` are the values for ``kg.updates`` in order, possibly views
    of internal buffers that the next run overwrites: copy them right away."""

    def __init__(self, kg, plan: MemoryPlan):
        self.kg, self.plan = kg, plan
        self.dims = tuple(kg.dims) or dims_needed(kg)
        self._bindings: OrderedDict = OrderedDict()
        self._kernels: list | None = None  # kg's kernels with the calls expanded, at the first binding

    def __call__(self, arrays: dict, env: dict) -> tuple[list, list]:
        try:
            key = tuple(env[d] for d in self.dims)
        except KeyError as e:
            raise ValueError(f"symbolic dim {e.args[0]!r} has no value bound") from None
        b = self._bindings.get(key)
        if b is None:
            with gc_paused():  # laying out a run allocates per kernel and frees next to nothing
                if self._kernels is None:
                    self._kernels = expand_calls(self.kg.kernels)
                b = Binding(self.kg, self._kernels, self.plan, dict(zip(self.dims, key)))
            self._bindings[key] = b
            if len(self._bindings) > MAX_BINDINGS:
                self._bindings.popitem(last=False)
        else:
            self._bindings.move_to_end(key)
        return b.run(arrays)


class InputView:
    """A strided view over a caller array, known by shape and strides before the array is."""

    __slots__ = ("name", "shape", "dtype", "strides", "offset", "value")

    def __init__(self, name, shape, dtype, strides, offset):
        self.name, self.shape, self.dtype = name, shape, dtype
        self.strides, self.offset, self.value = strides, offset, None  # bytes

    def resolve(self, arr: np.ndarray) -> np.ndarray:
        if any(n == 0 for n in self.shape):
            return np.empty(self.shape, self.dtype)
        return np.ndarray(self.shape, self.dtype, arr, self.offset, self.strides)


class Binding:
    """Everything about one binding of the symbolic dims: the arrays, the views and the calls.
    ``kernels``: the kernel graph's, calls expanded (``kernel_graph.expand_calls``)."""

    def __init__(self, kg, kernels, plan: MemoryPlan, env: dict):
        self.env = env
        self.calls: list = []
        self._pool: dict = {}  # (shape, dtype) -> free scratch arrays
        self._taken: dict = {}  # id -> scratch taken by the kernel being lowered
        self._loads: dict = {}  # (buffer id, its writes so far, view) -> the value a kernel reads
        self._writes: dict = {}  # buffer id -> kernels lowered so far that write it (a body's scratch: many)
        self._arrays: dict = {}  # buffer id -> array, for every buffer but the caller's
        self._caller: dict = {}  # name -> (shape, np dtype) of each caller array
        self._refs: dict = {}  # name -> [InputView]
        self._last: dict = {}  # name -> the array the views were last resolved over
        self._perm: dict = {}  # buffer id -> axis order of its storage, for the buffers stored permuted
        self._flat: dict = {}  # buffer id -> the buffer's storage as a 1-d array
        self._allocate(kg, plan, self._layouts(kg, kernels))
        self._allocate_parts(kernels)
        self._alias = self._in_place(kg, kernels)  # temp id -> name of the state array that holds it
        self._written = set(self._alias.values())  # the states written in place
        writes = self._writes
        for k in kernels:
            lower(k, self)
            for b, _ in k.outputs:
                writes[b.id] = writes.get(b.id, 0) + 1
        self.calls = split_rows(self.calls, self, thread_count())
        self._threaded = any(isinstance(f, Split) for f, _ in self.calls)
        self.out_calls = [self._output(buf, v) for buf, v in kg.outputs]
        self.up_calls = [self._update(buf, v) for _, buf, v in kg.updates]
        self._deps = self._index_input_views()

    # running --------------------------------------------------------------------------------------
    def run(self, arrays: dict) -> tuple[list, list]:
        last = self._last
        changed = [n for n in self._caller if arrays[n] is not last.get(n)]
        if changed:
            self._rebind(changed, arrays)
        with np.errstate(all="ignore"), blas.single_threaded() if self._threaded else _NO_CONTEXT:
            for f, args in self.calls:
                f(*args)
            outs = [f(*args) for f, args in self.out_calls]
        return outs, [f(*args) for f, args in self.up_calls]

    def _rebind(self, names, arrays) -> None:
        written = self._written
        if written and any(n in written for n in names):  # a new state array: anything may overlap it now
            names = list(dict.fromkeys([*names, *self._caller]))
        clash = _overlapping(names, written, arrays) if written else set()
        new = {}
        for n in names:  # check every array before changing anything
            a = arrays[n]
            shape, dtype = self._caller[n]
            arr = a if isinstance(a, np.ndarray) and a.dtype == dtype and a.flags.c_contiguous and n not in clash \
                else np.array(a, dtype, order="C")
            if arr.shape != shape:
                raise ValueError(f"array {n!r} has shape {arr.shape}, expected {shape}")
            new[n] = arr
        for n, arr in new.items():
            self._last[n] = arrays[n] if arr is arrays[n] else None  # a converted copy is redone every run
            for ref in self._refs.get(n, ()):
                ref.value = ref.resolve(arr)
        seen = set()
        for n in names:
            for lst, i, (f, args) in self._deps.get(n, ()):
                if (id(lst), i) not in seen:
                    seen.add((id(lst), i))
                    lst[i] = (f, tuple(x.value if type(x) is InputView else x for x in args))

    def _index_input_views(self) -> dict:
        deps: dict = {}
        parts = [p for f, _ in self.calls if isinstance(f, Split) for p in f.parts]
        for lst in (self.calls, self.out_calls, self.up_calls, *parts):
            for i, (f, args) in enumerate(lst):
                for n in {x.name for x in args if type(x) is InputView}:
                    deps.setdefault(n, []).append((lst, i, (f, args)))
        return deps

    # allocation -----------------------------------------------------------------------------------
    def _layouts(self, kg, kernels) -> dict:
        """{buffer id: storage axis order} for GEMM results whose readers walk them permuted. (A
        body's scratch is read by every call through the same view objects: each distinct view
        is looked at once, weighted by how many times it is read, and each buffer decided once.)"""
        readers: dict = {}  # buffer id -> {id(view): [view, reads]}
        reads = [(buf, v) for k in kernels for buf, v in k.inputs + k.epilogue_inputs]
        for buf, v in reads + kg.outputs + [(buf, v) for _, buf, v in kg.updates]:
            seen = readers.setdefault(buf.id, {})
            got = seen.get(id(v))
            if got is None:
                seen[id(v)] = [v, 1]
            else:
                got[1] += 1
        perms: dict = {}
        decided: set = set()
        for k in kernels:
            gemm = k.kind == "matmul" and all(v.mask is None for _, v in k.inputs)
            if not gemm:
                continue
            shape = tuple(d for i, d in enumerate(self.shape(k.domain)) if i not in k.axes)
            buf = next((b for b, e in k.outputs if e.op == "Acc" and b.dtype is k.acc_dtype), None)
            if buf is None or buf.id in decided or buf.kind != "temp" or buf.base is not None \
                    or self.shape(buf.shape) != shape or 0 in shape:
                continue
            decided.add(buf.id)
            views = [(self._valid_part(v), n) for v, n in readers.get(buf.id, {}).values()]
            order = layout.preferred_order([(v, n) for v, n in views if v is not None], shape)
            if order is not None:
                perms[buf.id] = order
        return perms

    def _in_place(self, kg, kernels) -> dict:
        """{temp id: state name} for the new values of states that an elementwise kernel can write
        straight into the state's array, which saves the caller's copy.

        Safe when nothing reads the state's old value afterwards (no later kernel, output or update;
        within the writing kernel, every read comes before the write) and no kernel that can fail
        at run time (gather, scatter) comes after it: a failed run still leaves the states as they were."""
        ks = kernels
        writer = {b.id: i for i, k in enumerate(ks) for b, _ in k.outputs}
        last_read: dict = {}
        for i, k in enumerate(ks):
            for b, _ in list(k.inputs) + list(k.epilogue_inputs):
                last_read[b.id] = i
        read_at_end = {b.id for b, _ in kg.outputs} | {b.id for _, b, _ in kg.updates}
        last_fallible = max((i for i, k in enumerate(ks) if k.kind in ("gather", "scatter_add")), default=-1)
        states = {b.name: b for b in kg.buffers if b.kind == "state"}
        alias = {}
        for name, t, view in kg.updates:
            st, i = states.get(name), writer.get(t.id)
            if st is None or t.kind != "temp" or i is None or ks[i].kind != "elementwise" or i < last_fallible:
                continue
            if t.dtype is not st.dtype or self.shape(t.shape) != self.shape(st.shape) or \
                    tuple(view.shape) != tuple(t.shape) or not view.is_contiguous():
                continue
            if last_read.get(st.id, -1) <= i and st.id not in read_at_end and _reads_before_write(ks[i], st, t):
                alias[t.id] = name
        return alias

    def _valid_part(self, view) -> Strided | None:
        """The part of ``view`` that reads the buffer (its valid box), or None when it reads nothing."""
        shape, strides, offset, box = ops.bound_view(view, self.env)
        if box is not None:
            inner = ops.inner_box(strides, offset, box)
            if inner is None:
                return None
            shape, offset = inner
        return Strided(shape, strides, offset)

    def _allocate(self, kg, plan: MemoryPlan, perms: dict) -> None:
        slots = []
        for nbytes in plan.slot_bytes(self.env, storage_itemsize):
            slots.append(np.empty(-(-nbytes // 8), np.float64).view(np.uint8))  # 8-byte aligned raw bytes
        for buf in kg.buffers + [b for r in kg.bodies() for b in r.scratch]:
            shape = self.shape(buf.shape)
            dtype = buf.dtype.np
            if buf.kind in CALLER_KINDS:
                self._caller[buf.name] = (shape, dtype)
            elif buf.kind == "const":
                self._arrays[buf.id] = np.ascontiguousarray(buf.value, dtype).reshape(shape)
            elif buf.kind == "iota":
                self._arrays[buf.id] = np.arange(shape[0], dtype=np.int32)
            elif buf.id in plan.slot_of:
                raw = slots[plan.slot_of[buf.id]]
                flat = raw[:prod(shape) * dtype.itemsize].view(dtype)
                perm = perms.get(buf.id)
                if perm is None:
                    self._arrays[buf.id] = flat.reshape(shape)
                else:  # stored in axis order ``perm``; the array is the logical view of that storage
                    self._perm[buf.id] = perm
                    phys = flat.reshape(tuple(shape[a] for a in perm))
                    self._arrays[buf.id] = phys.transpose(tuple(np.argsort(perm)))
                self._flat[buf.id] = flat
            else:  # a temp no kernel writes (the plan skips it): zeros of its own
                self._arrays[buf.id] = np.zeros(shape, dtype)
                self._flat[buf.id] = self._arrays[buf.id].reshape(-1)

    def _allocate_parts(self, kernels) -> None:
        """The parts of packs (``Buffer.base``, made by ``expand_calls``): views of their pack's storage
        (a part is written by a kernel before any kernel reads it)."""
        for k in kernels:
            for buf, _ in k.outputs:
                if buf.base is not None and buf.id not in self._flat:
                    shape = self.shape(buf.shape)
                    start = evaluate(buf.offset, self.env)
                    flat = self._flat[buf.base.id][start:start + prod(shape)]
                    self._flat[buf.id], self._arrays[buf.id] = flat, flat.reshape(shape)

    # what lowering uses ---------------------------------------------------------------------------
    def shape(self, dims) -> tuple:
        return tuple(evaluate(d, self.env) for d in dims)

    def array(self, buf) -> np.ndarray:
        """The (writable) array of a buffer the program owns (a state's own array, for a new state
        value written in place)."""
        if buf.id in self._alias:
            shape, dtype = self._caller[self._alias[buf.id]]
            return self.caller_view(self._alias[buf.id], shape, dtype, _byte_strides(shape, dtype), 0)
        return self._arrays[buf.id]

    def strided_view(self, view) -> Strided:
        shape, strides, offset, box = ops.bound_view(view, self.env)
        assert box is None, "strided_view of a masked view"
        return Strided(shape, strides, offset)

    def storage(self, buf, shape) -> tuple:
        """``(flat storage, element stride of each axis)`` of a temp buffer seen with ``shape``."""
        perm = self._perm.get(buf.id)
        strides = contiguous_strides(shape) if perm is None else layout.physical_strides(shape, perm)
        return self._flat[buf.id], strides

    def view(self, buf, v: Strided):
        """A read-only view ``v`` of a buffer (an :class:`InputView` for caller arrays), bounds-checked."""
        return self.storage_view(buf, self.locate(buf, v))

    def locate(self, buf, v: Strided) -> Strided:
        """``v`` (over the buffer's logical layout) as a view of its storage."""
        if buf.id not in self._perm:
            return v
        out = layout.remap(v, self._arrays[buf.id].shape, self._perm[buf.id])
        assert out is not None, "a reader of a permuted buffer does not remap (checked when choosing)"
        return out

    def storage_view(self, buf, v: Strided):
        """A read-only view ``v`` of a buffer's storage, bounds-checked."""
        if buf.id in self._flat and buf.id not in self._alias:
            return ops.strided(self._flat[buf.id], v.shape, v.strides, v.offset)
        if buf.kind not in CALLER_KINDS and buf.id not in self._alias:  # const, iota
            return ops.strided(self._arrays[buf.id].reshape(-1), v.shape, v.strides, v.offset)
        name = self._alias.get(buf.id, buf.name)
        shape, dtype = self._caller[name]
        if all(n != 0 for n in v.shape):
            ops.check_bounds(v.shape, v.strides, v.offset, prod(shape))
        item = dtype.itemsize
        return self.caller_view(name, v.shape, dtype, tuple(s * item for s in v.strides), v.offset * item)

    def over(self, flat: np.ndarray, v: Strided) -> np.ndarray:
        """A writable view ``v`` of a flat array the program owns."""
        item = flat.itemsize
        return np.ndarray(v.shape, flat.dtype, flat, v.offset * item, tuple(s * item for s in v.strides))

    def load(self, buf, view):
        """What a kernel reads through ``view``: a strided view, or for a masked view a dedicated
        array whose pad is filled now and whose valid box is copied on every run (by the first
        kernel that reads it: later readers share the copy until a kernel writes the buffer again,
        as every call of a body writes its scratch)."""
        key = (buf.id, self._writes.get(buf.id, 0), view)
        if key in self._loads:
            return self._loads[key]
        shape, strides, offset, box = ops.bound_view(view, self.env)
        if box is None:
            value = self.view(buf, Strided(shape, strides, offset))
        else:
            value = np.full(shape, view.pad, buf.dtype.np)
            inner = ops.inner_box(strides, offset, box)
            if inner is not None:
                src = self.view(buf, Strided(inner[0], strides, inner[1]))
                self.calls.append((np.copyto, (value[tuple(slice(lo, hi) for lo, hi in box)], src)))
        self._loads[key] = value
        return value

    def regroup(self, x, shape):
        """``x`` reshaped to ``shape`` without a copy, or None when its strides do not allow it."""
        if isinstance(x, np.ndarray):
            try:
                return np.reshape(x, shape, copy=False)
            except ValueError:
                return None
        probe = np.lib.stride_tricks.as_strided(np.empty(1, x.dtype), x.shape, x.strides)  # strides only
        try:
            strides = np.reshape(probe, shape, copy=False).strides
        except ValueError:
            return None
        return self.caller_view(x.name, shape, x.dtype, strides, x.offset)

    def transpose(self, x, perm):
        """``x`` with its axes in order ``perm`` (a scalar unchanged: the value of an expression of
        scalars alone, which broadcasts to any shape, is 0-d)."""
        if isinstance(x, np.ndarray):
            return x.transpose(perm) if x.ndim else x
        if not isinstance(x, InputView):
            return x
        return self.caller_view(x.name, tuple(x.shape[a] for a in perm), x.dtype, tuple(x.strides[a] for a in perm),
                                x.offset)

    def take(self, x, index: dict):
        """``x`` with the axes in ``index`` fixed at the given positions (and removed)."""
        if isinstance(x, np.ndarray):
            return x[tuple(index.get(i, slice(None)) for i in range(x.ndim)) + (Ellipsis,)]  # a view, even 0-d
        keep = [i for i in range(len(x.shape)) if i not in index]
        return self.caller_view(x.name, tuple(x.shape[i] for i in keep), x.dtype, tuple(x.strides[i] for i in keep),
                                x.offset + sum(j * x.strides[i] for i, j in index.items()))

    def compact(self, v):
        """``v`` read with size 1 along the axes it broadcasts along (stride 0)."""
        strides = getattr(v, "strides", None)
        if not strides or all(s != 0 or n <= 1 for n, s in zip(v.shape, strides)):
            return v
        if isinstance(v, np.ndarray):
            return v[tuple(slice(0, 1) if s == 0 else slice(None) for s in strides)]
        shape = tuple(1 if s == 0 else n for n, s in zip(v.shape, strides))
        return self.caller_view(v.name, shape, v.dtype, v.strides, v.offset)

    def expand(self, v, shape):
        """A compact ``v`` broadcast (stride 0) back to ``shape``."""
        shape = tuple(shape)
        if shape_of(v) == shape:
            return v
        if isinstance(v, InputView):
            strides = tuple(0 if n != m else s for n, m, s in zip(v.shape, shape, v.strides))
            return self.caller_view(v.name, shape, v.dtype, strides, v.offset)
        return np.broadcast_to(v, shape)

    def caller_view(self, name, shape, dtype, strides, offset) -> InputView:
        """A view (byte ``strides`` and ``offset``) of the caller array ``name``, resolved on every rebind."""
        ref = InputView(name, tuple(shape), dtype, tuple(strides), offset)
        self._refs.setdefault(name, []).append(ref)
        return ref

    def scratch(self, shape, dtype) -> np.ndarray:
        """A scratch array, the kernel's until it is released or the kernel ends."""
        free = self._pool.get((tuple(shape), np.dtype(dtype)))
        arr = free.pop() if free else np.empty(shape, dtype)
        self._taken[id(arr)] = arr
        return arr

    def release(self, arr: np.ndarray) -> None:
        del self._taken[id(arr)]
        self._pool.setdefault((arr.shape, arr.dtype), []).append(arr)

    def end_kernel(self) -> None:
        for arr in list(self._taken.values()):
            self.release(arr)

    # results --------------------------------------------------------------------------------------
    def _output(self, buf, view):
        shape, strides, offset, box = ops.bound_view(view, self.env)
        if box is None:
            return _fresh, (self.view(buf, Strided(shape, strides, offset)),)
        inner = ops.inner_box(strides, offset, box)
        src = None if inner is None else self.view(buf, Strided(inner[0], strides, inner[1]))
        slices = tuple(slice(lo, hi) for lo, hi in box)
        return _fresh_masked, (shape, view.pad, buf.dtype.np, slices, src)

    def _update(self, buf, view):
        if buf.kind in CALLER_KINDS:  # another state's value from before the run: copy it now
            return self._output(buf, view)
        value = self.load(buf, view)
        return _same, (value,)


def _overlapping(names, written, arrays) -> set:
    """The ``names`` whose arrays share memory with a state array the run writes in place (other than
    their own): they are read from a private copy, so that every read sees the values from before
    the run. Arrays of distinct allocations never overlap, so only those with a common base are
    compared."""
    roots = {}
    for w in written:
        roots.setdefault(_root(arrays[w]), []).append(w)
    out = set()
    for n in names:
        a = arrays[n]
        for w in roots.get(_root(a), ()):
            if w != n and np.may_share_memory(a, arrays[w]):
                out.add(n)
    return out


def _root(a) -> int:
    """Identity of the allocation behind an array (the end of its ``base`` chain)."""
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return id(a)


def _fresh(x) -> np.ndarray:
    return np.array(x, order="C")


def _fresh_masked(shape, pad, dtype, slices, src) -> np.ndarray:
    out = np.full(shape, pad, dtype)
    if src is not None:
        out[slices] = src
    return out


def _same(x):
    return x


def _byte_strides(shape, dtype) -> tuple:
    return tuple(s * dtype.itemsize for s in contiguous_strides(shape))


def _reads_before_write(k, st, t) -> bool:
    """In elementwise kernel ``k`` (emitted in ``topo`` order of its outputs), every node reading
    buffer ``st`` comes before the node writing ``t``, or is that node (numpy ufuncs handle an output
    overlapping an input; the branch-free ``where`` does not). A Copy or Reshape of a load is a view
    of the buffer, not a read: the node computing from it reads the buffer."""
    roots = rewrite([(e, b) for b, e in k.outputs])  # as the emitter rewrites them
    order = topo([e for e, _ in roots])
    root = next(e for e, b in roots if b is t)
    slots = {i for i, (b, _) in enumerate(k.inputs) if b is st}
    views = set()  # ids of the exprs whose value is a view of ``st``
    for e in order:
        if (e.op == "Load" and e.arg in slots) or (e.op in ("Copy", "Reshape") and id(e.args[0]) in views):
            views.add(id(e))
    reads = [j for j, e in enumerate(order) if e.op not in ("Copy", "Reshape") and any(id(a) in views for a in e.args)]
    if id(root) in views:  # the root is the old value itself, copied in place: a read at the root
        reads.append(order.index(root))
    last, at = max(reads, default=-1), order.index(root)
    return last < at or (last == at and root.op != "Where")

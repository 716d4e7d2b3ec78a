"""The compiled CPU backend: runs a kernel graph as a short list of precomputed calls, most of them
one call of generated code.

For each binding of the symbolic dims a :class:`Binding` allocates every buffer once (temps in the
memory plan's slots) and lowers every kernel (``lowering.py``): elementwise, reduce, gather and
scatter_add kernels, and matmul epilogues, to kernels of the IR (``codegen/cpu.py``), all of a
binding's linked into one LLVM engine (``codegen/llvm.py``); GEMMs to BLAS. The kernels' code is
generic in the symbolic dims (sizes laid out as ``DimValue`` values become kernel parameters) and made
once per program for every binding and every trip of a rolled body that places its buffers alike
(``lowering._generate``'s memo): a new binding compiles nothing it has compiled before. That makes
``steps``, the binding's schedule as typed data (``steps.py``): a generated kernel's call with a
prebuilt array of buffer pointers and of its dims' values (a large one cut along its first grid axis
over the backend's threads: ctypes releases the GIL), a GEMM, a copy, an index check. What a run
executes is ``_exec``: the steps with each stretch of native ones made one call of the generated
driver (``driver.py``: kernels and cblas GEMMs in order, in native code), so a run is
``for f, args in _exec: f(*args)`` over a handful of calls: no graph walking, no allocation on the
hot path; :meth:`Binding.run_steps` runs the same steps from Python instead. The kernel graph's calls
of rolled loop bodies are expanded into their kernels first (once per program).

Caller arrays (inputs, states, random draws) are read in place, not copied: the numpy calls that
read them hold :class:`InputView` placeholders, the generated kernels a slot of their pointer array
and the driver's GEMMs a cell, all patched only when a name's array object differs from the previous
run's (a State's array stays the same object across steps, so in steady state nothing is rebuilt).
"""
from __future__ import annotations

import contextlib
import ctypes
import time
from collections import OrderedDict

import numpy as np
from tqdm import tqdm

from luminal.backends.cpu import blas, driver, layout, steps, tune
from luminal.backends.cpu.fold import fold_batch_sums
from luminal.backends.cpu.gemm import Strided, classify, in_memory_order
from luminal.backends.cpu.lowering import lower
from luminal.backends.cpu.parallel import Split, split_rows, thread_count
from luminal.backends.cpu.steps import Copy, InputView, Kernel
from luminal.codegen import ir, llvm
from luminal.codegen.lower import Placed, index_value
from luminal.core import numpy_ops as ops
from luminal.core.gc_paused import gc_paused
from luminal.core.interrupts import interruptible
from luminal.core.kernel_graph import MemoryPlan, dims_needed, expand_calls
from luminal.core.symbolic import evaluate, prod, tracked
from luminal.core.view import contiguous_strides

CALLER_KINDS = ("input", "state", "random")
# kernel kinds that write any storage order (generated code through strides, BLAS through its layout)
_GENERATED = frozenset({"elementwise", "reduce", "matmul"})
MAX_BINDINGS = 8  # bindings kept per program (each holds all of its buffers)
# A generated kernel is cut over threads when its estimated time is this long or more (handing the
# work to another thread and back costs tens of microseconds on a busy 2-core machine); the estimate
# counts the memory accesses of its work items and its transcendental functions (tens of operations each)
SPLIT_NS = 100_000
# Our threads run a program only when its kernels worth cutting add up to this much: once they run,
# BLAS runs on one thread and the GEMMs are cut over ours, which on a small program (the MNIST MLP
# step: 0.3 ms of kernels to cut) cost more than the kernels gain (measured: 1.43 ms per step with our
# threads, 0.95 ms with BLAS's own threads for the GEMMs and the kernels on one)
OWN_THREADS_NS = 1_000_000
NS_PER_ACCESS = 0.3
# ns per element of the operations that cost more than an access: Exp2/Log2 are inline polynomials
# (codegen/llvm.py), Sin and a float Mod are libm calls
_CALLS = {"Exp2": 1.0, "Log2": 1.0, "Sin": 4.0, "Mod": 4.0}
_NO_CONTEXT = contextlib.nullcontext()
_NONE = frozenset()
_NATIVE = (llvm.CFUNC, driver.DRIVER)  # calls that run generated code only (and BLAS, the driver's)


def storage_itemsize(dtype) -> int:
    """Bytes per element as stored (numpy keeps bfloat16 in float32)."""
    return dtype.np.itemsize


class CpuProgram:
    """``prog(arrays, env) -> (outputs, updates)``: ``arrays`` maps every input/state/random buffer's
    name to its array, ``env`` binds the symbolic dims. ``outputs`` are fresh C-contiguous arrays
    (the caller keeps them); ``updates`` are the values for ``kg.updates`` in order, possibly views
    of internal buffers that the next run overwrites: copy them right away.

    ``search``: lay each new binding out under up to this many :class:`~luminal.backends.cpu.tune.Choices`
    and keep the fastest on its first call's arrays (``tune.py``; 0 or 1: the cost models' choices).
    Every new binding is searched: a program whose dims take many values pays it at each."""

    def __init__(self, kg, plan: MemoryPlan, search: int = 0):
        self.kg, self.plan = fold_batch_sums(kg), plan
        self.dims = tuple(kg.dims) or dims_needed(kg)
        self.search = search
        self.searches: OrderedDict = OrderedDict()  # binding key -> its tune.Search, for the bindings kept
        self._bindings: OrderedDict = OrderedDict()
        self._kernels: list | None = None  # kg's kernels with the calls expanded, at the first binding
        self._memo: dict = {}  # generated kernels by template and placements, for every binding (lowering.py)
        # what laying bindings out cost (``_count``): bindings, seconds, calls of generated code, kernels
        # generated and reused (``lowering._generate``), LLVM objects compiled and found in a cache
        self.codegen = dict.fromkeys(("bindings", "seconds", "calls", "kernels", "reused", "compiled", "cached"), 0)
        self._recent: tuple = (None, None)  # (key, binding) of the last call: the newest in _bindings

    _flat = False  # return one list, the outputs then the updates (the backend protocol's ``_Run``)

    def __call__(self, arrays: dict, env: dict) -> tuple[list, list]:
        b = self._recent[1]
        if b is None or self.dims:  # (a program without symbolic dims has one binding: no look-up)
            b = self.binding(env, arrays)
        results = b.run(arrays)
        if self._flat:
            return results
        n = len(b.out_calls)
        return results[:n], results[n:]

    def binding(self, env: dict, arrays: dict | None = None) -> Binding:
        """The :class:`Binding` of ``env``'s dims, laid out at the first call that binds them (under
        ``search``, the fastest layout on that call's ``arrays``). Bindings are kept most recently used
        last; a call with the dims of the call before finds its binding there already (nothing to move)."""
        key = ()
        if self.dims:
            try:
                key = tuple([env[d] for d in self.dims])
            except KeyError as e:
                raise ValueError(f"symbolic dim {e.args[0]!r} has no value bound") from None
        recent = self._recent
        if key == recent[0]:
            return recent[1]
        b = self._bindings.get(key)
        if b is None:
            t0, before = time.perf_counter(), dict(llvm.STATS)
            # laying out a run allocates per kernel and frees next to nothing; it writes nothing a caller
            # sees (``search`` times on copies), so a Ctrl-C during its code generation acts at once
            # even inside a train step's deferred block (``core/interrupts.py``)
            with gc_paused(), interruptible():
                if self._kernels is None:
                    self._kernels = expand_calls(self.kg.kernels)
                bound = dict(zip(self.dims, key))
                if self.search > 1 and arrays is not None:
                    b, self.searches[key] = tune.search(
                        lambda c: Binding(self.kg, self._kernels, self.plan, bound, c, self._memo), arrays,
                        self.search, bound)
                else:
                    b = Binding(self.kg, self._kernels, self.plan, bound, memo=self._memo)
            self._count(b, time.perf_counter() - t0, before)
            self._bindings[key] = b
            if len(self._bindings) > MAX_BINDINGS:
                self.searches.pop(self._bindings.popitem(last=False)[0], None)
        else:
            self._bindings.move_to_end(key)
        self._recent = (key, b)
        return b

    def prepare(self, env: dict) -> None:
        """Lay the program out for the binding ``env`` now (its code generated and compiled), so that
        the first call with those dims only runs."""
        self.binding(env)

    def _count(self, b: Binding, seconds: float, before: dict) -> None:
        """Add a new binding's layout to ``codegen``, what the compile report's code generation stage says."""
        c = self.codegen
        c["bindings"] += 1
        c["seconds"] += seconds
        c["calls"] += len(b._gen)
        for k in ("kernels", "reused"):
            c[k] += b.made[k]
        c["compiled"] += llvm.STATS["compiled"] - before["compiled"]
        c["cached"] += llvm.STATS["reused"] - before["reused"]

    def describe(self) -> str:
        """For ``report(code=True)``: what ``search`` timed for each binding kept, and what it chose."""
        if not self.searches:
            when = "at a new binding's first call" if self.search > 1 else "with search=2 or more"
            return f"cpu: nothing timed (search={self.search}; layouts are timed {when})"
        return "\n".join(str(s) for s in self.searches.values())


class Binding:
    """Everything about one binding of the symbolic dims: the arrays, the views and the steps.
    ``kernels``: the kernel graph's, calls expanded (``kernel_graph.expand_calls``); ``choices``: how
    to lay it out where the cost models would decide (``tune.py``; the default: as they decide)."""

    def __init__(self, kg, kernels, plan: MemoryPlan, env: dict, choices: tune.Choices = tune.DEFAULT,
                 memo: dict | None = None):
        # sizes as DimValues: generated code reads the dims as parameters (``ir.const``), so another
        # binding of them lays out the same code and reuses its compiled objects (unless the choices
        # say to specialise: plain ints, every size a constant in the code)
        self.values, self.env, self.choices = env, env if choices.specialise else tracked(env), choices
        self.memo = {} if memo is None else memo  # the program's generated kernels (``lowering._generate``)
        self.steps: list = []  # what a run does, in order (``steps.py``): the schedule of this binding
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
        self._gen: list = []  # (IR kernel, index of its step in self.steps, the IR names of its buffers) per call
        self._ir_names: dict = {}  # what an IR buffer points at -> its name in every generated kernel
        self._sources: dict = {}  # IR buffer name -> its array, or the name of the caller array it is
        self._slots: dict = {}  # caller array name -> [(pointer array, slot)] patched on rebind
        self._held: dict = {}  # caller array name -> the array the pointers point into
        self._module = None  # the generated kernels' compiled module (its functions live as long as it)
        self._pointers: list = []  # the pointer arrays of the generated calls
        self._acc_orders: dict = {}  # id(matmul kernel) -> storage order of its product's scratch
        with self.plain_sizes():  # (layouts compare sizes; no code is made from them)
            layouts = self._layouts(kg, kernels)
        self._allocate(kg, plan, layouts)
        self._allocate_parts(kernels)
        self._alias = self._in_place(kg, kernels)  # temp id -> name of the state array that holds it
        self._written = set(self._alias.values())  # the states written in place
        writes = self._writes
        self.made = {"kernels": 0, "reused": 0}  # generated kernels made and found in the memo (lowering.py)
        for k in tqdm(kernels, desc=f"generating code: {len(kernels)} kernels", unit="kernel", delay=1.0,
                      leave=False):
            lower(k, self)
            for b, _ in k.outputs:
                writes[b.id] = writes.get(b.id, 0) + 1
        threads = 1 if choices.threads == "blas" else thread_count()
        own = self._link(threads) or choices.threads == "own"
        self.steps = split_rows(self.steps, self, threads, matmuls=own)
        self._threaded = any(isinstance(s, Split) for s in self.steps)
        self.out_calls = [self._output(buf, v) for buf, v in kg.outputs]
        self.up_calls = [self._update(buf, v) for _, buf, v in kg.updates]  # (may add copies to steps)
        # what a run executes: ``steps`` with each run of native ones one call of the generated driver
        self._exec, tables = driver.build(self.steps, self.cell)
        self._pointers += tables
        self._deps, used = self._index_input_views()
        # A run of generated kernels and plain copies alone, on this thread, runs no numpy arithmetic
        # and no BLAS: it needs neither np.errstate (about a microsecond to enter and leave: numpy clears
        # the floating-point flags before each ufunc it runs, so what a generated kernel leaves in them
        # warns nowhere) nor BLAS on one thread. Threaded runs (long by construction) keep both.
        # (the driver's GEMMs are BLAS called directly: no numpy, no floating-point warnings)
        self._plain = not self._threaded and all(isinstance(f, _NATIVE) for f, _ in self._exec) and \
            all(f is _fresh or f is _same for f, _ in self.out_calls + self.up_calls)
        self._names = tuple(self._caller)
        # name -> (its InputViews that a run's calls still read, its pointer slots): what a rebind updates
        self._targets = {n: (tuple(r for r in self._refs.get(n, ()) if id(r) in used),
                             tuple(self._slots.get(n, ()))) for n in self._names}

    # running --------------------------------------------------------------------------------------
    def run(self, arrays: dict) -> list:
        """Run on the caller arrays ``arrays`` (by name): the outputs (fresh arrays), then the values of
        the updates (possibly views of buffers that the next run overwrites)."""
        # (plain loops: a comprehension is a function call of its own in Python 3.11, ~0.15 us each)
        last, changed = self._last, None
        for n in self._names:
            if arrays[n] is not last.get(n):
                if changed is None:
                    changed = [n]
                else:
                    changed.append(n)
        if changed is not None:
            self._rebind(changed, arrays)
        outs = []
        if self._plain:
            for f, args in self._exec:
                f(*args)
            for f, args in self.out_calls:
                outs.append(f(*args))
        else:
            with np.errstate(all="ignore"), blas.single_threaded() if self._threaded else _NO_CONTEXT:
                for f, args in self._exec:
                    f(*args)
                for f, args in self.out_calls:
                    outs.append(f(*args))
        for f, args in self.up_calls:
            outs.append(f(*args))
        return outs

    def run_steps(self, arrays: dict) -> list:
        """:meth:`run` through the Python path (``steps.run``): every step of ``steps`` called from
        Python in order, no driver table; the same results (what tests compare the driver with)."""
        self._last.clear()  # every caller array is bound anew, and every view of it resolved
        self._rebind(list(self._names), arrays)
        for n, refs in self._refs.items():
            arr = np.ascontiguousarray(arrays[n], self._caller[n][1])
            for ref in refs:
                ref.value = ref.resolve(arr)
        with np.errstate(all="ignore"):
            steps.run(self.steps)
            outs = [f(*args) for f, args in self.out_calls]
        return outs + [f(*args) for f, args in self.up_calls]

    def _rebind(self, names, arrays) -> None:
        """Point the program at the caller arrays ``names`` (new objects since the last run): the
        InputViews over them, the generated kernels' pointer slots, the numpy calls that read them.
        Every array is checked (and converted where it must be) before anything changes."""
        written, caller = self._written, self._caller
        clash = _NONE
        if written:
            if any(n in written for n in names):  # a new state array: anything may overlap it now
                names = list(dict.fromkeys([*names, *caller]))
            clash = _overlapping(names, written, arrays)
        new = []
        for n in names:
            a = arrays[n]
            shape, dtype = caller[n]
            # (``is`` first: numpy's built-in dtypes are singletons, and ``==`` costs a call)
            if type(a) is np.ndarray and (a.dtype is dtype or a.dtype == dtype) and a.flags.c_contiguous \
                    and n not in clash:
                arr = a
            else:
                arr = np.array(a, dtype, order="C")
            if arr.shape != shape:
                raise ValueError(f"array {n!r} has shape {arr.shape}, expected {shape}")
            new.append((n, a, arr))
        last, targets, held = self._last, self._targets, self._held
        for n, a, arr in new:
            last[n] = a if arr is a else None  # a converted copy is redone every run
            refs, slots = targets[n]
            for ref in refs:
                ref.value = ref.resolve(arr)
            if slots:
                held[n] = arr
                address = _address(arr)
                for ptrs, i in slots:
                    ptrs[i] = address
        deps = self._deps
        if deps:
            seen = set()
            for n in names:
                for lst, i, (f, args) in deps.get(n, ()):
                    if (id(lst), i) not in seen:
                        seen.add((id(lst), i))
                        lst[i] = (f, tuple(x.value if type(x) is InputView else x for x in args))

    def _index_input_views(self) -> tuple[dict, set]:
        """``{caller name: [(list, index, call)]}`` of the executed calls that read InputViews of the name
        (rebuilt with the new views on a rebind), and the ids of every InputView those calls read."""
        deps: dict = {}
        used: set = set()
        parts = [p for f, _ in self._exec if isinstance(f, Split) for p in f.parts]
        for lst in (self._exec, self.out_calls, self.up_calls, *parts):
            for i, (f, args) in enumerate(lst):
                views = [x for x in args if type(x) is InputView]
                used.update(map(id, views))
                for n in {x.name for x in views}:
                    deps.setdefault(n, []).append((lst, i, (f, args)))
        return deps, used

    # allocation -----------------------------------------------------------------------------------
    def _layouts(self, kg, kernels) -> dict:
        """{buffer id: storage axis order} for the temps a GEMM reads or writes that are better stored
        permuted: so that the GEMM is fewer, larger BLAS calls (``_gemm_layouts``), else, for a GEMM's
        result, in the order its readers walk it. (A body's scratch is read by every call through the
        same view objects: each distinct view is looked at once, weighted by how many times it is
        read, and each buffer decided once.) None under ``choices.gemm_layouts=False``."""
        if not self.choices.gemm_layouts:
            return {}
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
        self._gemm_layouts(kg, kernels, readers, perms, decided)
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
            order = self._readers_order(readers, buf, shape)
            if order is not None:
                perms[buf.id] = order
        return perms

    def _readers_order(self, readers, buf, shape) -> tuple | None:
        """The storage order ``buf``'s readers walk it in (``layout.preferred_order``), or None."""
        views = [(self._valid_part(v), times) for v, times in readers.get(buf.id, {}).values()]
        return layout.preferred_order([(v, times) for v, times in views if v is not None], shape)

    def _gemm_layouts(self, kg, kernels, readers, perms, decided) -> None:
        """Storage orders that make each GEMM one BLAS call per true batch (``layout.gemm_orders``):
        for its operands and its result where the program owns their layout (temps that generated
        kernels or GEMMs write, that no caller sees, whose every reader remaps), and for a product
        kept in a scratch (``acc_order``). The first GEMM to have a choice about a buffer makes it."""
        ends = {b.id for b, _ in kg.outputs} | {b.id for _, b, _ in kg.updates}
        writers: dict = {}
        for k in kernels:
            for b, _ in k.outputs:
                writers.setdefault(b.id, set()).add(k.kind)

        def options(buf, shape, v, group_sets, prefer=None) -> list:
            """The orders ``buf`` may take: the readers' preferred one (``prefer``, first: it wins a
            tie), its current one, and the GEMM's wishes (one per way of grouping its axes), where
            every reader remaps."""
            cur = perms.get(buf.id)
            if buf.id in decided or buf.kind != "temp" or buf.base is not None or buf.id in ends \
                    or 0 in shape or not writers.get(buf.id, {"none"}) <= _GENERATED:
                return [cur]
            parts = [p for p in (self._valid_part(r) for r, _ in readers.get(buf.id, {}).values()) if p is not None]
            wishes = [w for w in (layout.walk_order(v, shape, groups) for groups in group_sets)
                      if w is not None and all(layout.remap(p, shape, w) is not None for p in parts)]
            return list(dict.fromkeys([*(() if prefer is None else (prefer,)), cur, *wishes]))

        for k in kernels:
            if k.kind != "matmul" or any(v.mask is not None for _, v in k.inputs):
                continue
            domain = self.shape(k.domain)
            if 0 in domain:
                continue
            (abuf, av), (bbuf, bv) = k.inputs
            a, b = self.strided_view(av), self.strided_view(bv)
            batch, m, n = classify(domain, k.axes, a.strides, b.strides)
            ks = [i for i in k.axes if domain[i] != 1]
            kept = [i for i in range(len(domain)) if i not in k.axes]
            pos = {d: i for i, d in enumerate(kept)}
            shape = tuple(domain[i] for i in kept)
            acc = next((x for x, e in k.outputs if e.op == "Acc" and x.dtype is k.acc_dtype), None)
            out_groups = [[pos[d] for d in g] for g in (batch, m, n)]
            out = Strided(shape, tuple(contiguous_strides(shape)), 0)
            ashape, bshape = self.shape(abuf.shape), self.shape(bbuf.shape)
            same = abuf is bbuf  # a product of a buffer with itself keeps its layout
            ops_ = [(a, ashape, [perms.get(abuf.id)] if same else options(abuf, ashape, a, [[batch, m, ks]])),
                    (b, bshape, [perms.get(bbuf.id)] if same else options(bbuf, bshape, b, [[batch, ks, n]]))]
            # the result's rows merge in the order of a's strides as it is stored now (gemm.in_memory_order)
            a_now = layout.remap(a, ashape, perms[abuf.id]) if abuf.id in perms else a
            mem_groups = [[pos[d] for d in g] for g in (batch, in_memory_order(m, a_now.strides), n)]
            if acc is None:  # the product lives in a scratch that only the epilogue reads: any order
                wishes = [layout.walk_order(out, shape, g) for g in (out_groups, mem_groups)]
                ops_.append((out, shape, list(dict.fromkeys([None, *(w for w in wishes if w is not None)]))))
            elif self.shape(acc.shape) == shape:
                prefer = self._readers_order(readers, acc, shape)
                ops_.append((out, shape, options(acc, shape, out, [out_groups, mem_groups], prefer)))
            else:
                ops_.append((out, shape, [perms.get(acc.id)]))
            chosen = layout.gemm_orders(domain, k.axes, ops_)
            for buf, (_, _, opts), order in zip((abuf, bbuf, acc), ops_, chosen):
                if buf is not None and len(opts) > 1:
                    decided.add(buf.id)
                    if order is not None:
                        perms[buf.id] = order
            if acc is None and chosen[2] is not None:
                self._acc_orders[id(k)] = chosen[2]

    def acc_order(self, k) -> tuple | None:
        """The storage order of matmul ``k``'s product when it is kept in a scratch (None: logical)."""
        return self._acc_orders.get(id(k))

    def _in_place(self, kg, kernels) -> dict:
        """{temp id: state name} for the new values of states that an elementwise kernel can write
        straight into the state's array, which saves the caller's copy.

        Safe when nothing reads the state's old value afterwards (no later kernel, output or update;
        within the writing kernel, each work item reads only the element it writes, and the
        generated kernel stores it after every read: :func:`_stores_last`) and no kernel that can fail
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
            if last_read.get(st.id, -1) <= i and st.id not in read_at_end and _reads_in_step(ks[i], st, t):
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
                if raw.size < prod(shape) * dtype.itemsize:  # a product folded over an empty batch (fold.py)
                    raw = np.empty(prod(shape) * dtype.itemsize, np.uint8)
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
    @contextlib.contextmanager
    def plain_sizes(self):
        """Evaluate sizes as plain ints within: for work no generated code is made from (storage
        orders, a GEMM's BLAS call), where DimValue arithmetic would only cost time."""
        env, self.env = self.env, self.values
        try:
            yield
        finally:
            self.env = env

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
        # (the buffer's shape as the binding evaluates it: strides stored permuted are then expressions
        # of the dims, and code reading them serves every binding)
        out = layout.remap(v, self.shape(buf.shape), self._perm[buf.id])
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
                self.steps.append(Copy(value[tuple(slice(lo, hi) for lo, hi in box)], src))
        self._loads[key] = value
        return value

    def cell(self, x) -> tuple[int, int]:
        """For the generated driver (``driver.py``): ``(address of a cell holding x's base address, byte
        offset)`` of an array the program owns (a cell of its own, filled now) or of an InputView (a
        pointer slot of its caller array, written on every rebind)."""
        if type(x) is InputView:
            cell = (ctypes.c_void_p * 1)()
            self._slots.setdefault(x.name, []).append((cell, 0))
            offset = x.offset
        else:
            cell, offset = (ctypes.c_void_p * 1)(x.ctypes.data), 0
        self._pointers.append(cell)
        return ctypes.addressof(cell), offset

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

    # generated code ---------------------------------------------------------------------------------
    def place(self, buf, view) -> Placed:
        """For ``codegen/cpu.py``: the :class:`Placed` read of a view of ``buf`` (remapped onto a
        permuted storage, bounds-checked), or with ``view`` None the placement of the whole buffer
        (indexed in its own shape)."""
        name = self._ir_buffer(buf)
        if view is None:
            return Placed(name, buf.dtype, 0, self.strides_of(buf, self.shape(buf.shape)))
        vshape, strides, offset, box = ops.bound_view(view, self.env)
        inner = (vshape, offset) if box is None else ops.inner_box(strides, offset, box)
        if inner is not None and 0 not in inner[0]:
            valid = self.locate(buf, Strided(inner[0], strides, inner[1]))
            ops.check_bounds(valid.shape, valid.strides, valid.offset, self._storage_size(buf))
            lows = (0,) * len(vshape) if box is None else tuple(lo for lo, _ in box)
            strides = valid.strides  # the valid part's, extended to the whole (masked) view
            offset = valid.offset - sum(lo * s for lo, s in zip(lows, strides))
        return Placed(name, buf.dtype, offset, tuple(strides), box, view.pad)

    def strides_of(self, buf, shape) -> tuple:
        """Element strides of ``buf``'s storage seen with ``shape`` (its own, or a regrouping of it:
        permuted buffers only ever in their own)."""
        if buf.id in self._perm and buf.id not in self._alias:
            return tuple(layout.physical_strides(shape, self._perm[buf.id]))
        return tuple(contiguous_strides(shape))

    def scratch_name(self, arr: np.ndarray) -> str:
        """The IR buffer name of a scratch array (a GEMM's product that an epilogue reads)."""
        return self._ir_name(("scratch", id(arr)), arr)

    def _ir_buffer(self, buf) -> str:
        if buf.id in self._alias:
            return self._ir_name(("caller", self._alias[buf.id]), self._alias[buf.id])
        if buf.kind in CALLER_KINDS:
            return self._ir_name(("caller", buf.name), buf.name)
        arr = self._flat.get(buf.id)
        return self._ir_name(("own", buf.id), arr if arr is not None else self._arrays[buf.id])

    def _ir_name(self, key, source) -> str:
        name = self._ir_names.get(key)
        if name is None:
            name = self._ir_names[key] = f"b{len(self._ir_names)}"
            self._sources[name] = source
        return name

    def _storage_size(self, buf) -> int:
        if buf.id in self._alias or buf.kind in CALLER_KINDS:
            return prod(self._caller[self._alias.get(buf.id, buf.name)][0])
        arr = self._flat.get(buf.id)
        return (arr if arr is not None else self._arrays[buf.id]).size

    def generate(self, kernel: ir.Kernel, k, names: list) -> None:
        """Append a call of the generated ``kernel`` (made from kernel-graph kernel ``k``) over the IR
        buffers ``names`` (``names[i]`` is ``kernel.buffers[i]``); it is compiled with the binding's
        others when the binding is laid out (:meth:`_link`)."""
        aliased = {self._ir_buffer(b) for b, _ in k.outputs if b.id in self._alias}
        if aliased:
            aliased = {buf.name for buf, n in zip(kernel.buffers, names) if n in aliased}
            kernel = _stores_last(kernel, aliased, f"{kernel.name}_in_place{len(self._gen)}")
        self._gen.append((kernel, len(self.steps), names))
        self.steps.append(None)

    def _link(self, threads: int) -> bool:
        """Compile the generated kernels (one engine) and put their steps in place; a kernel whose
        estimated time is ``SPLIT_NS`` (times ``choices.split_scale``) or more is cut along its first
        grid axis over ``threads``. Returns whether any kernel was cut."""
        if not self._gen:
            return False
        # distinct: a kernel's buffers are separate allocations (the memory plan never places an output
        # in the slot of an input of the same kernel; pack parts are disjoint ranges; a caller array
        # overlapping a state written in place is read from a copy), but for a state written in place,
        # which is one buffer read and written
        choices = self.choices
        distinct = list({id(kern): kern for kern, _, _ in self._gen}.values())  # (a memo's kernel: many calls)
        self._module = llvm.compile_kernels(distinct, distinct=True, vector_width=choices.vector_width)
        known: dict = {}
        costs = [known[id(kern)] if id(kern) in known else known.setdefault(id(kern), _cost_ns(kern, self.values))
                 for kern, _, _ in self._gen]
        split = SPLIT_NS * choices.split_scale
        if choices.threads == "auto" and sum(c for c in costs if c >= split) < OWN_THREADS_NS:
            threads = 1  # too little to cut: BLAS keeps its own threads for the GEMMs
        cut = False
        for (kern, at, names), cost in zip(self._gen, costs):
            ptrs = (ctypes.c_void_p * max(1, len(kern.buffers)))()
            for slot, name in enumerate(names):
                src = self._sources[name]
                if isinstance(src, str):
                    self._slots.setdefault(src, []).append((ptrs, slot))
                else:
                    ptrs[slot] = src.ctypes.data
            params = (ctypes.c_int64 * max(1, len(kern.params)))(
                *(ir.derived_value(name, self.values) for name in kern.params))
            self._pointers += (ptrs, params)
            f = self._module.function(kern.name)
            n = index_value(kern.grid[0], self.values) if kern.grid else 1
            parts = _parts(n, cost, threads, split)
            if len(parts) == 1:
                self.steps[at] = Kernel(f, ptrs, params, 0, n, kern)
            else:
                self.steps[at] = Split([[Kernel(f, ptrs, params, lo, hi, kern)] for lo, hi in parts])
                cut = True
        return cut

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


def _address(a: np.ndarray) -> int:
    """The address of a C-contiguous array's first element. ``a.ctypes.data`` builds a ``_ctypes`` object and
    an ``__array_interface__`` dict (about a microsecond, on every call whose caller array is a new object);
    a ctypes view of the array's buffer gives the same address in a quarter of that. A read-only or empty
    array has no such view: ``a.ctypes.data`` then."""
    try:
        return _addressof(_byte_view(a))
    except (TypeError, ValueError):
        return a.ctypes.data


_addressof, _byte_view = ctypes.addressof, ctypes.c_byte.from_buffer


def _root(a) -> int:
    """Identity of the allocation behind an array (the end of its ``base`` chain)."""
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return id(a)


_fresh = np.ndarray.copy  # a C-contiguous copy (the method's default order), the caller's to keep


def _fresh_masked(shape, pad, dtype, slices, src) -> np.ndarray:
    out = np.full(shape, pad, dtype)
    if src is not None:
        out[slices] = src
    return out


def _same(x):
    return x


def _byte_strides(shape, dtype) -> tuple:
    return tuple(s * dtype.itemsize for s in contiguous_strides(shape))


def _reads_in_step(k, st, t) -> bool:
    """In elementwise kernel ``k``, every read of buffer ``st`` is its identity view over as many
    elements as ``t`` has: each work item reads the element of ``st`` that it writes into ``t``'s place
    (a Reshape of such a load reads it at the same flat index), so writing ``t`` over ``st`` in
    place changes no element before the item that reads it."""
    return all(v.is_contiguous() and prod(v.shape) == prod(t.shape) for b, v in k.inputs if b is st)


def _stores_last(kernel: ir.Kernel, names: set, name: str) -> ir.Kernel:
    """``kernel`` with its stores into ``names`` (state arrays written in place) moved after every
    other statement, each value kept in a register where the store was: every read of those
    arrays then comes before any write into them. Named ``name``: the kernel it is made from may be
    called elsewhere in the program as it is."""
    body, late = [], []
    for j, s in enumerate(kernel.body):
        if isinstance(s, ir.Store) and s.buffer in names:
            reg = f"_in_place{j}"
            body.append(ir.Assign(reg, s.value))
            late.append(ir.Store(s.buffer, s.index, ir.var(reg, s.value.dtype), s.valid))
        else:
            body.append(s)
    return ir.Kernel(name, kernel.buffers, kernel.params, kernel.grid, tuple(body + late), kernel.block,
                     kernel.shared, kernel.notes)


def _cost_ns(kernel: ir.Kernel, env: dict) -> float:
    """Estimated time of a CPU kernel: per work item, its loads and stores of elements that change
    with the item (a load at a constant index, a scalar parameter, is hoisted by LLVM: free) and its
    transcendentals and float remainders (a loop's body times its trip count), times the work items,
    at the sizes of the binding ``env``. Each value counts once per item, however many statements
    share it."""
    moving: dict = {}  # id(index) -> whether it moves with the item (``_moves``)

    def block(body, seen: set) -> float:
        total = 0.0
        for s in body:
            if isinstance(s, ir.Loop):
                trips = index_value(s.stop, env) - index_value(s.start, env)
                total += max(trips, 0) * block(s.body, set(seen))
                continue
            if isinstance(s, ir.If):
                total += block(s.body, seen)
                continue
            if isinstance(s, (ir.Store, ir.AtomicAdd)):
                total += NS_PER_ACCESS
            for v in ir.walk_values_of(ir.operands(s), seen):  # (values seen before: neither counted nor walked)
                if v.op == "load" and _moves(v.args[0], moving):
                    total += NS_PER_ACCESS
                elif v.op in _CALLS and (v.op != "Mod" or v.dtype.is_float):
                    total += _CALLS[v.op]
        return total

    items = 1
    for g in kernel.grid:
        items *= index_value(g, env)
    return items * block(kernel.body, set())


def _moves(index: ir.V, memo: dict) -> bool:
    """Whether an index depends on the work item or a loop variable."""
    got = memo.get(id(index))
    if got is None:
        got = memo[id(index)] = index.op in ("item", "var") or any(_moves(a, memo) for a in index.args)
    return got


def _parts(n: int, cost: float, threads: int, split: float) -> list:
    """The ranges of axis 0 (of ``n`` items) to run on threads of their own: one range unless the
    kernel takes ``split`` ns or more, then up to ``threads``, each with half of that or more."""
    if threads < 2 or n < 2 or cost < split:
        return [(0, n)]
    t = min(threads, n, max(2, int(cost // (split / 2))) if split > 0 else threads)
    bounds = [n * i // t for i in range(t + 1)]
    return list(zip(bounds, bounds[1:]))

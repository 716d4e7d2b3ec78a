"""Planning a binding of a CPU program: ``plan(kernel graph, sizes) -> Schedule``, computed without
touching memory.

For one binding of the symbolic dims, planning decides everything a run does: the storage order of
the temps a GEMM reads or writes (``layout.py``), which new state values are written in place, where
each buffer lives (the memory plan's slots, scratch, constants: the schedule's :class:`Storage`
list), each kernel's lowering (``lowering.py``: generated kernels, GEMMs, copies, index checks),
the generated code (made once per program for every binding and every trip of a rolled body that
places its buffers alike: ``lowering._generate``'s memo; compiled as one LLVM module), which kernels
are cut over threads and which runs of numpy calls are split by rows (``parallel.py``). What it
yields is a :class:`Schedule`: typed steps (``steps.py``) whose operands are :class:`Ref` views of a
caller array or of a storage, by offset and strides. ``compiled.Binding`` allocates the storages and
runs the steps; nothing in a schedule depends on where memory is.

Sizes are ``DimValue`` values while code is made (``core/symbolic.py``): generated code reads the
dims as parameters, so another binding lays out the same code and reuses its compiled objects
(unless the choices specialise: plain ints, every size a constant in the code).
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from luminal.backends.cpu import attention, batched, blas, blocked, driver, gathered, guard, layout, tune
from luminal.backends.cpu.gemm import Strided, classify, in_memory_order
from luminal.backends.cpu.lowering import (
    Memory,
    acc_output,
    lower,
    lower_attention,
    lower_batched,
    lower_run,
    sizes_key,
)
from luminal.backends.cpu.parallel import Split, item_ranges, split_rows, thread_count
from luminal.backends.cpu.steps import Copy, Kernel, Library, Ref, Storage
from luminal.codegen import ir, llvm, lowering
from luminal.codegen.lower import Placed, index_value
from luminal.codegen.lowering import rows
from luminal.codegen.target import CPU
from luminal.core import numpy_ops as ops
from luminal.core.kernel_graph import MemoryPlan
from luminal.core.symbolic import evaluate, prod, tracked
from luminal.core.view import contiguous_strides

CALLER_KINDS = ("input", "state", "random")
# kernel kinds that write any storage order (generated code through strides, BLAS through its layout)
_GENERATED = frozenset({"elementwise", "reduce", "matmul"})
# A generated kernel is cut over threads when its estimated time is this long or more (handing the
# work to another thread and back costs tens of microseconds on a busy 2-core machine); the estimate
# counts the memory accesses of its work items and its transcendental functions (tens of operations each)
SPLIT_NS = 100_000
# Our threads run a program when its kernels worth cutting add up to this much: once they run, BLAS
# runs on one thread and the GEMMs are cut over ours. Below it, with some kernel worth cutting, the
# machine decides and the model cannot: on the MNIST MLP step (0.3 ms of kernels to cut) our threads
# cost more than they gained on a 2-vCPU Zen 4 (1.43 ms per step with ours, 0.95 ms with BLAS's own
# threads for the GEMMs and the kernels on one) and gained 20% on a 2-vCPU Zen 3 (0.88 ms vs 1.10).
# Such a binding is laid out with BLAS's threads and marked ``undecided``: its program times both at
# its first call (``compiled.CpuProgram.binding``)
OWN_THREADS_NS = 1_000_000
NS_PER_ACCESS = 0.3
# ns per element of the operations that cost more than an access, by (op, float64?): Exp2, Log2 and
# float32 Sin are inline polynomials (codegen/llvm.py; float64's longer, for its precision), float64
# Sin and a float Mod libm calls LLVM cannot vectorise. Measured on 1M elements, one thread (a 2-vCPU
# EPYC): float32 exp 1.1 ns, float64 exp 6.4; float32 sin 3-4x float32 exp, float64 sin 15-20x; float64
# log2 3x float32's
_CALLS = {("Exp2", False): 1.0, ("Exp2", True): 5.0, ("Log2", False): 1.0, ("Log2", True): 3.0,
          ("Sin", False): 3.5, ("Sin", True): 18.0, ("Mod", False): 4.0, ("Mod", True): 4.0}
_CALLED = frozenset(op for op, _ in _CALLS)
# The memo's entry for what planning derives from the program alone (the kernel graph, its expanded
# kernels, its memory plan: fixed for the memo's program), not from a binding's sizes or choices:
# ``Planner.program``. Every other entry of the memo is a generated kernel (``lowering._generate``).
PROGRAM = "program"


def storage_itemsize(dtype) -> int:
    """Bytes per element as stored (numpy keeps bfloat16 in float32)."""
    return dtype.np.itemsize


@dataclass(eq=False)
class Schedule:
    """What a binding runs, as data. ``steps`` in order; ``outputs`` and ``updates``: ``(function,
    args)`` making each output (a fresh array) and each update's value after the steps; ``storages``:
    the memory the program owns (a Ref's int space indexes it); ``callers``: name -> (shape, numpy
    dtype) of each caller array; ``written``: the states written in place. The rest is for reading:
    ``generated`` lists ``(ir kernel, step index before the thread cuts, buffer names)`` per call of
    generated code, ``perms`` the temps stored permuted, ``acc_orders`` the storage order of GEMM
    products kept in scratch, ``made`` the kernels generated and reused (``lowering._generate``),
    ``gathered`` the products run as gathered GEMMs and the copies skipped (``gathered.find``),
    ``blocked`` the fusions run a block at a time (``attention.find``, ``batched.find``);
    ``module`` keeps the compiled code alive."""

    env: dict
    choices: tune.Choices
    steps: list
    outputs: list
    updates: list
    storages: list
    callers: dict
    written: frozenset
    generated: list
    perms: dict
    acc_orders: dict
    made: dict
    module: object
    gathered: tuple = ({}, frozenset())
    blocked: tuple = ()  # the fusions run a block at a time, by kind ("attention", "batched": blocked.py)
    direct: int = 0  # gathered products run as direct convolutions (gathered.lower, direct_conv.py)
    # whether the model left the thread choice to a measurement: some kernel is worth cutting, but fewer
    # than OWN_THREADS_NS of them (see there); laid out with BLAS's threads
    undecided: bool = False

    @property
    def threaded(self) -> bool:
        """Whether some steps run on threads of our own."""
        return any(isinstance(s, Split) for s in self.steps)


def plan(kg, kernels, memory: MemoryPlan, env: dict, choices: tune.Choices = tune.DEFAULT,
         memo: dict | None = None) -> Schedule:
    """The :class:`Schedule` of kernel graph ``kg`` (``kernels``: its kernels with the calls expanded,
    ``kernel_graph.expand_calls``) for the binding ``env`` of its dims, under ``choices`` (how to lay
    it out where the cost models would decide: ``tune.py``). ``memo``: the program's generated
    kernels, shared by its bindings (``lowering._generate``)."""
    p = Planner(kg, kernels, memory, env, choices, {} if memo is None else memo)
    return Schedule(env=dict(env), choices=choices, steps=p.steps, outputs=p.out_calls, updates=p.up_calls,
                    storages=p.storages, callers=p.callers, written=frozenset(p.alias.values()),
                    generated=p.generated, perms=p.perms, acc_orders=p.acc_orders, made=p.made, module=p.module,
                    gathered=(p.gathered, frozenset(p.skipped)), blocked=tuple(kind for kind, _, _ in p.fused),
                    direct=p.direct, undecided=p.undecided)


class Planner:
    """The state of planning one binding; what ``lowering.py`` asks of it (``place``, ``load``,
    ``view``, ``scratch``, ``steps``, ...)."""

    def __init__(self, kg, kernels, memory: MemoryPlan, env: dict, choices: tune.Choices, memo: dict):
        self.values, self.env, self.choices = env, env if choices.specialise else tracked(env), choices
        self.memo = memo
        self.program = memo.setdefault(PROGRAM, {})  # (see PROGRAM)
        # id(dims or view) -> (the object, kept alive so its id is not reused; its value under ``env``):
        # ``_known`` under the current sizes, ``_plain`` under the plain ones (``plain_sizes``)
        self._known: dict = {}
        self._plain: dict = self._known if self.env is self.values else {}
        self._placed: dict = {}  # what place computes, by view, storage order and size (see place)
        self.steps: list = []
        self.storages: list = []  # Storage by space index
        self.callers: dict = {}  # name -> (shape, np dtype) of each caller array
        self.generated: list = []  # (IR kernel, index of its step in self.steps, the IR names of its buffers)
        self.perms: dict = {}  # buffer id -> axis order of its storage, for the buffers stored permuted
        self.acc_orders: dict = {}  # id(matmul kernel) -> storage order of its product's scratch
        self.module = None
        self._pool: dict = {}  # (shape, dtype) -> free scratch Refs
        self._taken: dict = {}  # space -> scratch Ref taken by the kernel being lowered
        self._loads: dict = {}  # (buffer id, its writes so far, view) -> the value a kernel reads
        self._writes: dict = {}  # buffer id -> kernels lowered so far that write it (a body's scratch: many)
        self._flat: dict = {}  # buffer id -> the buffer's storage as a 1-d Ref
        self._ir_names: dict = {}  # what an IR buffer points at -> its name in every generated kernel
        self._buffer_names: dict = {}  # buffer id -> its IR buffer's name (``_ir_buffer``)
        self._sources: dict = {}  # IR buffer name -> (space, byte offset) where it starts
        with self.plain_sizes():  # (layouts compare sizes; no code is made from them)
            self.perms = self._layouts(kg, kernels)
        self._allocate(kg, memory)
        self._allocate_parts(kernels)
        self.alias = self._in_place(kg, kernels)  # temp id -> name of the state array that holds it
        self.own_threads = False  # whether a step was cut over our threads outside _link (gathered.lower)
        self.undecided = False  # the thread choice is left to a measurement (Schedule.undecided; _link)
        # products run as gathered GEMMs and the copies they make unneeded (gathered.py)
        self.gathered, self.skipped = gathered.find(self, kg, kernels, memory)
        self.direct = 0  # of those, the products run as direct convolutions (gathered.lower)
        self.made = {"kernels": 0, "reused": 0}  # generated kernels made and found in the memo (lowering.py)
        writes = self._writes
        units = self._units(kernels, memory)
        self.skipped -= {id(k) for u in units if len(u) > 1 for k in u}  # (a run lowered as one makes it)
        # fusions run a block at a time (blocked.py): {index of their first unit: the fusion}
        attentions = attention.find(self, kg, units, memory)
        taken = {i + j for i, f in attentions.items() for j in range(len(f.runs) + 2)}
        products = batched.find(self, kg, units, memory, taken)
        self.fused: list = []  # (kind, its kernels' entries in self.generated, blocked.Blocks) per fusion
        fused_until = 0
        for i, unit in enumerate(tqdm(units, desc=f"generating code: {len(kernels)} kernels", unit="kernel",
                                      delay=1.0, leave=False)):
            if i in attentions:
                lower_attention(attentions[i], self)
                fused_until = i + len(attentions[i].runs) + 2
            elif i in products:
                lower_batched(products[i], self)
                fused_until = i + 2
            elif i < fused_until or (len(unit) == 1 and id(unit[0]) in self.skipped):
                pass
            elif len(unit) > 1:
                lower_run(unit, self)
            else:
                lower(unit[0], self)
            for k in unit:
                for b, _ in k.outputs:
                    writes[b.id] = writes.get(b.id, 0) + 1
        threads = 1 if choices.threads == "blas" else thread_count()
        cut = self._link(threads)
        self._finish_fused()
        own = cut or choices.threads == "own" or self.own_threads
        self.steps = split_rows(self.steps, threads, matmuls=own)
        self.out_calls = [self._output(buf, v) for buf, v in kg.outputs]
        self.up_calls = [self._update(name, buf, v) for name, buf, v in kg.updates]  # (may add copies to steps)

    def _finish_fused(self) -> None:
        """The fusions' steps in place of their placeholders, their kernels' calls made from each one's
        compiled call over every item (``blocked.Blocks.finish``)."""
        if not self.fused:
            return
        done: dict = {}
        for _, kernels, blocks in self.fused:
            wholes = []
            for kern, at, names in kernels:
                step = self.steps[at]
                first = step if isinstance(step, Kernel) else step.parts[0][0]  # (cut over the threads by _link)
                items = index_value(kern.grid[0], self.values) if kern.grid else 1
                wholes.append((first.with_range(0, items), names))
                self.steps[at] = None
            done[id(blocks)] = blocks.finish(wholes)
            self.own_threads = self.own_threads or any(isinstance(x, Split) for x in done[id(blocks)])
        self.steps = [x for s in self.steps if s is not None
                      for x in (done[id(s)] if isinstance(s, blocked.Blocks) else [s])]

    def _units(self, kernels, memory: MemoryPlan) -> list[list]:
        """``kernels`` in the units they are lowered in: a run lowered as one pass over its rows
        (``codegen/lowering/rows.py``, where :func:`rows.fits` and it writes no state in place, whose
        stores must come last in their kernel), every other kernel alone."""
        found = self.program.get("runs")
        if found is None:  # (the runs whose buffers the memory plan keeps apart: the program's)
            found = self.program["runs"] = [(start, stop) for start, stop in rows.runs(kernels)
                                            if not rows.overlaps(kernels[start:stop], memory.slot_of, {})]
        runs = {start: stop for start, stop in found
                if rows.worth_it(kernels[start:stop], CPU, Memory(self.env, None))
                and not any(b.id in self.alias for k in kernels[start:stop] for b, _ in k.outputs)}
        units, i = [], 0
        while i < len(kernels):
            stop = runs.get(i, i + 1)
            units.append(kernels[i:stop])
            i = stop
        return units

    # layouts ------------------------------------------------------------------------------------
    def _layouts(self, kg, kernels) -> dict:
        """{buffer id: storage axis order} for the temps a GEMM reads or writes that are better stored
        permuted: so that the GEMM is fewer, larger BLAS calls (``_gemm_layouts``), else, for a GEMM's
        result, in the order its readers walk it. (A body's scratch is read by every call through the
        same view objects: each distinct view is looked at once, weighted by how many times it is
        read, and each buffer decided once.) None under ``choices.gemm_layouts=False``."""
        if not self.choices.gemm_layouts:
            return {}
        readers = self.program.get("readers")  # buffer id -> {id(view): [view, reads]} (the program's)
        if readers is None:
            readers = self.program["readers"] = {}
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
        got = self.program.get("ends, writers")  # (the program's)
        if got is None:
            writers: dict = {}
            for k in kernels:
                for b, _ in k.outputs:
                    writers.setdefault(b.id, set()).add(k.kind)
            got = self.program["ends, writers"] = ({b.id for b, _ in kg.outputs} | {b.id for _, b, _ in kg.updates},
                                                   writers)
        ends, writers = got

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
                      if w is not None and all(layout.remaps(p, shape, w) for p in parts)]
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
                self.acc_orders[id(k)] = chosen[2]

    def acc_order(self, k) -> tuple | None:
        """The storage order of matmul ``k``'s product when it is kept in a scratch (None: logical)."""
        return self.acc_orders.get(id(k))

    @property
    def split_ns(self) -> float:
        """The estimated time from which work is cut over threads (``SPLIT_NS`` under the choices)."""
        return SPLIT_NS * self.choices.split_scale

    def product_strides(self, k, shape) -> tuple:
        """Element strides of matmul ``k``'s product over its output ``shape``, where ``lowering`` will
        write it (``_accumulator``: the output buffer that is just the product, else a scratch)."""
        buf = acc_output(k)
        if buf is not None:
            return self.storage(buf, shape)[1]
        order = self.acc_order(k)
        return tuple(contiguous_strides(shape) if order is None else layout.physical_strides(shape, order))

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
        last_fallible = self._last_fallible(ks)
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

    def _last_fallible(self, kernels) -> int:
        """The position of the last kernel that can fail at run time (-1: none): a gather or scatter_add
        whose index check (``lowering._indexing``) is not one an earlier kernel made already, on the
        same elements of the same index buffer (unwritten since) against the same size. The scatter_add
        of an embedding's gradient reads the indices its forward gather checked: it cannot fail, and
        the optimizer's updates before it can still be written in place."""
        # the checks made so far: (index buffer id, its pack's id or its own, its bound view, pad, size)
        checked: set = set()
        last = -1
        for i, k in enumerate(kernels):
            if k.kind in ("gather", "scatter_add"):
                ib, iv = k.inputs[1]
                with self.plain_sizes():
                    check = (ib.id, ib.id if ib.base is None else ib.base.id, self.bound(iv), iv.pad,
                             self.index_size(k))
                if check not in checked:
                    checked.add(check)
                    last = i
            if checked:  # (a write into a buffer, or into a part of its pack or the pack, undoes its checks)
                written = {x for b, _ in k.outputs for x in (b.id, b.id if b.base is None else b.base.id)}
                checked = {c for c in checked if c[0] not in written and c[1] not in written}
        return last

    def index_size(self, k) -> int:
        """The size gather or scatter_add ``k``'s indices must stay below: its table's along the axis."""
        return self.shape(k.inputs[0][1].shape if k.kind == "gather" else k.domain)[k.axes[0]]

    def _valid_part(self, view) -> Strided | None:
        """The part of ``view`` that reads the buffer (its valid box), or None when it reads nothing."""
        shape, strides, offset, box = self.bound(view)
        if box is not None:
            inner = ops.inner_box(strides, offset, box)
            if inner is None:
                return None
            shape, offset = inner
        return Strided(shape, strides, offset)

    # memory -----------------------------------------------------------------------------------------
    def _storage(self, nbytes: int, what: str = "", **kw) -> int:
        """A new storage of the schedule: its space (index). ``what``: what it holds, in words (what
        guard mode's errors say: ``guard.py``)."""
        self.storages.append(Storage(int(nbytes), what=what, **kw))
        return len(self.storages) - 1

    def _own(self, buf, space: int, shape, dtype) -> None:
        """``buf`` lives at the start of ``space`` (in the axis order ``perms`` gives it)."""
        self._flat[buf.id] = Ref.contiguous(space, (prod(shape),), dtype)

    def _allocate(self, kg, memory: MemoryPlan) -> None:
        with self.plain_sizes():  # (storages are data: no code is made from their sizes)
            self._allocate_all(kg, memory)

    def _allocate_all(self, kg, memory: MemoryPlan) -> None:
        got = self.program.get("placed")
        if got is None:  # (the program's: its buffers, those of each slot, each slot in words)
            placed = kg.buffers + [b for r in kg.bodies() for b in r.scratch]
            held: list = [[] for _ in memory.slots]  # the buffers of each slot
            for buf in placed:
                if buf.kind not in CALLER_KINDS and buf.kind not in ("const", "iota") and buf.id in memory.slot_of:
                    held[memory.slot_of[buf.id]].append(buf)
            got = self.program["placed"] = (placed, held, [_slot_words(at, bufs) for at, bufs in enumerate(held)])
        placed, held, words = got
        # each slot as large as the largest buffer placed in it: the program's buffers, not the memory
        # plan's (a product folded over its batch keeps its buffer's id and slot, and is B times smaller:
        # fold.py; a GPT step's rolled weight gradients left 132 MB of its slots unused)
        sizes = [max((prod(self.shape(buf.shape)) * storage_itemsize(buf.dtype) for buf in bufs), default=0)
                 for bufs in held]
        # (guard mode's strict form gives every temp a storage of its own: its guards at its own end)
        strict = guard.BYTES and guard.STRICT
        slots = None if strict else [self._storage(n, what) for n, what in zip(sizes, words)]
        for buf in placed:
            shape = self.shape(buf.shape)
            dtype = buf.dtype.np
            if buf.kind in CALLER_KINDS:
                self.callers[buf.name] = (tuple(map(int, shape)), dtype)
            elif buf.kind in ("const", "iota"):
                data = np.ascontiguousarray(buf.value, dtype).reshape(-1) if buf.kind == "const" else \
                    np.arange(shape[0], dtype=np.int32)
                self._own(buf, self._storage(data.nbytes, repr(buf), data=data), shape, dtype)
            elif buf.id in memory.slot_of and slots is not None:
                self._own(buf, slots[memory.slot_of[buf.id]], shape, dtype)
            elif buf.id in memory.slot_of:
                nbytes = prod(shape) * storage_itemsize(buf.dtype)
                self._own(buf, self._storage(nbytes, f"{buf!r} (slot {memory.slot_of[buf.id]})"), shape, dtype)
            else:  # a temp no kernel writes (the plan skips it): zeros of its own
                self._own(buf, self._storage(prod(shape) * dtype.itemsize, f"unwritten {buf!r}"), shape, dtype)

    def library_product(self, k) -> bool:
        """Whether matmul ``k`` is a library product here (BLAS or the generated GEMM, then its epilogue)."""
        return lowering.options(k, CPU, Memory(self.env, None))[0] == "library"

    def own_storage(self, buf) -> None:
        """Give temp ``buf`` a storage of its own instead of its slot of the memory plan (a fusion
        interleaves kernels the plan saw one after another: ``blocked.Values.claim``). Before any
        kernel touching it is lowered."""
        shape = self.shape(buf.shape)
        self._own(buf, self._storage(prod(shape) * storage_itemsize(buf.dtype), f"{buf!r} (a fusion's own)"),
                  shape, buf.dtype.np)

    def _allocate_parts(self, kernels) -> None:
        """The parts of packs (``Buffer.base``, made by ``expand_calls``): views of their pack's storage
        (a part is written by a kernel before any kernel reads it)."""
        values = self.values
        for k in kernels:
            for buf, _ in k.outputs:
                if buf.base is not None and buf.id not in self._flat:
                    size = prod(evaluate(d, values) for d in buf.shape)
                    self._flat[buf.id] = self._flat[buf.base.id].view((size,), (1,), evaluate(buf.offset, values))

    # what lowering uses ---------------------------------------------------------------------------
    def plain_sizes(self) -> _PlainSizes:
        """Evaluate sizes as plain ints within (a ``with`` block): for work no generated code is made
        from (storage orders, a GEMM's BLAS call), where DimValue arithmetic would only cost time."""
        return _PlainSizes(self)

    def shape(self, dims) -> tuple:
        """``dims`` evaluated under the current sizes (kept: a body's trips share their dims). What
        ``shape`` and ``bound`` compute for a long-lived object (dims, a view) is made once per planner
        and sizes (``_known``), kept with the object itself, so that its id is not reused meanwhile."""
        got = self._known.get(id(dims))
        if got is None or got[0] is not dims:
            env = self.env
            got = self._known[id(dims)] = (dims, tuple([evaluate(d, env) for d in dims]))
        return got[1]

    def bound(self, view) -> tuple:
        """``ops.bound_view(view)`` under the current sizes (kept: every trip of a rolled body reads
        through the same view objects, thousands of times in a deep stack)."""
        got = self._known.get(id(view))
        if got is None or got[0] is not view:
            got = self._known[id(view)] = (view, ops.bound_view(view, self.env))
        return got[1]

    def strided_view(self, view) -> Strided:
        shape, strides, offset, box = self.bound(view)
        assert box is None, "strided_view of a masked view"
        return Strided(shape, strides, offset)

    def storage(self, buf, shape) -> tuple:
        """``(flat storage, element stride of each axis)`` of a temp buffer seen with ``shape``."""
        perm = self.perms.get(buf.id)
        strides = contiguous_strides(shape) if perm is None else layout.physical_strides(shape, perm)
        return self._flat[buf.id], strides

    def view(self, buf, v: Strided) -> Ref:
        """A view ``v`` of a buffer, bounds-checked."""
        return self.storage_view(buf, self.locate(buf, v))

    def locate(self, buf, v: Strided) -> Strided:
        """``v`` (over the buffer's logical layout) as a view of its storage."""
        if buf.id not in self.perms:
            return v
        # (the buffer's shape as the binding evaluates it: strides stored permuted are then expressions
        # of the dims, and code reading them serves every binding)
        out = layout.remap(v, self.shape(buf.shape), self.perms[buf.id])
        assert out is not None, "a reader of a permuted buffer does not remap (checked when choosing)"
        return out

    def storage_view(self, buf, v: Strided) -> Ref:
        """A view ``v`` of a buffer's storage (in elements), bounds-checked."""
        if buf.id in self.alias or buf.kind in CALLER_KINDS:
            name = self.alias.get(buf.id, buf.name)
            shape, dtype = self.callers[name]
            flat = Ref.contiguous(name, (prod(shape),), dtype)
        else:
            flat = self._flat[buf.id]
        if 0 not in v.shape:
            ops.check_bounds(v.shape, v.strides, v.offset, flat.shape[0])
        return flat.view(v.shape, v.strides, v.offset)

    def over(self, flat: Ref, v: Strided) -> Ref:
        """A view ``v`` (written to) of a flat Ref of the program's memory."""
        return flat.view(v.shape, v.strides, v.offset)

    def load(self, buf, view) -> Ref:
        """What a kernel reads through ``view``: a strided view, or for a masked view a dedicated
        storage whose pad is filled when allocated and whose valid box is copied on every run (by the
        first kernel that reads it: later readers share the copy until a kernel writes the buffer
        again, as every call of a body writes its scratch)."""
        key = (buf.id, self._writes.get(buf.id, 0), view)
        if key in self._loads:
            return self._loads[key]
        shape, strides, offset, box = self.bound(view)
        if box is None:
            value = self.view(buf, Strided(shape, strides, offset))
        else:
            dtype = buf.dtype.np
            space = self._storage(prod(shape) * dtype.itemsize, f"padded copy of {buf!r}", dtype=dtype,
                                  fill=view.pad)
            value = Ref.contiguous(space, shape, dtype)
            inner = ops.inner_box(strides, offset, box)
            if inner is not None:
                src = self.view(buf, Strided(inner[0], strides, inner[1]))
                self.steps.append(Copy(value.box(box), src))
        self._loads[key] = value
        return value

    def scratch(self, shape, dtype) -> Ref:
        """A scratch array (C-contiguous), the kernel's until it is released or the kernel ends."""
        dtype = np.dtype(dtype)
        key = (tuple(map(int, shape)), dtype)
        free = self._pool.get(key)
        ref = free.pop() if free else Ref.contiguous(
            self._storage(prod(shape) * dtype.itemsize, f"scratch {key[0]} {dtype}"), shape, dtype)
        self._taken[ref.space] = ref
        return ref

    def error_cell(self) -> Ref:
        """Two int32 of its own, zero, where a gather or scatter kernel flags an index out of range (the
        flag, then the index)."""
        return Ref.contiguous(self._storage(8, "error cell"), (2,), np.int32)

    def end_kernel(self) -> None:
        for ref in self._taken.values():
            self._pool.setdefault((ref.shape, ref.dtype), []).append(ref)
        self._taken.clear()

    # generated code ---------------------------------------------------------------------------------
    def place(self, buf, view) -> Placed:
        """For the lowering (``codegen/lowering``): the :class:`Placed` read of a view of ``buf`` (remapped onto a
        permuted storage, bounds-checked), or with ``view`` None the placement of the whole buffer
        (indexed in its own shape). What a placement computes is kept per view, storage order and
        storage size (``_placed``): every trip of a rolled body places its buffers through the same views."""
        name, dtype, placement, _ = self.placed(buf, view)
        return Placed(name, dtype, *placement)

    def placed(self, buf, view) -> tuple:
        """:meth:`place` apart: ``(name, dtype, (offset, strides, box, pad), sizes)``, where ``sizes`` are
        the latter as the code sees them (``lowering.sizes_key``), kept with them."""
        perm = self.perms.get(buf.id)
        key = (id(view), id(buf.shape), id(self.env), perm, buf.id in self.alias, self._storage_size(buf))
        got = self._placed.get(key)
        if got is None or got[0] is not view or got[1] is not buf.shape:
            placement = self._placement(buf, view)
            got = self._placed[key] = (view, buf.shape, placement, sizes_key(*placement))
        return self._ir_buffer(buf), buf.dtype, got[2], got[3]

    def _placement(self, buf, view) -> tuple:
        """``(offset, strides, box, pad)`` of :meth:`place`."""
        if view is None:
            return 0, self.strides_of(buf, self.shape(buf.shape)), None, 0.0
        vshape, strides, offset, box = self.bound(view)
        inner = (vshape, offset) if box is None else ops.inner_box(strides, offset, box)
        if inner is not None and 0 not in inner[0]:
            valid = self.locate(buf, Strided(inner[0], strides, inner[1]))
            ops.check_bounds(valid.shape, valid.strides, valid.offset, self._storage_size(buf))
            lows = (0,) * len(vshape) if box is None else tuple(lo for lo, _ in box)
            strides = valid.strides  # the valid part's, extended to the whole (masked) view
            offset = valid.offset - sum(lo * s for lo, s in zip(lows, strides))
        return offset, tuple(strides), box, view.pad

    def strides_of(self, buf, shape) -> tuple:
        """Element strides of ``buf``'s storage seen with ``shape`` (its own, or a regrouping of it:
        permuted buffers only ever in their own)."""
        if buf.id in self.perms and buf.id not in self.alias:
            return tuple(layout.physical_strides(shape, self.perms[buf.id]))
        return tuple(contiguous_strides(shape))

    def scratch_name(self, ref: Ref) -> str:
        """The IR buffer name of a scratch array (a GEMM's product that an epilogue reads)."""
        return self._ir_name(("scratch", ref.space, ref.offset), (ref.space, ref.offset))

    def _ir_buffer(self, buf) -> str:
        got = self._buffer_names.get(buf.id)  # (the name a buffer got first: by its array, or its own id)
        if got is not None:
            return got
        if buf.id in self.alias or buf.kind in CALLER_KINDS:
            name = self.alias.get(buf.id, buf.name)
            got = self._ir_name(("caller", name), (name, 0))
        else:
            flat = self._flat[buf.id]
            got = self._ir_name(("own", buf.id), (flat.space, flat.offset))
        self._buffer_names[buf.id] = got
        return got

    def _ir_name(self, key, source) -> str:
        name = self._ir_names.get(key)
        if name is None:
            name = self._ir_names[key] = f"b{len(self._ir_names)}"
            self._sources[name] = source
        return name

    def _storage_size(self, buf) -> int:
        """Elements of ``buf``'s storage from its start."""
        if buf.id in self.alias or buf.kind in CALLER_KINDS:
            return prod(self.callers[self.alias.get(buf.id, buf.name)][0])
        return self._flat[buf.id].shape[0]

    def generate(self, kernel: ir.Kernel, k, names: list) -> None:
        """Append a call of the generated ``kernel`` (made from kernel-graph kernel ``k``) over the IR
        buffers ``names`` (``names[i]`` is ``kernel.buffers[i]``); it is compiled with the binding's
        others when the binding is laid out (:meth:`_link`)."""
        outputs = [o for x in (k if isinstance(k, list) else [k]) for o in x.outputs]  # (a run: a list)
        aliased = {self._ir_buffer(b) for b, _ in outputs if b.id in self.alias}
        if aliased:
            aliased = {buf.name for buf, n in zip(kernel.buffers, names) if n in aliased}
            kernel = _stores_last(kernel, aliased, f"{kernel.name}_in_place{len(self.generated)}")
        self.generated.append((kernel, len(self.steps), names))
        self.steps.append(None)

    def _libraries(self) -> list:
        """The hand-written modules whose kernels the steps call (``steps.Library``), once each."""
        found: dict = {}
        for s in self.steps:
            for x in ([y for part in s.parts for y in part] if isinstance(s, Split) else [s]):
                if isinstance(x, Kernel) and isinstance(x.function, Library):
                    found.setdefault(x.function, None)
        return list(found)

    def _resolve(self, libraries: list) -> None:
        """Each step calling a kernel of ``libraries`` given its compiled function (compiled in the
        batch of the binding's kernels where there are some: then found in the caches)."""
        if not libraries:
            return
        functions = {lib: llvm.compile_text(lib.module, [lib.name], vectorised=True).function(lib.name)
                     for lib in libraries}

        def done(x):
            if isinstance(x, Kernel) and isinstance(x.function, Library):
                return Kernel(functions[x.function], x.buffers, x.params, x.start, x.stop, x.function)
            return x

        self.steps = [Split([[done(y) for y in part] for part in s.parts]) if isinstance(s, Split) else done(s)
                      for s in self.steps]

    def _link(self, threads: int) -> bool:
        """Compile the generated kernels (one module) and put their steps in place; a kernel whose
        estimated time is ``SPLIT_NS`` (times ``choices.split_scale``) or more is cut along its first
        grid axis over ``threads``. Returns whether any kernel was cut."""
        libraries = self._libraries()
        if not self.generated:
            self._resolve(libraries)
            return False
        # distinct: a kernel's buffers are separate allocations (the memory plan never places an output
        # in the slot of an input of the same kernel; pack parts are disjoint ranges; a caller array
        # overlapping a state written in place is read from a copy), but for a state written in place,
        # which is one buffer read and written
        choices = self.choices
        known: dict = {}
        costs = [known[id(kern)] if id(kern) in known else known.setdefault(id(kern), _cost_ns(kern, self.values))
                 for kern, _, _ in self.generated]
        split = self.split_ns
        worth = sum(c for c in costs if c >= split)
        if choices.threads == "auto" and worth < OWN_THREADS_NS:
            # too little to cut for the model to say our threads win: BLAS keeps its own threads for the
            # GEMMs; with something to cut, and nothing that runs on our threads anyway, a measurement decides
            self.undecided = threads > 1 and worth > 0 and not (self.own_threads or self.fused)
            threads = 1
        sizes = [index_value(kern.grid[0], self.values) if kern.grid else 1 for kern, _, _ in self.generated]
        cuts = [item_ranges(n, cost, threads, split) for n, cost in zip(sizes, costs)]
        cut = any(len(parts) > 1 for parts in cuts)
        # (the driver's modules the binding will call, compiled with the kernels: on threads of our
        # own, BLAS runs on one thread and the products may be cut; else on its own threads)
        own = cut or choices.threads == "own" or self.own_threads or bool(self.fused)  # (fusions: ours run them)
        planned = [x for s in self.steps for x in (s.steps if isinstance(s, blocked.Blocks) else [s])]
        also = driver.companions(planned, choices.gemm, 1 if own else blas.threads() or 1,
                                 thread_count() if own else 1) + [(lib.module, True) for lib in libraries]
        distinct = list({id(kern): kern for kern, _, _ in self.generated}.values())  # (a memo's kernel: many calls)
        self.module = llvm.compile_kernels(distinct, distinct=True, vector_width=choices.vector_width, also=also)
        self._resolve(libraries)
        for (kern, at, names), n, parts in zip(self.generated, sizes, cuts):
            buffers = tuple(self._sources[name] for name in names)
            params = tuple(int(ir.derived_value(name, self.values)) for name in kern.params)
            f = self.module.function(kern.name)
            whole = Kernel(f, buffers, params, 0, n, kern)
            if len(parts) == 1:
                self.steps[at] = whole
            else:
                self.steps[at] = Split([[whole.with_range(lo, hi)] for lo, hi in parts])
        return cut

    # results --------------------------------------------------------------------------------------
    def _output(self, buf, view):
        shape, strides, offset, box = self.bound(view)
        if box is None:
            return fresh, (self.view(buf, Strided(shape, strides, offset)),)
        inner = ops.inner_box(strides, offset, box)
        src = None if inner is None else self.view(buf, Strided(inner[0], strides, inner[1]))
        slices = tuple(slice(int(lo), int(hi)) for lo, hi in box)
        return fresh_masked, (tuple(map(int, shape)), view.pad, buf.dtype.np, slices, src)

    def _update(self, name, buf, view):
        if self.alias.get(buf.id) == name:  # written straight into the state's own array: nothing to copy
            return written, ()
        if buf.kind in CALLER_KINDS:  # another state's value from before the run: copy it now
            return self._output(buf, view)
        return same, (self.load(buf, view),)


class _PlainSizes:
    """:meth:`Planner.plain_sizes`'s block (a class: entered thousands of times in a deep stack's
    layout, where a generator's context manager costs several times more)."""

    __slots__ = ("planner", "env", "known")

    def __init__(self, planner):
        self.planner = planner

    def __enter__(self):
        p = self.planner
        self.env, self.known, p.env, p._known = p.env, p._known, p.values, p._plain

    def __exit__(self, *exc):
        self.planner.env, self.planner._known = self.env, self.known


def _slot_words(at: int, bufs: list) -> str:
    """A slot of the memory plan in words: its index and the buffers placed in it."""
    shown = ", ".join(map(repr, bufs[:4])) + (f" and {len(bufs) - 4} more" if len(bufs) > 4 else "")
    return f"slot {at} of the memory plan ({shown})" if bufs else f"slot {at} of the memory plan"


fresh = np.ndarray.copy  # a C-contiguous copy (the method's default order), the caller's to keep


def fresh_masked(shape, pad, dtype, slices, src) -> np.ndarray:
    out = np.full(shape, pad, dtype)
    if src is not None:
        out[slices] = src
    return out


def same(x):
    return x


def written():
    """An update whose value the run wrote into the state's own array (``Planner._in_place``): None, so
    the caller copies nothing (it copied the array onto itself: 2.4 MB a step of the MNIST MLP's
    AdamW, about a tenth of the step)."""
    return None


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
    called elsewhere in the program as it is.

    A value that is the element itself where a condition says so, ``Where(c, x, old)`` (or
    ``Where(c, old, x)``) with ``old`` the element read where it is stored, is stored only where it
    changes: ``if c: a[i] = x``. A Llama step's KV-cache update is such a select over the whole cache;
    it then reads and writes only the rows of the step."""
    body, late = [], []
    for j, s in enumerate(kernel.body):
        if isinstance(s, ir.Store) and s.buffer in names:
            reg = f"_in_place{j}"
            kept = _changed_where(s)
            if kept is not None:
                cond, value = kept
                body += [ir.Assign(f"{reg}_if", cond), ir.Assign(reg, value)]
                late.append(ir.If(ir.var(f"{reg}_if", cond.dtype),
                                  (ir.Store(s.buffer, s.index, ir.var(reg, value.dtype), s.valid),)))
                continue
            body.append(ir.Assign(reg, s.value))
            late.append(ir.Store(s.buffer, s.index, ir.var(reg, s.value.dtype), s.valid))
        else:
            body.append(s)
    return ir.Kernel(name, kernel.buffers, kernel.params, kernel.grid, tuple(body + late), kernel.block,
                     kernel.shared, kernel.notes)


def _changed_where(s: ir.Store) -> tuple | None:
    """``(condition, new value)`` when store ``s`` writes ``Where`` of its own element and a new value
    (``Where(c, x, old)``: c, x; ``Where(c, old, x)``: not c, x), else None."""
    v = s.value
    if v.op != "Where":
        return None
    c, a, b = v.args

    def own(x) -> bool:
        return x.op == "load" and x.arg[0] == s.buffer and len(x.args) == 1 and ir.same_value(x.args[0], s.index)

    if own(b) and not own(a):
        return c, a
    if own(a) and not own(b):
        return ir.alu("Not", c), b
    return None


def _cost_ns(kernel: ir.Kernel, env: dict) -> float:
    """Estimated time of a CPU kernel: per work item, its loads and stores of elements that change
    with the item (a load at a constant index, a scalar parameter, is hoisted by LLVM: free) and its
    transcendentals and float remainders (a loop's body times its trip count), times the work items,
    at the sizes of the binding ``env``. Each value counts once per item, however many statements
    share it. (What a kernel costs per trip of its loops is kept with it: ``_cost_terms``.)"""
    total = 0.0
    for loops, ns in _cost_terms(kernel):
        for start, stop in loops:
            ns *= max(index_value(stop, env) - index_value(start, env), 0)
        total += ns
    items = 1
    for g in kernel.grid:
        items *= index_value(g, env)
    return items * total


_COST_TERMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # ir.Kernel -> its _cost_terms


def _cost_terms(kernel: ir.Kernel) -> tuple:
    """``_cost_ns`` apart from the sizes: ``((loops, ns), ...)``, the ns per work item of the statements
    inside each nest of ``loops`` (``(start, stop)`` of each, outermost first) for one trip of them.
    Made once per kernel (a program's kernels are shared by its bindings and a body's trips)."""
    got = _COST_TERMS.get(kernel)
    if got is not None:
        return got
    moving: dict = {}  # id(index) -> whether it moves with the item (``_moves``)
    terms: list = []

    def block(body, seen: set, loops: tuple) -> None:
        ns = 0.0
        for s in body:
            if isinstance(s, ir.Loop):
                block(s.body, set(seen), loops + ((s.start, s.stop),))
                continue
            if isinstance(s, ir.If):
                block(s.body, seen, loops)
                continue
            if isinstance(s, (ir.Store, ir.AtomicAdd)):
                ns += NS_PER_ACCESS
            for v in ir.walk_values_of(ir.operands(s), seen):  # (values seen before: neither counted nor walked)
                if v.op == "load" and _moves(v.args[0], moving):
                    ns += NS_PER_ACCESS
                elif v.op in _CALLED and (v.op != "Mod" or v.dtype.is_float):
                    ns += _CALLS[v.op, v.dtype.itemsize == 8]
        if ns:
            terms.append((loops, ns))

    block(kernel.body, set(), ())
    got = _COST_TERMS[kernel] = tuple(terms)
    return got


def _moves(index: ir.V, memo: dict) -> bool:
    """Whether an index depends on the work item or a loop variable."""
    got = memo.get(id(index))
    if got is None:
        got = memo[id(index)] = index.op in ("item", "var") or any(_moves(a, memo) for a in index.args)
    return got



"""The kernel graph: what the compiler hands to a backend (backend-neutral, no frontend objects).

A program is a list of :class:`Kernel`s in execution order over :class:`Buffer`s. Every buffer is a
contiguous array of its (possibly symbolic) shape; a kernel reads buffers through views
(``frontend/view.py`` semantics: strides, offset, validity mask with a pad value) and writes whole
buffers. Inside a kernel, computation is an :class:`Expr` DAG evaluated per element of the kernel's
domain: a backend may evaluate it element by element (CUDA) or array by array (numpy).

Kernel kinds (``Kernel.kind``):

| kind        | domain          | what it computes
|-------------|-----------------|-----------------
| elementwise | out shape       | each output ``Expr`` at every index of the domain (several outputs allowed)
| reduce      | input shape     | ``reduce_op`` ("sum"/"max") of ``prologue`` over ``axes``; then each output
|             |                 | ``Expr`` (an epilogue, where ``Acc`` is the reduced value) at every output index
| matmul      | product shape   | ``Acc = sum over axes[0] of a*b`` where ``a``, ``b`` are ``inputs[0]``, ``inputs[1]``
|             |                 | read through their views (a GEMM layout); then the epilogue outputs
| gather      | out shape       | ``Gather`` of ``inputs[0]`` at ``inputs[1]`` along ``axis``
| scatter_add | dst shape       | ``ScatterAdd``: ``inputs[0]`` with ``inputs[2]`` added at ``inputs[1]`` along ``axis``
| call        | ``()``          | ``body``'s kernels (a :class:`Body`) with its ``params`` bound to the first
|             |                 | ``inputs`` (the rest: program temps its kernels read directly) and its
|             |                 | ``results`` to the buffers of ``outputs`` (whose Exprs are None), then its
|             |                 | ``packs`` to the next ones (1-d: each result of a pack is a part of it; an
|             |                 | input that is a part of an earlier call's pack is read through its view)

(A gather / scatter_add kernel's one output Expr is ``Gather`` / ``ScatterAdd`` of its Loads: it names
the operation, which backends carry out from ``inputs`` and ``axes``.)

A rolled loop (``compiler/rolling/``) stays rolled here: its body's kernels are built once, as a
:class:`Body`, and every trip is one ``call`` kernel of it. Everything that is linear in the
unrolled program is left to the backend, which expands the calls (``expand_calls``) when it lays out
its run; the memory plan places a body's ``scratch`` once, in slots every call reuses.

Expr ops: every elementwise primitive of ``core/primitives.py`` (Log2, Exp2, Sin, Sqrt, Recip,
Add, Mul, Mod, Max, LessThan, Where, Cast, and Copy, which is its operand's value; their dtype
rules are the primitives'), plus leaves
``Load`` (``arg`` = input slot: reads ``inputs[arg]`` at the current index), ``Scalar`` (``arg`` = a
number or a symbolic dim, broadcast) and ``Acc`` (the reduced / matmul value, in epilogues only), and
``Reshape`` (``arg`` = new shape: the same elements in the same order, regrouped). Every Expr has a
shape implied by its leaves (a Load: its view's shape; Acc: the kernel's output shape); an output
Expr has its buffer's shape, or no shape at all when it is made of Scalars only (it then broadcasts).
In an elementwise kernel and in a prologue ``Load(i)`` reads ``inputs[i]``; in a reduce or matmul
epilogue it reads ``epilogue_inputs[i]`` (views of the output shape).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from luminal.core.dtype import DType
from luminal.core.symbolic import evaluate, free_vars_in, shape_str, view_vars

BUFFER_KINDS = ("input", "state", "random", "const", "iota", "temp")
KERNEL_KINDS = ("elementwise", "reduce", "matmul", "gather", "scatter_add", "call")


@dataclass(eq=False, slots=True)  # thousands per deep graph: no per-instance dict
class Buffer:
    """A contiguous array. ``input``/``state``/``random`` buffers are supplied by the caller under
    ``name`` on every run; ``const`` buffers hold ``value`` (fixed at compile time); an ``iota``
    buffer (1-d int32) holds ``0..n-1`` for its bound length; ``temp`` buffers are produced by
    kernels and placed by the memory plan."""

    id: int
    shape: tuple
    dtype: DType
    kind: str = "temp"
    name: str | None = None
    value: object = None  # numpy array of a const buffer
    base: Buffer | None = None  # a part of a pack: its elements from ``offset`` on (made by ``expand_calls``)
    offset: object = 0

    def __repr__(self):
        tag = f" {self.name}" if self.name else ""
        part = f" in b{self.base.id}@{self.offset}" if self.base is not None else ""
        return f"b{self.id}:{self.kind}{tag} {shape_str(self.shape)} {self.dtype.name}{part}"


@dataclass(eq=False, slots=True)  # tens of thousands per deep graph: no per-instance dict
class Expr:
    op: str
    args: tuple = ()
    arg: object = None
    dtype: DType | None = None

    def __repr__(self):
        return self.show()

    def show(self, depth: int = 12) -> str:
        """The expression as text, operands ``depth`` levels down and deeper written ``...`` (a fused
        region may be thousands of operations deep)."""
        a = "" if self.arg is None else f"[{self.arg}]"
        if not self.args:
            return f"{self.op}{a}()"
        inner = "..." if depth <= 0 else ", ".join(x.show(depth - 1) for x in self.args)
        return f"{self.op}{a}({inner})"


@dataclass(eq=False)
class Kernel:
    kind: str
    domain: tuple  # the shape the kernel iterates over (see the table above)
    inputs: list  # [(Buffer, View)], each view of shape ``domain`` (reduce: prologue domain; matmul: product)
    outputs: list  # [(Buffer, Expr)]: each output buffer and the expression that fills it
    axes: tuple = ()  # reduce / matmul: reduced axes of ``domain``; gather / scatter_add: (axis,)
    reduce_op: str | None = None  # reduce: "sum" or "max"
    prologue: Expr | None = None  # reduce: the value reduced, per element of ``domain``
    acc_dtype: DType | None = None  # reduce / matmul: dtype of ``Acc``
    epilogue_inputs: list = field(default_factory=list)  # reduce / matmul: [(Buffer, View)] of the output shape
    fused: tuple = ()  # names of the primitives this kernel computes (for the report)
    body: Body | None = None  # call: the kernels it runs

    def __repr__(self):
        outs = ", ".join(repr(b) for b, _ in self.outputs)
        return f"{self.kind}{shape_str(self.domain)} -> {outs} [{' '.join(self.fused)}]"


@dataclass(eq=False)
class Body:
    """A rolled loop's body as kernels, run by each of its ``call`` kernels (one per trip). (The same
    body is a ``rolling.detect.Span`` of nodes when detected and a ``rolling.body.Body`` of terms
    once linked.)

    Its kernels read ``params`` (bound to a call's inputs, in order), the program's own buffers
    (leaves, and the values every trip shares, computed once before the first call) and ``scratch``;
    they write ``results`` (bound to a call's outputs, in order) and ``scratch``: temporaries that live
    within one call, so every call may reuse the same storage. None of these buffers is in the
    program's ``buffers``."""

    name: str
    params: list  # [Buffer]
    results: list  # [Buffer]
    scratch: list  # [Buffer]
    kernels: list  # [Kernel], in execution order (no calls)
    packs: list = field(default_factory=list)  # per pack: [(Buffer, element offset)], the results it holds


@dataclass
class KernelGraph:
    buffers: list  # [Buffer]
    kernels: list  # [Kernel], in execution order
    outputs: list  # [(Buffer, View)]: the program's results, read through views
    updates: list  # [(state name, Buffer, View)]: written into the named states after the run
    dims: tuple = ()  # symbolic dim names the program needs bound

    def bodies(self) -> list[Body]:
        """The bodies the program calls, in the order of their first calls."""
        return list({id(k.body): k.body for k in self.kernels if k.kind == "call"}.values())


def expand_calls(kernels) -> list[Kernel]:
    """``kernels`` with every call replaced by its body's kernels over the call's buffers (a copy
    per call; the scratch buffers are the body's own, shared by every call): the program as it
    runs, for a backend laying out its run. Linear in the unrolled program, unlike the rest of the
    kernel graph.

    A part of a pack becomes a Buffer of its own whose ``base`` is the pack (negative ids: the
    program's are not), one per part: the call writing it and the calls reading it share it."""
    return [k if not links else relinked(k, links) for k, links in call_links(kernels)]


def call_links(kernels):
    """``(kernel, links)`` per kernel the program runs, in order: a call's body kernels with
    ``links`` mapping the body's params, results and pack members to the call's buffers (``{}``
    for a kernel outside any call). A backend that compiles a body's kernels once launches them
    per call over the linked buffers; ``expand_calls`` copies them instead."""
    parts: dict = {}  # (pack, offset) -> the part's Buffer
    packs: set = set()  # the packs written so far

    def part(pack, offset, like):
        b = parts.get((pack, offset))
        if b is None:
            b = parts[(pack, offset)] = Buffer(-1 - len(parts), like.shape, like.dtype, base=pack, offset=offset)
        return b

    for k in kernels:
        if k.kind != "call":
            yield k, {}
            continue
        r = k.body
        links = {p: part(b, v.offset, p) if b in packs else b for p, (b, v) in zip(r.params, k.inputs)}
        bound = [b for b, _ in k.outputs]
        links.update(zip(r.results, bound))
        for pack, members in zip(bound[len(r.results):], r.packs):
            packs.add(pack)
            links.update((b, part(pack, off, b)) for b, off in members)
        for x in r.kernels:
            yield x, links


def relinked(k: Kernel, links: dict) -> Kernel:
    """``k`` with each buffer in ``links`` replaced by its link (same domain, views and expressions)."""
    get = links.get
    return Kernel(k.kind, k.domain, [(get(b, b), v) for b, v in k.inputs], [(get(b, b), e) for b, e in k.outputs],
                  k.axes, k.reduce_op, k.prologue, k.acc_dtype, [(get(b, b), v) for b, v in k.epilogue_inputs],
                  k.fused, k.body)


def dims_needed(kg: KernelGraph, expr_args=None) -> tuple:
    """Every symbolic dim name the program needs bound (shapes, views, scalars, reshapes), sorted.

    ``expr_args``: the args of every Scalar and Reshape in the kernels' expressions, from a caller
    that made them (the kernel builder): then no expression is walked (tens of thousands in a deep
    graph). A body's kernels are looked at once, however many calls it has."""
    used: set = set() if expr_args is None else free_vars_in(list(expr_args))
    seen: set[int] = set()  # ids of the shapes, views and exprs looked at: deep graphs share most of them

    def add(x, find=free_vars_in):
        if id(x) not in seen:
            seen.add(id(x))
            used.update(find(x))

    bodies = kg.bodies()
    kernels = kg.kernels + [k for body in bodies for k in body.kernels]
    buffers = kg.buffers + [b for body in bodies for b in body.params + body.results + body.scratch]
    used |= free_vars_in(list({b.shape for b in buffers} | {k.domain for k in kernels}))  # few distinct shapes
    for v in [v for _, v in kg.outputs] + [v for _, _, v in kg.updates]:
        add(v, view_vars)
    for k in kernels:
        if k.kind == "call":  # arguments are read whole: their dims are their buffers' shapes'
            continue
        for _, v in k.inputs:
            add(v, view_vars)
        for _, v in k.epilogue_inputs:
            add(v, view_vars)
        stack = [] if expr_args is not None else \
            [e for _, e in k.outputs if e is not None] + ([k.prologue] if k.prologue is not None else [])
        while stack:
            e = stack.pop()
            if id(e) in seen:
                continue
            seen.add(id(e))
            if e.op in ("Scalar", "Reshape") and not isinstance(e.arg, (int, float)):
                used |= free_vars_in(e.arg)
            stack.extend(e.args)
    return tuple(sorted(used))


# the memory plan (made by ``compiler/memory.py``, read by backends) ----------------------------------

def copy_source(k: Kernel):
    """``(buffer, view)`` that elementwise kernel ``k`` only copies into its one output (a copy of a
    view: an im2col matrix, a transpose made contiguous), else None."""
    if k.kind != "elementwise" or len(k.inputs) != 1 or len(k.outputs) != 1:
        return None
    e = k.outputs[0][1]
    while e.op in ("Reshape", "Copy"):
        e = e.args[0]
    if e.op != "Load" or e.arg != 0 or k.outputs[0][0].dtype is not k.inputs[0][0].dtype:
        return None
    return k.inputs[0]


def logical_itemsize(dtype) -> int:
    """Bytes per element of the dtype itself (bfloat16: 2), as a device backend stores it."""
    return dtype.itemsize


def nbytes(buf: Buffer, env: dict[str, int], itemsize=logical_itemsize) -> int:
    n = itemsize(buf.dtype)
    for d in buf.shape:  # (each dim's value: multiplying the expressions first builds a new one each time)
        n *= evaluate(d, env)
    return n


@dataclass
class MemoryPlan:
    slot_of: dict  # {temp buffer id: slot index}, bodies' scratch included
    slots: list  # [[Buffer]]: the temps sharing each slot, in the order they were placed
    temps: list  # [Buffer]: every temp buffer of the graph, then every body's scratch
    calls: dict = field(default_factory=dict)  # {scratch buffer id: calls of its body}

    def slot_bytes(self, env: dict[str, int], itemsize=logical_itemsize) -> list[int]:
        """Bytes of each slot under ``env``: its largest buffer."""
        return [max((nbytes(b, env, itemsize) for b in bufs), default=0) for bufs in self.slots]

    def peak_bytes(self, env: dict[str, int], itemsize=logical_itemsize) -> int:
        """Temp storage with reuse (the sum of the slots)."""
        return sum(self.slot_bytes(env, itemsize))

    def no_reuse_bytes(self, env: dict[str, int], itemsize=logical_itemsize) -> int:
        """Temp storage if every temp had its own allocation (scratch: one per call)."""
        return sum(nbytes(b, env, itemsize) * self.calls.get(b.id, 1) for b in self.temps)

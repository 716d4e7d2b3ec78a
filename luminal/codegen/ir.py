"""The kernel IR: one kernel as a grid of independent work items plus the code of one item.

Every code-generating backend speaks it: the CPU target compiles it to machine code through LLVM
(``codegen/llvm.py``), the CUDA target renders it to CUDA C and runs it on an emulator
(``backends/cuda``). It is deliberately small, so a kernel prints as a page of readable text
(:func:`show`) and each target is one walk over it.

**Values** (:class:`V`) are expressions without side effects, shared freely (a DAG):

| op          | args                    | arg                  | value
|-------------|-------------------------|----------------------|------
| ``const``   |                         | number               | the number, as ``dtype``
| ``param``   |                         | name                 | a scalar kernel parameter (a symbolic dim), ``INDEX``
| ``item``    |                         | axis                 | CPU: this work item's index along grid ``axis``
| ``thread``  |                         | axis (0, 1, 2)       | GPU: ``threadIdx`` along ``axis``
| ``block``   |                         | axis (0, 1, 2)       | GPU: ``blockIdx`` along ``axis``
| ``var``     |                         | name                 | a loop variable or a register (see ``Assign``)
| ``load``    | index [, valid]         | (buffer, pad)        | ``buffer[index]``; ``pad`` where ``valid`` is False
|             |                         |                      | (nothing is read then: the index may be out of range)
| ``cast``    | x                       |                      | ``x`` as ``dtype`` (the Cast primitive's rule)
| ``shfl_xor``| x                       | lane mask            | GPU: ``x`` of lane ``lane ^ mask`` of this warp
| primitive   | operands                |                      | an elementwise primitive of ``core/primitives.py``:
|             |                         |                      | Log2 Exp2 Sin Sqrt Recip Add Mul Mod Max LessThan Where
| ``Div``     | a, b                    |                      | integer floor division (``a >= 0``, ``b > 0``)
| ``And``, ``Or`` | a, b (bool)         |                      | logical and / or (masks)
| ``Not``     | a (bool)                |                      | logical not

Dtype rule: a primitive's result dtype is the primitive record's (``like a``, ``bool``). A float16 or
bfloat16 value is computed in float32 and rounded to its type once per operation, as the
reference does, so every target gives the reference's bits for elementwise code. Index math uses
``INDEX`` (64-bit signed integers).

**Statements** run in order for each work item:

| statement                         | effect
|-----------------------------------|-------
| ``Assign(name, value)``           | sets register ``name`` (its first assignment declares it, of ``value``'s dtype)
| ``Store(buffer, index, value, valid)`` | ``buffer[index] = value`` where ``valid`` (None: always)
| ``Loop(var, start, stop, body, step, ordered)`` | ``for var in range(start, stop, step)``: ``body`` (a tuple of
|                                   | statements); bounds may differ between GPU threads (each runs its own trips);
|                                   | ``ordered``: float sums in it add in trip order (not reassociated across trips)
| ``If(cond, body)``                | ``body`` where ``cond``
| ``Barrier()``                     | GPU: every thread of the block reaches this point before any goes on
| ``AtomicAdd(buffer, index, value, valid)`` | ``buffer[index] += value`` atomically
| ``Mma(d, a, b, c, dtype)``        | GPU: one warp's ``mma.sync.m16n8k16`` (``a``: 8, ``b``: 4, ``c``: 4 values per
|                                   | lane in the PTX fragment layout, ``a``/``b`` of ``dtype`` (float16 / bfloat16),
|                                   | ``c`` float32); registers ``d`` (4 names) receive ``a @ b + c``
| ``WideLoad(d, buffer, dtype, index)`` | GPU: registers ``d`` receive ``buffer[index + i]``, one 16-byte load: 4
|                                   | float32 or 8 float16 / bfloat16 (``wide_lanes``; the address 16-byte aligned)
| ``AsyncCopy(shared, sindex, buffer, index, count, dtype)`` | GPU: 16 bytes from a buffer into a shared array,
|                                   | landing later (``cp.async``; its first ``count`` elements read, zeros after)
| ``AsyncCommit()``, ``AsyncWait(n)`` | GPU: close a group of this thread's copies; wait until at most ``n`` groups
|                                   | are in flight
| ``LdMatrix(d, shared, index, dtype, trans)`` | GPU: a warp's four 8x8 16-bit matrices from shared memory into
|                                   | ``Mma`` fragments, a row address per lane (``ldmatrix.x4``)

**Kernels** (:class:`Kernel`): ``buffers`` are pointer parameters (:class:`Buf`), ``params`` the
scalar ones. A CPU kernel (``block == ()``) runs its ``body`` once per index of ``grid`` (the work
items: independent, so a target may run them in any order, vectorise across the innermost axis and
split the outermost over threads). A GPU kernel runs ``grid`` blocks of ``block`` threads; ``shared``
declares its per-block shared memory. Barriers, shuffles, ``Mma``, ``WideLoad``, the async copies and
``LdMatrix`` exist only in GPU kernels.

Buffer storage: a buffer holds its dtype's elements contiguously, except that CPU targets carry
bfloat16 in float32 storage (numpy's convention in this project); GPU targets store 16 bits.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from luminal.core import dtype as dt
from luminal.core.float_text import float_text
from luminal.core.primitives import ELEMENTWISE
from luminal.core.symbolic import DimValue, evaluate

INDEX = dt.DType("index", "i", 64, np.int64)  # index math: 64-bit, never a tensor's dtype

PRIMITIVE_OPS = frozenset(ELEMENTWISE) - {"Copy", "Cast"}  # Copy is its operand; Cast is ``cast``
INDEX_OPS = frozenset({"Div", "And", "Or", "Not"})
VALUE_OPS = frozenset({"const", "param", "item", "thread", "block", "var", "load", "cast", "shfl_xor"}) \
    | PRIMITIVE_OPS | INDEX_OPS
GPU_OPS = frozenset({"thread", "block", "shfl_xor"})


@dataclass(frozen=True, eq=False, slots=True)
class V:
    """A value: ``op`` over ``args`` (values) with ``arg`` (the table in the module docstring)."""

    op: str
    dtype: dt.DType
    args: tuple = ()
    arg: object = None

    def __repr__(self):
        return show_value(self)

    # Operators build index math (INDEX operands, Python ints lifted): lowering code stays readable.
    def __add__(self, o):
        return add(self, o)

    __radd__ = __add__

    def __mul__(self, o):
        return mul(self, o)

    __rmul__ = __mul__

    def __floordiv__(self, o):
        return div(self, o)

    def __mod__(self, o):
        return mod(self, o)

    def __lt__(self, o):
        return alu("LessThan", self, lift(o, self.dtype))


# value constructors -------------------------------------------------------------------------------

def const(value, dtype=INDEX) -> V:
    """A constant; a :class:`~luminal.core.symbolic.DimValue` (a size known for one binding, with the
    dim it is the value of) becomes that dim's expression over the kernel's parameters instead
    (:func:`dim`): code generated for one binding then runs for every binding of the same shape of code."""
    if type(value) is DimValue:
        v = dim(value.sym)
        return v if dtype is INDEX else cast(v, dtype)
    return V("const", dtype, (), value)


class DerivedDim(str):
    """The name of a parameter whose value the host computes from the binding's dims (:func:`dim`),
    carrying that dim (``.dim``): a kernel's ``params`` then say how to get every value they need,
    with no table kept elsewhere. A ``str`` (its name, ``d_`` and a digest of the dim), so everything
    that reads a parameter by name reads it alike."""

    def __new__(cls, d):
        name = super().__new__(cls, "d_" + hashlib.sha256(str(d).encode()).hexdigest()[:8])
        name.dim = d
        return name

    def __reduce__(self):
        return DerivedDim, (self.dim,)


def dim(d) -> V:
    """The symbolic dim ``d`` as an ``INDEX`` value over the kernel's ``param`` values (a kernel takes
    the dims it reads as parameters). A polynomial in the dim names is computed in the kernel; a dim
    with floor divisions, remainders, minima or maxima (a slice's clamped length) is a parameter of
    its own whose value the host computes once per call (``derived_value``): exact for negative
    operands, and no per-item arithmetic."""
    if isinstance(d, int):
        return const(d)
    if any(atom.kind != "var" for monomial, _ in d.terms for atom in monomial):
        return param(DerivedDim(d))
    out = const(0)
    for monomial, coeff in d.terms:
        term = const(coeff)
        for atom in monomial:
            term = mul(term, param(atom.args[0]))  # only dim names: other atoms returned above
        out = add(out, term)
    return out


def derived_value(name: str, env: dict) -> int:
    """The value of parameter ``name`` (one of a kernel's ``params``) under the binding ``env``: a dim
    name's own, or a derived dim's (a :class:`DerivedDim`) evaluated with Python's integer semantics."""
    if name in env:
        return env[name]
    d = getattr(name, "dim", None)
    if d is None:
        raise KeyError(f"kernel parameter {name!r} is neither a dim of the binding ({sorted(env)}) nor a derived dim")
    return int(evaluate(d, env))


def used_params(k) -> tuple:
    """The names of the parameters kernel ``k``'s grid and body read, sorted (its ``params``)."""
    return tuple(sorted({v.arg for v in walk_values_of(k.grid) + walk_values(k.body) if v.op == "param"}))


def lift(x, dtype=INDEX) -> V:
    """``x`` as a value: a V unchanged, a number as a constant of ``dtype``."""
    return x if isinstance(x, V) else const(x, dtype)


def param(name: str) -> V:
    return V("param", INDEX, (), name)


def item(axis: int) -> V:
    return V("item", INDEX, (), axis)


def thread(axis: int = 0) -> V:
    return V("thread", INDEX, (), axis)


def block(axis: int = 0) -> V:
    return V("block", INDEX, (), axis)


def var(name: str, dtype=INDEX) -> V:
    return V("var", dtype, (), name)


def same_value(a: V, b: V) -> bool:
    """Whether two values are the same expression (built apart: structurally equal). Iterative: a
    fused region's values may be thousands deep."""
    stack, seen = [(a, b)], set()
    while stack:
        x, y = stack.pop()
        if x is y or (id(x), id(y)) in seen:
            continue
        seen.add((id(x), id(y)))
        if x.op != y.op or x.dtype is not y.dtype or x.arg != y.arg or len(x.args) != len(y.args):
            return False
        stack.extend(zip(x.args, y.args))
    return True


def replaced(x: V, old: V, new: V) -> V:
    """``x`` with every subexpression that is :func:`same_value` as ``old`` replaced by ``new`` (the
    rest shared, not copied)."""
    out: dict = {}
    for v in walk_values_of([x]):  # (operands before users)
        if v.op == old.op and same_value(v, old):
            out[id(v)] = new
            continue
        args = tuple(out[id(a)] for a in v.args)
        out[id(v)] = v if all(a is b for a, b in zip(args, v.args)) else V(v.op, v.dtype, args, v.arg)
    return out[id(x)]


def load(buffer: str, dtype, index, valid: V | None = None, pad=0) -> V:
    args = (lift(index),) if valid is None else (lift(index), valid)
    return V("load", dtype, args, (buffer, pad))


def cast(x: V, dtype) -> V:
    return x if x.dtype is dtype else V("cast", dtype, (x,))


def shfl_xor(x: V, mask: int) -> V:
    return V("shfl_xor", x.dtype, (x,), mask)


def alu(op: str, *args) -> V:
    """An elementwise primitive (or an index op) over ``args``, of the primitive's result dtype."""
    if op not in PRIMITIVE_OPS and op not in INDEX_OPS:
        raise ValueError(f"kernel IR: unknown operation {op!r}")
    if op == "LessThan" or op in ("And", "Or", "Not"):
        out = dt.bool_
    elif op == "Where":
        out = args[1].dtype
    else:
        out = args[0].dtype
    return V(op, out, tuple(args))


def _fold(op, a, b):
    """Index math on constants folds here, so printed kernels show the numbers."""
    if a.op == "const" and b.op == "const" and a.dtype is INDEX and b.dtype is INDEX:
        x, y = a.arg, b.arg
        return const({"Add": x + y, "Mul": x * y, "Div": x // y if y else None, "Mod": x % y if y else None}[op])
    return None


def add(a, b) -> V:
    a, b = lift(a), lift(b)
    if b.op == "const" and b.arg == 0:
        return a
    if a.op == "const" and a.arg == 0:
        return b
    return _fold("Add", a, b) or V("Add", a.dtype, (a, b))


def mul(a, b) -> V:
    a, b = lift(a), lift(b)
    for x, y in ((a, b), (b, a)):
        if y.op == "const" and y.arg == 1:
            return x
        if y.op == "const" and y.arg == 0 and x.dtype is INDEX:
            return y
    return _fold("Mul", a, b) or V("Mul", a.dtype, (a, b))


def div(a, b) -> V:
    a, b = lift(a), lift(b)
    if b.op == "const" and b.arg == 1:
        return a
    return _fold("Div", a, b) or V("Div", a.dtype, (a, b))


def mod(a, b) -> V:
    a, b = lift(a), lift(b)
    if b.op == "const" and b.arg == 1:
        return const(0)
    return _fold("Mod", a, b) or V("Mod", a.dtype, (a, b))


def both(a: V | None, b: V | None) -> V | None:
    """``a and b`` where None means True (masks)."""
    if a is None:
        return b
    if b is None:
        return a
    return V("And", dt.bool_, (a, b))


# statements ---------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Assign:
    name: str
    value: V


@dataclass(frozen=True, eq=False)
class Store:
    buffer: str
    index: V
    value: V
    valid: V | None = None


@dataclass(frozen=True, eq=False)
class Loop:
    var: str
    start: V
    stop: V
    body: tuple
    step: V = None  # None: 1 (a GPU thread-strided loop steps by its block's size)
    # float sums accumulated in the loop keep trip order: a target vectorises across the independent
    # accumulators of one trip (a block of columns) rather than across trips (strided gathers)
    ordered: bool = False


@dataclass(frozen=True, eq=False)
class If:
    cond: V
    body: tuple


@dataclass(frozen=True, eq=False)
class Barrier:
    pass


@dataclass(frozen=True, eq=False)
class AtomicAdd:
    buffer: str
    index: V
    value: V
    valid: V | None = None


@dataclass(frozen=True, eq=False)
class Mma:
    d: tuple  # 4 register names (float32)
    a: tuple  # 8 values of ``dtype``
    b: tuple  # 4 values of ``dtype``
    c: tuple  # 4 float32 values
    dtype: dt.DType  # float16 or bfloat16


@dataclass(frozen=True, eq=False)
class WideLoad:
    d: tuple  # ``wide_lanes(dtype)`` register names, of ``dtype``
    buffer: str
    dtype: dt.DType  # float32, float16 or bfloat16
    index: V  # of the first element (its address 16-byte aligned)


@dataclass(frozen=True, eq=False)
class AsyncCopy:
    """GPU (``cp.async``): 16 bytes of ``dtype`` from ``buffer[index]`` on into shared array
    ``shared[sindex]`` on, without waiting: the first ``count`` elements are read (0 to
    ``wide_lanes(dtype)``; the rest are zeros). Both addresses 16-byte aligned. The copy lands by the
    ``AsyncWait`` that completes its group (``AsyncCommit``); until then its destination holds no value."""

    shared: str
    sindex: V
    buffer: str
    index: V
    count: V
    dtype: dt.DType  # float32, float16 or bfloat16


@dataclass(frozen=True, eq=False)
class AsyncCommit:
    """GPU: the thread's copies issued since its last commit become one group."""


@dataclass(frozen=True, eq=False)
class AsyncWait:
    """GPU: wait until at most ``pending`` of the thread's most recent groups are still in flight (the
    older ones have landed; other threads see them after a ``Barrier``)."""

    pending: int


@dataclass(frozen=True, eq=False)
class LdMatrix:
    """GPU (``ldmatrix.sync.aligned.m8n8.x4``): four 8x8 matrices of 16-bit values from shared array
    ``shared``, one warp together. Lane ``8 i + r`` gives ``index``, where row ``r`` of matrix ``i``
    starts (8 consecutive elements, 16-byte aligned); lane ``l`` receives ``d[2 i]``, ``d[2 i + 1]`` =
    matrix ``i``'s elements ``(l // 4, 2 (l % 4))`` and ``(l // 4, 2 (l % 4) + 1)``, or with ``trans``
    ``(2 (l % 4), l // 4)`` and ``(2 (l % 4) + 1, l // 4)``: ``Mma``'s fragment layout."""

    d: tuple  # 8 register names of ``dtype``
    shared: str
    index: V
    dtype: dt.DType  # float16 or bfloat16
    trans: bool = False


WIDE_DTYPES = (dt.float32, dt.float16, dt.bfloat16)


def wide_lanes(d: dt.DType) -> int:
    """Elements of ``d`` in one 16-byte load (``WideLoad``): 4 float32, 8 float16 or bfloat16."""
    return 16 // d.itemsize

STATEMENTS = (Assign, Store, Loop, If, Barrier, AtomicAdd, Mma, WideLoad, AsyncCopy, AsyncCommit, AsyncWait,
              LdMatrix)
GPU_STATEMENTS = (Barrier, Mma, WideLoad, AsyncCopy, AsyncCommit, AsyncWait, LdMatrix)


# kernels ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Buf:
    """A pointer parameter: ``name`` of ``dtype``; ``access`` "r", "w" or "rw" (what the code does)."""

    name: str
    dtype: dt.DType
    access: str = "r"


@dataclass(frozen=True)
class Shared:
    """A GPU kernel's per-block shared array of ``size`` elements."""

    name: str
    dtype: dt.DType
    size: int


@dataclass(eq=False)
class Kernel:
    name: str
    buffers: tuple  # (Buf, ...): pointer parameters, in order
    params: tuple  # (name, ...): INDEX scalar parameters, after the buffers
    grid: tuple  # (V, ...): CPU: work items per axis; GPU: blocks per axis (x, y, z)
    body: tuple  # (statement, ...)
    block: tuple = ()  # GPU: threads per block (x, y, z); () for a CPU kernel
    shared: tuple = ()  # (Shared, ...)
    notes: dict = field(default_factory=dict)  # the lowering's choices (for the report), not semantics

    @property
    def gpu(self) -> bool:
        return bool(self.block)

    def text(self) -> str:
        return show(self)


# printing -----------------------------------------------------------------------------------------

_INFIX = {"Add": "+", "Mul": "*", "Div": "//", "Mod": "%", "LessThan": "<", "And": "&&", "Or": "||"}


SHOW_DEPTH = 48  # operands deeper than this print as "...": a fused region may be thousands deep


def show_value(v: V, names: dict | None = None, depth: int = SHOW_DEPTH) -> str:
    """``v`` as an expression (``names``: values already bound to a name, printed as the name),
    operands more than ``depth`` levels down written ``...``."""
    if names is not None and id(v) in names:
        return names[id(v)]
    if depth <= 0 and v.args:
        return "..."
    r = (lambda x: show_value(x, names, depth - 1))
    if v.op == "const":
        s = repr(v.arg) if not isinstance(v.arg, bool) else str(v.arg).lower()
        return s if v.dtype is INDEX else f"{s}:{v.dtype.name}"
    if v.op in ("param", "var"):
        return str(v.arg)
    if v.op == "item":
        return f"item{v.arg}"
    if v.op in ("thread", "block"):
        return f"{v.op}.{'xyz'[v.arg]}"
    if v.op == "load":
        buf, pad = v.arg
        at = f"{buf}[{r(v.args[0])}]"
        return at if len(v.args) == 1 else f"({at} if {r(v.args[1])} else {pad!r})"
    if v.op == "cast":
        return f"{v.dtype.name}({r(v.args[0])})"
    if v.op == "shfl_xor":
        return f"shfl_xor({r(v.args[0])}, {v.arg})"
    if v.op in _INFIX and len(v.args) == 2:
        return f"({r(v.args[0])} {_INFIX[v.op]} {r(v.args[1])})"
    return f"{v.op}({', '.join(r(a) for a in v.args)})"


def _lines(body, depth, out):
    pad = "  " * depth
    for s in body:
        if isinstance(s, Assign):
            out.append(f"{pad}{s.name} = {show_value(s.value)}")
        elif isinstance(s, (Store, AtomicAdd)):
            op = "=" if isinstance(s, Store) else "+=(atomic)"
            where = "" if s.valid is None else f" if {show_value(s.valid)}"
            out.append(f"{pad}{s.buffer}[{show_value(s.index)}] {op} {show_value(s.value)}{where}")
        elif isinstance(s, Loop):
            step = "" if s.step is None else f" step {show_value(s.step)}"
            step += " (ordered)" if s.ordered else ""
            out.append(f"{pad}for {s.var} in {show_value(s.start)}..{show_value(s.stop)}{step}:")
            _lines(s.body, depth + 1, out)
        elif isinstance(s, If):
            out.append(f"{pad}if {show_value(s.cond)}:")
            _lines(s.body, depth + 1, out)
        elif isinstance(s, Barrier):
            out.append(f"{pad}barrier")
        elif isinstance(s, Mma):
            args = "; ".join(", ".join(show_value(x) for x in xs) for xs in (s.a, s.b, s.c))
            out.append(f"{pad}{', '.join(s.d)} = mma.m16n8k16.{s.dtype.name}({args})")
        elif isinstance(s, WideLoad):
            out.append(f"{pad}{', '.join(s.d)} = wide {s.buffer}[{show_value(s.index)}]:{s.dtype.name}")
        elif isinstance(s, AsyncCopy):
            out.append(f"{pad}{s.shared}[{show_value(s.sindex)}] <- async {s.buffer}[{show_value(s.index)}]:"
                       f"{s.dtype.name} x {show_value(s.count)}")
        elif isinstance(s, AsyncCommit):
            out.append(f"{pad}async commit")
        elif isinstance(s, AsyncWait):
            out.append(f"{pad}async wait {s.pending}")
        elif isinstance(s, LdMatrix):
            out.append(f"{pad}{', '.join(s.d)} = ldmatrix{'.trans' if s.trans else ''} "
                       f"{s.shared}[{show_value(s.index)}]:{s.dtype.name}")
        else:
            raise TypeError(f"kernel IR: not a statement: {s!r}")


def show(k: Kernel) -> str:
    """The kernel as text: signature, launch shape, then the code of one work item."""
    bufs = ", ".join(f"{b.name}: {b.dtype.name}*{'' if b.access == 'r' else ' ' + b.access}" for b in k.buffers)
    params = "".join(f", {p}" for p in k.params)
    grid = ", ".join(show_value(g) for g in k.grid)
    launch = f"grid ({grid})" + (f" block {tuple(k.block)}" if k.block else "")
    out = [f"kernel {k.name}({bufs}{params})  {launch}"]
    out += [f"  shared {s.name}: {s.dtype.name}[{s.size}]" for s in k.shared]
    _lines(k.body, 1, out)
    return "\n".join(out)


# checking -----------------------------------------------------------------------------------------

class IRError(ValueError):
    """A malformed kernel (a bug in a lowering, reported with the kernel's name)."""


def check(k: Kernel) -> Kernel:
    """``k`` after checking that every name it reads is defined, every buffer declared, dtypes agree
    where an operation needs them to, and GPU constructs appear only in GPU kernels."""
    bufs = {b.name: b for b in k.buffers} | {s.name: s for s in k.shared}
    params = set(k.params)

    def fail(msg):
        raise IRError(f"kernel {k.name}: {msg}")

    def value(root: V, scope: set, seen: set):
        stack = [root]  # iterative: fused regions may be thousands of operations deep
        while stack:
            v = stack.pop()
            if id(v) in seen:
                continue
            seen.add(id(v))
            if v.op not in VALUE_OPS:
                fail(f"unknown value op {v.op!r}")
            if v.op in GPU_OPS and not k.gpu:
                fail(f"{v.op} in a CPU kernel")
            if v.op == "item" and k.gpu:
                fail("item in a GPU kernel (use thread/block)")
            if v.op == "item" and not 0 <= v.arg < len(k.grid):
                fail(f"item{v.arg} outside the grid's {len(k.grid)} axes")
            if v.op == "param" and v.arg not in params:
                fail(f"parameter {v.arg!r} not declared")
            if v.op == "var" and v.arg not in scope:
                fail(f"{v.arg!r} read before it is assigned")
            if v.op == "load" and v.arg[0] not in bufs:
                fail(f"load from undeclared buffer {v.arg[0]!r}")
            if v.op in ("Add", "Mul", "Mod", "Max", "LessThan", "Div") and v.args[0].dtype is not v.args[1].dtype:
                fail(f"{v.op} of {v.args[0].dtype.name} and {v.args[1].dtype.name}: {show_value(v)}")
            stack.extend(v.args)

    def block_(body, scope: set):
        # values checked once per block: a block's scope only grows, so what passed at one statement
        # passes at the later ones (a fused region's statements share most of a deep DAG of values)
        seen: set = set()
        for s in body:
            if isinstance(s, Assign):
                value(s.value, scope, seen)
                scope.add(s.name)
            elif isinstance(s, (Store, AtomicAdd)):
                if s.buffer not in bufs:
                    fail(f"store to undeclared buffer {s.buffer!r}")
                for v in (s.index, s.value) + (() if s.valid is None else (s.valid,)):
                    value(v, scope, seen)
            elif isinstance(s, Loop):
                for v in (s.start, s.stop) + (() if s.step is None else (s.step,)):
                    value(v, scope, seen)
                block_(s.body, scope | {s.var})
            elif isinstance(s, If):
                value(s.cond, scope, seen)
                inner = set(scope)
                block_(s.body, inner)
            elif isinstance(s, Barrier):
                if not k.gpu:
                    fail("barrier in a CPU kernel")
            elif isinstance(s, Mma):
                if not k.gpu:
                    fail("mma in a CPU kernel")
                if (len(s.d), len(s.a), len(s.b), len(s.c)) != (4, 8, 4, 4):
                    fail("mma takes 8 a, 4 b, 4 c values and 4 d registers per lane")
                for v in s.a + s.b + s.c:
                    value(v, scope, seen)
                scope.update(s.d)
            elif isinstance(s, WideLoad):
                if not k.gpu:
                    fail("wide load in a CPU kernel")
                if s.dtype not in WIDE_DTYPES or len(s.d) != wide_lanes(s.dtype):
                    fail(f"a wide load is 4 float32 or 8 float16/bfloat16 registers, got {len(s.d)} of {s.dtype.name}")
                if s.buffer not in {b.name for b in k.buffers}:
                    fail(f"wide load from {s.buffer!r}, not a buffer of the kernel's (shared arrays: no)")
                value(s.index, scope, seen)
                scope.update(s.d)
            elif isinstance(s, AsyncCopy):
                if not k.gpu:
                    fail("async copy in a CPU kernel")
                if s.dtype not in WIDE_DTYPES:
                    fail(f"an async copy moves float32, float16 or bfloat16, not {s.dtype.name}")
                if s.buffer not in {b.name for b in k.buffers} or s.shared not in {x.name for x in k.shared}:
                    fail(f"async copy from {s.buffer!r} (a buffer) into {s.shared!r} (a shared array)")
                for v in (s.sindex, s.index, s.count):
                    value(v, scope, seen)
            elif isinstance(s, (AsyncCommit, AsyncWait)):
                if not k.gpu:
                    fail("async commit or wait in a CPU kernel")
                if isinstance(s, AsyncWait) and not (isinstance(s.pending, int) and 0 <= s.pending <= 7):
                    fail(f"async wait for {s.pending!r} groups in flight (0 to 7)")
            elif isinstance(s, LdMatrix):
                if not k.gpu:
                    fail("ldmatrix in a CPU kernel")
                if s.dtype not in (dt.float16, dt.bfloat16) or len(s.d) != 8:
                    fail(f"ldmatrix.x4 gives 8 float16/bfloat16 registers, got {len(s.d)} of {s.dtype.name}")
                if s.shared not in {x.name for x in k.shared}:
                    fail(f"ldmatrix from {s.shared!r}, not a shared array of the kernel's")
                value(s.index, scope, seen)
                scope.update(s.d)
            else:
                fail(f"not a statement: {s!r}")

    for g in k.grid:
        value(g, set(), set())
    block_(k.body, set())
    return k


def _arg_text(arg) -> str:
    """An IR value's argument as fingerprint text: its ``repr``, with each NaN's bits (``repr`` writes
    every NaN as ``nan``: two kernels differing in a NaN constant's sign would share one object)."""
    if type(arg) is float:
        return float_text(arg)
    if type(arg) is tuple and any(type(a) is float and a != a for a in arg):
        return "(" + ", ".join(_arg_text(a) for a in arg) + ")"
    return repr(arg)


def fingerprint(k: Kernel, positional: bool = False) -> str:
    """The kernel's full code as text, every value once (numbered, operands first), whatever its
    depth: what identifies a kernel (its name's digest, a compile cache's key), where ``show`` may
    abbreviate deep operands. ``positional``: buffers named by their position in ``k.buffers``, so
    that kernels of the same code over other buffers (the trips of a rolled body) print the same."""
    rename = {b.name: f"#{i}" for i, b in enumerate(k.buffers)} if positional else {}

    def buf(name: str) -> str:
        return rename.get(name, name)

    refs: dict[int, str] = {}  # id(value) -> "%n", n its number
    lines: list[str] = []

    def ref(v: V) -> str:
        return refs[id(v)]

    walked: set = set()

    def values(vs):
        for v in walk_values_of(vs, walked):
            if id(v) not in refs:
                r = refs[id(v)] = f"%{len(refs)}"
                operands = ", ".join([refs[id(a)] for a in v.args])
                arg = (buf(v.arg[0]), v.arg[1]) if v.op == "load" else v.arg
                lines.append(f"{r} = {v.op}:{v.dtype.name}[{_arg_text(arg)}]({operands})")

    def stmts(body, depth):
        pad = "  " * depth
        for s in body:
            vs = operands(s)
            values(vs)
            refs = " ".join(ref(v) for v in vs)
            if isinstance(s, Assign):
                lines.append(f"{pad}{s.name} := {refs}")
            elif isinstance(s, (Store, AtomicAdd)):
                lines.append(f"{pad}{type(s).__name__} {buf(s.buffer)} {refs}")
            elif isinstance(s, Loop):
                lines.append(f"{pad}loop{' ordered' if s.ordered else ''} {s.var} {refs}")
            elif isinstance(s, If):
                lines.append(f"{pad}if {refs}")
            elif isinstance(s, Barrier):
                lines.append(f"{pad}barrier")
            elif isinstance(s, Mma):
                lines.append(f"{pad}mma {s.dtype.name} {' '.join(s.d)} {refs}")
            elif isinstance(s, WideLoad):
                lines.append(f"{pad}wide {s.dtype.name} {' '.join(s.d)} {buf(s.buffer)} {refs}")
            elif isinstance(s, AsyncCopy):
                lines.append(f"{pad}async {s.dtype.name} {s.shared} {buf(s.buffer)} {refs}")
            elif isinstance(s, AsyncCommit):
                lines.append(f"{pad}commit")
            elif isinstance(s, AsyncWait):
                lines.append(f"{pad}wait {s.pending}")
            elif isinstance(s, LdMatrix):
                kind = "ldmatrix trans" if s.trans else "ldmatrix"
                lines.append(f"{pad}{kind} {s.dtype.name} {' '.join(s.d)} {s.shared} {refs}")
            if isinstance(s, (Loop, If)):
                stmts(s.body, depth + 1)

    values(k.grid)
    head = [f"bufs {[(buf(b.name), b.dtype.name, b.access) for b in k.buffers]} params {list(k.params)}",
            f"grid {[ref(g) for g in k.grid]} block {list(k.block)}",
            f"shared {[(x.name, x.dtype.name, x.size) for x in k.shared]}"]
    stmts(k.body, 0)
    return "\n".join(head + lines)


def walk_values_of(roots, seen: set | None = None):
    """Every value reachable from ``roots``, each once, operands before users (iteratively); ``seen``:
    ids of values walked before (by an earlier call sharing the set), left out and not walked again."""
    seen = set() if seen is None else seen
    out: list = []
    for root in roots:
        stack = [(root, False)]
        push, pop = stack.append, stack.pop
        while stack:
            x, done = pop()
            if done:
                out.append(x)
                continue
            if id(x) in seen:
                continue
            seen.add(id(x))
            push((x, True))
            for a in reversed(x.args):  # (one walked already is left out here, as it would be when popped)
                if id(a) not in seen:
                    push((a, False))
    return out


def operands(s) -> tuple:
    """The values statement ``s`` itself uses (not those of the statements it contains)."""
    if isinstance(s, Assign):
        return (s.value,)
    if isinstance(s, (Store, AtomicAdd)):
        return (s.index, s.value) + (() if s.valid is None else (s.valid,))
    if isinstance(s, Loop):
        return (s.start, s.stop) + (() if s.step is None else (s.step,))
    if isinstance(s, If):
        return (s.cond,)
    if isinstance(s, Mma):
        return s.a + s.b + s.c
    if isinstance(s, (WideLoad, LdMatrix)):
        return (s.index,)
    if isinstance(s, AsyncCopy):
        return (s.sindex, s.index, s.count)
    return ()


def walk_values(body):
    """Every value the statements of ``body`` use, each once, operands before users."""
    roots: list = []

    def stmts(body):
        for s in body:
            roots.extend(operands(s))
            if isinstance(s, (Loop, If)):
                stmts(s.body)

    stmts(body)
    return walk_values_of(roots)

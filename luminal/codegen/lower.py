"""What every lowering into the kernel IR shares: symbolic dims as index values, a view's read as an
index and a validity mask, and a kernel's ``Expr`` DAG as IR values at one index of its domain.

The one lowering (``codegen/lowering/``) builds every kernel kind on these for every target; targets
differ only in their ``Target`` record (how work items map onto the machine: loops over a grid of
items, or threads and blocks), so the per-element code, its dtype rules and its masked reads cannot
disagree between them.
"""

from __future__ import annotations

from dataclasses import dataclass

from luminal.codegen import ir
from luminal.core import dtype as dt
from luminal.core.symbolic import DimValue, Sym, evaluate, is_static


def dim(d, env: dict | None = None) -> ir.V:
    """The symbolic dim ``d`` as an ``INDEX`` value: a constant when ``env`` binds it to plain ints (a
    kernel specialised to one binding), else an expression over the kernel's ``param`` values
    (``ir.dim``; a GPU kernel takes its dims as parameters, and a CPU kernel laid out with
    ``DimValue`` sizes too, through ``ir.const``)."""
    if type(d) is DimValue:
        return ir.dim(d.sym)
    if is_static(d):
        return ir.const(int(d))
    if env is not None:
        return ir.const(evaluate(d, env))
    return ir.dim(d)


_INDEX_OPS = {"Add": lambda a, b: a + b, "Mul": lambda a, b: a * b, "Div": lambda a, b: a // b,
              "Mod": lambda a, b: a % b, "Max": max}


def index_value(v: ir.V, env: dict) -> int:
    """The value of index math ``v`` (constants and parameters: a grid's extent, a loop's bound) under
    the binding ``env``, as the kernel computes it (``Div``/``Mod`` on the non-negative values the IR
    promises); ``ValueError`` for anything else (a loaded or per-item value)."""
    if v.op == "const":
        return int(v.arg)
    if v.op == "param":
        return ir.derived_value(v.arg, env)
    if v.op in _INDEX_OPS:
        return _INDEX_OPS[v.op](*(index_value(a, env) for a in v.args))
    raise ValueError(f"not a value known before the kernel runs: {v.op}")


@dataclass(frozen=True)
class Placed:
    """A view resolved against where its buffer lives: IR buffer ``name`` (of ``dtype``), the element
    ``offset`` and ``strides`` into it, and per axis the valid ``box`` (None: every index valid) with
    ``pad`` outside it. Offsets, strides and box bounds are ints or symbolic dims."""

    name: str
    dtype: dt.DType
    offset: object
    strides: tuple
    box: tuple | None = None
    pad: float = 0.0


def address(p: Placed, idx, env: dict | None = None) -> ir.V:
    """The element of ``p``'s buffer at the multi-index ``idx``: its offset plus the index times its
    strides (no bounds: :func:`read`'s ``valid`` says where it may be read)."""
    index = dim(p.offset, env)
    for i, s in zip(idx, p.strides):
        index = ir.add(index, ir.mul(i, dim(s, env)))
    return index


def read(p: Placed, idx, env: dict | None = None, extra: ir.V | None = None) -> ir.V:
    """The value ``p`` reads at the multi-index ``idx`` (IR values, one per axis). Where ``extra`` (a
    bool value) is False nothing is read either: a gather's position, loaded at run time, may be out
    of range, and the load must not touch memory there."""
    index = address(p, idx, env)
    valid = None
    for i, bounds in zip(idx, p.box or [None] * len(idx)):
        if bounds is not None:
            lo, hi = bounds
            if not (is_static(lo) and type(lo) is not DimValue and lo <= 0):  # (a dim's value may change)
                valid = ir.both(valid, ir.alu("Not", ir.alu("LessThan", i, dim(lo, env))))
            valid = ir.both(valid, ir.alu("LessThan", i, dim(hi, env)))
    pad = p.pad if p.dtype.is_float else (bool(p.pad) if p.dtype.kind == "b" else int(p.pad))
    return ir.load(p.name, p.dtype, index, ir.both(valid, extra), pad)


def index_read(p: Placed, idx, size, env: dict | None = None) -> tuple[ir.V, ir.V]:
    """A gather's or scatter's position along its axis: the index tensor ``p`` read at ``idx``, as
    ``INDEX``, and whether it lies in ``[0, size)`` (else the reference raises IndexError: a kernel
    reads and writes nothing there and reports it)."""
    j = ir.cast(read(p, idx, env), ir.INDEX)
    ok = ir.both(ir.alu("Not", ir.alu("LessThan", j, ir.const(0))), ir.alu("LessThan", j, dim(size, env)))
    return j, ok


def contiguous_index(idx, shape, env: dict | None = None) -> ir.V:
    """The row-major flat index of ``idx`` in ``shape`` (where a kernel writes its output)."""
    index = ir.const(0)
    for i, n in zip(idx, shape):
        index = ir.add(ir.mul(index, dim(n, env)), i)
    return index


def unflatten(flat: ir.V, shape, env: dict | None = None) -> list:
    """The multi-index of the row-major flat index ``flat`` in ``shape``."""
    out = []
    for n in reversed(shape[1:]):
        size = dim(n, env)
        out.append(ir.mod(flat, size))
        flat = ir.div(flat, size)
    if shape:
        out.append(flat)  # the outermost axis: no wrap (the flat index is in range)
    return out[::-1]


class Values:
    """A kernel's ``Expr`` DAG as IR values at one index of its domain.

    ``leaf(e, idx)`` gives the value of a ``Load`` or ``Acc`` leaf at ``idx``; ``shape_of(e)`` the
    shape of a leaf (a Load: its view's; Acc: the output's). Values are shared per (Expr, index), so a
    DAG stays a DAG. ``Reshape`` regroups the index (row-major flat index, then the operand's axes)."""

    def __init__(self, leaf, leaf_shape, env: dict | None = None):
        self.leaf, self.leaf_shape, self.env = leaf, leaf_shape, env
        self._memo: dict = {}
        self._shapes: dict = {}
        self._regrouped: dict = {}  # (Reshape id, index key) -> its operand's index (made once)
        self._alive: list = []  # every index whose ids are memo keys, kept alive so no id is reused
        self._index_ids: dict = {}  # id(index tuple) -> (the tuple, its values' ids): ``_ids``

    def shape(self, e):
        """The shape ``e`` is computed at (None: made of scalars alone, it broadcasts)."""
        s = self._shapes.get(id(e), ())
        if s != ():
            return s
        stack = [e]
        while stack:  # iterative: fused regions may be thousands of operations deep
            x = stack[-1]
            if id(x) in self._shapes:
                stack.pop()
                continue
            todo = [a for a in x.args if id(a) not in self._shapes]
            if todo and x.op not in ("Load", "Acc", "Scalar", "Reshape"):
                stack.extend(todo)
                continue
            stack.pop()
            if x.op in ("Load", "Acc"):
                out = tuple(self.leaf_shape(x))
            elif x.op == "Scalar":
                out = None
            elif x.op == "Reshape":
                out = tuple(x.arg)
            else:
                shapes = [self._shapes[id(a)] for a in x.args]
                out = next((s for s in shapes if s is not None), None)
            self._shapes[id(x)] = out
        return self._shapes[id(e)]

    def at(self, e, idx: tuple) -> ir.V:
        """The value of ``e`` at ``idx`` (a tuple of IR values, one per axis of ``shape(e)``)."""
        memo = self._memo
        key = (id(e), tuple(id(i) for i in idx))
        v = memo.get(key)
        if v is not None:
            return v
        self._alive.append(idx)
        ids = self._ids
        stack = [(e, idx, key)]
        while stack:  # operands before users, iteratively
            x, at, k = stack[-1]
            if k in memo:
                stack.pop()
                continue
            needs = [(a, i, (id(a), ids(i))) for a, i in self._operands(x, at)]
            missing = [n for n in needs if n[2] not in memo]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            memo[k] = self._node(x, at, [memo[n[2]] for n in needs])
        return memo[key]

    def _ids(self, idx: tuple) -> tuple:
        """The memo's key of index ``idx``: its values' ids, worked out once per index tuple (an
        operand is read at its user's own tuple, or at one ``_regrouped`` made). The tuple is kept
        with its key, so its id is never another's."""
        got = self._index_ids.get(id(idx))
        if got is None:
            got = self._index_ids[id(idx)] = (idx, tuple(id(i) for i in idx))
        return got[1]

    def _operands(self, x, at):
        if x.op in ("Load", "Acc", "Scalar"):
            return []
        if x.op == "Reshape":
            src = self.shape(x.args[0])
            if src is None:
                return [(x.args[0], ())]
            key = (id(x), tuple(id(i) for i in at))
            inner = self._regrouped.get(key)
            if inner is None:
                flat = contiguous_index(at, x.arg, self.env)
                inner = self._regrouped[key] = tuple(unflatten(flat, src, self.env))
                self._alive.append(at)
            return [(x.args[0], inner)]
        return [(a, () if self.shape(a) is None else at) for a in x.args]

    def _node(self, x, at, args) -> ir.V:
        op = x.op
        if op in ("Load", "Acc"):
            return self.leaf(x, at)
        if op == "Scalar":
            return scalar(x.arg, x.dtype, self.env)
        if op in ("Reshape", "Copy"):
            return args[0]
        if op == "Cast":
            return ir.cast(args[0], x.dtype)
        if op == "Where":
            return ir.V("Where", x.dtype, tuple(args))
        v = ir.alu(op, *args)
        if v.dtype is not x.dtype:
            raise ir.IRError(f"{op} of {[a.dtype.name for a in args]} gives {v.dtype.name}, "
                             f"the kernel graph says {x.dtype.name}")
        return v


def scalar(value, dtype, env: dict | None = None) -> ir.V:
    """A ``Scalar`` leaf: a number, or a symbolic dim converted to ``dtype``."""
    if isinstance(value, Sym):
        return ir.cast(dim(value, env), dtype)
    if dtype.kind == "b":
        return ir.const(bool(value), dtype)
    if dtype.kind == "i":
        return ir.const(int(value), dtype)
    return ir.const(float(value), dtype)


def reduce_identity(op: str, dtype) -> ir.V:
    """Where an accumulator starts: a sum at +0.0 (so a sum of -0.0 is +0.0, as numpy's and torch's),
    0 or False; a max at -inf, the least int32, or False."""
    if dtype.kind == "b":
        return ir.const(False, dt.bool_)
    if op == "sum":
        return ir.const(0.0 if dtype.is_float else 0, dtype)
    return ir.const(float("-inf"), dtype) if dtype.is_float else ir.const(-(2 ** 31), dtype)


def accumulator(op: str, dtype) -> dt.DType:
    """The dtype a reduction of ``dtype`` values accumulates in.

    A float32 sum accumulates in float64. Its error then has a bound whatever order a target adds
    in (LLVM's vectoriser reassociates a sum into many partial sums; a GPU block adds by threads,
    then as a tree, a split row by blocks): at most ``(n - 1) * 2**-53`` times the sum of the
    terms' magnitudes, 2.4e-7 for ``n = 2**31`` terms, and the one rounding to float32 adds 6e-8.
    So a float32 sum stays within 1e-6 (relative, for terms of one sign) of the exact sum up to
    2**31 terms, as numpy's pairwise sum does, where a float32 accumulator drifted (the mean of 2e7
    copies of 0.1 was 6e-3 off; a float32 running sum stops growing at 2**24 times its terms).
    Compensated (Kahan) float32 sums would bound it too, but their loop-carried compensation keeps
    LLVM from vectorising the loop; a float64 add per term vectorises. It costs little where memory
    bounds the reduction (a sum of 2**22 float32: +4% on a 2-core Xeon), more where the data is in
    cache and the halved vector width shows (a 64x4096 row sum +35%, softmax of 1024x1024 +13%): the
    price of a bound that holds at any length and in any order.

    float16 and bfloat16 reductions accumulate in float32 (the reference's rule); a float32 max and
    integer and float64 reductions in their own dtype (a max is exact)."""
    if dtype in (dt.float16, dt.bfloat16):
        return dt.float32
    return dt.float64 if op == "sum" and dtype is dt.float32 else dtype


def accumulate(op: str, acc: ir.V, x: ir.V) -> ir.V:
    """One step of a sum (Add: ``or`` on bools) or max reduction."""
    return ir.alu("Max" if op == "max" and acc.dtype.kind != "b" else "Add", acc, x)

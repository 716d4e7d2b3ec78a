"""Lowering one kernel's ``Expr`` DAG to a flat list of numpy calls over preallocated arrays.

Each Expr node becomes one ufunc call (plus a bfloat16 rounding) writing into a scratch array taken
from the binding's pool, or straight into the output buffer when the node is an output. A scratch
goes back to the pool as soon as the last node reading it has been emitted (never before the node
reading it is written, so no call writes an array it also reads); the next node or kernel reuses it.

Values stay *compact*: a load that broadcasts (stride 0) along an axis is read with size 1 there,
and a node is computed at the broadcast of its operands' sizes, so arithmetic on broadcast scalars
(an optimizer's bias corrections) costs one element, not a parameter's worth. ``Reshape`` nodes are
views of their operand (a copy only when the operand's strides cannot be regrouped).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from luminal.core import dtype as dt
from luminal.core import numpy_ops as ops
from luminal.core.kernel_graph import Expr
from luminal.core.symbolic import evaluate
from luminal.core.walk import postorder

SPLIT_INNER = 4  # split calls along an innermost axis this short where an operand broadcasts along it


def shape_of(v) -> tuple:
    return getattr(v, "shape", ())


def topo(roots) -> list:
    """Every Expr reachable from ``roots``, operands first, each once (Exprs are DAGs by identity)."""
    return postorder(roots, lambda e: e.args)


def rewrite(roots) -> list:
    """``roots`` with the peepholes below applied (each node rebuilt once, by identity): an ``Add`` of a
    negation becomes ``Sub``, a ``Mul`` by a reciprocal ``Divide``, the frontend's compositions of
    ``LessThan`` one numpy comparison each (see :func:`_comparison`) and a ReLU's nested selects one.
    The emitter evaluates this DAG, and compiled.py's in-place check walks it too, so both see one
    order."""
    order = topo([e for e, _ in roots])
    uses: dict[int, int] = {}
    for e in order:
        for a in e.args:
            uses[id(a)] = uses.get(id(a), 0) + 1
    for e, _ in roots:
        uses[id(e)] = uses.get(id(e), 0) + 1
    keys = _Keys()
    new: dict[int, Expr] = {}
    for e in order:
        args = tuple(new[id(a)] for a in e.args)
        out = e if all(x is y for x, y in zip(args, e.args)) else Expr(e.op, args, e.arg, e.dtype)
        out = _subtraction(e, args, uses, new) or _division(e, args, uses) or _comparison(out, keys) or \
            _select(out, keys) or out
        new[id(e)] = out
    return [(new[id(e)], d) for e, d in roots]


def _subtraction(e, args, uses, new):
    """``Add(a, Mul(b, -1))`` (a Mul read nowhere else) as ``Sub(a, b)``: one pass instead of two, and
    the same bits (negation is exact, and ``a + -b`` is ``a - b`` in IEEE and in wrapping int32
    arithmetic alike)."""
    if e.op != "Add" or e.dtype.kind == "b":
        return None
    for i in (0, 1):
        m = e.args[i]
        neg = _negated(m) if uses[id(m)] == 1 else None
        if neg is not None:
            return Expr("Sub", (args[1 - i], new[id(neg)]), None, e.dtype)
    return None


def _division(e, args, uses):
    """``Mul(a, Recip(b))`` (a Recip read nowhere else; float32/float64) as ``Divide(a, b)``: one pass
    instead of two, and the correctly rounded quotient (what torch computes for ``a / b``) where the
    primitives round twice; so not the reference's bits, a difference within one rounding."""
    if e.op != "Mul" or e.dtype not in (dt.float32, dt.float64):
        return None
    for i in (0, 1):
        r = args[i]
        if r.op == "Recip" and uses[id(e.args[i])] == 1:
            return Expr("Divide", (args[1 - i], r.args[0]), None, e.dtype)
    return None


def _select(e, key):
    """``Where(c, Where(d, a, x), x)`` as ``Where(d, a, x)`` when ``d`` implies ``c`` (``p < q`` implies
    ``p <= q``): a ReLU, ``where(x <= 0, where(x < 0, 0, x), x)``, is one select, not two."""
    if e.op != "Where" or e.args[1].op != "Where":
        return None
    c, (d, _, x) = e.args[0], e.args[1].args
    if key(x) != key(e.args[2]) or c.op != "LessEqual" or d.op != "LessThan" or \
            list(map(key, c.args)) != list(map(key, d.args)):
        return None
    return e.args[1]


def _negated(m):
    """``b`` when ``m`` is ``Mul(b, -1)`` or ``Mul(-1, b)``, else None."""
    if m.op != "Mul":
        return None
    for i in (0, 1):
        if _number(m.args[i]) == -1:
            return m.args[1 - i]
    return None


def _number(e):
    """The value of a numeric (non-symbolic, non-bool) ``Scalar``, else None."""
    if e.op != "Scalar" or hasattr(e.arg, "terms") or isinstance(e.arg, bool) or e.dtype.kind == "b":
        return None
    return e.arg


# comparisons ---------------------------------------------------------------------------------------
# The frontend composes every comparison from LessThan (NaN-correct: eq(a, b) is
# not(a < b or b < a) and not(isnan(a) or isnan(b)), isnan(x) is not(x < inf or -inf < x), not(x) is
# x < True, or is a bool Max, and is a bool Mul): a dozen passes where numpy has one ufunc with the
# same semantics. Recognised bottom-up, so an eq inside an le or a ne is already one node there.
COMPARE = {"Equal": np.equal, "NotEqual": np.not_equal, "LessEqual": np.less_equal, "IsNaN": np.isnan}


class _Keys:
    """Structural keys for Exprs (which compare by identity): equal keys, equal values. An Expr's key
    is made from its operands' keys, operands first (an iterative walk over the ones without a key
    yet: an expression may be thousands of operations deep)."""

    def __init__(self):
        self.ids: dict = {}
        self.memo: dict[int, int] = {}

    def __call__(self, e) -> int:
        memo = self.memo
        k = memo.get(id(e))
        if k is None:
            for x in postorder([e], lambda x: [a for a in x.args if id(a) not in memo]):
                sig = (x.op, repr(x.arg), x.dtype, tuple(memo[id(a)] for a in x.args))
                memo[id(x)] = self.ids.setdefault(sig, len(self.ids))
            k = memo[id(e)]
        return k


def _is_not(e) -> bool:
    """``e`` is ``LessThan(x, True)`` on bools: ``not x``."""
    return e.op == "LessThan" and e.args[0].dtype.kind == "b" and e.args[1].op == "Scalar" and e.args[1].arg is True


def _is_or(e) -> bool:
    return e.op == "Max" and e.dtype.kind == "b"


def _disjuncts(e) -> list:
    """The operands of an or-tree, left to right, without the ``False`` ones (the compiler leaves
    ``x or False`` where it folded ``isnan`` of a number). Walked with a stack: a chain of ors is as
    deep as the user made it."""
    out, stack = [], [e]
    while stack:
        x = stack.pop()
        if _is_or(x):
            stack += (x.args[1], x.args[0])
        elif not (x.op == "Scalar" and x.arg is False):
            out.append(x)
    return out


def _nor(e):
    """Atoms ``A`` with ``e == not any(A)`` when ``e`` is a not, or an and of nots; else None (walked
    with a stack, like :func:`_disjuncts`)."""
    out, stack = [], [e]
    while stack:
        x = stack.pop()
        if _is_not(x):
            out += _disjuncts(x.args[0])
        elif x.op == "Mul" and x.dtype.kind == "b":
            stack += (x.args[1], x.args[0])
        else:
            return None
    return out


def _comparison(e, key):
    """``e`` as one comparison node (``COMPARE``) when it is the composition of one, else None."""
    if _is_not(e) and e.args[0].op == "Equal":
        return Expr("NotEqual", e.args[0].args, None, e.dtype)
    if _is_or(e):  # le(a, b) = a < b or eq(a, b)
        lt, eq = sorted(e.args, key=lambda x: x.op == "Equal")
        if lt.op == "LessThan" and eq.op == "Equal" and sorted(map(key, lt.args)) == sorted(map(key, eq.args)):
            return Expr("LessEqual", lt.args, None, e.dtype)
        return None
    atoms = _nor(e)
    if atoms is None:
        return None
    uniq = list({key(a): a for a in atoms}.values())
    x = _nan_tested(uniq, key)
    if x is not None:
        return Expr("IsNaN", (x,), None, e.dtype)
    return _equality(uniq, key, e.dtype)


def _nan_tested(atoms, key):
    """``x`` when ``atoms`` are ``x < inf`` and ``-inf < x``: not(either) is ``isnan(x)``."""
    if len(atoms) != 2 or any(a.op != "LessThan" for a in atoms):
        return None
    hi = next((a for a in atoms if _number(a.args[1]) == math.inf), None)
    lo = next((a for a in atoms if _number(a.args[0]) == -math.inf), None)
    if hi is None or lo is None or hi is lo:
        return None
    x = hi.args[0]
    return x if x.dtype.is_float and key(lo.args[1]) == key(x) else None


def _equality(atoms, key, dtype):
    """``Equal(a, b)`` when ``atoms`` are ``a < b``, ``b < a`` and an ``isnan`` of each of ``a``, ``b``
    that can be NaN (nothing else), else None."""
    lts = [a for a in atoms if a.op == "LessThan" and not _is_not(a)]
    pair = next(((p, q) for p in lts for q in lts if key(p.args[0]) == key(q.args[1])
                 and key(p.args[1]) == key(q.args[0])), None)
    if pair is None:
        return None
    a, b = pair[0].args
    rest = [x for x in atoms if x is not pair[0] and x is not pair[1]]
    tested = {key(x.args[0]) for x in rest if x.op == "IsNaN"}
    if len(tested) != len(rest) or not tested <= {key(a), key(b)}:
        return None
    if any(key(x) not in tested for x in (a, b) if _may_be_nan(x)):
        return None
    return Expr("Equal", (a, b), None, dtype)


def _may_be_nan(x) -> bool:
    v = _number(x)
    return x.dtype.is_float and (v is None or math.isnan(v))


def _zero_bits(e) -> bool:
    """``e`` is a Scalar whose bits are all zero (+0.0, 0, False)."""
    if e.op == "Scalar" and e.arg is False:
        return True
    v = _number(e)
    return v is not None and v == 0 and math.copysign(1.0, v) > 0


def _in_place(out, args) -> bool:
    """Does ``out`` (a state's own array, written in place) overlap an operand? Then the call must stay
    one call: split along the inner axis, a later call would read elements an earlier one wrote."""
    return type(out) is not np.ndarray and any(getattr(a, "name", None) == out.name for a in args)


def _subtract(dtype):
    return functools.partial(np.subtract, dtype=np.float32) if dtype is dt.float16 else np.subtract


class ExprEmitter:
    """Emits the calls of one kernel's expressions into ``binding.calls``.

    ``loads[i]``: the value ``Load(i)`` reads (an array or an input view); ``acc``: the value of ``Acc``."""

    def __init__(self, binding, loads, acc=None):
        self.b, self.loads, self.acc = binding, list(loads), acc
        self.full: dict[int, tuple] = {}  # id(expr) -> the Expr's shape (its value may be compact)
        self.token: dict[int, int] = {}  # id(expr) -> id of the scratch holding its value
        self.pending: dict[int, int] = {}  # id(scratch) -> reads not yet emitted
        self.scratch: dict[int, np.ndarray] = {}

    def emit(self, roots) -> list:
        """``roots``: [(Expr, dst array or None)]. Writes every root with a ``dst`` into it; returns
        the value of each root at its full shape (those without a ``dst`` stay valid until the
        kernel ends)."""
        roots = rewrite(roots)
        exprs = [e for e, _ in roots]
        order = topo(exprs)
        uses: dict[int, int] = {}
        reads: dict[int, int] = {}  # Load index -> reads by nodes
        for e in order:
            for a in e.args:
                uses[id(a)] = uses.get(id(a), 0) + 1
                if a.op == "Load":
                    reads[a.arg] = reads.get(a.arg, 0) + 1
        for e in exprs:
            uses[id(e)] = uses.get(id(e), 0) + 1
        perm = self._eval_order(order, roots, reads)
        if perm is not None:  # evaluate in the axis order of the heaviest operands (see _eval_order)
            t = self.b.transpose
            self.loads = [t(v, perm) for v in self.loads]
            self.acc = None if self.acc is None else t(self.acc, perm)
            roots = [(e, None if d is None else t(d, perm)) for e, d in roots]
        self.load_full = [shape_of(v) for v in self.loads]
        self.loads = [self._gathered(self.b.compact(v)) if reads.get(i, 0) > 1 else self.b.compact(v)
                      for i, v in enumerate(self.loads)]
        dst_of: dict[int, np.ndarray] = {}
        for e, dst in roots:
            dst_of.setdefault(id(e), dst)
        val: dict[int, object] = {}
        for e in order:
            val[id(e)] = self._node(e, [val[id(a)] for a in e.args], dst_of.get(id(e)), uses[id(e)])
            for a in e.args:
                self._used(a)
        for e, dst in roots:
            if dst is not None:  # a root without one stays taken (for the caller) until the kernel ends
                if val[id(e)] is not dst:
                    self._append(np.copyto, (dst, val[id(e)]), dst)
                self._used(e)
        out = [self.b.expand(val[id(e)], self.full[id(e)]) for e in exprs]
        return out if perm is None else [self.b.transpose(v, tuple(np.argsort(perm))) for v in out]

    def _eval_order(self, order, roots, reads):
        """The axis order to evaluate in, when not the domain's own: that of the operands weighing most
        (elements times reads). numpy walks an operation in the order its operands agree on and falls
        back to the given axis order when they disagree, so a kernel reading a permuted view (pooling
        windows, a transposed gradient) several times would read it against its layout every time;
        evaluated in the view's order, only the final write into the output goes against the grain."""
        if any(e.op == "Reshape" for e in order):
            return None
        acc_reads = sum(1 for e in order for a in e.args if a.op == "Acc") + sum(1 for e, _ in roots if e.op == "Acc")
        weighted = [(v, reads.get(i, 0)) for i, v in enumerate(self.loads)]
        weighted += [(d, 1) for _, d in roots if d is not None] + [(self.acc, acc_reads)]
        votes: dict = {}
        ndim = None
        for v, w in weighted:
            strides = getattr(v, "strides", None)
            if not w or not strides:
                continue
            if ndim not in (None, len(strides)):
                return None
            ndim = len(strides)
            moving = [(n, s) for n, s in zip(v.shape, strides) if n > 1 and s != 0]
            key = tuple(sorted(range(ndim), key=lambda a: (0, a) if v.shape[a] <= 1 or strides[a] == 0
                               else (1, -abs(strides[a]))))
            votes[key] = votes.get(key, 0) + w * int(np.prod([n for n, _ in moving]))
        if not votes:
            return None
        best = max(votes, key=lambda o: (votes[o], o == tuple(range(ndim))))
        return None if best == tuple(range(ndim)) else best

    def _gathered(self, v):
        """A load read by several nodes through a column-order view (a transposed gradient) is copied
        once into a contiguous scratch: numpy reads such views several times slower than a copy costs."""
        shape, strides = shape_of(v), getattr(v, "strides", ())
        inner = [s for n, s in zip(shape, strides) if n > 1]
        if not inner or inner[-1] == v.dtype.itemsize:
            return v
        tmp = self.b.scratch(shape, v.dtype)  # the kernel's until it ends
        self.b.calls.append((np.copyto, (tmp, v)))
        return tmp

    # scratch bookkeeping ----------------------------------------------------------------------------
    def _take(self, e, shape, uses) -> np.ndarray:
        arr = self.b.scratch(shape, e.dtype.np)
        self.token[id(e)] = id(arr)
        self.scratch[id(arr)] = arr
        self.pending[id(arr)] = uses
        return arr

    def _share(self, e, a, uses):
        """``e``'s value is a view of ``a``'s scratch: that scratch stays taken while ``e`` is read."""
        t = self.token.get(id(a))
        if t is not None:
            self.token[id(e)] = t
            self.pending[t] += uses

    def _used(self, e):
        t = self.token.get(id(e))
        if t is None:
            return
        self.pending[t] -= 1
        if self.pending[t] == 0:
            self.b.release(self.scratch.pop(t))

    # nodes ------------------------------------------------------------------------------------------
    def _node(self, e, xs, dst, uses):
        op = e.op
        if op == "Load":
            self.full[id(e)] = self.load_full[e.arg]
            return self.loads[e.arg]
        if op == "Acc":
            self.full[id(e)] = shape_of(self.acc)
            return self.acc
        if op == "Scalar":
            self.full[id(e)] = ()
            return np.asarray(evaluate(e.arg, self.b.env) if hasattr(e.arg, "terms") else e.arg, e.dtype.np)[()]
        if op == "Reshape":
            v = self._reshape(e, xs[0], tuple(evaluate(d, self.b.env) for d in e.arg), uses)
            return self._gathered(v) if id(e) not in self.token and uses > 1 else v
        lower = LOWERING.get(op) or _PEEPHOLES.get(op)
        if lower is None:
            raise NotImplementedError(f"cpu backend: no lowering for Expr op {op!r}")
        return lower(self, e, xs, dst, uses)

    def _out(self, e, xs, dst, uses) -> np.ndarray:
        """The array ``e`` is computed into: ``dst`` when it has the operands' broadcast shape, else a
        scratch (``e``'s own until its last reader)."""
        self.full[id(e)] = np.broadcast_shapes(*(self.full[id(a)] for a in e.args))
        shape = np.broadcast_shapes(*(shape_of(x) for x in xs))
        if dst is not None and dst.shape == shape and dst.dtype == e.dtype.np:
            return dst
        return self._take(e, shape, uses)

    # each op's lowering: (emitter, expr, operand values, dst or None, uses) -> its value ----------------
    def _copy(self, e, xs, dst, uses):
        """The value itself (a root is copied into its buffer like any other)."""
        self.full[id(e)] = self.full[id(e.args[0])]
        self._share(e, e.args[0], uses)
        return self._gathered(xs[0]) if id(e) not in self.token and uses > 1 else xs[0]

    def _cast(self, e, xs, dst, uses):
        out = self._out(e, xs, dst, uses)
        self._append(ops.cast, (xs[0], e.args[0].dtype, e.dtype, out), out)
        return out

    def _ufunc(self, e, xs, dst, uses):
        """A ufunc primitive (its record's numpy function) or ``Sub``; bfloat16 rounded after it."""
        out = self._out(e, xs, dst, uses)
        f = _subtract(e.dtype) if e.op == "Sub" else ops.ufunc(e.op, e.args[0].dtype)
        self._append(f, (*xs, out), out)
        if e.dtype is dt.bfloat16:
            self.b.calls.append((ops.round_bf16_, (out,)))
        return out

    def _where(self, e, xs, dst, uses):
        out = self._out(e, xs, dst, uses)
        zero = next((i for i in (1, 2) if _zero_bits(e.args[i])), None)
        if zero is not None:  # a ReLU's or a gradient's select against zero
            self._append(ops.where_zero, (xs[0], xs[3 - zero], out, zero == 1), out)
            return out
        tmp = self.b.scratch(out.shape, out.dtype)
        self._append(ops.where, (*xs, out, tmp), out)
        self.b.release(tmp)  # only this call uses it
        return out

    def _append(self, f, args, out):
        """Append the call ``f(*args)`` writing ``out``; where an operand broadcasts along a short
        innermost axis of ``out`` (a pooling window's), one call per index along that axis instead:
        numpy's inner loop would run over that axis alone, a few elements per loop, several times
        slower than the split calls (whose inner loops run over the axes merged around it)."""
        shape = shape_of(out)
        n = shape[-1] if len(shape) >= 2 else 0
        if not 1 < n <= SPLIT_INNER or not any(shape_of(a)[-1:] == (1,) for a in args) or _in_place(out, args):
            self.b.calls.append((f, args))
            return
        for i in range(n):
            self.b.calls.append((f, tuple(self._inner(a, i) for a in args)))

    def _inner(self, a, i):
        """``a`` at index ``i`` of its last axis (0 where it broadcasts); anything not an array as is."""
        shape = shape_of(a)
        return self.b.take(a, {len(shape) - 1: i if shape[-1] > 1 else 0}) if shape else a

    def _reshape(self, e, x, shape, uses):
        self.full[id(e)] = shape
        if not shape_of(x):  # a scalar (or 0-d value) broadcasts to any shape
            self._share(e, e.args[0], uses)
            return x
        v = self.b.regroup(self.b.expand(x, self.full[id(e.args[0])]), shape)
        if v is not None:
            self._share(e, e.args[0], uses)
            return self.b.compact(v)
        full = self.full[id(e.args[0])]
        tmp = self._take(e, full, uses)  # strides that cannot be regrouped: copy, then view
        self.b.calls.append((np.copyto, (tmp, x)))
        return tmp.reshape(shape)


def _one_call(f):
    """The lowering of a peephole op computed by the one numpy call ``f`` (no rounding: its results
    are float32/float64 or bool)."""
    def lower(em, e, xs, dst, uses):
        out = em._out(e, xs, dst, uses)
        em._append(f, (*xs, out), out)
        return out
    return lower


# The cpu lowering of every elementwise primitive (the backend's facet of the records in
# core/primitives.py; the ufunc ones call the records' numpy functions through numpy_ops.ufunc). The
# other primitives reach this backend as kernels of their own kind or as buffers (see __init__.py).
LOWERING = {
    "Copy": ExprEmitter._copy,
    "Cast": ExprEmitter._cast,
    "Where": ExprEmitter._where,
    **dict.fromkeys(ops.UFUNCS, ExprEmitter._ufunc),
}
# the ops rewrite()'s peepholes make, which are no primitives
_PEEPHOLES = {
    "Sub": ExprEmitter._ufunc,
    "Divide": _one_call(np.divide),
    **{op: _one_call(f) for op, f in COMPARE.items()},
}

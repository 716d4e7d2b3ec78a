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

import numpy as np

from ..compile.kernel_graph import Expr
from ..compile.walk import postorder
from ..frontend import dtype as dt
from ..frontend.symbolic import evaluate
from . import numpy_ops as ops


def shape_of(v) -> tuple:
    return getattr(v, "shape", ())


def topo(roots) -> list:
    """Every Expr reachable from ``roots``, operands first, each once (Exprs are DAGs by identity)."""
    return postorder(roots, lambda e: e.args)


def fuse_subtractions(roots) -> list:
    """``roots`` with ``Add(a, Mul(b, -1))`` (a Mul read nowhere else) rewritten as ``Sub(a, b)``: one
    pass instead of two, and the same bits (negation is exact, and ``a + -b`` is ``a - b`` in IEEE and
    in wrapping int32 arithmetic alike)."""
    order = topo([e for e, _ in roots])
    uses: dict[int, int] = {}
    for e in order:
        for a in e.args:
            uses[id(a)] = uses.get(id(a), 0) + 1
    for e, _ in roots:
        uses[id(e)] = uses.get(id(e), 0) + 1
    new: dict[int, Expr] = {}
    for e in order:
        args = tuple(new[id(a)] for a in e.args)
        out = e if all(x is y for x, y in zip(args, e.args)) else Expr(e.op, args, e.arg, e.dtype)
        if e.op == "Add" and e.dtype.kind != "b":
            for i in (0, 1):
                m = e.args[i]
                neg = _negated(m) if uses[id(m)] == 1 else None
                if neg is not None:
                    out = Expr("Sub", (args[1 - i], new[id(neg)]), None, e.dtype)
                    break
        new[id(e)] = out
    return [(new[id(e)], d) for e, d in roots]


def _negated(m):
    """``b`` when ``m`` is ``Mul(b, -1)`` or ``Mul(-1, b)``, else None."""
    if m.op != "Mul":
        return None
    for i in (0, 1):
        c = m.args[i]
        if c.op == "Scalar" and not hasattr(c.arg, "terms") and not isinstance(c.arg, bool) and c.arg == -1:
            return m.args[1 - i]
    return None


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
        roots = fuse_subtractions(roots)
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
                    self.b.calls.append((np.copyto, (dst, val[id(e)])))
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
        if op == "Copy":  # the value itself (a root is copied into its buffer like any other)
            self.full[id(e)] = self.full[id(e.args[0])]
            self._share(e, e.args[0], uses)
            return self._gathered(xs[0]) if id(e) not in self.token and uses > 1 else xs[0]
        if op == "Reshape":
            v = self._reshape(e, xs[0], tuple(evaluate(d, self.b.env) for d in e.arg), uses)
            return self._gathered(v) if id(e) not in self.token and uses > 1 else v
        self.full[id(e)] = np.broadcast_shapes(*(self.full[id(a)] for a in e.args))
        shape = np.broadcast_shapes(*(shape_of(x) for x in xs))
        if dst is not None and dst.shape == shape and dst.dtype == e.dtype.np:
            out = dst
        else:
            out = self._take(e, shape, uses)
        calls = self.b.calls
        if op == "Cast":
            calls.append((ops.cast, (xs[0], e.args[0].dtype, e.dtype, out)))
        elif op == "Where":
            tmp = self.b.scratch(out.shape, out.dtype)
            calls.append((ops.where, (*xs, out, tmp)))
            self.b.release(tmp)  # only this call uses it
        elif op in ops.UNARY or op in ops.BINARY or op == "Sub":
            f = _subtract(e.dtype) if op == "Sub" else ops.ufunc(op, e.args[0].dtype)
            calls.append((f, (*xs, out)))
            if e.dtype is dt.bfloat16 and op != "LessThan":
                calls.append((ops.round_bf16_, (out,)))
        else:
            raise NotImplementedError(f"cpu backend: no lowering for Expr op {op!r}")
        return out

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

"""The reference interpreter: executes the primitive graph with numpy, op by op.

It is the semantic ground truth every other backend is tested against, so it does exactly what the
table in ``core/primitives.py`` says and nothing clever (``EVAL``: one entry per primitive, the
elementwise ufuncs being the records' own), with one exception: a ``SumReduce`` of a
``Mul`` that nothing else reads is evaluated as one ``einsum`` contraction, so that matmuls written as
broadcast-multiply + sum do not materialise the broadcast product.
"""

from __future__ import annotations

import numpy as np

from luminal.core import dtype as dt
from luminal.core import numpy_ops as ops
from luminal.core.numpy_ops import read
from luminal.core.symbolic import evaluate

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


class ReferenceInterpreter:
    """``ReferenceInterpreter(roots, constants)``: evaluates the (node, View) ``roots`` from the
    primitive nodes they read (in id order: creation order, so producers first); ``constants`` maps a
    Constant's key to its array. ``interp(arrays, env)`` returns one array per root."""

    def __init__(self, roots, constants):
        self.constants = constants
        self.outputs = list(roots)
        needed: dict[int, object] = {}
        stack = [n for n, _ in self.outputs]
        while stack:
            n = stack.pop()
            if n.id not in needed:
                needed[n.id] = n
                stack.extend(s for s, _ in n.srcs)
        self.order = [needed[i] for i in sorted(needed)]
        self.inputs = [n for n in self.order if n.op == "Input"]
        readers: dict[int, list] = {}
        for n in self.order:
            for s, v in n.srcs:
                readers.setdefault(s.id, []).append((n, v))
        outs = {n.id for n, _ in self.outputs}
        # Muls read only by SumReduces through the identity view are folded into a contraction.
        # (A contiguous view that regroups the product's axes is not the identity: the sum's axis would
        # then name an axis of another shape.)
        self.fused = {n.id for n in self.order if n.op == "Mul" and n.id not in outs and all(
            r.op == "SumReduce" and v.is_contiguous() and tuple(v.shape) == tuple(n.shape)
            for r, v in readers.get(n.id, []))}

    def __call__(self, arrays: dict[str, np.ndarray], env: dict[str, int]) -> list[np.ndarray]:
        vals: dict[int, np.ndarray] = {}
        with np.errstate(all="ignore"):
            for n in self.order:
                if n.id in self.fused:
                    continue
                v = self._eval(n, vals, arrays, env)
                # buffers are contiguous (views index them flat); einsum and friends may return strided results
                vals[n.id] = v if v.flags.c_contiguous else np.array(v, order="C")
            # np.array, not np.ascontiguousarray: the latter turns 0-d results into shape (1,)
            return [np.array(read(vals[n.id], v, env), order="C") for n, v in self.outputs]

    def _eval(self, n, vals, arrays, env) -> np.ndarray:
        if n.op == "SumReduce" and n.srcs[0][0].id in self.fused:
            return dt.to_storage(self._contract(n, vals, env), n.dtype)
        f = EVAL.get(n.op)
        if f is None:
            raise NotImplementedError(f"reference interpreter has no rule for {n.op}")
        return f(self, n, [read(vals[s.id], v, env) for s, v in n.srcs], arrays, env)

    def _contract(self, n, vals, env) -> np.ndarray:
        mul = n.srcs[0][0]
        operands = [read(vals[s.id], v, env) for s, v in mul.srcs]
        cd = ops.compute_dtype(mul.dtype)
        ndim = len(mul.shape)
        letters = _LETTERS[:ndim]
        subs, arrs = [], []
        for k, a in enumerate(operands):
            # a broadcast axis is dropped (einsum then need not walk it), but never the summed one: an
            # operand without the summed letter is factored out of the sum (``r * sum(x)`` for
            # ``sum(x * r)``), which rounds otherwise and loses IEEE's ``0 * inf = NaN``
            keep = [i for i in range(ndim) if i == n.arg or not (a.strides[i] == 0 and a.shape[i] > 1 and (
                k == 1 or operands[1].strides[i] != 0))]
            a = a[tuple(slice(None) if i in keep else 0 for i in range(ndim))]
            subs.append("".join(letters[i] for i in keep))
            arrs.append(a.astype(cd, copy=False))
        out_letters = letters[:n.arg] + letters[n.arg + 1:]
        if mul.dtype.kind == "b":
            return np.einsum(f"{subs[0]},{subs[1]}->{out_letters}", *[x.astype(np.int32) for x in arrs]) > 0
        return np.einsum(f"{subs[0]},{subs[1]}->{out_letters}", *arrs, optimize=True)



# one entry per primitive: (interpreter, node, inputs read through their views, arrays, env) -> value
def _constant(interp, n, xs, arrays, env):
    if n.arg.scalar is None:
        return interp.constants[n.arg]
    return np.asarray(evaluate(n.arg.scalar, env) if n.arg.digest == "sym" else n.arg.scalar, n.dtype.np)


def _reduce(n, xs):
    x = xs[0].astype(ops.compute_dtype(n.srcs[0][0].dtype), copy=False)  # half sums run in float32
    return dt.to_storage(np.asarray(ops.reduce("sum" if n.op == "SumReduce" else "max", x, (n.arg,), n.dtype)), n.dtype)


EVAL = {
    "Input": lambda i, n, xs, arrays, env: arrays[n.arg],
    "Constant": _constant,
    "Arange": lambda i, n, xs, arrays, env: np.arange(evaluate(n.arg, env), dtype=np.int32),
    "Copy": lambda i, n, xs, *_: np.array(xs[0], order="C"),
    "Cast": lambda i, n, xs, *_: ops.cast(xs[0], n.srcs[0][0].dtype, n.dtype),
    "Where": lambda i, n, xs, *_: dt.to_storage(ops.where(*xs), n.dtype),
    "SumReduce": lambda i, n, xs, *_: _reduce(n, xs),
    "MaxReduce": lambda i, n, xs, *_: _reduce(n, xs),
    "Gather": lambda i, n, xs, *_: ops.gather(*xs, n.arg),
    "ScatterAdd": lambda i, n, xs, *_: ops.scatter_add(*xs, n.arg, n.dtype),
    **dict.fromkeys(ops.UFUNCS, lambda i, n, xs, *_: dt.to_storage(np.asarray(ops.ufunc(n.op, n.srcs[0][0].dtype)(*xs)),
                                                                   n.dtype)),
}

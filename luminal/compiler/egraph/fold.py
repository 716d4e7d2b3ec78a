"""Constant folding while lowering: values that are the same at every index ("uniform").

A scalar Constant is uniform; so is an elementwise op whose inputs are all uniform and read
through unmasked views, a SumReduce of zeros, a MaxReduce of a uniform value over a non-empty
axis. A uniform node is never lowered (unless it is a root): each consumer reads the scalar
constant instead, through the consumer's view with every stride set to 0, which reads the same
value at the same valid positions. A ``Where`` whose condition is uniform becomes a ``Copy`` of
the chosen branch (which the algebra's ``copy-id`` then removes when the view is the identity).

Values are computed by the very numpy calls the reference interpreter makes (``core/numpy_ops.py``,
from the primitive records: 16-bit floats in float32, rounded once), so a folded constant is
bit-identical to what a backend would compute; ConstKeys of folded values follow
``Graph.constant`` (so -0.0, 0.0 and NaN stay distinct and exact).
"""

from __future__ import annotations

import numpy as np

from luminal.core import dtype as dt
from luminal.core import numpy_ops as ops
from luminal.core.symbolic import is_static
from luminal.core.view import View
from luminal.frontend.graph import ConstKey


def _scalar(x) -> np.ndarray:
    return np.asarray(x).reshape(())


def scalar_value(node) -> np.ndarray | None:
    """The value of a numeric scalar Constant node as a 0-d array of its storage dtype, else None."""
    if node.op != "Constant" or node.arg.scalar is None or node.arg.digest == "sym" or node.shape != ():
        return None
    return np.asarray(node.arg.scalar, node.dtype.np).reshape(())


def evaluate(node, vals) -> np.ndarray | None:
    """The uniform value of ``node`` from its inputs' uniform values (0-d arrays, all present)."""
    op, d = node.op, node.dtype
    src = node.srcs[0][0].dtype
    with np.errstate(all="ignore"):
        if op == "Copy":
            return vals[0]
        if op == "Cast":
            return _scalar(ops.cast(vals[0], src, d))
        if op == "Where":
            return vals[1] if bool(vals[0]) else vals[2]
        if op in ops.UFUNCS:
            return _scalar(dt.to_storage(np.asarray(ops.ufunc(op, src)(*vals)), d))
    return None


def reduce_value(node, val) -> np.ndarray | None:
    """SumReduce of zeros is zero (any length); MaxReduce of ``v`` over a non-empty axis is ``v``."""
    n = node.srcs[0][1].shape[node.arg]
    if node.op == "SumReduce" and val == 0 and not np.signbit(val):
        return np.zeros((), node.dtype.np)
    if node.op == "MaxReduce" and is_static(n) and n > 0:
        return val
    return None


def const_key(val: np.ndarray, d: dt.DType) -> ConstKey:
    """The key ``Graph.constant`` gives this scalar."""
    v = np.asarray(val, d.np)
    return ConstKey(f"{d.name}:{v.tobytes().hex()}", v.item())


def broadcast(view: View) -> View:
    """``view`` reading a scalar: the same shape and mask, every stride 0."""
    return View(view.shape, (0,) * len(view.shape), 0, view.mask, view.pad)

"""Range checks of integer values (class labels, one-hot indices): out-of-range values fail naming the
op that reads them, now where the values are known, else before a program computing from them runs.

Values usually arrive as inputs, which only a run sees. A gather reading them would fail deep in a
program naming neither the op nor the input; a comparison (``one_hot``) would give a silent row of
zeros. So the check is a ``Graph.guard`` registered by the op, ``of`` the tensor it computes from
the values: only programs that compute it are checked.
"""

from __future__ import annotations

import numpy as np

from luminal.core.errors import op_error
from luminal.core.symbolic import is_static
from luminal.frontend.ops.combine import cat
from luminal.frontend.ops.elementwise import ge, logical_and, logical_or, lt, ne, where
from luminal.frontend.ops.reduce import amax, amin
from luminal.frontend.tensor import GraphTensor


def known_values(t: GraphTensor):
    """The values ``t`` reads when they are known at build time (a constant read whole, or a constant
    scalar however expanded), else None. A 0-d array constant (``g.constant(np.array(3))``) keeps its
    value in ``graph.constants``, as other arrays do; a Python-number one in its key's ``scalar``."""
    node = t.node
    if node.op != "Constant" or node.arg.digest == "sym":
        return None
    if not node.shape:
        return np.asarray(t.graph.constants[node.arg] if node.arg.scalar is None else node.arg.scalar)
    if t.layout.is_contiguous() and t.shape == node.shape:
        return t.graph.constants[node.arg]
    return None


def range_check(op: str, values: GraphTensor, n, describe, operands: tuple, ignore: int | None = None):
    """Int32 ``values`` outside ``[0, n)`` (other than ``ignore``): where they are known now, an
    IndexError naming ``op``, ``describe(the first bad value)`` and ``operands`` (their shapes and the
    user's line) is raised now and None returned; else ``(failed, value, message)`` for a
    ``Graph.guard``: ``value`` the bad value farthest from the range, ``message`` with ``{value}``."""
    known = known_values(values) if is_static(n) else None
    if known is not None:
        out = (known < 0) | (known >= n)
        if ignore is not None:
            out &= known != ignore
        if out.any():
            raise op_error(IndexError, op, describe(known[out].flat[0]), *operands)
        return None
    g = values.graph
    bound = n if is_static(n) else g.constant(n)
    bad = logical_or(lt(values, 0), ge(values, bound))
    if ignore is not None:
        bad = logical_and(bad, ne(values, ignore))
    # (a sentinel keeps the max and min defined for no values)
    high = amax(cat([where(bad, values, -2**31).reshape(-1), g.constant(np.array([-2**31], np.int32))]))
    low = amin(cat([where(bad, values, 2**31 - 1).reshape(-1), g.constant(np.array([2**31 - 1], np.int32))]))
    value = where(ge(high, bound), high, low)
    return bad.any(), value, str(op_error(IndexError, op, describe("{value}"), *operands))


def guard(check, of: GraphTensor) -> None:
    """Register :func:`range_check`'s run-time check (when it returned one) as a guard ``of`` the
    tensor computed from the values."""
    if check is not None:
        failed, value, message = check
        of.graph.guard(failed, value, IndexError, message, of=of)

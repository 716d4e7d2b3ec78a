"""Vector norms (``torch.linalg.vector_norm``, ``torch.norm``), from sums and maxima of ``|x|``."""

from __future__ import annotations

import math

from luminal.core.errors import op_error
from luminal.frontend.checks import tensor_op
from luminal.frontend.ops.core import cast, normalize_axes, require
from luminal.frontend.ops.elementwise import (
    _opmath,
    abs_,
    div,
    eq,
    isnan,
    logical_or,
    mul,
    ne,
    pow,
    sign,
    sqrt,
    where,
)
from luminal.frontend.ops.reduce import _own_node, amax, amin, sum
from luminal.frontend.tensor import GraphTensor


@tensor_op("vector_norm")
@_opmath
def vector_norm(x, ord=2, dim=None, keepdim: bool = False, *, dtype=None) -> GraphTensor:  # noqa: A002 - torch's names
    """The vector norm of ``x`` over ``dim`` (all dims by default), as ``torch.linalg.vector_norm``:
    ``ord`` 2 (Euclidean), 1, ``inf`` (largest ``|x|``), ``-inf`` (smallest), 0 (the number of
    non-zeros, as a float) or any other number ``p``: ``sum(|x|**p) ** (1/p)``. The gradients are
    torch's ``norm_backward``: 0 at a zero vector (2-norm), 0 at each zero element for ``p < 1``
    (fractional and negative orders, whose ``|x|**(p-1)`` is infinite there), and for ``inf``/``-inf``
    shared among the tied extremes, 0 at every element of a vector holding a NaN.

    Args:
        x: a float tensor.
        ord: the order of the norm.
        dim: an int, a sequence of ints or None (every dim).
        keepdim: keep the reduced dims as size 1.
        dtype: cast ``x`` to this dtype first."""
    if dtype is not None:
        x = cast(x, dtype)
    require("vector_norm", x.dtype.is_float, f"needs a float tensor, got {x.dtype.name}", x)
    if isinstance(ord, bool) or not isinstance(ord, (int, float)):
        raise op_error(TypeError, "vector_norm", f"ord must be a number, got {ord!r}", x)
    axes = normalize_axes(x, dim, "vector_norm")
    if ord == 2:
        s = sum(x * x, axes, keepdim)
        flat = eq(s, 0)
        return where(flat, 0.0, sqrt(where(flat, 1.0, s)))
    if ord == 1:
        return sum(abs_(x), axes, keepdim)
    if ord in (math.inf, -math.inf):
        return _extreme_norm(x, axes, keepdim, ord > 0)
    if ord == 0:
        return sum(cast(ne(x, 0), x.dtype), axes, keepdim)
    a = abs_(x)
    if ord < 1:  # |x|**ord of a zero is 0**ord, with the gradient 0 there, not inf * 0
        zero = eq(a, 0)
        a = where(zero, 0.0 if ord > 0 else math.inf, pow(where(zero, 1.0, a), ord))
        return pow(sum(a, axes, keepdim), 1.0 / ord)
    return pow(sum(pow(a, ord), axes, keepdim), 1.0 / ord)


def _extreme_norm(x: GraphTensor, axes, keepdim: bool, largest: bool) -> GraphTensor:
    """The ``inf`` (largest ``|x|``) or ``-inf`` (smallest) norm, with torch's gradient: the
    adjoint times ``sign(x)`` shared among the elements whose ``|x|`` is the norm and the NaNs (a
    NaN's share is ``sign(NaN) = 0``). ``amax``'s own gradient is NaN for a NaN maximum, as
    torch.amax's; a norm's is 0 there."""
    a = abs_(x)
    out = _own_node(amax(a, axes, keepdim) if largest else amin(a, axes, keepdim), "vector_norm")

    def rule(out, adjoint, x):
        if not keepdim:
            kept = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
            out, adjoint = out.reshape(kept), adjoint.reshape(kept)
        a = abs_(x)
        hit = eq(a, out)
        count = sum(cast(logical_or(hit, isnan(a)), x.dtype), axes, keepdim=True)
        return [where(hit, mul(sign(x), div(adjoint, count)), 0.0)]

    return x.graph.custom_vjp(out, [x], rule)


@tensor_op("norm")
def norm(x, p="fro", dim=None, keepdim: bool = False, dtype=None) -> GraphTensor:
    """``torch.norm``: the vector ``p``-norm over ``dim`` (all dims by default); ``"fro"`` is the
    2-norm (of the flattened dims). Matrix norms (``"nuc"``) are not supported.

    Args:
        x: a float tensor.
        p: ``"fro"`` or a number (see ``vector_norm``'s ``ord``).
        dim: an int, a sequence of ints or None (every dim).
        keepdim: keep the reduced dims as size 1.
        dtype: cast ``x`` to this dtype first."""
    if p == "fro" or p is None:
        p = 2
    if isinstance(p, str):
        raise op_error(ValueError, "norm", f"p={p!r} is not supported (vector norms and 'fro' only)", x)
    return vector_norm(x, p, dim, keepdim, dtype=dtype)

"""Vector norms (``torch.linalg.vector_norm``, ``torch.norm``), from sums and maxima of ``|x|``."""

from __future__ import annotations

import math

from luminal.core.errors import op_error
from luminal.frontend.checks import tensor_op
from luminal.frontend.ops.core import cast, normalize_axes, require
from luminal.frontend.ops.elementwise import _opmath, abs_, eq, ne, pow, sqrt, where
from luminal.frontend.ops.reduce import amax, amin, sum
from luminal.frontend.tensor import GraphTensor


@tensor_op("vector_norm")
@_opmath
def vector_norm(x, ord=2, dim=None, keepdim: bool = False, *, dtype=None) -> GraphTensor:  # noqa: A002 - torch's names
    """The vector norm of ``x`` over ``dim`` (all dims by default), as ``torch.linalg.vector_norm``:
    ``ord`` 2 (Euclidean), 1, ``inf`` (largest ``|x|``), ``-inf`` (smallest), 0 (the number of
    non-zeros, as a float) or any other number ``p``: ``sum(|x|**p) ** (1/p)``. The 2-norm of zeros
    has gradient 0 (as torch's), and ``inf``-norm ties share the gradient.

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
    if ord == math.inf:
        return amax(abs_(x), axes, keepdim)
    if ord == -math.inf:
        return amin(abs_(x), axes, keepdim)
    if ord == 0:
        return sum(cast(ne(x, 0), x.dtype), axes, keepdim)
    return pow(sum(pow(abs_(x), ord), axes, keepdim), 1.0 / ord)


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

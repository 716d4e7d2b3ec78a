"""Vector norms (``torch.linalg.vector_norm``, ``torch.norm``), from sums and maxima of ``|x|``."""

from __future__ import annotations

import math

from luminal.core.errors import op_error
from luminal.frontend.checks import tensor_op
from luminal.frontend.ops.core import cast, normalize_axes, require
from luminal.frontend.ops.elementwise import (
    _opmath,
    abs_,
    add,
    div,
    eq,
    gt,
    isnan,
    logical_or,
    mul,
    ne,
    pow,
    sign,
    sqrt,
    where,
)
from luminal.frontend.ops.movement import movedim
from luminal.frontend.ops.reduce import _amax_or, _own_node, amax, amin, sum
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
    """``torch.norm``: a number ``p`` is the vector ``p``-norm over ``dim`` (all dims by default; see
    ``vector_norm``'s ``ord``), as is ``"fro"`` over None, one dim or two; another string (``"nuc"``,
    or ``"fro"`` over more dims) is ``matrix_norm``'s, as torch's.

    Args:
        x: a float tensor.
        p: ``"fro"``, ``"nuc"``, a number or None (2).
        dim: an int, a sequence of ints or None (every dim).
        keepdim: keep the reduced dims as size 1.
        dtype: cast ``x`` to this dtype first."""
    if p is None or (p == "fro" and (dim is None or isinstance(dim, int) or len(dim) <= 2)):
        p = 2
    if isinstance(p, str):
        return matrix_norm(x, p, tuple(range(x.ndim)) if dim is None else dim, keepdim, dtype=dtype)
    return vector_norm(x, p, dim, keepdim, dtype=dtype)


@tensor_op("matrix_norm")
@_opmath
def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None) -> GraphTensor:  # noqa: A002, N803
    """``torch.linalg.matrix_norm`` over the two dims ``dim``: ``"fro"`` (the 2-norm of the entries),
    1 / -1 (the largest / smallest column sum of ``|A|``), ``inf`` / ``-inf`` (row sums), each as
    torch computes it (a 1-norm along one dim, then ``amax``/``amin`` along the other, ties sharing
    the gradient; 0 for a matrix without columns (rows); -1 and -inf refuse one). ``"nuc"``, 2 and -2
    (the sum, largest and smallest singular value) come from ``linalg.svdvals``: static sizes,
    min(m, n) <= 16.

    Args:
        A: a float tensor of at least 2 dims.
        ord: ``"fro"``, ``"nuc"``, 1, -1, 2, -2, ``inf`` or ``-inf``.
        dim: the two (different) dims of the matrices.
        keepdim: keep the reduced dims as size 1.
        dtype: cast ``A`` to this dtype first."""
    if dtype is not None:
        A = cast(A, dtype)
    require("matrix_norm", A.dtype.is_float, f"needs a float tensor, got {A.dtype.name}", A)
    require("matrix_norm", A.ndim >= 2, f"needs a tensor of at least 2 dims, got {A.ndim}", A, kind=ValueError)
    if not (isinstance(dim, (tuple, list)) and len(dim) == 2):
        raise op_error(TypeError, "matrix_norm", f"dim must be a pair of dims, got {dim!r}", A)
    rows, cols = (A._axis(d, "matrix_norm") for d in dim)
    require("matrix_norm", rows != cols, f"the dims must differ, got {tuple(dim)}", A, kind=ValueError)
    if ord in ("nuc", 2, -2):  # from the singular values (svdvals: static sizes, min(m, n) <= 16)
        from luminal.frontend.ops.linalg_spectral import svdvals

        S = svdvals(movedim(A, (rows, cols), (-2, -1)))
        out = sum(S, -1) if ord == "nuc" else S[..., 0] if ord == 2 else S[..., -1]
        for d in sorted((rows, cols)) if keepdim else ():
            out = out.unsqueeze(d)
        return out
    if ord == "fro":
        return vector_norm(A, 2, (rows, cols), keepdim)
    if isinstance(ord, bool) or ord not in (1, -1, math.inf, -math.inf):
        raise op_error(ValueError, "matrix_norm", f"ord={ord!r} is not a matrix norm ('fro', 'nuc', 1, -1, 2, -2, "
                       "inf or -inf)", A)
    summed, other = (cols, rows) if abs(ord) == math.inf else (rows, cols)
    sums = sum(abs_(A), summed, keepdim=True)
    if ord < 0:  # (over no column, or row, refused as torch's)
        out = amin(sums, other, keepdim=True)
    elif A.shape[other] == 0:  # no column (row): 0, as torch's
        out = sum(sums, other, keepdim=True)
    else:  # (a 0 beside each symbolic dim's sums, which may be none: never above them)
        out = _amax_or(sums, (other,), 0.0, keepdim=True)
    return out if keepdim else out.squeeze((rows, cols))


@tensor_op("renorm")
@_opmath
def renorm(input, p, dim: int, maxnorm) -> GraphTensor:  # noqa: A002 - torch's names
    """``torch.renorm``: each slice of ``input`` at an index of ``dim`` whose ``p``-norm (over the other
    dims) exceeds ``maxnorm`` scaled by ``maxnorm / (norm + 1e-7)``, as torch's; the others as they
    are. The gradient flows through the norm where a slice is scaled (torch's ``renorm_backward``).

    Args:
        input: a float tensor of at least 2 dims.
        p: the norm's order, a positive number (``inf`` included).
        dim: the dim whose slices are renormalised.
        maxnorm: the largest norm kept, a number >= 0."""
    x = input
    require("renorm", x.dtype.is_float, f"needs a float tensor, got {x.dtype.name}", x)
    require("renorm", x.ndim >= 2, f"needs a tensor of at least 2 dims, got {x.ndim}", x, kind=ValueError)
    for name, v in (("p", p), ("maxnorm", maxnorm)):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise op_error(TypeError, "renorm", f"{name} must be a number, got {v!r}", x)
    require("renorm", p > 0, f"p must be positive, got {p}", x, kind=ValueError)
    require("renorm", maxnorm >= 0, f"maxnorm must be >= 0, got {maxnorm}", x, kind=ValueError)
    a = x._axis(dim, "renorm")
    norms = vector_norm(x, p, tuple(i for i in range(x.ndim) if i != a), keepdim=True)
    return where(gt(norms, maxnorm), mul(x, div(maxnorm, add(norms, 1e-7))), x)

"""More of torch's names, composed from the other ops: sgn, frac, signbit, heaviside, float_power,
fliplr/flipud, hsplit/vsplit/dsplit, dist, logdet, block_diag, cartesian_prod, tril_indices/
triu_indices, cov/corrcoef, gcd/lcm, and function forms of the shape methods (``lm.transpose``,
``lm.permute``, ``lm.squeeze``, ``lm.unsqueeze``, ``lm.reshape``, ``lm.swapaxes``/``swapdims``,
``lm.tile``)."""

from __future__ import annotations

import math

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import check_int, op_error
from luminal.core.symbolic import is_static
from luminal.frontend.checks import check_tensors, tensor_op
from luminal.frontend.graph import Graph
from luminal.frontend.ops.combine import _sequence, cat, stack, tensor_split
from luminal.frontend.ops.core import cast, check_device, coerce, prim, require, take_graph
from luminal.frontend.ops.elementwise import (
    _const_bool,
    _int_div,
    _neg_side,
    abs_,
    clamp,
    div,
    eq,
    gt,
    lt,
    mul,
    ne,
    pow,
    sign,
    sqrt,
    sub,
    trunc,
    where,
)
from luminal.frontend.ops.linalg import matmul
from luminal.frontend.ops.linalg_solve import slogdet
from luminal.frontend.ops.movement import diagonal, flip, meshgrid
from luminal.frontend.ops.norms import vector_norm
from luminal.frontend.ops.reduce import any_
from luminal.frontend.ops.reduce import sum as sum_
from luminal.frontend.tensor import GraphTensor


# elementwise -----------------------------------------------------------------------------------
@tensor_op("sgn")
def sgn(input: GraphTensor) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.sgn: for real tensors the same as ``sign`` (-1, 0 or 1; 0 for NaN), gradient 0.

    Args:
        input: an int or float tensor.
    """
    return sign(input)


@tensor_op("frac")
def frac(input: GraphTensor) -> GraphTensor:  # noqa: A002
    """torch.frac: ``input - trunc(input)``, the fractional part with the input's sign (NaN for
    +-inf); the gradient is 1, as torch's.

    Args:
        input: a float tensor.
    """
    require("frac", input.dtype.is_float, f"needs a float tensor, got {input.dtype.name}", input)
    return sub(input, trunc(input))


@tensor_op("signbit")
def signbit(input: GraphTensor) -> GraphTensor:  # noqa: A002
    """torch.signbit: whether the sign bit is set, a bool tensor: ``x < 0``, and ``-0.0`` too. A NaN
    reads False whatever its sign bit (not observable through the primitives; torch reads it).

    Args:
        input: a tensor.
    """
    if input.dtype.kind == "b":
        return _const_bool(input, False)
    if not input.dtype.is_float:
        return lt(input, 0)
    return _neg_side(input).detach()


@tensor_op("heaviside")
def heaviside(input: GraphTensor, values) -> GraphTensor:  # noqa: A002
    """torch.heaviside: 0 where ``input < 0`` (and NaN), ``values`` where ``input == 0``, 1 where
    ``input > 0``; ``values`` broadcast, of ``input``'s dtype (torch refuses mixed dtypes). Not
    differentiable (torch has no derivative): no gradient flows.

    Args:
        input: the tensor.
        values: the values at 0 (a tensor or a number).
    """
    if isinstance(values, GraphTensor) and values.dtype is not input.dtype:
        raise op_error(TypeError, "heaviside", f"input and values must have one dtype, got {input.dtype.name} and "
                       f"{values.dtype.name}", input, values)
    x, v = coerce("heaviside", input, values)
    step = cast(gt(x, 0), x.dtype)
    return where(eq(x, 0), v, step).detach()


@tensor_op("float_power")
def float_power(input, exponent) -> GraphTensor:  # noqa: A002
    """torch.float_power: ``input ** exponent`` computed and returned in float64, whatever the
    operands' dtypes (a Python number exponent stays a number).

    Args:
        input: the base (a tensor, or a number with a tensor exponent).
        exponent: the exponent (a tensor or a number).
    """
    def wide(v):
        return cast(v, dt.float64) if isinstance(v, GraphTensor) else float(v)
    return pow(wide(input), wide(exponent))


# shapes ------------------------------------------------------------------------------------------
@tensor_op("fliplr")
def fliplr(input: GraphTensor) -> GraphTensor:  # noqa: A002
    """torch.fliplr: dim 1 reversed (a view); at least 2 dims.

    Args:
        input: the tensor.
    """
    if input.ndim < 2:
        raise op_error(ValueError, "fliplr", f"needs at least 2 dims, got {input.ndim}", input)
    return flip(input, (1,))


@tensor_op("flipud")
def flipud(input: GraphTensor) -> GraphTensor:  # noqa: A002
    """torch.flipud: dim 0 reversed (a view); at least 1 dim.

    Args:
        input: the tensor.
    """
    if input.ndim < 1:
        raise op_error(ValueError, "flipud", "needs at least 1 dim, got a 0-d tensor", input)
    return flip(input, (0,))


def _dir_split(op: str, x: GraphTensor, sections, dim: int, min_ndim: int) -> tuple[GraphTensor, ...]:
    if x.ndim < min_ndim:
        raise op_error(ValueError, op, f"needs at least {min_ndim} dims, got {x.ndim}", x)
    if isinstance(sections, int) and not isinstance(sections, bool):
        n = x.shape[dim]
        if sections <= 0 or not is_static(n) or n % sections:
            raise op_error(ValueError, op, f"dim {dim} of size {n} does not split into {sections} equal pieces "
                           "(torch: 'not divisible by the split_size'); give the indices to cut at instead", x)
    return tensor_split(x, sections, dim)


@tensor_op("hsplit")
def hsplit(input: GraphTensor, indices_or_sections) -> tuple[GraphTensor, ...]:  # noqa: A002
    """torch.hsplit: ``tensor_split`` along dim 1 (dim 0 of a 1-d tensor); an int must divide the dim.

    Args:
        input: the tensor (at least 1-d).
        indices_or_sections: the number of equal pieces, or the indices to cut before.
    """
    return _dir_split("hsplit", input, indices_or_sections, 0 if input.ndim == 1 else 1, 1)


@tensor_op("vsplit")
def vsplit(input: GraphTensor, indices_or_sections) -> tuple[GraphTensor, ...]:  # noqa: A002
    """torch.vsplit: ``tensor_split`` along dim 0 of a tensor of at least 2 dims; an int must divide it.

    Args:
        input: the tensor (at least 2-d).
        indices_or_sections: the number of equal pieces, or the indices to cut before.
    """
    return _dir_split("vsplit", input, indices_or_sections, 0, 2)


@tensor_op("dsplit")
def dsplit(input: GraphTensor, indices_or_sections) -> tuple[GraphTensor, ...]:  # noqa: A002
    """torch.dsplit: ``tensor_split`` along dim 2 of a tensor of at least 3 dims; an int must divide it.

    Args:
        input: the tensor (at least 3-d).
        indices_or_sections: the number of equal pieces, or the indices to cut before.
    """
    return _dir_split("dsplit", input, indices_or_sections, 2, 3)


# reductions and products ---------------------------------------------------------------------------
@tensor_op("dist")
def dist(input: GraphTensor, other, p=2) -> GraphTensor:  # noqa: A002
    """torch.dist: the ``p``-norm of ``input - other`` (broadcast) over all elements, a 0-d tensor
    (``p`` as ``vector_norm``'s ``ord``: 0, 1, 2, inf, -inf or any number).

    Args:
        input: a float tensor.
        other: a tensor (or number) broadcastable with it.
        p: the norm's order (default 2).
    """
    a, b = coerce("dist", input, other)
    require("dist", a.dtype.is_float, f"needs float tensors, got {a.dtype.name}", a)
    return vector_norm(sub(a, b), float(p) if not isinstance(p, bool) else p)


@tensor_op("logdet")
def logdet(input: GraphTensor) -> GraphTensor:  # noqa: A002
    """torch.logdet: ``log(det(A))`` of each square matrix: NaN where the determinant is negative,
    -inf where it is 0 (from ``slogdet``; static size n). The gradient is slogdet's, ``inv(A).mT``:
    NaN at a singular matrix (it does not exist there), and 0 where the value is the NaN of a negative
    determinant, as torch's.

    Args:
        input: a float32/float64 tensor (*, n, n).
    """
    s, logabs = slogdet(input)
    return where(lt(s, 0), math.nan, logabs)


def block_diag(*tensors) -> GraphTensor:
    """torch.block_diag: the tensors (0-d as (1, 1), 1-d as one row, 2-d) on the diagonal of a matrix
    of zeros, in their promoted dtype; the blocks' column counts must be static.

    Args:
        tensors: the blocks.
    """
    ts = _sequence("block_diag", tensors)
    blocks = []
    for t in ts:
        if t.ndim > 2:
            raise op_error(ValueError, "block_diag", f"takes 0-d, 1-d or 2-d tensors, got {t.ndim}-d", t)
        blocks.append(t.reshape(1, 1) if t.ndim == 0 else t.reshape(1, t.shape[0]) if t.ndim == 1 else t)
    for t in blocks:
        if not is_static(t.shape[1]):
            raise op_error(ValueError, "block_diag", f"needs static column counts, got {t.shape[1]}", *ts)
    dtype = blocks[0].dtype
    for t in blocks[1:]:
        dtype = dt.promote(dtype, t.dtype)
    total = int(np.sum([t.shape[1] for t in blocks]))
    rows, before = [], 0
    for t in blocks:
        m = t.shape[1]
        rows.append(cast(t, dtype).pad([before, total - before - m], False if dtype.kind == "b" else 0))
        before += m
    return cat(rows, 0)


def cartesian_prod(*tensors) -> GraphTensor:
    """torch.cartesian_prod: every combination of one element of each 1-d tensor, as the rows of a
    (n1 * n2 * ..., k) tensor in row-major order (one tensor: itself).

    Args:
        tensors: 1-d tensors.
    """
    ts = _sequence("cartesian_prod", tensors)
    for t in ts:
        if t.ndim != 1:
            raise op_error(ValueError, "cartesian_prod", f"expects 1-d tensors, got {t.ndim}-d", t)
    if len(ts) == 1:
        return ts[0].graph.tensor(ts[0].node, ts[0].layout)
    grids = meshgrid(*ts, indexing="ij")
    return stack([g.reshape(-1) for g in grids], 1)


def _triangle_indices(op: str, args, offset, dtype, graph, device, lower: bool) -> GraphTensor:
    check_device(op, device)
    g, args = take_graph(op, args, graph)
    if len(args) == 3:
        args, offset = args[:2], args[2]
    if len(args) != 2:
        raise op_error(TypeError, op, f"expected row and col, got {len(args)} positional arguments")
    row, col = (check_int(op, name, v, 0) for name, v in zip(("row", "col"), args))
    offset = check_int(op, "offset", offset)
    r, c = np.indices((row, col)).reshape(2, -1)
    keep = c - r <= offset if lower else c - r >= offset
    d = dt.int32 if dtype is None else dt.as_dtype(dtype)
    require(op, d.kind == "i", f"dtype must be an integer type, got {d.name}", kind=TypeError)
    return g.constant(np.stack([r[keep], c[keep]]).astype(np.int32), d)


def tril_indices(*args, offset: int = 0, dtype=None, graph: Graph | None = None, device=None) -> GraphTensor:
    """torch.tril_indices: the (2, N) int32 coordinates (row-major) of the lower triangle of a
    ``row`` x ``col`` matrix, diagonal ``offset`` and below (a constant).

    Called as ``tril_indices(row, col, offset=0, graph=g)`` or with the graph first.

    Args:
        row: the number of rows.
        col: the number of columns.
        offset: which diagonal bounds the triangle (0 the main one, > 0 above, < 0 below).
        dtype: an integer dtype (default int32, luminal's torch.long).
        graph: the Graph to build in, when not given first.
        device: ``"cpu"`` or None.
    """
    return _triangle_indices("tril_indices", args, offset, dtype, graph, device, True)


def triu_indices(*args, offset: int = 0, dtype=None, graph: Graph | None = None, device=None) -> GraphTensor:
    """torch.triu_indices: the (2, N) int32 coordinates (row-major) of the upper triangle of a
    ``row`` x ``col`` matrix, diagonal ``offset`` and above (a constant).

    Called as ``triu_indices(row, col, offset=0, graph=g)`` or with the graph first.

    Args:
        row: the number of rows.
        col: the number of columns.
        offset: which diagonal bounds the triangle (0 the main one, > 0 above, < 0 below).
        dtype: an integer dtype (default int32, luminal's torch.long).
        graph: the Graph to build in, when not given first.
        device: ``"cpu"`` or None.
    """
    return _triangle_indices("triu_indices", args, offset, dtype, graph, device, False)


@tensor_op("cov")
def cov(input: GraphTensor, *, correction: int = 1, fweights=None, aweights=None) -> GraphTensor:  # noqa: A002
    """torch.cov: the covariance matrix of the variables in the rows of ``input`` (observations in
    the columns; a 1-d input is one variable: a 0-d result), as torch computes it: the (weighted)
    mean of each row, ``(x - mean) @ ((x - mean) * w).T`` divided by ``sum(w) - correction`` (with
    ``aweights``: ``sum(w) - correction * sum(w * aweights) / sum(w)``), a divisor at or below 0
    replaced by 0. Size-1 dims of the result are squeezed, as torch's. Weights that sum to 0 raise
    RuntimeError when the program runs, as torch.

    Args:
        input: a 1-d or 2-d tensor (int gives float32).
        correction: subtracted from the observation count (1: unbiased).
        fweights: integer frequency weights, one per observation (1-d).
        aweights: float observation weights, one per observation (1-d).
    """
    x = input
    if x.ndim > 2:
        raise op_error(ValueError, "cov", f"expects a 1-d or 2-d input, got {x.ndim}-d", x)
    require("cov", x.dtype.kind != "b", "not defined for bool tensors", x)
    x = x.reshape(1, -1) if x.ndim < 2 else x
    x = x if x.dtype.is_float else cast(x, dt.float32)
    n = x.shape[1]
    w, checks = None, []  # (failed, value, message) guards, registered for the result
    for name, wt, kind in (("fweights", fweights, "i"), ("aweights", aweights, "f")):
        if wt is None:
            continue
        check_tensors("cov", **{name: wt})
        if wt.ndim != 1 or wt.shape[0] != n:
            raise op_error(ValueError, "cov", f"{name} must be 1-d with one weight per observation ({n}), got "
                           f"shape {tuple(wt.shape)}", x, wt)
        if (wt.dtype.kind == "i") != (kind == "i") or wt.dtype.kind == "b":
            raise op_error(TypeError, "cov", f"{name} must be {'an integer' if kind == 'i' else 'a float'} tensor, "
                           f"got {wt.dtype.name}", wt)
        negative = lt(wt, 0)
        checks.append((any_(negative), sum_(cast(negative, dt.int32)),
                       f"{name} cannot be negative ({{value}} negative)"))
        wt = cast(wt, x.dtype)
        w = wt if w is None else mul(w, wt)
    if w is None:
        w_sum = float(n) if is_static(n) else cast(x.graph.constant(n), x.dtype)
        avg = div(sum_(x, 1), w_sum)
    else:
        w_sum = sum_(w)
        checks.append((eq(w_sum, 0), w_sum, "weights sum to zero, can't be normalized"))
        avg = div(sum_(mul(x, w), 1), w_sum)
    if w is not None and aweights is not None and correction != 0:
        norm = sub(w_sum, div(mul(sum_(mul(w, cast(aweights, x.dtype))), correction), w_sum))
    else:
        norm = sub(w_sum, correction) if isinstance(w_sum, GraphTensor) else w_sum - correction
    if isinstance(norm, GraphTensor):
        norm = where(gt(norm, 0), norm, 0.0)
    else:
        norm = max(norm, 0.0)
    d = sub(x, avg.unsqueeze(1))
    c = matmul(d, (d if w is None else mul(d, w)).transpose(0, 1))
    out = div(c, norm)
    keep = [k for k in range(2) if not (is_static(out.shape[k]) and out.shape[k] == 1)]
    out = out.reshape(tuple(out.shape[k] for k in keep))
    for failed, value, message in checks:
        x.graph.guard(failed, value, RuntimeError, str(op_error(RuntimeError, "cov", message, input)), of=out)
    return out


@tensor_op("corrcoef")
def corrcoef(input: GraphTensor) -> GraphTensor:  # noqa: A002
    """torch.corrcoef: the Pearson correlation coefficients of the variables in the rows of
    ``input``: ``cov(input)`` divided by the standard deviations on both sides, clipped to [-1, 1]
    (one variable: ``c / c``, 1 or NaN).

    Args:
        input: a 1-d or 2-d tensor.
    """
    if input.ndim > 2:
        raise op_error(ValueError, "corrcoef", f"expects a 1-d or 2-d input, got {input.ndim}-d", input)
    c = cov(input)
    if c.ndim == 0:
        return div(c, c)
    sd = sqrt(diagonal(c))
    c = div(div(c, sd.unsqueeze(1)), sd.unsqueeze(0))
    return clamp(c, -1.0, 1.0)


# integers ---------------------------------------------------------------------------------------------
_EUCLID_STEPS = 47  # consecutive Fibonacci numbers are the slowest pair: F(47) > 2**31


def _gcd(a: GraphTensor, b: GraphTensor) -> GraphTensor:
    """torch's ``calc_gcd``: ``a, b = |a|, |b|``, then ``a, b = b % a, a`` while ``a != 0``, unrolled
    (``_EUCLID_STEPS`` rounds cover every int32 pair); ``|INT_MIN|`` wraps to itself, as in torch."""
    a, b = abs_(a), abs_(b)
    for _ in range(_EUCLID_STEPS):
        nz = ne(a, 0)
        a, b = where(nz, prim("Mod", b, where(nz, a, 1)), a), where(nz, a, b)
    return b


def _int_pair(op: str, input, other):
    a, b = coerce(op, input, other)
    require(op, a.dtype.kind == "i", f"needs integer tensors, got {a.dtype.name}", a)
    return a, b


@tensor_op("gcd")
def gcd(input: GraphTensor, other) -> GraphTensor:  # noqa: A002
    """torch.gcd: the greatest common divisor of the integers, elementwise (broadcast); ``gcd(0, 0)``
    is 0, signs are dropped.

    Args:
        input: an int32 tensor.
        other: an int32 tensor or int.
    """
    return _gcd(*_int_pair("gcd", input, other))


@tensor_op("lcm")
def lcm(input: GraphTensor, other) -> GraphTensor:  # noqa: A002
    """torch.lcm: the least common multiple, ``|a / gcd(a, b) * b|`` (0 when either is 0), wrapping
    on int32 overflow as torch's.

    Args:
        input: an int32 tensor.
        other: an int32 tensor or int.
    """
    a, b = _int_pair("lcm", input, other)
    g = _gcd(a, b)
    zero = eq(g, 0)
    q = _int_div(a, where(zero, 1, g), floor=False)
    return where(zero, 0, abs_(prim("Mul", q, b)))


# function forms of the shape methods ---------------------------------------------------------------
@tensor_op("transpose")
def transpose(input: GraphTensor, dim0: int, dim1: int) -> GraphTensor:  # noqa: A002
    """torch.transpose: ``input.transpose(dim0, dim1)`` (a view).

    Args:
        input: the tensor.
        dim0: one dim.
        dim1: the other.
    """
    return input.transpose(dim0, dim1)


@tensor_op("swapaxes")
def swapaxes(input: GraphTensor, axis0: int, axis1: int) -> GraphTensor:  # noqa: A002
    """torch.swapaxes: ``transpose`` with numpy's names.

    Args:
        input: the tensor.
        axis0: one dim.
        axis1: the other.
    """
    return input.transpose(axis0, axis1)


@tensor_op("swapdims")
def swapdims(input: GraphTensor, dim0: int, dim1: int) -> GraphTensor:  # noqa: A002
    """torch.swapdims: ``transpose`` under another name.

    Args:
        input: the tensor.
        dim0: one dim.
        dim1: the other.
    """
    return input.transpose(dim0, dim1)


@tensor_op("t")
def t(input: GraphTensor) -> GraphTensor:  # noqa: A002
    """torch.t: ``input.t()``, a 2-d tensor's transpose (a 0-d or 1-d tensor as it is; a view).

    Args:
        input: a tensor of at most 2 dims.
    """
    return input.t()


@tensor_op("permute")
def permute(input: GraphTensor, dims) -> GraphTensor:  # noqa: A002
    """torch.permute: ``input.permute(dims)`` (a view).

    Args:
        input: the tensor.
        dims: the new order of the dims (a sequence of ints).
    """
    return input.permute(*dims)


@tensor_op("squeeze")
def squeeze(input: GraphTensor, dim=None) -> GraphTensor:  # noqa: A002
    """torch.squeeze: ``input.squeeze(dim)``: the size-1 dims (or those of ``dim``, an int or a
    sequence) removed.

    Args:
        input: the tensor.
        dim: None (every size-1 dim), an int or a sequence of ints.
    """
    return input.squeeze() if dim is None else input.squeeze(dim)


@tensor_op("unsqueeze")
def unsqueeze(input: GraphTensor, dim: int) -> GraphTensor:  # noqa: A002
    """torch.unsqueeze: ``input.unsqueeze(dim)``, a size-1 dim inserted at ``dim``.

    Args:
        input: the tensor.
        dim: where the new dim goes.
    """
    return input.unsqueeze(dim)


@tensor_op("reshape")
def reshape(input: GraphTensor, shape) -> GraphTensor:  # noqa: A002
    """torch.reshape: ``input.reshape(shape)`` (a view where the layout allows, else a copy).

    Args:
        input: the tensor.
        shape: the new shape (one -1 is inferred).
    """
    return input.reshape(shape)


@tensor_op("tile")
def tile(input: GraphTensor, dims) -> GraphTensor:  # noqa: A002
    """torch.tile: ``input.tile(dims)``, the tensor repeated ``dims[i]`` times along dim i (``dims``
    padded with leading 1s to the rank).

    Args:
        input: the tensor.
        dims: the repeat counts (a sequence of ints).
    """
    return input.tile(*dims)

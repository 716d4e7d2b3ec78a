"""More reductions with torch's names: nansum, nanmean (NaN skipped), count_nonzero and aminmax
(``reduce.py`` holds the core set these are built from)."""

from __future__ import annotations

from luminal.core import dtype as dt
from luminal.core.errors import op_error, user_frame
from luminal.core.errors import where as at_line
from luminal.core.symbolic import is_static, shape_str
from luminal.frontend.checks import tensor_op
from luminal.frontend.ops.core import cast, require
from luminal.frontend.ops.elementwise import _opmath, div, isnan, logical_not, ne, where
from luminal.frontend.ops.reduce import amax, amin
from luminal.frontend.ops.reduce import sum as sum_
from luminal.frontend.tensor import GraphTensor, MinMax


def _no_nan(x: GraphTensor) -> GraphTensor:
    """``x`` with each NaN replaced by 0: a ``where``, so a NaN's gradient is 0 (torch's), not NaN."""
    return where(isnan(x), x.graph.constant(0, x.dtype), x) if x.dtype.is_float else x


@tensor_op("nansum")
def nansum(input, dim=None, keepdim: bool = False, *, dtype=None) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.nansum: the sum over ``dim`` (all dims by default) counting NaN as 0 (so all-NaN and
    empty sums are 0); the gradient is 1 at the numbers and 0 at the NaNs. Integer and bool inputs
    sum as ``sum`` does (int32, where torch gives int64).

    Args:
        input: the input tensor.
        dim: the dim or dims to reduce (None: all).
        keepdim: keep the reduced dims as size 1.
        dtype: cast the input to this dtype first.
    """
    x = input if dtype is None else cast(input, dtype)
    return sum_(_no_nan(x), dim, keepdim)


@tensor_op("nanmean")
@_opmath
def nanmean(input, dim=None, keepdim: bool = False, *, dtype=None) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.nanmean: the mean of the non-NaN elements over ``dim`` (all dims by default): NaN where
    there are none (all NaN, or an empty dim), as torch. Needs a float tensor, as torch. The gradient
    is ``1 / count`` at the numbers and 0 at the NaNs, also where all are NaN (torch's is NaN there,
    from ``0 * inf`` in its backward; the NaN result already says that nothing was averaged).
    float16/bfloat16 means are computed in float32 and rounded once, as ``mean``'s (torch's nanmean
    rounds the sum to 16 bits before dividing: a bfloat16 mean of 5000 values in [0, 1) can be off
    by a unit in the last place).

    Args:
        input: a float tensor.
        dim: the dim or dims to reduce (None: all).
        keepdim: keep the reduced dims as size 1.
        dtype: cast the input to this dtype first.
    """
    x = input if dtype is None else cast(input, dtype)
    require("nanmean", x.dtype.is_float, f"needs a float tensor, got {x.dtype.name}", x)
    count = sum_(cast(logical_not(isnan(x)), x.dtype), dim, keepdim)
    return div(sum_(_no_nan(x), dim, keepdim), count)


@tensor_op("count_nonzero")
def count_nonzero(input, dim=None) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.count_nonzero: how many elements over ``dim`` (all dims by default) are not zero (NaN
    counts; -0.0 does not), as int32 (torch's int64).

    Args:
        input: the input tensor.
        dim: the dim or dims to count over (None: all).
    """
    return sum_(cast(ne(input, 0), dt.int32), dim)


AminmaxResult = type("aminmax", (MinMax,), {"__doc__": "``aminmax``'s result: ``min`` and ``max`` (a tuple, as "
                                                      "torch's ``torch.return_types.aminmax``).", "__slots__": ()})


@tensor_op("aminmax")
def aminmax(input, *, dim: int | None = None, keepdim: bool = False) -> MinMax:  # noqa: A002 - torch's names
    """torch.aminmax: the named tuple ``(min, max)`` of ``amin`` and ``amax`` over ``dim`` (all dims
    by default); NaN propagates, and each gradient is shared among the tied extremes, as torch's.

    Args:
        input: the input tensor (not empty along the reduced dims).
        dim: the dim to reduce (an int; None: all).
        keepdim: keep the reduced dims as size 1.
    """
    x = input
    axes = range(x.ndim) if dim is None else (x._axis(dim, "aminmax"),) if x.ndim else ()
    if any(is_static(x.shape[a]) and x.shape[a] == 0 for a in axes):
        raise op_error(ValueError, "aminmax", "cannot compute aminmax over an empty dim (it has no identity)", x)
    out = AminmaxResult(amin(x, dim, keepdim), amax(x, dim, keepdim))
    for a in axes:  # a symbolic dim bound to 0: refused before the run, naming the op and the line
        if not is_static(x.shape[a]):
            msg = (f"aminmax: reducing dim {a} of a {shape_str(x.shape)} tensor, which is empty: there is no "
                   f"smallest or largest value (at {at_line(user_frame())})")
            for t in out:
                x.graph.node_requirements.setdefault(t.node.id, []).append((x.shape[a] - 1, msg, IndexError))
    return out

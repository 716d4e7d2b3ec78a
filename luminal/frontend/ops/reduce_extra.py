"""More reductions with torch's names: nansum, nanmean (NaN skipped) and count_nonzero (``reduce.py``
holds the core set these are built from)."""

from __future__ import annotations

from luminal.core import dtype as dt
from luminal.frontend.checks import tensor_op
from luminal.frontend.ops.core import cast, require
from luminal.frontend.ops.elementwise import _opmath, div, isnan, logical_not, ne, where
from luminal.frontend.ops.reduce import sum as sum_
from luminal.frontend.tensor import GraphTensor


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

"""combinations: torch.combinations as one gather of index lists computed when the graph is built."""

from __future__ import annotations

import itertools

import numpy as np

from luminal.core.errors import check_int, op_error
from luminal.core.symbolic import is_static
from luminal.frontend.checks import tensor_op
from luminal.frontend.ops.indexing import index_select
from luminal.frontend.tensor import GraphTensor


@tensor_op("combinations")
def combinations(input: GraphTensor, r: int = 2, with_replacement: bool = False) -> GraphTensor:  # noqa: A002
    """torch.combinations: every length-``r`` combination of the elements of a 1-d tensor, as the rows of
    a ``(C, r)`` tensor in ``itertools.combinations`` order (``combinations_with_replacement``'s with
    ``with_replacement=True``). The index lists are computed when the graph is built, so the length must
    be static; the rows are one gather of ``input``, which gradients flow back through. As torch's,
    ``r=0`` gives an empty 1-d tensor, and more than ``n`` without replacement an empty ``(0, r)`` one.

    Args:
        input: a 1-d tensor of static length ``n``.
        r: the length of each combination (an int >= 0).
        with_replacement: whether an element may repeat within a combination.
    """
    x = input
    if x.ndim != 1:
        raise op_error(ValueError, "combinations", f"expects a 1-d tensor, got shape {tuple(x.shape)}", x)
    r = check_int("combinations", "r", r, 0)
    n = x.shape[0]
    if not is_static(n):
        raise op_error(ValueError, "combinations", f"the length must be static (the index lists are computed when "
                       f"the graph is built), got {n}", x)
    if not isinstance(with_replacement, (bool, np.bool_)):
        raise op_error(TypeError, "combinations", f"with_replacement must be a bool, got {with_replacement!r}", x)
    if r == 0:
        return x._slice_dim(0, 0, 0, 1)
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = np.array(list(pick(range(n), r)), np.int32).reshape(-1, r)
    index = x.graph.constant(rows.reshape(-1))
    return index_select(x, 0, index).reshape((rows.shape[0], r))

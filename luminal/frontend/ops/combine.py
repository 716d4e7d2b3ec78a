"""Joining and splitting: cat, stack, split, chunk, tensor_split.

``cat`` pads each piece with zeros out to the full length along the dim and adds the pieces: the
padded regions are views (no data), and ``x + -0.0`` is exact (a float piece is padded with -0.0,
the one additive identity that also keeps -0.0), so this is one mechanism (views + Add)
rather than a new primitive. Sizes add symbolically (``S`` and ``1`` give ``S+1``).
"""

from __future__ import annotations

from luminal.core import dtype as dt
from luminal.core.errors import check_int, op_error
from luminal.core.symbolic import free_vars, is_static, shape_str
from luminal.frontend.checks import check_tensors, tensor_op
from luminal.frontend.ops.core import cast, fresh
from luminal.frontend.ops.elementwise import add
from luminal.frontend.tensor import GraphTensor


def _sequence(op: str, tensors) -> list[GraphTensor]:
    """``tensors`` as a non-empty list of GraphTensors of one graph, else an error naming ``op``."""
    if isinstance(tensors, GraphTensor):  # iterating it would concatenate its rows
        raise op_error(TypeError, op, "expected a sequence of GraphTensors, got one GraphTensor (wrap it in a list)",
                       tensors)
    try:
        tensors = list(tensors)
    except TypeError:
        raise op_error(TypeError, op, f"expected a sequence of GraphTensors, got {type(tensors).__name__}") from None
    if not tensors:
        raise op_error(TypeError, op, "expected a non-empty sequence of GraphTensors")
    check_tensors(op, **{f"tensors[{i}]": t for i, t in enumerate(tensors)})
    return tensors


def cat(tensors, dim: int = 0) -> GraphTensor:
    """torch.cat: the tensors joined along ``dim``; their shapes must agree in every other dim, and the
    result takes their promoted dtype (every tensor's, as torch's).

    As torch's, a 1-d empty tensor (shape ``(0,)``, torch's legacy empty tensor) is skipped whatever
    the others' shapes (so an empty accumulator can start a loop of joins), and a 0-d tensor is refused.

    Args:
        tensors: a non-empty sequence of tensors of one graph.
        dim: the dim to join along (default 0).
    """
    tensors = _sequence("cat", tensors)
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise op_error(ValueError, "cat", f"tensors[{i}] is 0-d and cannot be concatenated (as torch's: "
                           "unsqueeze it, or use stack)", *tensors)
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = dt.promote(dtype, t.dtype)
    joined = [t for t in tensors if not (t.ndim == 1 and is_static(t.shape[0]) and t.shape[0] == 0)] or tensors
    first = joined[0]
    d = first._axis(dim, "cat")
    for t in joined[1:]:
        if t.ndim != first.ndim:
            raise op_error(ValueError, "cat", f"tensors must have the same number of dims, got {first.ndim} and "
                           f"{t.ndim}", *tensors)
        if any(a != b for k, (a, b) in enumerate(zip(t.shape, first.shape)) if k != d):
            raise op_error(ValueError, "cat", f"shapes must match except in dim {d}, got {shape_str(first.shape)} "
                           f"and {shape_str(t.shape)}{_rounded_hint(first, t, d)}", *tensors)
    total = 0
    for t in joined:
        total = total + t.shape[d]
    out, before = None, 0
    for t in joined:
        after = total - before - t.shape[d]
        pads = [0, 0] * (first.ndim - 1 - d) + [before, after]
        piece = cast(t, dtype).pad(pads, -0.0 if dtype.is_float else 0)  # x + -0.0 is x, even for x = -0.0
        out = piece if out is None else add(out, piece)
        before = before + t.shape[d]
    return fresh(out) if any(out is t for t in tensors) else out  # (cat of one: a handle of its own, as torch's copy)


def _rounded_hint(a: GraphTensor, b: GraphTensor, d: int) -> str:
    """For symbolic sizes that differ only as expressions of rounding (a U-Net's skip ``H`` joined with
    ``2*(H//2)``, the same size for an even ``H``): how to declare the input so that they are equal."""
    if a.ndim != b.ndim:
        return ""
    for k, (x, y) in enumerate(zip(a.shape, b.shape)):
        if k == d or x == y or (is_static(x) and is_static(y)):
            continue
        rounded = [str(v) for v in (x, y) if not is_static(v) and ("//" in str(v) or "%" in str(v))]
        if not rounded:
            continue
        name = sorted(free_vars(x) | free_vars(y))[0]
        return (f"; dim {k} is {x} in one tensor and {y} in the other, equal only for some values of {name} "
                f"(the division in {rounded[0]} rounds down): declaring the input's size as a multiple, as "
                f"4*lm.sym(\"{name.lower()}\") in g.input for two halvings, makes such divisions exact and the sizes "
                "equal")
    return ""


def stack(tensors, dim: int = 0) -> GraphTensor:
    """torch.stack: the tensors (all of one shape) joined along a new dim ``dim``.

    Args:
        tensors: a non-empty sequence of tensors of one shape.
        dim: where the new dim goes (default 0; up to ``ndim``).
    """
    tensors = _sequence("stack", tensors)
    d = tensors[0]._axis(dim, "stack", tensors[0].ndim + 1)
    for t in tensors[1:]:
        if t.shape != tensors[0].shape:
            raise op_error(ValueError, "stack", "all tensors must have the same shape", *tensors)
    return cat([t.unsqueeze(d) for t in tensors], d)


@tensor_op("split")
def split(x: GraphTensor, split_size_or_sections, dim: int = 0) -> tuple[GraphTensor, ...]:
    """torch.split: views of ``x`` cut along ``dim``: pieces of ``split_size_or_sections`` elements
    (the last one smaller when the size does not divide), or of the listed sizes.

    Args:
        x: the input tensor.
        split_size_or_sections: an int (the size of each piece; needs a static dim) or a list of sizes
            adding up to the dim's size.
        dim: the dim to split (default 0).

    Returns:
        A tuple of tensors.
    """
    d = x._axis(dim, "split", scalar=False)
    n = x.shape[d]
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        if not is_static(n):
            raise op_error(ValueError, "split", f"an int size needs a static dim, got dim {d} of size {n}", x)
        if size < 0 or size == 0 and n != 0:  # (torch: a size of 0 only for an empty dim)
            raise op_error(ValueError, "split", f"the size must be positive (0 only for an empty dim), got {size} "
                           f"for dim {d} of size {n}", x)
        sizes = [min(size, n - s) for s in range(0, n, size)] if n else [0]
    else:
        sizes = list(split_size_or_sections)
        if any(isinstance(s, int) and s < 0 for s in sizes):
            raise op_error(ValueError, "split", f"negative section in {sizes}", x)
        total = 0
        for s in sizes:
            total = total + s
        if total != n:
            raise op_error(ValueError, "split", f"sections {sizes} do not add up to dim {d} of size {n}", x)
    out, start = [], 0
    for s in sizes:
        out.append(x._slice_dim(d, start, s, 1))
        start = start + s
    return tuple(out)


@tensor_op("chunk")
def chunk(x: GraphTensor, chunks: int, dim: int = 0) -> tuple[GraphTensor, ...]:
    """torch.chunk: ``x`` cut along ``dim`` into at most ``chunks`` pieces of ``ceil(n / chunks)``
    elements (the last one smaller), ``chunks`` empty pieces of an empty dim; the dim must be static.

    Args:
        x: the input tensor.
        chunks: the number of pieces asked for.
        dim: the dim to cut (default 0).

    Returns:
        A tuple of tensors.
    """
    d = x._axis(dim, "chunk", scalar=False)
    n = x.shape[d]
    if not is_static(n) or chunks <= 0:
        raise op_error(ValueError, "chunk", f"need a positive chunk count and a static dim (dim {d} is {n})", x)
    if n == 0:  # torch: ``chunks`` empty pieces (so ``a, b, c = x.chunk(3)`` unpacks)
        return tuple(x._slice_dim(d, 0, 0, 1) for _ in range(chunks))
    return split(x, -(-n // chunks), d)


@tensor_op("tensor_split")
def tensor_split(input: GraphTensor, indices_or_sections, dim: int = 0) -> tuple[GraphTensor, ...]:  # noqa: A002
    """torch.tensor_split: views of ``input`` cut along ``dim``. An int ``n`` gives ``n`` pieces, the
    first ``size % n`` of them one longer (``split``'s differ: ``n`` there is a piece's size); a
    list of indices cuts before each, as the slices ``input[:i0], input[i0:i1], ..., input[ik:]`` (an
    index may be negative or past the end; a piece whose end comes before its start is empty). The dim
    must be static; the indices are Python ints (torch also takes a tensor of them).

    Args:
        input: the tensor (at least 1-d).
        indices_or_sections: the number of pieces (an int > 0), or a sequence of indices.
        dim: the dim to cut (default 0).

    Returns:
        A tuple of tensors.
    """
    x = input
    d = x._axis(dim, "tensor_split", scalar=False)
    n = x.shape[d]
    if not is_static(n):
        raise op_error(ValueError, "tensor_split", f"needs a static dim, got dim {d} of size {n}", x)
    if isinstance(indices_or_sections, GraphTensor):
        raise op_error(TypeError, "tensor_split", "indices_or_sections must be an int or a sequence of ints, "
                       "not a tensor (its values are known only when the program runs)", x)
    if isinstance(indices_or_sections, (tuple, list)):
        cuts = [check_int("tensor_split", "index", i) for i in indices_or_sections]
        bounds = [slice(a, b).indices(n)[:2] for a, b in zip([0, *cuts], [*cuts, n])]
        return tuple(x._slice_dim(d, a, max(0, b - a), 1) for a, b in bounds)
    k = check_int("tensor_split", "sections", indices_or_sections)
    if k <= 0:
        raise op_error(ValueError, "tensor_split", f"the number of sections must be at least 1, got {k}", x)
    q, r = divmod(n, k)
    return split(x, [q + 1] * r + [q] * (k - r), d)


def concat(tensors, dim: int = 0) -> GraphTensor:
    """torch.concat: :func:`cat` under another of torch's names.

    Args:
        tensors: a non-empty sequence of tensors of one graph.
        dim: the dim to join along (default 0).
    """
    return cat(tensors, dim)


def concatenate(tensors, dim: int = 0) -> GraphTensor:
    """torch.concatenate: :func:`cat` under numpy's name.

    Args:
        tensors: a non-empty sequence of tensors of one graph.
        dim: the dim to join along (default 0).
    """
    return cat(tensors, dim)


def hstack(tensors) -> GraphTensor:
    """torch.hstack: concatenate along dim 1, or along dim 0 for 1-d tensors (0-d ones count as 1-d).

    Args:
        tensors: a sequence of tensors.
    """
    ts = [t.reshape(1) if t.ndim == 0 else t for t in _sequence("hstack", tensors)]
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors) -> GraphTensor:
    """torch.vstack: concatenate along dim 0 after viewing 0-d and 1-d tensors as rows ``(1, n)``.

    Args:
        tensors: a sequence of tensors.
    """
    ts = [t.reshape(1, -1) if t.ndim < 2 else t for t in _sequence("vstack", tensors)]
    return cat(ts, 0)


row_stack = vstack


def dstack(tensors) -> GraphTensor:
    """torch.dstack: concatenate along dim 2 (depth) after viewing each tensor as at least 3-d, as
    torch's ``atleast_3d``: a 0-d tensor as ``(1, 1, 1)``, a 1-d ``(n,)`` as ``(1, n, 1)``, a 2-d
    ``(m, n)`` as ``(m, n, 1)``.

    Args:
        tensors: a sequence of tensors.
    """
    def atleast_3d(t):
        return t.reshape(1, 1, 1) if t.ndim == 0 else t.reshape(1, t.shape[0], 1) if t.ndim == 1 else \
            t.unsqueeze(-1) if t.ndim == 2 else t
    return cat([atleast_3d(t) for t in _sequence("dstack", tensors)], 2)


def column_stack(tensors) -> GraphTensor:
    """torch.column_stack: concatenate along dim 1 after viewing each 0-d or 1-d tensor as a column
    ``(n, 1)`` (a 0-d one as ``(1, 1)``); tensors of 2 or more dims join as they are.

    Args:
        tensors: a sequence of tensors.
    """
    ts = _sequence("column_stack", tensors)
    return cat([t.reshape(t.shape[0] if t.ndim else 1, 1) if t.ndim < 2 else t for t in ts], 1)

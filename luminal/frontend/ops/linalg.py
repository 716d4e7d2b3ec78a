"""Matrix products as broadcast-multiply + sum (the form the compiler's matmul discovery matches):
matmul, dot, outer, bmm, addmm, baddbmm (einsum and tensordot: ``einsum.py``)."""

from __future__ import annotations

from luminal.core.errors import check_number, op_error, renamed
from luminal.core.symbolic import shape_str
from luminal.frontend.checks import check_tensors
from luminal.frontend.ops.core import broadcast_shapes, coerce, require
from luminal.frontend.ops.elementwise import add, mul
from luminal.frontend.ops.reduce import sum as sum_
from luminal.frontend.tensor import GraphTensor


def matmul(a: GraphTensor, b: GraphTensor) -> GraphTensor:
    """torch.matmul semantics, including 1-d operands and broadcast batch dims."""
    check_tensors("matmul", input=a, other=b)
    if a.ndim == 0 or b.ndim == 0:
        raise op_error(ValueError, "matmul", "both operands need at least one dim", a, b)
    require("matmul", a.dtype.kind != "b" and b.dtype.kind != "b", "bool operands are not supported", a, b)
    a2 = a.unsqueeze(0) if a.ndim == 1 else a
    b2 = b.unsqueeze(-1) if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise op_error(ValueError, "matmul", f"contracted dims differ: {a2.shape[-1]} vs {b2.shape[-2]}", a, b)
    m, k, n = a2.shape[-2], a2.shape[-1], b2.shape[-1]
    batch = broadcast_shapes("matmul", a, b, shapes=[a2.shape[:-2], b2.shape[:-2]])
    lhs = a2.unsqueeze(-1).expand(*batch, m, k, n)
    rhs = b2.unsqueeze(-3).expand(*batch, m, k, n)
    lhs, rhs = coerce("matmul", lhs, rhs)
    out = sum_(mul(lhs, rhs), -2)
    if a.ndim == 1:
        out = out.squeeze(-2)
    if b.ndim == 1:
        out = out.squeeze(-1)
    return out


def dot(a: GraphTensor, b: GraphTensor) -> GraphTensor:
    """torch.dot: the inner product of two 1-d tensors (``matmul`` of the two vectors, a 0-d tensor).

    Args:
        a: the first vector.
        b: the second vector.
    """
    return matmul(a, b)


def outer(a: GraphTensor, b: GraphTensor) -> GraphTensor:
    """torch.outer: the outer product ``a[:, None] * b[None, :]`` of two 1-d tensors.

    Args:
        a: the first vector (rows).
        b: the second vector (columns).
    """
    check_tensors("outer", input=a, vec2=b)
    require("outer", a.ndim == 1 and b.ndim == 1, "both operands must be 1-d", a, b, kind=ValueError)
    return mul(a.unsqueeze(-1), b.unsqueeze(0))


def bmm(input: GraphTensor, mat2: GraphTensor) -> GraphTensor:  # noqa: A002 - torch's name
    """torch.bmm: batched matrix product of two 3-d tensors, ``(b, n, m) @ (b, m, p) -> (b, n, p)``.

    Args:
        input: the first batch of matrices, 3-d.
        mat2: the second batch of matrices, 3-d, with the same batch size.
    """
    check_tensors("bmm", input=input, mat2=mat2)
    if input.ndim != 3 or mat2.ndim != 3 or input.shape[0] != mat2.shape[0]:
        raise op_error(ValueError, "bmm", "needs two 3-d tensors with the same batch size", input, mat2)
    return matmul(input, mat2)


def _scaled_sum(op: str, input: GraphTensor, product: GraphTensor, beta, alpha) -> GraphTensor:
    """``beta * input + alpha * product``; ``input`` is ignored when beta is 0 (as torch: its NaN and
    inf do not propagate), and must broadcast to the product's shape."""
    check_number(op, "beta", beta, input)
    check_number(op, "alpha", alpha, input)
    if broadcast_shapes(op, input, product) != product.shape:
        raise op_error(ValueError, op, f"input {shape_str(input.shape)} must broadcast to the product's "
                       f"{shape_str(product.shape)}", input, product)
    out = product if alpha == 1 else mul(product, alpha)
    if beta == 0:
        return out
    return add(input if beta == 1 else mul(input, beta), out)


def addmm(input: GraphTensor, mat1: GraphTensor, mat2: GraphTensor, *, beta=1, alpha=1) -> GraphTensor:  # noqa: A002
    """torch.addmm: ``beta * input + alpha * (mat1 @ mat2)``.

    Args:
        input: the tensor added, broadcastable to ``(n, p)``.
        mat1: an ``(n, m)`` matrix.
        mat2: an ``(m, p)`` matrix.
        beta: the scale of ``input`` (with 0 it is ignored, NaN included).
        alpha: the scale of the product.
    """
    check_tensors("addmm", input=input, mat1=mat1, mat2=mat2)
    if mat1.ndim != 2 or mat2.ndim != 2:
        raise op_error(ValueError, "addmm", "mat1 and mat2 must be 2-d", mat1, mat2)
    return _scaled_sum("addmm", input, matmul(mat1, mat2), beta, alpha)


def baddbmm(input: GraphTensor, batch1: GraphTensor, batch2: GraphTensor, *, beta=1, alpha=1) -> GraphTensor:  # noqa: A002
    """torch.baddbmm: ``beta * input + alpha * bmm(batch1, batch2)``.

    Args:
        input: the tensor added, broadcastable to ``(b, n, p)``.
        batch1: a ``(b, n, m)`` batch of matrices.
        batch2: a ``(b, m, p)`` batch of matrices.
        beta: the scale of ``input`` (with 0 it is ignored, NaN included).
        alpha: the scale of the product.
    """
    check_tensors("baddbmm", input=input, batch1=batch1, batch2=batch2)
    with renamed("baddbmm"):
        product = bmm(batch1, batch2)
    return _scaled_sum("baddbmm", input, product, beta, alpha)

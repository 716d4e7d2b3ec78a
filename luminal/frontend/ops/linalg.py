"""Matrix products as broadcast-multiply + sum (the form the compiler's matmul discovery matches):
matmul, dot, outer, bmm, addmm, baddbmm (einsum and tensordot: ``einsum.py``); and the products
torch has beside them: cross (of 3-vectors) and kron."""

from __future__ import annotations

from luminal.core import dtype as dt
from luminal.core.errors import check_number, op_error, renamed
from luminal.core.symbolic import is_static, shape_str
from luminal.frontend.checks import check_tensors
from luminal.frontend.ops.combine import cat
from luminal.frontend.ops.core import broadcast_shapes, cast, coerce, require
from luminal.frontend.ops.elementwise import add, mul, sub
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
    inf do not propagate), and must broadcast to the product's shape. With integer operands the
    scales are converted to int first (truncated toward zero), as torch does: the result stays
    integer (``beta=0.5`` is 0, where a float scale would have promoted the result to float)."""
    check_number(op, "beta", beta, input)
    check_number(op, "alpha", alpha, input)
    if not dt.promote(input.dtype, product.dtype).is_float:
        beta, alpha = int(beta), int(alpha)
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


def cross(input: GraphTensor, other: GraphTensor, dim: int | None = None) -> GraphTensor:  # noqa: A002
    """torch.cross: the cross product of 3-vectors along ``dim`` (operands broadcast), ``c_i =
    a_(i+1) b_(i+2) - a_(i+2) b_(i+1)`` with indices mod 3. ``dim=None`` takes the first dim of size 3,
    as torch.cross (``lm.linalg.cross`` defaults to the last dim, as torch.linalg.cross).

    Args:
        input: a tensor with a dim of size 3.
        other: a tensor of the same size along ``dim``, broadcast against ``input``.
        dim: the dim holding the vectors' 3 components.
    """
    check_tensors("cross", input=input, other=other)
    if input.ndim != other.ndim:
        raise op_error(ValueError, "cross", f"input and other must have the same number of dims, got {input.ndim} "
                       f"and {other.ndim}", input, other)
    a, b = coerce("cross", input, other)
    require("cross", a.dtype.kind != "b", "bool operands are not supported", input, other)
    if dim is None:
        threes = [i for i, n in enumerate(a.shape) if is_static(n) and n == 3]
        if not threes:
            raise op_error(ValueError, "cross", f"no dim of size 3 in {shape_str(a.shape)}", input, other)
        dim = threes[0]
    d = a._axis(dim, "cross")
    if not (is_static(a.shape[d]) and a.shape[d] == 3):
        raise op_error(ValueError, "cross", f"dim {d} must have size 3, got {a.shape[d]}", input, other)

    def comp(t: GraphTensor, i: int) -> GraphTensor:
        return t._slice_dim(d, i % 3, 1, 1)

    parts = [sub(mul(comp(a, i + 1), comp(b, i + 2)), mul(comp(a, i + 2), comp(b, i + 1))) for i in range(3)]
    return cat(parts, d)


def kron(input: GraphTensor, other: GraphTensor) -> GraphTensor:  # noqa: A002
    """torch.kron: the Kronecker product: block ``i`` of the result is ``input[i] * other``, in every dim
    (the operand with fewer dims gets leading 1s). One broadcast multiply over interleaved dims
    ``(a0, b0, a1, b1, ...)``, then a reshape.

    Args:
        input: a tensor.
        other: a tensor.
    """
    check_tensors("kron", input=input, other=other)
    d = dt.promote(input.dtype, other.dtype)
    n = max(input.ndim, other.ndim)
    a = cast(input, d).reshape((1,) * (n - input.ndim) + input.shape)
    b = cast(other, d).reshape((1,) * (n - other.ndim) + other.shape)
    wide = mul(a.reshape(tuple(x for k in a.shape for x in (k, 1))),
               b.reshape(tuple(x for k in b.shape for x in (1, k))))
    return wide.reshape(tuple(p * q for p, q in zip(a.shape, b.shape)))

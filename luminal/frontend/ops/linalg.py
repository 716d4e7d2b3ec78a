"""Matrix products as broadcast-multiply + sum (the form the compiler's matmul discovery matches)."""

from __future__ import annotations

from luminal.core.errors import op_error
from luminal.frontend.checks import check_tensors
from luminal.frontend.ops.core import broadcast_shapes, coerce, require
from luminal.frontend.ops.elementwise import mul
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
    return matmul(a, b)


def outer(a: GraphTensor, b: GraphTensor) -> GraphTensor:
    check_tensors("outer", input=a, vec2=b)
    require("outer", a.ndim == 1 and b.ndim == 1, "both operands must be 1-d", a, b, kind=ValueError)
    return mul(a.unsqueeze(-1), b.unsqueeze(0))

"""Matrix products as broadcast-multiply + sum (the form the compiler's matmul discovery matches):
matmul and its fixed-rank forms (mm, mv, bmm, dot, vdot, inner, outer/ger), the scaled sums addmm,
addmv, addr, baddbmm, addbmm, and chains of products (multi_dot, chain_matmul) (einsum and tensordot:
``einsum.py``); and the products torch has beside them: cross (of 3-vectors) and kron."""

from __future__ import annotations

from luminal.core import dtype as dt
from luminal.core.errors import check_number, op_error, renamed
from luminal.core.symbolic import is_static, shape_str
from luminal.frontend.checks import check_tensors
from luminal.frontend.ops.combine import cat
from luminal.frontend.ops.core import broadcast_shapes, cast, coerce, require
from luminal.frontend.ops.einsum import tensordot
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
        raise op_error(ValueError, "matmul", f"contracted dims differ: {a2.shape[-1]} vs {b2.shape[-2]} "
                       f"({shape_str(a.shape)} @ {shape_str(b.shape)})", a, b)
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


def _ranks(op: str, names: tuple[str, ...], tensors: tuple, ranks: tuple[int, ...]) -> None:
    """torch's fixed-rank products (``mm``: two 2-d tensors) refuse other ranks rather than broadcast."""
    check_tensors(op, **dict(zip(names, tensors)))
    if any(t.ndim != r for t, r in zip(tensors, ranks)):
        want = " and ".join(f"{r}-d {n}" for n, r in zip(names, ranks))
        got = ", ".join(f"{n} {t.ndim}-d" for n, t in zip(names, tensors))
        raise op_error(ValueError, op, f"needs {want}, got {got}", *tensors)


@renamed("dot")
def dot(a: GraphTensor, b: GraphTensor) -> GraphTensor:
    """torch.dot: the inner product of two 1-d tensors of the same length (a 0-d tensor).

    Args:
        a: the first vector.
        b: the second vector.
    """
    _ranks("dot", ("input", "tensor"), (a, b), (1, 1))
    return matmul(a, b)


@renamed("vdot")
def vdot(input: GraphTensor, other: GraphTensor) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.vdot: ``dot`` with the first vector conjugated, which for real tensors is ``dot``.

    Args:
        input: the first vector.
        other: the second vector.
    """
    _ranks("vdot", ("input", "other"), (input, other), (1, 1))
    return matmul(input, other)


@renamed("mm")
def mm(input: GraphTensor, mat2: GraphTensor) -> GraphTensor:  # noqa: A002
    """torch.mm: the product of an ``(n, m)`` and an ``(m, p)`` matrix (2-d only, no broadcasting).

    Args:
        input: the first matrix.
        mat2: the second matrix.
    """
    _ranks("mm", ("input", "mat2"), (input, mat2), (2, 2))
    return matmul(input, mat2)


@renamed("mv")
def mv(input: GraphTensor, vec: GraphTensor) -> GraphTensor:  # noqa: A002
    """torch.mv: the product of an ``(n, m)`` matrix and a length-``m`` vector (length ``n``).

    Args:
        input: the matrix.
        vec: the vector.
    """
    _ranks("mv", ("input", "vec"), (input, vec), (2, 1))
    return matmul(input, vec)


@renamed("inner")
def inner(input: GraphTensor, other: GraphTensor) -> GraphTensor:  # noqa: A002
    """torch.inner: the sum of products over the last dims of both, shape ``input.shape[:-1] +
    other.shape[:-1]``; with a 0-d operand, the product ``input * other``.

    Args:
        input: the first tensor.
        other: the second tensor, with the same last size.
    """
    check_tensors("inner", input=input, other=other)
    if input.ndim == 0 or other.ndim == 0:
        return mul(input, other)
    if input.shape[-1] != other.shape[-1]:
        raise op_error(ValueError, "inner", f"last dims differ: {shape_str(input.shape)} and "
                       f"{shape_str(other.shape)}", input, other)
    return tensordot(input, other, ([-1], [-1]))


def outer(a: GraphTensor, b: GraphTensor) -> GraphTensor:
    """torch.outer: the outer product ``a[:, None] * b[None, :]`` of two 1-d tensors.

    Args:
        a: the first vector (rows).
        b: the second vector (columns).
    """
    _ranks("outer", ("input", "vec2"), (a, b), (1, 1))
    return mul(a.unsqueeze(-1), b.unsqueeze(0))


@renamed("ger")
def ger(input: GraphTensor, vec2: GraphTensor) -> GraphTensor:  # noqa: A002
    """torch.ger: the old name of ``outer``.

    Args:
        input: the first vector (rows).
        vec2: the second vector (columns).
    """
    return outer(input, vec2)


@renamed("bmm")
def bmm(input: GraphTensor, mat2: GraphTensor) -> GraphTensor:  # noqa: A002 - torch's name
    """torch.bmm: batched matrix product of two 3-d tensors, ``(b, n, m) @ (b, m, p) -> (b, n, p)``.

    Args:
        input: the first batch of matrices, 3-d.
        mat2: the second batch of matrices, 3-d, with the same batch size.
    """
    _ranks("bmm", ("input", "mat2"), (input, mat2), (3, 3))
    if input.shape[0] != mat2.shape[0]:
        raise op_error(ValueError, "bmm", f"batch sizes differ: {input.shape[0]} and {mat2.shape[0]}", input, mat2)
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
    if beta == 0:  # the dtype as with any other beta: input's dtype still promotes
        return cast(out, dt.promote(input.dtype, out.dtype))
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
    check_tensors("addmm", input=input)
    _ranks("addmm", ("mat1", "mat2"), (mat1, mat2), (2, 2))
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
    check_tensors("baddbmm", input=input)
    _ranks("baddbmm", ("batch1", "batch2"), (batch1, batch2), (3, 3))
    with renamed("baddbmm"):
        product = bmm(batch1, batch2)
    return _scaled_sum("baddbmm", input, product, beta, alpha)


def addmv(input: GraphTensor, mat: GraphTensor, vec: GraphTensor, *, beta=1, alpha=1) -> GraphTensor:  # noqa: A002
    """torch.addmv: ``beta * input + alpha * (mat @ vec)``.

    Args:
        input: the tensor added, broadcastable to ``(n,)``.
        mat: an ``(n, m)`` matrix.
        vec: a length-``m`` vector.
        beta: the scale of ``input`` (with 0 it is ignored, NaN included).
        alpha: the scale of the product.
    """
    check_tensors("addmv", input=input)
    _ranks("addmv", ("mat", "vec"), (mat, vec), (2, 1))
    with renamed("addmv"):
        product = mv(mat, vec)
    return _scaled_sum("addmv", input, product, beta, alpha)


def addr(input: GraphTensor, vec1: GraphTensor, vec2: GraphTensor, *, beta=1, alpha=1) -> GraphTensor:  # noqa: A002
    """torch.addr: ``beta * input + alpha * outer(vec1, vec2)``.

    Args:
        input: the tensor added, broadcastable to ``(n, m)``.
        vec1: a length-``n`` vector.
        vec2: a length-``m`` vector.
        beta: the scale of ``input`` (with 0 it is ignored, NaN included).
        alpha: the scale of the outer product.
    """
    check_tensors("addr", input=input)
    _ranks("addr", ("vec1", "vec2"), (vec1, vec2), (1, 1))
    with renamed("addr"):
        product = outer(vec1, vec2)
    return _scaled_sum("addr", input, product, beta, alpha)


def addbmm(input: GraphTensor, batch1: GraphTensor, batch2: GraphTensor, *, beta=1, alpha=1) -> GraphTensor:  # noqa: A002
    """torch.addbmm: ``beta * input + alpha * sum_b (batch1[b] @ batch2[b])`` (an empty batch sums to 0).

    Args:
        input: the tensor added, broadcastable to ``(n, p)``.
        batch1: a ``(b, n, m)`` batch of matrices.
        batch2: a ``(b, m, p)`` batch of matrices.
        beta: the scale of ``input`` (with 0 it is ignored, NaN included).
        alpha: the scale of the summed products.
    """
    check_tensors("addbmm", input=input)
    _ranks("addbmm", ("batch1", "batch2"), (batch1, batch2), (3, 3))
    with renamed("addbmm"):
        product = sum_(bmm(batch1, batch2), 0)
    return _scaled_sum("addbmm", input, product, beta, alpha)


def _chain_order(dims: list) -> list | None:
    """The cheapest parenthesisation of a chain of matrices of sizes ``dims[i] x dims[i + 1]``, by the
    textbook dynamic programme over multiply-add counts (Cormen et al. 15.2): ``split[i][j]`` is the
    last matrix of the left factor of the product of matrices ``i..j``. None (left to right) when a
    size is symbolic."""
    n = len(dims) - 1
    if not all(is_static(d) for d in dims):
        return None
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j], split[i][j] = min((cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1], k)
                                          for k in range(i, j))
    return split


def _chain(op: str, mats: list) -> GraphTensor:
    """The product of 2-d ``mats`` (at least one; adjacent sizes checked), in ``_chain_order``."""
    for k in range(len(mats) - 1):
        if mats[k].shape[1] != mats[k + 1].shape[0]:
            raise op_error(ValueError, op, f"matrices {k} and {k + 1} cannot be multiplied: "
                           f"{shape_str(mats[k].shape)} @ {shape_str(mats[k + 1].shape)}", mats[k], mats[k + 1])
    split = _chain_order([mats[0].shape[0]] + [m.shape[1] for m in mats])

    def product(i: int, j: int) -> GraphTensor:
        if i == j:
            return mats[i]
        k = j - 1 if split is None else split[i][j]
        return matmul(product(i, k), product(k + 1, j))

    return product(0, len(mats) - 1)


def multi_dot(tensors) -> GraphTensor:
    """torch.linalg.multi_dot: the product of two or more matrices, multiplied in the order that
    costs the fewest multiply-adds (static sizes). The first may be a 1-d row vector and the last a
    1-d column vector; their dim is dropped from the result, as in ``matmul``.

    Args:
        tensors: a list or tuple of tensors: 1-d or 2-d first and last, 2-d between.
    """
    if not isinstance(tensors, (tuple, list)):
        raise op_error(TypeError, "multi_dot", f"tensors must be a list or tuple, got {type(tensors).__name__}")
    check_tensors("multi_dot", **{f"tensors[{i}]": t for i, t in enumerate(tensors)})
    if len(tensors) < 2:
        raise op_error(ValueError, "multi_dot", f"needs at least 2 tensors, got {len(tensors)}", *tensors)
    for i, t in enumerate(tensors):
        ok = (1, 2) if i in (0, len(tensors) - 1) else (2,)
        if t.ndim not in ok:
            where = "the first tensor" if i == 0 else "the last tensor" if i == len(tensors) - 1 else f"tensor {i}"
            raise op_error(ValueError, "multi_dot", f"{where} must be {' or '.join(map(str, ok))}-d, got {t.ndim}-d", t)
    first, last = tensors[0], tensors[-1]
    mats = [first.unsqueeze(0) if first.ndim == 1 else first, *tensors[1:-1],
            last.unsqueeze(-1) if last.ndim == 1 else last]
    with renamed("multi_dot"):
        out = _chain("multi_dot", mats)
    if first.ndim == 1:
        out = out.squeeze(0)
    return out.squeeze(-1) if last.ndim == 1 else out


def chain_matmul(*matrices) -> GraphTensor:
    """torch.chain_matmul (torch deprecates it for ``linalg.multi_dot``): the product of one or more
    2-d matrices, in the order that costs the fewest multiply-adds; one matrix is returned as is.

    Args:
        matrices: the 2-d tensors, as separate arguments.
    """
    check_tensors("chain_matmul", **{f"matrices[{i}]": t for i, t in enumerate(matrices)})
    if not matrices:
        raise op_error(ValueError, "chain_matmul", "needs at least one matrix")
    for i, t in enumerate(matrices):
        if t.ndim != 2:
            raise op_error(ValueError, "chain_matmul", f"matrix {i} must be 2-d, got {t.ndim}-d", t)
    with renamed("chain_matmul"):
        return _chain("chain_matmul", list(matrices))


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

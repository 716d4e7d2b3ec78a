"""Parity with torch for the shape, indexing and product ops a PyTorch user reaches for: einsum,
tensordot, roll, narrow, select, unbind, movedim, repeat_interleave, addmm / baddbmm, index_add /
index_copy / index_put, scatter_reduce, meshgrid, hstack / vstack, trace / diagonal / diag,
flip(dims=), take_along_dim without dim, advanced indexing and ``__setitem__``, pad modes and
max pooling with indices. Forward values, dtypes, shapes and gradients (``parity.check``) on every
backend."""

import numpy as np
import pytest
import torch
import torch.nn.functional as tF
from parity import check, rand

import luminal as lm
from luminal import nn

pytestmark = pytest.mark.usefixtures("one_torch_thread")

F32, I32 = lm.float32, lm.int32


def idx(shape, n, seed=1):
    return rand(shape, I32, seed=seed, low=0, high=n - 1)


def perm_idx(k, n, seed=1):
    """``k`` distinct indices below ``n`` (torch leaves duplicates unspecified for copies)."""
    return np.random.default_rng(seed).permutation(n)[:k].astype(np.int32)


# einsum ------------------------------------------------------------------------------------------
EINSUM = [  # (equation, operand shapes)
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ik,jk->ij", [(3, 4), (5, 4)]),
    ("ij,jk", [(3, 4), (4, 2)]),  # implicit output: letters used once, alphabetical
    ("ba,ac", [(3, 4), (4, 2)]),
    ("Ab,bC->CA", [(3, 4), (4, 2)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iij->ji", [(3, 3, 2)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ijk,kl,lm->im", [(2, 3, 4), (4, 5), (5, 2)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("...i,i", [(2, 3, 4), (4,)]),
    ("i...->...", [(3, 2, 2)]),
    ("ij,ij->i", [(3, 4), (1, 4)]),  # a size-1 dim broadcasts
]


@pytest.mark.parametrize("eq,shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum(eq, shapes, backend):
    inputs = [rand(s, seed=k) for k, s in enumerate(shapes)]
    check(lambda *xs: lm.einsum(eq, *xs), inputs, torch_op=lambda *ts: torch.einsum(eq, *ts), backend=backend)


def test_einsum_list_operands_and_ints(backend):
    check(lambda a, b: lm.einsum("ij,jk->ik", [a, b]), [rand((3, 4), I32), rand((4, 2), I32, seed=1)],
          torch_op=lambda a, b: torch.einsum("ij,jk->ik", [a.long(), b.long()]), backend=backend)


def test_einsum_finds_a_gemm():
    g = lm.Graph()
    a, b = g.input("a", (8, 16)), g.input("b", (16, 4))
    f = lm.compile(lm.einsum("ik,kj->ij", a, b), backend="cpu")
    av, bv = rand((8, 16)), rand((16, 4), seed=1)
    np.testing.assert_allclose(f(a=av, b=bv), av @ bv, rtol=1e-5, atol=1e-5)
    assert "matmul" in f.report(show=False).rules


@pytest.mark.parametrize("eq,shapes,msg", [
    ("ij,jk->ik", [(3, 4), (5, 2)], "sizes"), ("ij->ik", [(3, 4)], "no input"), ("ijk->i", [(3, 4)], "subscripts"),
    ("ij,jk", [(3, 4)], "operand"), ("i1->i", [(3, 4)], "invalid subscript")], ids=str)
def test_einsum_errors(eq, shapes, msg):
    g = lm.Graph()
    xs = [g.input(f"x{k}", s) for k, s in enumerate(shapes)]
    with pytest.raises(ValueError, match=f"einsum.*{msg}"):
        lm.einsum(eq, *xs)


TENSORDOT = [((3, 4, 5), (4, 5, 2), 2), ((3, 4), (4, 2), 1), ((3, 4), (2, 5), 0),
             ((3, 4, 5), (5, 3, 2), ([0, 2], [1, 0])), ((3, 4), (2, 4), ([1], [1]))]


@pytest.mark.parametrize("sa,sb,dims", TENSORDOT, ids=str)
def test_tensordot(sa, sb, dims, backend):
    check(lambda a, b: lm.tensordot(a, b, dims), [rand(sa), rand(sb, seed=1)],
          torch_op=lambda a, b: torch.tensordot(a, b, dims), backend=backend)


# movement ----------------------------------------------------------------------------------------
X = (3, 4, 5)


@pytest.mark.parametrize("shifts,dims", [(2, None), (-1, 0), (7, 1), ((1, -2), (0, 2)), ((3, 1), (2, 2))], ids=str)
def test_roll(shifts, dims, backend):
    check(lambda x: (lm.roll(x, shifts, dims), x.roll(shifts, dims)), [rand(X)],
          torch_op=lambda x: (torch.roll(x, shifts, dims), x.roll(shifts, dims)), backend=backend)


def test_narrow_select_unbind_movedim(backend):
    def op(x):
        return (lm.narrow(x, 1, 1, 2), x.narrow(-1, -3, 2), lm.select(x, 1, -1), x.select(0, 1),
                *lm.unbind(x, 1), *x.unbind(), lm.movedim(x, 0, -1), x.movedim((0, 2), (1, 0)),
                lm.moveaxis(x, -1, 0))

    def top(x):
        return (torch.narrow(x, 1, 1, 2), x.narrow(-1, -3, 2), torch.select(x, 1, -1), x.select(0, 1),
                *torch.unbind(x, 1), *x.unbind(), torch.movedim(x, 0, -1), x.movedim((0, 2), (1, 0)),
                torch.moveaxis(x, -1, 0))

    check(op, [rand(X)], torch_op=top, backend=backend)
    check(op, [rand((4, 3, 5))], torch_op=top, backend=backend, pre=lambda t: t.transpose(0, 1))


@pytest.mark.parametrize("repeats,dim", [(2, None), (3, 1), (1, 0), (2, -1), (0, 1)], ids=str)
def test_repeat_interleave_int(repeats, dim, backend):
    check(lambda x: (lm.repeat_interleave(x, repeats, dim), x.repeat_interleave(repeats, dim)), [rand(X)],
          torch_op=lambda x: (torch.repeat_interleave(x, repeats, dim), x.repeat_interleave(repeats, dim)),
          backend=backend)


@pytest.mark.parametrize("dim", [0, 1, None], ids=str)
def test_repeat_interleave_tensor(dim, backend):
    n = 12 if dim is None else (3, 4)[dim]
    reps = np.random.default_rng(2).integers(0, 4, size=n).astype(np.int32)
    total = int(reps.sum())
    check(lambda x, r: lm.repeat_interleave(x, r, dim, output_size=total), [rand((3, 4)), reps],
          torch_op=lambda x, r: torch.repeat_interleave(x, r.long(), dim, output_size=total), backend=backend)


def test_repeat_interleave_tensor_needs_output_size():
    g = lm.Graph()
    x, r = g.input("x", (3,)), g.input("r", (3,), dtype=I32)
    with pytest.raises(ValueError, match="repeat_interleave.*output_size"):
        lm.repeat_interleave(x, r)


def test_flip_dims_keyword(backend):
    check(lambda x: (x.flip(dims=(0, 2)), x.flip(dims=1), lm.flip(x, [-1]), x.flip(0, 1), x.flip((2,))),
          [rand(X)], torch_op=lambda x: (x.flip(dims=(0, 2)), x.flip(dims=(1,)), torch.flip(x, [-1]), x.flip(0, 1),
                                         x.flip((2,))), backend=backend)


DIAGONAL = [(0, 0, 1), (1, 0, 1), (-1, 0, 1), (2, 1, 0), (0, -1, 0), (-2, 2, 1), (9, 0, 1)]


@pytest.mark.parametrize("offset,d1,d2", DIAGONAL, ids=str)
def test_diagonal(offset, d1, d2, backend):
    check(lambda x: (lm.diagonal(x, offset, d1, d2), x.diagonal(offset, d1, d2)), [rand((3, 4, 5))],
          torch_op=lambda x: (torch.diagonal(x, offset, d1, d2), x.diagonal(offset, d1, d2)), backend=backend)


@pytest.mark.parametrize("shape,k", [((4,), 0), ((3,), 2), ((3,), -1), ((3, 4), 0), ((3, 4), 1), ((4, 3), -2)],
                         ids=str)
def test_diag(shape, k, backend):
    check(lambda x: (lm.diag(x, k), x.diag(k)), [rand(shape)],
          torch_op=lambda x: (torch.diag(x, k), x.diag(k)), backend=backend)


def test_trace(backend):
    check(lambda x: (lm.trace(x), x.trace()), [rand((3, 4))], torch_op=lambda x: (torch.trace(x), x.trace()),
          backend=backend)
    check(lambda x: lm.trace(x), [rand((4, 3), I32)], torch_op=torch.trace, backend=backend)


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid(indexing, backend):
    check(lambda a, b, c: lm.meshgrid(a, b, c, indexing=indexing), [rand((2,)), rand((3,), seed=1), rand((4,), seed=2)],
          torch_op=lambda a, b, c: torch.meshgrid(a, b, c, indexing=indexing), backend=backend)
    check(lambda a, b: lm.meshgrid([a, b], indexing=indexing), [rand((2,)), rand((3,), seed=1)],
          torch_op=lambda a, b: torch.meshgrid([a, b], indexing=indexing), backend=backend)


def test_hstack_vstack(backend):
    def op(a, b, m, n):
        return lm.hstack([a, b]), lm.vstack([a, b]), lm.hstack([m, n]), lm.vstack([m, n]), lm.vstack([m, a[:4]])

    def top(a, b, m, n):
        return torch.hstack([a, b]), torch.vstack([a, b]), torch.hstack([m, n]), torch.vstack([m, n]), \
            torch.vstack([m, a[:4]])

    check(op, [rand((5,)), rand((5,), seed=1), rand((2, 4), seed=2), rand((2, 4), seed=3)], torch_op=top,
          backend=backend)


# products ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("beta,alpha,ishape", [(1, 1, (3, 5)), (0.5, 2.0, (5,)), (0, -1.5, (1, 5))], ids=str)
def test_addmm(beta, alpha, ishape, backend):
    check(lambda i, a, b: (lm.addmm(i, a, b, beta=beta, alpha=alpha), i.addmm(a, b, beta=beta, alpha=alpha)),
          [rand(ishape), rand((3, 4), seed=1), rand((4, 5), seed=2)],
          torch_op=lambda i, a, b: (torch.addmm(i, a, b, beta=beta, alpha=alpha), i.addmm(a, b, beta=beta,
                                                                                          alpha=alpha)),
          backend=backend)


@pytest.mark.parametrize("beta,alpha,ishape", [(1, 1, (2, 3, 5)), (2.0, 0.5, (3, 1)), (0, 1, (2, 3, 5))], ids=str)
def test_baddbmm(beta, alpha, ishape, backend):
    check(lambda i, a, b: (lm.baddbmm(i, a, b, beta=beta, alpha=alpha), i.baddbmm(a, b, beta=beta, alpha=alpha),
                           lm.bmm(a, b)),
          [rand(ishape), rand((2, 3, 4), seed=1), rand((2, 4, 5), seed=2)],
          torch_op=lambda i, a, b: (torch.baddbmm(i, a, b, beta=beta, alpha=alpha),
                                    i.baddbmm(a, b, beta=beta, alpha=alpha), torch.bmm(a, b)),
          backend=backend)


def test_addmm_beta_zero_ignores_nan(backend):
    i = np.full((3, 5), np.nan, np.float32)
    check(lambda i, a, b: lm.addmm(i, a, b, beta=0), [i, rand((3, 4), seed=1), rand((4, 5), seed=2)],
          torch_op=lambda i, a, b: torch.addmm(i, a, b, beta=0), backend=backend, grad=False)


# index ops ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dim,k", [(0, 5), (1, 2), (-1, 7)], ids=str)
def test_index_add(dim, k, backend):
    src_shape = list(X)
    src_shape[dim] = k
    i = idx((k,), X[dim], seed=3)
    check(lambda x, i, s: (lm.index_add(x, dim, i, s), x.index_add(dim, i, s, alpha=-2.0)),
          [rand(X), i, rand(tuple(src_shape), seed=1)],
          torch_op=lambda x, i, s: (torch.index_add(x, dim, i.long(), s), x.index_add(dim, i.long(), s, alpha=-2.0)),
          backend=backend)


@pytest.mark.parametrize("dim,k", [(0, 2), (1, 4), (-1, 3)], ids=str)
def test_index_copy(dim, k, backend):
    src_shape = list(X)
    src_shape[dim] = k
    i = perm_idx(k, X[dim], seed=4)
    check(lambda x, i, s: (lm.index_copy(x, dim, i, s), x.index_copy(dim, i, s)),
          [rand(X), i, rand(tuple(src_shape), seed=1)],
          torch_op=lambda x, i, s: (torch.index_copy(x, dim, i.long(), s), x.index_copy(dim, i.long(), s)),
          backend=backend)


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(accumulate, backend):
    i0 = np.array([0, 2, 1, 2], np.int32)
    i1 = np.array([1, 3, 0, 0], np.int32)  # distinct (i0, i1) pairs
    check(lambda x, a, b, v: (lm.index_put(x, (a, b), v, accumulate), x.index_put((a[:3],), v[0, :1], accumulate)),
          [rand(X), i0, i1, rand((4, 5), seed=1)],
          torch_op=lambda x, a, b, v: (torch.index_put(x, (a.long(), b.long()), v, accumulate),
                                       x.index_put((a[:3].long(),), v[0, :1], accumulate)),
          backend=backend)


def test_index_put_accumulates_duplicates(backend):
    i = np.array([1, 1, 0, 1], np.int32)
    check(lambda x, i, v: lm.index_put(x, (i,), v, accumulate=True), [rand((3, 2)), i, rand((4, 2), seed=1)],
          torch_op=lambda x, i, v: torch.index_put(x, (i.long(),), v, accumulate=True), backend=backend)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dim,ishape", [(0, (6, 4, 5)), (1, (3, 2, 5)), (2, (2, 4, 7))], ids=str)
def test_scatter_reduce(reduce, include_self, dim, ishape, backend):
    i = idx(ishape, X[dim], seed=5)
    check(lambda x, i, s: x.scatter_reduce(dim, i, s, reduce, include_self=include_self),
          [rand(X, low=0.5, high=2.0), i, rand(ishape, seed=1, low=0.5, high=2.0)],
          torch_op=lambda x, i, s: x.scatter_reduce(dim, i.long(), s, reduce, include_self=include_self),
          backend=backend)


def test_scatter_reduce_function_and_ints(backend):
    i = idx((6, 4, 5), 3, seed=6)
    reduces = ("amax", "amin", "sum", "prod", "mean")  # integer mean rounds down, as torch's
    check(lambda x, i, s: tuple(lm.scatter_reduce(x, 0, i, s, r) for r in reduces),
          [rand(X, I32), i, rand((6, 4, 5), I32, seed=1)],
          torch_op=lambda x, i, s: tuple(torch.scatter_reduce(x, 0, i.long(), s, r) for r in reduces),
          backend=backend)


def test_take_along_dim_flattened(backend):
    i = rand((7,), I32, seed=2, low=0, high=59)  # torch refuses negative ones here
    check(lambda x, i: (lm.take_along_dim(x, i), x.take_along_dim(i)), [rand(X), i],
          torch_op=lambda x, i: (torch.take_along_dim(x, i.long()), x.take_along_dim(i.long())), backend=backend)


# advanced indexing -------------------------------------------------------------------------------
I3 = np.array([2, 0, 1], np.int32)
J3 = np.array([[1, 3, 0]], np.int32)  # (1, 3): broadcasts with I3 and I2 below
I2 = np.array([[0], [2]], np.int32)  # (2, 1)
NEG = np.array([-1, 0, -3], np.int32)


def _adv(x, i, j, k, n):
    return (x[i], x[i, j], x[:, j], x[i, :, j], x[k, j], x[:, j, i], x[None, i, :, j], x[i, None, j], x[0, :, i],
            x[..., i], x[n], x[1:, j[0]], x[i, 2])


ADV_TORCH = lambda x, i, j, k, n: _adv(x, i.long(), j.long(), k.long(), n.long())  # noqa: E731


def test_advanced_indexing(backend):
    check(_adv, [rand(X), I3, J3, I2, NEG], torch_op=ADV_TORCH, backend=backend)


def test_advanced_indexing_on_views(backend):
    check(_adv, [rand((5, 4, 3)), I3, J3, I2, NEG], torch_op=ADV_TORCH, backend=backend,
          pre=lambda t: t.transpose(0, 2) if t.ndim == 3 else t)


def test_list_and_static_mask_indexing(backend):
    mask = np.array([True, False, True, True])
    mask2 = np.random.default_rng(3).random((3, 4)) < 0.5

    def op(x):
        g = x.graph
        return (x[[0, 2]], x[[2, 0], [1, 3]], x[:, [-1, 0], [[1], [4]]], x[:, mask], x[mask2], x[1, mask],
                x[np.array([1, 1, 0])], x[:, g.constant(mask)], x[[True, False, True]])

    def top(x):
        return (x[[0, 2]], x[[2, 0], [1, 3]], x[:, [-1, 0], [[1], [4]]], x[:, torch.from_numpy(mask)],
                x[torch.from_numpy(mask2)], x[1, torch.from_numpy(mask)], x[torch.tensor([1, 1, 0])],
                x[:, torch.from_numpy(mask)], x[torch.tensor([True, False, True])])

    check(op, [rand(X)], torch_op=top, backend=backend)


def test_indexing_and_setitem_with_a_symbolic_dim(backend):
    def assigned(x, i, w):
        a = x * 1.0
        a[:, 0] = 0.0
        b = x * 1.0
        b[x > 0] = 1.0
        c = x * 1.0
        c[i] = w.T
        return x[i], x[:, [0, 2]], x[i, [1, 2]], a, b, c

    def op(x, i, w):
        return *assigned(x, i, w), lm.einsum("bi,ij->bj", x, w), x.pad((1, 2), mode="reflect")

    def top(x, i, w):
        return *assigned(x, i.long(), w), torch.einsum("bi,ij->bj", x, w), tF.pad(x, (1, 2), mode="reflect")

    check(op, [rand((5, 4)), np.array([3, -1], np.int32), rand((4, 2), seed=1).T.copy()],
          shapes=[("B", 4), (2,), (2, 4)], torch_op=top, backend=backend,
          pre=lambda t: t.T if t.ndim == 2 and t.shape[0] == 2 else t)


def test_runtime_mask_getitem_is_refused():
    g = lm.Graph()
    x = g.input("x", (3, 4))
    with pytest.raises(IndexError, match="getitem.*run time"):
        x[x > 0]


# __setitem__ -------------------------------------------------------------------------------------
def _set(x, i, m, v, s):
    """Every kind of assignment on clones (each rebinds its own handle)."""
    out = []

    def fresh():
        return x * 1.0

    a = fresh()
    a[0] = 5.0
    out.append(a)
    a = fresh()
    a[:, 1:3] = v  # (3, 2, 5) value
    out.append(a)
    a = fresh()
    a[..., -1] = s  # (4,) value broadcast over (3, 4)
    out.append(a)
    a = fresh()
    a[1, ::2, 1:] = 0.0  # a stepped slice: the scatter path
    out.append(a)
    a = fresh()
    a[i] = 2.0  # tensor index
    out.append(a)
    a = fresh()
    a[i, 0, [1, 3]] = s[:2]
    out.append(a)
    a = fresh()
    a[m] = -1.0  # runtime mask, masked_fill
    out.append(a)
    a = fresh()
    a[m[..., 0]] = v[0, 0]  # leading mask, a (5,) row for every selected row
    out.append(a)
    a = fresh()
    a[:, m[0, :, 0]] = v[:, :1, :1]  # a mask after a slice; value (3, 1, 1): one per batch row
    out.append(a)
    a = fresh()
    a[..., m[0, 0]] = s[:1]
    out.append(a)
    return tuple(out)


def test_setitem(backend):
    m = rand(X, lm.bool, seed=7)
    torch_set = lambda x, i, m, v, s: _set(x, i.long(), m, v, s)  # noqa: E731
    check(_set, [rand(X), perm_idx(2, 3, seed=8), m, rand((3, 2, 5), seed=1), rand((4,), seed=2)],
          dtypes=[F32, I32, lm.bool, F32, F32], torch_op=torch_set, backend=backend)


def test_setitem_rebinds_the_handle():
    g = lm.Graph()
    x = g.input("x", (3,))
    y = x * 2.0
    view = y[1:]
    node = y.node
    y[0] = 7.0
    assert y.node is not node and view.node is node  # views taken before keep the old value
    f = lm.compile([y, view], backend="reference")
    got, old = f(x=np.array([1.0, 2.0, 3.0], np.float32))
    np.testing.assert_allclose(got, [7.0, 4.0, 6.0])
    np.testing.assert_allclose(old, [4.0, 6.0])


# pad modes and max pooling indices ---------------------------------------------------------------
PADS = [(1, 2), (2, 0, 1, 1), (0, 1, 2, 0, 1, 1), (-1, 2)]


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("pads", PADS, ids=str)
def test_pad_modes(mode, pads, backend):
    if mode == "reflect" and any(p < 0 for p in pads):
        pytest.skip("torch rejects negative reflect padding")
    shape = (1, 2, 3, 4, 5)[3 - len(pads) // 2:]  # torch: batch and channel dims before the padded ones
    check(lambda x: x.pad(pads, mode=mode), [rand(shape)], torch_op=lambda x: tF.pad(x, pads, mode=mode),
          backend=backend)


def test_pad_mode_errors():
    g = lm.Graph()
    x = g.input("x", (2, 3))
    with pytest.raises(ValueError, match="pad.*reflect"):
        x.pad((3, 0), mode="reflect")
    with pytest.raises(ValueError, match="pad.*mode"):
        x.pad((1, 1), mode="wrap")


@pytest.mark.parametrize("layer,shape", [
    (lambda: (nn.MaxPool2d(2, return_indices=True), torch.nn.MaxPool2d(2, return_indices=True)), (2, 3, 4, 6)),
    (lambda: (nn.MaxPool2d(3, 2, 1, return_indices=True), torch.nn.MaxPool2d(3, 2, 1, return_indices=True)),
     (1, 2, 5, 7)),
    (lambda: (nn.MaxPool2d((2, 3), (1, 2), dilation=(2, 1), ceil_mode=True, return_indices=True),
              torch.nn.MaxPool2d((2, 3), (1, 2), dilation=(2, 1), ceil_mode=True, return_indices=True)), (2, 6, 7)),
    (lambda: (nn.MaxPool1d(3, 2, 1, return_indices=True), torch.nn.MaxPool1d(3, 2, 1, return_indices=True)),
     (2, 3, 9)),
], ids=["2x2", "3s2p1", "dilated_ceil", "1d"])
def test_max_pool_return_indices(layer, shape, backend):
    ours, theirs = layer()
    check(lambda x: ours(x), [rand(shape)], torch_op=lambda x: theirs(x), backend=backend)


# errors name the op and the operands ---------------------------------------------------------------
ERRORS = [
    (lambda x, i, f: lm.roll(x, (1, 2), 0), ValueError, "roll"),
    (lambda x, i, f: lm.narrow(x, 1, 3, 2), IndexError, "narrow"),
    (lambda x, i, f: lm.movedim(x, (0, 0), (1, 2)), ValueError, "movedim"),
    (lambda x, i, f: lm.repeat_interleave(x, f), TypeError, "repeat_interleave"),
    (lambda x, i, f: lm.diagonal(x, 0, 1, -2), ValueError, "diagonal"),
    (lambda x, i, f: lm.diag(x), ValueError, "diag"),
    (lambda x, i, f: lm.trace(x), ValueError, "trace"),
    (lambda x, i, f: lm.tensordot(x, x, ([0], [1])), ValueError, "tensordot"),
    (lambda x, i, f: lm.addmm(x, x, x), ValueError, "addmm"),
    (lambda x, i, f: lm.baddbmm(x, x, x[0]), ValueError, "baddbmm"),
    (lambda x, i, f: lm.index_add(x, 0, i, x), ValueError, "index_add"),
    (lambda x, i, f: lm.index_copy(x, 0, f, x), TypeError, "index_copy"),
    (lambda x, i, f: lm.index_put(x, i, f), TypeError, "index_put"),
    (lambda x, i, f: lm.scatter_reduce(x, 0, i.reshape(2, 1, 1), x, "median"), ValueError, "scatter_reduce"),
    (lambda x, i, f: lm.meshgrid(x, indexing="ji"), ValueError, "meshgrid"),
    (lambda x, i, f: x[[0.5]], TypeError, "getitem"),
    (lambda x, i, f: x.__setitem__(x > 0, x[0]), ValueError, "setitem"),
    (lambda x, i, f: x.__setitem__(i, x[:1, :1, :2]), ValueError, "setitem"),
]


@pytest.mark.parametrize("op,exc,name", ERRORS, ids=[e[2] + str(k) for k, e in enumerate(ERRORS)])
def test_errors_name_the_op(op, exc, name):
    g = lm.Graph()
    x, i, f = g.input("x", X), g.input("i", (2,), dtype=I32), g.input("f", (2,))
    with pytest.raises(exc, match=f"^{name}: "):
        op(x, i, f)

"""An audit against torch of ``lm.einsum``, the distances (``cdist``, ``pdist``, ``pairwise_distance``,
``cosine_similarity`` and their layers), ``fold``/``unfold``, ``grid_sample``/``affine_grid``,
``embedding_bag``, ``max_unpool``, ``lp_pool`` and ``local_response_norm``: values and gradients over
the arguments torch documents and the edge cases a user meets.

What it found: ``grid_sample`` refused 5-d (volume) inputs, which torch samples trilinearly or by the
nearest voxel; ``cdist``/``pdist`` of points with no coordinates raised for ``p = inf`` (torch: 0);
``local_response_norm`` raised for an input with no channels (torch: the empty output).

Where torch's own gradient is wrong the defined value is written out instead: torch's
``cdist``/``pdist`` with ``p = inf`` give every coordinate tied for the largest difference the whole
gradient (no subgradient of the max; luminal shares it among them, as ``torch.linalg.vector_norm``),
and ``embedding_bag`` with ``include_last_offset`` and indices past the last offset (in no bag) gives
those indices, and the last bag's, gradients as if the last bag ran to the end of the input."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from parity import check, rand

import luminal as lm
import luminal.nn.functional as F
from luminal import nn, train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _ints(shape, seed=0):
    """Coordinates in {-1, 0, 1}: equal points (distance 0), zero differences and ties."""
    return np.random.default_rng(seed).integers(-1, 2, shape).astype(np.float32)


# --- einsum ---------------------------------------------------------------------------------------

EINSUM = [
    ("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("ii->", [(3, 3)]), ("iij->j", [(3, 3, 2)]), ("iji->j", [(3, 2, 3)]),
    ("iii->i", [(3, 3, 3)]), ("...ii->...i", [(2, 3, 3)]), ("a...a->...", [(3, 2, 3)]),
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (5, 3, 4)]), ("...ij,...jk", [(2, 1, 2, 3), (5, 3, 4)]),
    ("i...,i...->i", [(2, 3), (2, 4, 3)]), ("...,...->...", [(2, 3), (3,)]), ("...->", [(2, 3)]),
    ("i,j", [(2,), (3,)]), ("ji", [(2, 3)]), (" i j , j k -> i k ", [(2, 3), (3, 4)]),
    ("Ab,bC->AC", [(2, 3), (3, 4)]), ("aB,Ba", [(2, 3), (3, 2)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("ij,jk,kl,lm", [(2, 3), (3, 4), (4, 2), (2, 2)]), ("i,i,i->i", [(3,), (3,), (3,)]),
    (",i->i", [(), (3,)]), ("i,->i", [(3,), ()]), (",->", [(), ()]), ("->", [()]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]), ("ab,ab->ba", [(2, 3), (1, 3)]), ("ij,j->i", [(2, 1), (3,)]),
    ("ij,jk->ik", [(2, 0), (0, 3)]), ("i...j,j...->...", [(2, 3, 4), (4, 3)]),
    ("bA,c", [(2, 3), (4,)]), ("...ij->i...j", [(2, 3, 4, 5)]), ("ij...,jk...->ik...", [(2, 3, 1), (3, 2, 4)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum(eq, shapes):
    """Diagonals, ellipses broadcast across operands, implicit outputs, spaces, uppercase letters, one
    to four operands, scalars and empty dims: values and gradients."""
    ins = [rand(s, seed=k) for k, s in enumerate(shapes)]
    check(lambda *xs: lm.einsum(eq, *xs), ins, torch_op=lambda *xs: torch.einsum(eq, *xs))


@pytest.mark.parametrize("eq,shapes", [("ij,jk->ik", [(2, 3), (3, 4)]), ("ii->i", [(3, 3)]), ("i,i", [(3,), (3,)])])
def test_einsum_int_operands_and_backends(eq, shapes, backend):
    for dtype in (lm.int32, lm.float64):
        ins = [rand(s, dtype, seed=k) for k, s in enumerate(shapes)]
        check(lambda *xs: lm.einsum(eq, *xs), ins, torch_op=lambda *xs: torch.einsum(eq, *xs), backend=backend)


def test_einsum_sublists_and_an_operand_list():
    a, b = rand((2, 3)), rand((3, 4), seed=1)
    check(lambda x, y: lm.einsum(x, [0, 1], y, [1, 2], [0, 2]), [a, b],
          torch_op=lambda x, y: torch.einsum(x, [0, 1], y, [1, 2], [0, 2]))
    check(lambda x, y: lm.einsum(x, [Ellipsis, 1], y, [1, 27]), [a, b],
          torch_op=lambda x, y: torch.einsum(x, [Ellipsis, 1], y, [1, 27]))
    check(lambda x, y: lm.einsum("ij,jk", [x, y]), [a, b], torch_op=lambda x, y: torch.einsum("ij,jk", [x, y]))


@pytest.mark.parametrize("eq,n_ops,message", [
    ("i1,jk", 2, "invalid subscript '1' in operand 0"), ("ij->i.", 1, "bad ellipsis in the output"),
    ("ij->j->i", 1, "invalid subscript '-' in the output"), ("ij>i", 1, "invalid subscript '>' in operand 0"),
    ("ij,jk->iz", 2, "output subscript 'z' .* appears in no input operand"),
    ("ij->ii", 1, "'i' appears more than once"),
    ("ijk", 1, "operand 0 has 2 dims but 3 subscripts"), ("ij,jk", 1, "2 operand subscripts, got 1 operands"),
    ("ij,ik->ij", 2, "subscript 'i' .* has sizes 2 and 3"), ("....", 1, "operand 0: bad ellipsis"),
])
def test_einsum_errors_name_the_bad_subscript(eq, n_ops, message):
    g = lm.Graph()
    ops = [g.input("x", (2, 3)), g.input("y", (3, 4))][:n_ops]
    with pytest.raises(ValueError, match=f"^einsum: .*{message}"):
        lm.einsum(eq, *ops)


# --- distances ------------------------------------------------------------------------------------

P = [0, 1, 2, math.inf, 0.5, 3]
MODES = ["use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"]


@pytest.mark.parametrize("p", P)
@pytest.mark.parametrize("shapes", [((3, 4), (5, 4)), ((2, 3, 4), (1, 5, 4)), ((30, 2), (4, 2))],
                         ids=["plain", "batched", "mm"])
def test_cdist(p, shapes):
    """Every p, broadcast batch dims, and more than 25 points (the default mode's matmul form)."""
    ins = [rand(shapes[0]), rand(shapes[1], seed=1)]
    check(lambda a, b: lm.cdist(a, b, p), ins, torch_op=lambda a, b: torch.cdist(a, b, p), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("p", [0, 1, 2, 0.5, 3])
def test_cdist_equal_points_have_gradient_zero(mode, p):
    """Points repeated in both sets (distance 0) and coordinates that differ by 0: torch's gradient is 0
    at a zero distance, and for p < 1 at a zero difference."""
    a, b = _ints((4, 3), 0), _ints((5, 3), 1)
    b[:2] = a[:2]
    check(lambda x, y: lm.cdist(x, y, p, mode), [a, b], torch_op=lambda x, y: torch.cdist(x, y, p, compute_mode=mode),
          rtol=1e-4, atol=1e-4)


def _inf_norm_grad(d: np.ndarray) -> np.ndarray:
    """The gradient of ``max_k |d_k|`` over the last dim (summed adjoint 1): ``sign(d_k)`` shared
    equally among the ``k`` tied for the maximum, a subgradient (torch's cdist gives each the whole)."""
    a = np.abs(d)
    hit = a == a.max(-1, keepdims=True)
    return np.sign(d) * hit / hit.sum(-1, keepdims=True)


@pytest.mark.parametrize("fn", ["cdist", "pdist"])
def test_inf_distance_shares_its_gradient_among_ties(fn):
    x1, x2 = _ints((3, 4), 0), _ints((5, 4), 1)
    g = lm.Graph()
    a, b = g.input("a", x1.shape), g.input("b", x2.shape)
    if fn == "cdist":
        out = lm.cdist(a, b, math.inf)
        diff = x1[:, None, :] - x2[None, :, :]
        want_a, want_b = _inf_norm_grad(diff).sum(1), -_inf_norm_grad(diff).sum(0)
    else:
        out = lm.pdist(a, math.inf)
        i, j = np.triu_indices(3, 1)
        share = _inf_norm_grad(x1[i] - x1[j])
        want_a, want_b = np.zeros_like(x1), np.zeros_like(x2)
        np.add.at(want_a, i, share)
        np.add.at(want_a, j, -share)
    grads = train.grad(out.sum(), [a, b], allow_unused=True)
    got = lm.compile([out] + [gr for gr in grads if gr is not None])(a=x1, b=x2)
    t1 = torch.from_numpy(x1)
    ref = torch.cdist(t1, torch.from_numpy(x2), math.inf) if fn == "cdist" else torch.pdist(t1, math.inf)
    np.testing.assert_allclose(got[0], ref.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got[1], want_a, rtol=1e-6, atol=1e-6)
    if fn == "cdist":
        np.testing.assert_allclose(got[2], want_b, rtol=1e-6, atol=1e-6)


def test_cdist_float64_symbolic_points_and_backends(backend):
    a, b = rand((2, 3, 4), lm.float64), rand((2, 5, 4), lm.float64, seed=1)
    check(lambda x, y: lm.cdist(x, y, 1.5), [a, b], backend=backend,
          torch_op=lambda x, y: torch.cdist(x, y, 1.5))
    check(lambda x, y: lm.cdist(x, y), [a, b], shapes=[(2, "P", 4), (2, "R", 4)], backend=backend,
          torch_op=lambda x, y: torch.cdist(x, y))


@pytest.mark.parametrize("p", P)
def test_points_without_coordinates_are_at_distance_zero(p, backend):
    """(P, 0) and (R, 0) points: every distance 0, as torch's; p = inf was a ValueError from
    vector_norm (a max over the empty dim)."""
    check(lambda a, b: lm.cdist(a, b, p), [rand((2, 3, 0)), rand((2, 2, 0))], backend=backend,
          torch_op=lambda a, b: torch.cdist(a, b, p))
    check(lambda a: lm.pdist(a, p), [rand((3, 0))], torch_op=lambda a: torch.pdist(a, p), backend=backend)


@pytest.mark.parametrize("m", [0, 4])
def test_inf_distance_over_a_symbolic_coordinate_count(m, backend):
    """A symbolic coordinate count M: bound to 0 when the program runs, every distance is 0 as torch's
    (was vector_norm's 'MaxReduce over an empty axis' at run time, the static 0 alone being handled);
    bound to 4, with a point repeated across the sets (all its differences 0, gradient 0), the values
    and gradients of the static case."""
    a, b = rand((2, 3, m)), rand((2, 2, m), seed=1)
    b[:, 0] = a[:, 1]
    check(lambda x, y: lm.cdist(x, y, math.inf), [a, b], shapes=[(2, 3, "M"), (2, 2, "M")], backend=backend,
          torch_op=lambda x, y: torch.cdist(x, y, math.inf))
    check(lambda x: lm.pdist(x, math.inf), [a[0]], shapes=[(3, "M")], backend=backend,
          torch_op=lambda x: torch.pdist(x, math.inf))


@pytest.mark.parametrize("p", P)
def test_pdist(p):
    x = _ints((5, 3))
    x[3] = x[1]  # a zero distance
    if p != math.inf:  # (ties: test_inf_distance_shares_its_gradient_among_ties)
        check(lambda t: F.pdist(t, p), [x], torch_op=lambda t: TF.pdist(t, p))
    check(lambda t: lm.pdist(t, p), [rand((4, 3))], torch_op=lambda t: torch.pdist(t, p))


@pytest.mark.parametrize("p", [1, 2, 3, math.inf, 0, 0.5, -1, -math.inf])
@pytest.mark.parametrize("eps,keepdim", [(1e-6, False), (0.0, True), (0.1, False)])
def test_pairwise_distance(p, eps, keepdim):
    """Equal coordinates (a difference of eps only), broadcasting, 1-d vectors, keepdim."""
    for s1, s2 in [((3, 4), (3, 4)), ((2, 3, 4), (1, 4)), ((3, 1), (3, 4)), ((4,), (4,))]:
        check(lambda a, b: F.pairwise_distance(a, b, p, eps, keepdim), [_ints(s1, 0), _ints(s2, 1)],
              torch_op=lambda a, b: TF.pairwise_distance(a, b, p, eps, keepdim))
    check(lambda a, b: nn.PairwiseDistance(p, eps, keepdim)(a, b), [rand((3, 4)), rand((3, 4), seed=1)],
          torch_op=lambda a, b: torch.nn.PairwiseDistance(p, eps, keepdim)(a, b))


@pytest.mark.parametrize("dim", [1, 0, -1])
@pytest.mark.parametrize("eps", [1e-8, 0.5])
def test_cosine_similarity(dim, eps):
    """Broadcasting, a zero vector in each input (its norm held at eps) and a large eps."""
    for s1, s2 in [((3, 4), (3, 4)), ((2, 3, 4), (3, 4)), ((3, 1), (3, 4)), ((1, 4), (3, 4))]:
        a, b = rand(s1), rand(s2, seed=1)
        a.reshape(-1)[:a.shape[-1]] = 0
        b.reshape(-1)[-1] = 0
        check(lambda x, y: F.cosine_similarity(x, y, dim, eps), [a, b],
              torch_op=lambda x, y: TF.cosine_similarity(x, y, dim, eps))
        check(lambda x, y: F.cosine_similarity(x, y, dim, eps), [np.zeros(s1, np.float32), b],
              torch_op=lambda x, y: TF.cosine_similarity(x, y, dim, eps))
    check(lambda x, y: nn.CosineSimilarity(0, eps)(x, y), [rand((4,)), rand((4,), seed=1)],
          torch_op=lambda x, y: torch.nn.CosineSimilarity(0, eps)(x, y))


def test_distances_in_float64_and_16_bit():
    for dtype in (lm.float64, lm.float16, lm.bfloat16):
        ins = [rand((3, 4), dtype), rand((3, 4), dtype, seed=1)]
        check(lambda a, b: F.cosine_similarity(a, b), ins, dtypes=[dtype, dtype],
              torch_op=lambda a, b: TF.cosine_similarity(a, b))
        check(lambda a, b: F.pairwise_distance(a, b), ins, dtypes=[dtype, dtype],
              torch_op=lambda a, b: TF.pairwise_distance(a, b))


# --- fold / unfold --------------------------------------------------------------------------------

FOLD = [  # kernel_size, dilation, padding, stride, input shape
    (2, 1, 0, 1, (2, 3, 4, 5)), ((2, 3), (1, 2), (1, 0), (2, 1), (1, 2, 5, 6)), (3, 2, 2, 2, (2, 1, 5, 5)),
    ((1, 2), 1, (0, 1), (1, 3), (3, 4, 5)), (1, 1, 0, 1, (1, 2, 3, 3)), (3, 1, 1, 3, (1, 1, 4, 4)),
]


@pytest.mark.parametrize("k,d,p,s,shape", FOLD)
def test_unfold_and_fold(k, d, p, s, shape):
    """ints and pairs, dilation, padding, strides that skip elements, unbatched inputs; overlapping
    blocks sum in ``fold``."""
    x = rand(shape)
    check(lambda t: F.unfold(t, k, d, p, s), [x], torch_op=lambda t: TF.unfold(t, k, d, p, s))
    check(lambda t: nn.Unfold(k, d, p, s)(t), [x], torch_op=lambda t: torch.nn.Unfold(k, d, p, s)(t))
    cols = rand(tuple(TF.unfold(torch.from_numpy(x), k, d, p, s).shape), seed=3)
    size = shape[-2:]
    check(lambda t: F.fold(t, size, k, d, p, s), [cols], torch_op=lambda t: TF.fold(t, size, k, d, p, s))
    check(lambda t: nn.Fold(size, k, d, p, s)(t), [cols], torch_op=lambda t: torch.nn.Fold(size, k, d, p, s)(t))


def test_fold_unfold_on_every_backend(backend):
    x = rand((2, 2, 5, 4))
    check(lambda t: F.unfold(t, 2, 2, 1, (2, 1)), [x], torch_op=lambda t: TF.unfold(t, 2, 2, 1, (2, 1)),
          backend=backend)
    check(lambda t: F.fold(t, 4, 2), [rand((2, 8, 9))], torch_op=lambda t: TF.fold(t, 4, 2), backend=backend)


# --- grid_sample / affine_grid --------------------------------------------------------------------

GRID = list(itertools.product(["zeros", "border", "reflection"], [False, True]))


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding,ac", GRID)
def test_grid_sample_4d(mode, padding, ac):
    """Corners, the centre and points past the edges, with random ones."""
    x = rand((2, 3, 4, 5), seed=1)
    grid = rand((2, 3, 6, 2), seed=2, low=-1.4, high=1.4)
    grid[0, 0] = [[-1, -1], [1, 1], [0, 0], [-1, 1], [0.5, -0.25], [1.2, -1.3]]
    check(lambda a, b: F.grid_sample(a, b, mode, padding, ac), [x, grid],
          torch_op=lambda a, b: TF.grid_sample(a, b, mode, padding, ac))


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding,ac", GRID)
def test_grid_sample_5d(mode, padding, ac):
    """Volumes (N, C, D, H, W) sampled at (x, y, z): trilinear or the nearest voxel, with the
    gradients of the input and (trilinear) the grid. Was a ValueError (4-d inputs only)."""
    x = rand((2, 2, 3, 4, 5), seed=1)
    grid = rand((2, 2, 3, 2, 3), seed=2, low=-1.3, high=1.3)
    grid[0, 0, 0] = [[-1, -1, -1], [1, 1, 1]]
    check(lambda a, b: F.grid_sample(a, b, mode, padding, ac), [x, grid],
          torch_op=lambda a, b: TF.grid_sample(a, b, mode, padding, ac))


def test_grid_sample_5d_on_every_backend_and_its_errors(backend):
    x, grid = rand((1, 2, 2, 3, 4)), rand((1, 2, 2, 3, 3), seed=2, low=-1.2, high=1.2)
    check(lambda a, b: F.grid_sample(a, b, align_corners=False), [x, grid], backend=backend,
          torch_op=lambda a, b: TF.grid_sample(a, b, align_corners=False))
    g = lm.Graph()
    v, vg = g.input("v", (1, 2, 2, 3, 4)), g.input("vg", (1, 2, 2, 3, 3))
    with pytest.raises(ValueError, match=r"^grid_sample: mode 'bicubic' needs a 4-d input .* \(1, 2, 2, 3, 4\)"):
        F.grid_sample(v, vg, mode="bicubic")
    with pytest.raises(ValueError, match=r"^grid_sample: expected a grid \(N, Do, Ho, Wo, 3\) .* got \(1, 2, 3, 2\)"):
        F.grid_sample(v, g.input("g4", (1, 2, 3, 2)))
    with pytest.raises(ValueError, match=r"^grid_sample: expected a grid \(N, Ho, Wo, 2\) .* got \(1, 2, 3, 3\)"):
        F.grid_sample(g.input("x4", (1, 2, 3, 4)), g.input("g3", (1, 2, 3, 3)))


@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 3, 1, 4), (2, 1, 3, 4, 5), (2, 1, 1, 2, 2)])
@pytest.mark.parametrize("ac", [False, True])
def test_affine_grid(size, ac):
    theta = rand((2, 2, 3) if len(size) == 4 else (2, 3, 4), seed=4)
    with np.errstate(all="ignore"), pytest.warns(UserWarning) if ac and 1 in size[2:] else _nothing():
        check(lambda t: F.affine_grid(t, size, ac), [theta], torch_op=lambda t: TF.affine_grid(t, size, ac))


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_affine_grid_feeds_grid_sample_in_5d():
    theta, x = rand((1, 3, 4), seed=4, low=-0.8, high=0.8), rand((1, 2, 3, 4, 4))

    def op(t, v):
        f = TF if isinstance(t, torch.Tensor) else F
        return f.grid_sample(v, f.affine_grid(t, (1, 2, 2, 3, 3), False), align_corners=False)

    check(op, [theta, x])


# --- embedding_bag --------------------------------------------------------------------------------

W = rand((6, 3), seed=5)
IDX2 = np.array([[0, 2, 2], [5, 1, 0], [3, 3, 3], [4, 0, 1]], np.int32)
IDX1 = np.array([1, 2, 4, 5, 4, 3, 2, 3, 0, 0], np.int32)


def _bag(idx, mode, pad, offsets=None, last=False):
    def op(w, *psw):
        if isinstance(w, torch.Tensor):
            o = None if offsets is None else torch.from_numpy(offsets).long()
            return TF.embedding_bag(torch.from_numpy(idx).long(), w, o, mode=mode, padding_idx=pad,
                                    per_sample_weights=psw[0] if psw else None, include_last_offset=last)
        g = w.graph
        o = None if offsets is None else g.constant(offsets)
        return F.embedding_bag(g.constant(idx), w, o, mode=mode, padding_idx=pad,
                               per_sample_weights=psw[0] if psw else None, include_last_offset=last)
    return op


OFFSETS = [([0, 3, 3, 7], False), ([0, 3, 3, 7, 10], True), ([0, 10], False), ([0], False), ([0, 0, 10], False)]


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("pad", [None, 0, 3, -1])
def test_embedding_bag(mode, pad):
    """2-d bags and 1-d bags over offsets (empty bags, include_last_offset), padding_idx (also
    negative), per_sample_weights for 'sum'; the gradients of the table and of the weights."""
    psw = mode == "sum"
    check(_bag(IDX2, mode, pad), [W, rand(IDX2.shape, seed=7)] if psw else [W])
    for offs, last in OFFSETS:
        check(_bag(IDX1, mode, pad, np.array(offs, np.int32), last), [W, rand(IDX1.shape, seed=8)] if psw else [W])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_indices_past_the_last_offset_are_in_no_bag(mode):
    """With include_last_offset the last offset ends the last bag: indices after it are in no bag, so
    neither they nor their per-sample weights get a gradient. torch's forward agrees, its backward
    runs the last bag to the end of the input; the defined value is torch's on the indices cut at the
    last offset (zeros after it)."""
    offs = np.array([0, 3, 3, 7, 8], np.int32)
    psw = rand(IDX1.shape, seed=8)
    g = lm.Graph()
    w, p = g.input("w", W.shape), g.input("p", psw.shape)
    out = F.embedding_bag(g.constant(IDX1), w, g.constant(offs), mode=mode, include_last_offset=True,
                          per_sample_weights=p if mode == "sum" else None)
    grads = train.grad(out.sum(), [w, p], allow_unused=True)
    got = lm.compile([out] + [gr for gr in grads if gr is not None])(w=W, p=psw)
    tw, tp = torch.from_numpy(W).requires_grad_(True), torch.from_numpy(psw[:8]).requires_grad_(True)
    ref = TF.embedding_bag(torch.from_numpy(IDX1[:8]).long(), tw, torch.from_numpy(offs).long(), mode=mode,
                           include_last_offset=True, per_sample_weights=tp if mode == "sum" else None)
    ref.sum().backward()
    np.testing.assert_allclose(got[0], ref.detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got[1], tw.grad.numpy(), rtol=1e-6, atol=1e-6)
    if mode == "sum":
        np.testing.assert_allclose(got[2], np.concatenate([tp.grad.numpy(), [0.0, 0.0]]), rtol=1e-6, atol=1e-6)


def test_embedding_bag_module_on_every_backend(backend):
    t = torch.nn.EmbeddingBag(6, 3, mode="max", padding_idx=2)
    m = nn.EmbeddingBag(6, 3, mode="max", padding_idx=2)
    m.load_state_dict({k: v.detach().numpy() for k, v in t.state_dict().items()})
    g = lm.Graph()
    i, o = g.input("i", IDX1.shape, dtype=lm.int32), g.input("o", (4,), dtype=lm.int32)
    offs = np.array([0, 3, 3, 7], np.int32)
    got = lm.compile(m(i, o), backend=backend)(i=IDX1, o=offs)
    want = t(torch.from_numpy(IDX1).long(), torch.from_numpy(offs).long()).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# --- max_unpool, lp_pool, local_response_norm ------------------------------------------------------

UNPOOL = [(2, None, 0, (2, 2, 6, 6, 6)), (3, 2, 1, (1, 2, 7, 5, 5)), (2, 1, 0, (1, 1, 4, 5, 4))]


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("k,s,p,shape", UNPOOL)
def test_max_unpool(nd, k, s, p, shape):
    """The indices of MaxPoolNd(return_indices=True), overlapping windows (stride 1), padding, the
    output_size (with and without N, C), unbatched inputs and the functional form."""
    shape = shape[:2 + nd]
    values, indices = getattr(torch.nn, f"MaxPool{nd}d")(k, s, p, return_indices=True)(
        torch.from_numpy(rand(shape)))
    v, i = values.numpy(), indices.numpy().astype(np.int32)
    ours, theirs = getattr(nn, f"MaxUnpool{nd}d"), getattr(torch.nn, f"MaxUnpool{nd}d")
    for size in (None, shape, shape[2:]):
        check(lambda a, b: ours(k, s, p)(a, b, output_size=size), [v, i],
              torch_op=lambda a, b: theirs(k, s, p)(a, b.long(), output_size=size))
    check(lambda a, b: ours(k, s, p)(a, b), [v[0], i[0]], torch_op=lambda a, b: theirs(k, s, p)(a, b.long()))
    f, tf = getattr(F, f"max_unpool{nd}d"), getattr(TF, f"max_unpool{nd}d")
    check(lambda a, b: f(a, b, k, s, p), [v, i], torch_op=lambda a, b: tf(a, b.long(), k, s, p))


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("p", [1, 2, 3, 1.5, math.inf])
def test_lp_pool(nd, p):
    """norm_type 1, 2, 3, 1.5 and inf, strides, ceil_mode's clipped windows, unbatched inputs."""
    shape = {1: (2, 3, 7), 2: (2, 2, 5, 6), 3: (1, 2, 4, 5, 5)}[nd]
    ours, theirs = getattr(nn, f"LPPool{nd}d"), getattr(torch.nn, f"LPPool{nd}d")
    x = rand(shape, low=0.1)
    for k, s, ceil in [(2, None, False), (3, 2, True), ((2, 1, 3)[:nd] if nd > 1 else 3, 2, True)]:
        check(lambda t: ours(p, k, s, ceil)(t), [x], torch_op=lambda t: theirs(p, k, s, ceil)(t))
    check(lambda t: ours(p, 2)(t), [x[0]], torch_op=lambda t: theirs(p, 2)(t))
    f, tf = getattr(F, f"lp_pool{nd}d"), getattr(TF, f"lp_pool{nd}d")
    check(lambda t: f(t, p, 2, 1), [x], torch_op=lambda t: tf(t, p, 2, 1))


@pytest.mark.parametrize("size,alpha,beta,k,shape", [
    (2, 1e-4, 0.75, 1.0, (2, 5, 3)), (3, 0.5, 0.75, 1.0, (2, 5, 3, 4)), (5, 1.0, 2.0, 2.0, (1, 4, 2, 2, 3)),
    (1, 0.3, 0.5, 0.5, (2, 3, 4)), (10, 0.9, 0.1, 1.5, (2, 3, 4)),
])
def test_local_response_norm(size, alpha, beta, k, shape):
    """Windows wider than the channels, size 1, 3-d to 5-d inputs."""
    x = rand(shape)
    check(lambda t: nn.LocalResponseNorm(size, alpha, beta, k)(t), [x],
          torch_op=lambda t: torch.nn.LocalResponseNorm(size, alpha, beta, k)(t))
    check(lambda t: F.local_response_norm(t, size, alpha, beta, k), [x],
          torch_op=lambda t: TF.local_response_norm(t, size, alpha, beta, k))


@pytest.mark.parametrize("shape", [(2, 0, 3), (1, 0, 2, 2), (2, 3, 0), (0, 3, 2)])
@pytest.mark.parametrize("size", [1, 3])
def test_local_response_norm_of_an_empty_input(shape, size):
    """An empty output of the input's shape, as torch's; no channels was a ValueError from the window's
    unfold."""
    check(lambda t: F.local_response_norm(t, size), [rand(shape)], torch_op=lambda t: TF.local_response_norm(t, size))


def test_local_response_norm_refuses_2d_as_torch():
    with pytest.raises(ValueError, match=r"^local_response_norm: expected input of shape \(N, C, \*\).* \(2, 6\)"):
        F.local_response_norm(lm.Graph().input("x", (2, 6)), 2)

"""Audit of the linear family, embeddings and distances against torch 2.13 (values, gradients, dtypes,
errors), beyond test_layers / test_layer_options / test_embedding_bag / test_similarity_bilinear /
test_cdist: F.linear with 1-d operands and zero features, 16-bit Linear layers, F.bilinear on 1-d inputs,
F.embedding's ``scale_grad_by_freq`` and ``sparse``, the refused ``max_norm``, ``from_pretrained`` with
torch's keywords, out-of-range indices named at run time, bags without bags, ``pdist``, and
cosine_similarity / pairwise_distance broadcasting and zero vectors."""

from __future__ import annotations

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


def _is_torch(t):
    return isinstance(t, torch.Tensor)


def _fn(torch_fn, lm_fn):
    """One callable for both sides; torch's index arguments (int32 here) go as int64."""
    def run(*args, **kwargs):
        if any(_is_torch(a) for a in args):
            args = [a.long() if _is_torch(a) and a.dtype == torch.int32 else a for a in args]
            return torch_fn(*args, **kwargs)
        return lm_fn(*args, **kwargs)
    return run


linear, bilinear = _fn(TF.linear, F.linear), _fn(TF.bilinear, F.bilinear)
embedding, embedding_bag = _fn(TF.embedding, F.embedding), _fn(TF.embedding_bag, F.embedding_bag)
cosine_similarity, pairwise_distance = _fn(TF.cosine_similarity, F.cosine_similarity), _fn(TF.pairwise_distance,
                                                                                         F.pairwise_distance)
pdist = _fn(torch.pdist, lambda *a, **k: lm.pdist(*a, **k))


# linear / bilinear -----------------------------------------------------------------------------
@pytest.mark.parametrize("shapes", [[(4,), (3, 4), (3,)], [(2, 4), (4,)], [(4,), (4,)], [(2, 3, 5, 4), (3, 4), (3,)],
                                    [(2, 4), (0, 4), (0,)], [(2, 0), (3, 0), (3,)], [(0, 4), (3, 4), (3,)]],
                         ids=str)
def test_linear_shapes(shapes, backend):
    check(linear, [rand(s, seed=k) for k, s in enumerate(shapes)], backend=backend)


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16])
def test_linear_16_bit(dtype, backend):
    check(linear, [rand(s, dtype, seed=k) for k, s in enumerate([(2, 4), (3, 4), (3,)])], dtypes=[dtype] * 3,
          backend=backend)


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16])
def test_linear_layer_16_bit_values_and_gradients(dtype):
    tdt = {lm.float16: torch.float16, lm.bfloat16: torch.bfloat16}[dtype]
    tm = torch.nn.Linear(4, 3).to(tdt)
    m = nn.Linear(4, 3, device="cpu", dtype=dtype)
    m.load_state_dict({k: v.detach().float().numpy() for k, v in tm.state_dict().items()})
    x = rand((5, 4), dtype)
    g = lm.Graph()
    xi = g.input("x", (5, 4), dtype=dtype)
    y = m(xi)
    got = lm.compile([y, *train.grad(y.float().sum(), [xi, m.weight, m.bias])])(x=x)
    tx = torch.from_numpy(x).to(tdt).requires_grad_()
    ty = tm(tx)
    ty.float().sum().backward()
    assert y.dtype is dtype
    for a, b in zip(got, [ty, tx.grad, tm.weight.grad, tm.bias.grad]):
        np.testing.assert_allclose(np.asarray(a, np.float64), b.detach().double().numpy(), rtol=2e-2, atol=2e-2)


def _ulp(values, dtype):
    """The spacing of ``dtype`` at each of ``values`` (float32 arrays of 16-bit values)."""
    if dtype is lm.float16:
        return np.spacing(np.abs(values).astype(np.float16)).astype(np.float64)
    return np.spacing(np.abs(values).astype(np.float32)).astype(np.float64) * 2.0 ** 16  # bfloat16: 8 bits


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16])
@pytest.mark.parametrize("x_shape", [(16, 64), (64,), (2, 8, 64)], ids=str)
def test_16_bit_linear_with_a_bias_rounds_once(dtype, x_shape, backend):
    """torch's addmm adds the bias to the float32 product and rounds once: within half an ulp of the exact
    result. The product rounded to 16 bits before the bias was added was an ulp off at a quarter of the
    elements."""
    x, w, b = rand(x_shape, dtype), rand((32, 64), dtype, seed=1), rand((32,), dtype, seed=2)
    exact = x.astype(np.float64) @ w.astype(np.float64).T + b
    g = lm.Graph()
    xi, wi, bi = (g.input(n, a.shape, dtype=dtype) for n, a in zip("xwb", (x, w, b)))
    m = nn.Linear(64, 32, dtype=dtype)
    m.load_state_dict({"weight": w, "bias": b})
    for got in lm.compile([F.linear(xi, wi, bi), m(xi)], backend=backend)(x=x, w=w, b=b):
        got = np.asarray(got, np.float64)
        assert np.all(np.abs(got - exact) <= 0.5 * _ulp(got, dtype) + 1e-5 * np.abs(exact))


def test_bilinear_1d_inputs_and_no_bias(backend):
    check(bilinear, [rand((3,)), rand((4,), seed=1), rand((5, 3, 4), seed=2), rand((5,), seed=3)], backend=backend)
    check(bilinear, [rand((2, 6, 3)), rand((2, 6, 4), seed=1), rand((5, 3, 4), seed=2)], backend=backend)


def test_bilinear_of_a_scalar_input_names_the_op():
    """A 0-d input was an IndexError from the shape check itself ('tuple index out of range')."""
    g = lm.Graph()
    with pytest.raises(ValueError, match=r"^bilinear: input1 \(\*, in1\), input2 \(\*, in2\) and weight .* "
                                         r"do not match: \(\), \(2, 4\), \(5, 3, 4\)"):
        F.bilinear(g.input("a", ()), g.input("b", (2, 4)), g.input("w", (5, 3, 4)))


def test_linear_and_embedding_take_torchs_device_keyword():
    """torch's Linear and Embedding take ``device``; Bilinear and EmbeddingBag here did, these two did not."""
    assert nn.Linear(3, 2, device="cpu").weight.shape == (2, 3)
    assert nn.Embedding(3, 2, device="cpu", dtype=lm.bfloat16).weight.dtype is lm.bfloat16


# embedding -------------------------------------------------------------------------------------
IDX = np.array([[1, 2, 1], [4, 1, 3]], np.int32)


@pytest.mark.parametrize("dtype", [lm.float32, lm.float16, lm.bfloat16])
@pytest.mark.parametrize("padding_idx", [None, 1, -4])
def test_embedding_values_and_gradients(dtype, padding_idx, backend):
    check(lambda i, w: embedding(i, w, padding_idx=padding_idx), [IDX, rand((5, 3), dtype)],
          dtypes=[lm.int32, dtype], backend=backend)
    check(lambda i, w: embedding(i, w), [np.array(2, np.int32), rand((5, 3), dtype)], dtypes=[lm.int32, dtype],
          backend=backend)


@pytest.mark.parametrize("padding_idx", [None, 3])
def test_embedding_scale_grad_by_freq(padding_idx, backend):
    """Each row's gradient is divided by how often its index occurs in the input (was refused)."""
    check(lambda i, w: embedding(i, w, padding_idx=padding_idx, scale_grad_by_freq=True) * w[0, 0],
          [IDX, rand((5, 3))], backend=backend)
    tm = torch.nn.Embedding(5, 3, padding_idx=padding_idx, scale_grad_by_freq=True)
    m = nn.Embedding(5, 3, padding_idx=padding_idx, scale_grad_by_freq=True)
    assert repr(m) == repr(tm)
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    g = lm.Graph()
    i = g.input("i", IDX.shape, dtype=lm.int32)
    y = m(i)
    out, gw = lm.compile([y, train.grad((y * y).sum(), m.weight)], backend=backend)(i=IDX)
    ty = tm(torch.from_numpy(IDX).long())
    (ty * ty).sum().backward()
    np.testing.assert_array_equal(out, ty.detach().numpy())
    np.testing.assert_allclose(gw, tm.weight.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_embedding_sparse_is_accepted_with_torchs_gradient_values(backend):
    """torch's ``sparse=True`` only changes the gradient's layout: here it is dense, with the same values."""
    check(lambda i, w: embedding(i, w, sparse=True), [IDX, rand((5, 3))], grad=False, backend=backend)
    m, tm = nn.Embedding(5, 3, sparse=True), torch.nn.Embedding(5, 3, sparse=True)
    assert repr(m) == repr(tm) and m.sparse
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    g = lm.Graph()
    i = g.input("i", IDX.shape, dtype=lm.int32)
    gw = lm.compile(train.grad(m(i).sum(), m.weight), backend=backend)(i=IDX)
    tm(torch.from_numpy(IDX).long()).sum().backward()
    np.testing.assert_array_equal(gw, tm.weight.grad.to_dense().numpy())


def test_max_norm_is_refused_naming_the_op_and_why():
    """torch renormalises the weight's rows in place during the forward; luminal refuses rather than
    returning rescaled rows while the weight (and a second forward) stays as it was."""
    g = lm.Graph()
    i, w = g.input("i", (3,), dtype=lm.int32), g.input("w", (5, 3))
    for make in (lambda: nn.Embedding(5, 3, max_norm=1.0), lambda: F.embedding(i, w, max_norm=1.0),
                 lambda: nn.Embedding.from_pretrained(rand((5, 3)), max_norm=1.0),
                 lambda: F.embedding_bag(i, w, g.input("o", (1,), dtype=lm.int32), max_norm=1.0)):
        with pytest.raises(NotImplementedError, match=r"max_norm=1.0 is not supported: torch renormalises"):
            make()
    with pytest.raises(NotImplementedError, match=r"^EmbeddingBag: scale_grad_by_freq=True is not supported"):
        nn.EmbeddingBag(5, 3, scale_grad_by_freq=True)


def test_from_pretrained_takes_torchs_keywords():
    w = rand((5, 3))
    m = nn.Embedding.from_pretrained(w, freeze=False, padding_idx=None, max_norm=None, norm_type=2.0,
                                     scale_grad_by_freq=True, sparse=True)
    tm = torch.nn.Embedding.from_pretrained(torch.from_numpy(w), freeze=False, scale_grad_by_freq=True,
                                            sparse=True)
    assert repr(m) == repr(tm) and m.weight.requires_grad and m.scale_grad_by_freq
    assert (m.max_norm, m.norm_type) == (tm.max_norm, tm.norm_type)
    assert repr(nn.EmbeddingBag(5, 3, norm_type=1.0)) == repr(torch.nn.EmbeddingBag(5, 3, norm_type=1.0))
    for cls in ("Embedding", "EmbeddingBag"):
        with pytest.raises(ValueError, match=rf"^{cls}.from_pretrained: embeddings must be 2-d .*got shape \(5,\)"):
            getattr(nn, cls).from_pretrained(np.zeros(5, np.float32))


@pytest.mark.parametrize("make", [
    lambda i, w: F.embedding(i, w), lambda i, w: nn.Embedding(5, 3)(i),
    lambda i, w: F.embedding_bag(i.reshape(1, 2), w), lambda i, w: nn.EmbeddingBag(5, 3, mode="max")(i.reshape(2, 1)),
    lambda i, w: F.embedding_bag(i, w, i.graph.constant(np.array([0, 1], np.int32)), mode="sum"),
], ids=["embedding", "Embedding", "embedding_bag", "EmbeddingBag", "embedding_bag_offsets"])
@pytest.mark.parametrize("bad", [5, -1])
def test_an_index_out_of_range_is_named_at_run_time(make, bad, backend):
    """embedding_bag's said 'index_select: index 7 is out of range', naming an op the user never called."""
    g = lm.Graph()
    i, w = g.input("i", (2,), dtype=lm.int32), g.input("w", (5, 3))
    out = make(i, w)
    f = lm.compile(out, backend=backend)
    want = r"^(embedding|Embedding\(5, 3\)|embedding_bag|EmbeddingBag\(5, 3, mode='max'\))"
    with pytest.raises(IndexError, match=want + rf": index {bad} is out of range for a dim of size 5"):
        f(i=np.array([1, bad], np.int32), w=rand((5, 3)))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("offsets,last", [([], False), ([0], True)], ids=str)
def test_embedding_bag_without_bags(mode, offsets, last, backend):
    """No bags at all: torch's (0, embedding_dim); it was an IndexError from index_add."""
    g = lm.Graph()
    i, w, o = g.input("i", (3,), dtype=lm.int32), g.input("w", (5, 3)), g.input("o", (len(offsets),), dtype=lm.int32)
    out = lm.compile(F.embedding_bag(i, w, o, mode=mode, include_last_offset=last), backend=backend)(
        i=np.array([1, 2, 3], np.int32), w=rand((5, 3)), o=np.array(offsets, np.int32))
    assert out.shape == (0, 3) and out.dtype == np.float32


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_16_bit_and_empty_bags(mode, backend):
    offsets = np.array([0, 0, 2, 4], np.int32)  # the first and the last bags empty: zeros
    check(lambda i, w, o: embedding_bag(i, w, o, mode=mode), [np.array([1, 2, 3, 2], np.int32),
                                                               rand((5, 3), lm.float16), offsets], backend=backend)


# cosine_similarity / pairwise_distance ------------------------------------------------------------
@pytest.mark.parametrize("shapes,dim", [([(3, 1, 4), (5, 4)], -1), ([(3, 1), (3, 4)], 1), ([(4,), (4,)], 0)],
                         ids=str)
def test_cosine_similarity_broadcasting(shapes, dim, backend):
    check(lambda a, b: cosine_similarity(a, b, dim=dim), [rand(s, seed=k) for k, s in enumerate(shapes)],
          backend=backend)


def test_cosine_similarity_of_zero_vectors_is_0_with_each_norm_clamped_apart(backend):
    """torch 2.x: ``x1 . x2 / (max(|x1|, eps) * max(|x2|, eps))``: a zero vector gives 0 (not NaN)."""
    zero = np.zeros((2, 4), np.float32)
    out = check(lambda a, b: cosine_similarity(a, b, dim=-1), [zero, rand((2, 4), seed=1)], backend=backend)
    np.testing.assert_array_equal(out[0], [0.0, 0.0])
    check(lambda a, b: cosine_similarity(a, b, eps=3.0), [rand((3, 4)), rand((3, 4), seed=1)], backend=backend)


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16])
def test_cosine_similarity_and_pairwise_distance_16_bit(dtype, backend):
    args = [rand((3, 4), dtype), rand((3, 4), dtype, seed=1)]
    check(cosine_similarity, args, dtypes=[dtype] * 2, backend=backend)
    check(pairwise_distance, args, dtypes=[dtype] * 2, backend=backend)


@pytest.mark.parametrize("kwargs", [{}, {"keepdim": True}, {"p": 1.0, "eps": 0.0}, {"p": math.inf}], ids=str)
def test_pairwise_distance_broadcasting(kwargs, backend):
    check(lambda a, b: pairwise_distance(a, b, **kwargs), [rand((4,)), rand((3, 4), seed=1)], backend=backend)
    check(lambda a, b: pairwise_distance(a, b, **kwargs), [rand(()), rand((), seed=1)], backend=backend)


# pdist -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, 0.5, 3.0, math.inf])
def test_pdist(p, backend):
    """torch.pdist was missing: every pair i < j of rows, torch's order; coincident rows (distance 0,
    gradient 0) included."""
    x = rand((5, 3), lm.float64)
    x[3] = x[1]
    check(lambda t: pdist(t, p), [x], backend=backend)
    check(lambda t: pdist(t, p), [rand((4, 2))], backend=backend)
    check(lambda t: pdist(t, p), [rand((1, 2))], backend=backend)  # one point: no pairs


def test_pdist_errors():
    g = lm.Graph()
    with pytest.raises(ValueError, match=r"^pdist: needs a 2-d tensor \(N, M\), got 3-d"):
        lm.pdist(g.input("a", (2, 3, 4)))
    with pytest.raises(ValueError, match=r"^pdist: p must be >= 0, got -1"):
        F.pdist(g.input("b", (3, 2)), -1)
    with pytest.raises(TypeError, match=r"^pdist: needs a float tensor, got int32"):
        lm.pdist(g.input("c", (3, 2), dtype=lm.int32))
    with pytest.raises(ValueError, match=r"^pdist: needs a static number of points"):
        lm.pdist(g.input("d", ("N", 2)))


@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"])
@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16])
def test_16_bit_cdist_and_pdist_compute_in_float32(dtype, mode, backend):
    """Points of size ~100 in float16: the matmul form's squared norms (~5e4 summed) overflowed to inf.
    torch's CPU cdist refuses 16-bit; its reference here is float32 rounded once, as its GPU kernels."""
    tdt = {lm.float16: torch.float16, lm.bfloat16: torch.bfloat16}[dtype]
    x1, x2 = rand((30, 8), dtype, low=-100, high=100), rand((27, 8), dtype, seed=1, low=-100, high=100)
    check(lambda a, b: lm.cdist(a, b, compute_mode=mode), [x1, x2], dtypes=[dtype] * 2, backend=backend,
          torch_op=lambda a, b: torch.cdist(a.float(), b.float(), compute_mode=mode).to(tdt), rtol=1e-2, atol=0.5,
          grad_rtol=2e-2, grad_atol=2e-2)
    check(lambda a: lm.pdist(a), [x1], dtypes=[dtype], backend=backend, rtol=1e-2, atol=0.5,
          torch_op=lambda a: torch.pdist(a.float()).to(tdt), grad_rtol=2e-2, grad_atol=2e-2)

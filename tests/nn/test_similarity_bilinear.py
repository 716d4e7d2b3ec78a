"""Parity with torch for ``nn.Bilinear``, ``nn.CosineSimilarity`` and ``nn.PairwiseDistance``: torch's
weights load by name, the outputs and the gradients (of the inputs and of the parameters) agree on every
backend, parameters and init are torch's, reprs too, and bad inputs fail naming the layer."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity import check, rand

import luminal as lm
from luminal import nn, train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _load(ours, theirs):
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})


def _pick(m, tm):
    """The module for the side a tensor belongs to (one lambda for both)."""
    return lambda a, *rest: (tm if isinstance(a, torch.Tensor) else m)(a, *rest)


@pytest.mark.parametrize("bias", [True, False])
def test_bilinear(bias, backend):
    tm = torch.nn.Bilinear(3, 4, 5, bias=bias)
    m = nn.Bilinear(3, 4, 5, bias=bias)
    _load(m, tm)
    check(_pick(m, tm), [rand((2, 3)), rand((2, 4), seed=1)], backend=backend)
    check(_pick(m, tm), [rand((2, 7, 3)), rand((2, 7, 4), seed=1)], backend=backend, pre=lambda t: t.flip(1))
    check(_pick(m, tm), [rand((3,)), rand((4,), seed=1)], backend=backend)  # unbatched
    check(_pick(m, tm), [rand((5, 3)), rand((5, 4), seed=1)], backend=backend, shapes=[("B", 3), ("B", 4)])


def test_bilinear_parameter_gradients(backend):
    tm = torch.nn.Bilinear(3, 2, 4)
    m = nn.Bilinear(3, 2, 4)
    _load(m, tm)
    x1, x2 = rand((5, 3)), rand((5, 2), seed=1)
    g = lm.Graph()
    a, b = g.input("a", (5, 3)), g.input("b", (5, 2))
    loss = (m(a, b) ** 2).mean()
    f = lm.compile([loss, *train.grad(loss, [m.weight, m.bias])], backend=backend)
    got = f(a=x1, b=x2)
    want = (tm(torch.from_numpy(x1), torch.from_numpy(x2)) ** 2).mean()
    want.backward()
    np.testing.assert_allclose(got[0], want.item(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], tm.weight.grad.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got[2], tm.bias.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_bilinear_layout_init_and_repr():
    tm = torch.nn.Bilinear(6, 2, 3)
    lm.manual_seed(0)
    m = nn.Bilinear(6, 2, 3)
    assert repr(m) == repr(tm)
    assert repr(nn.Bilinear(1, 2, 3, bias=False)) == repr(torch.nn.Bilinear(1, 2, 3, bias=False))
    sd, tsd = m.state_dict(), tm.state_dict()
    assert list(sd) == list(tsd) == ["weight", "bias"]
    assert all(sd[k].shape == tuple(tsd[k].shape) for k in sd)
    bound = 1 / np.sqrt(6)  # torch's: U(-1/sqrt(in1_features), +) for the weight and the bias
    for v in sd.values():
        assert np.abs(v).max() <= bound and np.abs(v).max() > 0.5 * bound
    assert len(list(m.parameters())) == 2 and nn.Bilinear(2, 2, 2, bias=False).bias is None
    lm.manual_seed(0)
    np.testing.assert_array_equal(nn.Bilinear(6, 2, 3).weight.data, sd["weight"])  # lm.manual_seed reproduces
    m64 = nn.Bilinear(2, 3, 4, dtype=lm.float64, device="cpu")
    assert m64.weight.dtype is lm.float64 and m64.bias.dtype is lm.float64


def test_bilinear_errors():
    m = nn.Bilinear(3, 4, 5)
    g = lm.Graph()
    with pytest.raises(ValueError, match=r"^Bilinear\(in1_features=3, .*\): input2: expected input of shape \(\*, 4\), "
                                         r"got \(2, 5\)"):
        m(g.input("a", (2, 3)), g.input("b", (2, 5)))
    with pytest.raises(ValueError, match=r"^Bilinear\(.*\): input1: expected input of shape \(\*, 3\), got \(\)"):
        m(g.input("s", ()), g.input("c", (4,)))
    with pytest.raises(TypeError, match=r"^Bilinear\(.*\): input2 must be a GraphTensor, got ndarray"):
        m(g.input("d", (3,)), np.zeros(4))
    with pytest.raises(TypeError, match="^Bilinear: in1_features must be an int, got float"):
        nn.Bilinear(3.0, 4, 5)
    with pytest.raises(ValueError, match="^Bilinear: out_features must be at least 0, got -1"):
        nn.Bilinear(3, 4, -1)


@pytest.mark.parametrize("args", [{}, {"dim": 0}, {"dim": -1, "eps": 1e-3}, {"dim": 2}])
def test_cosine_similarity_module(args, backend):
    m, tm = nn.CosineSimilarity(**args), torch.nn.CosineSimilarity(**args)
    assert repr(m) == repr(tm) == "CosineSimilarity()" and (m.dim, m.eps) == (tm.dim, tm.eps)
    check(_pick(m, tm), [rand((3, 5, 4)), rand((3, 5, 4), seed=1)], backend=backend)
    check(_pick(m, tm), [rand((3, 5, 4), lm.float64), rand((5, 4), lm.float64, seed=1)], backend=backend,
          pre=lambda t: t.flip(-1))  # broadcast


def test_cosine_similarity_below_eps(backend):
    """A norm under ``eps`` counts as ``eps`` and its gradient is still the norm's, as torch's (which clamps
    without recording it); a zero vector gives 0."""
    m, tm = nn.CosineSimilarity(), torch.nn.CosineSimilarity()
    x1 = np.array([[0.0, 0.0, 0.0], [1e-9, -2e-9, 0.0], [1.0, 2.0, 3.0], [3e-9, 0.0, 4e-9]], np.float32)
    check(_pick(m, tm), [x1, rand((4, 3))], backend=backend)
    check(_pick(m, tm), [x1.astype(np.float64), x1[::-1].astype(np.float64) + 1e-12], backend=backend)


@pytest.mark.parametrize("args", [{}, {"p": 1.0}, {"p": 3.0, "keepdim": True}, {"p": float("inf")},
                                  {"eps": 0.0, "keepdim": True}])
def test_pairwise_distance_module(args, backend):
    m, tm = nn.PairwiseDistance(**args), torch.nn.PairwiseDistance(**args)
    assert repr(m) == repr(tm) == "PairwiseDistance()" and (m.norm, m.eps, m.keepdim) == (tm.norm, tm.eps, tm.keepdim)
    check(_pick(m, tm), [rand((4, 5)), rand((4, 5), seed=1)], backend=backend)
    check(_pick(m, tm), [rand((2, 3, 5)), rand((5,), seed=1)], backend=backend, pre=lambda t: t * 2)  # broadcast
    check(_pick(m, tm), [rand((4, 5)), rand((4, 5), seed=1)], backend=backend, shapes=[("B", 5), ("B", 5)])


def test_similarity_modules_in_a_sequential_model_and_errors():
    g = lm.Graph()
    a, b = g.input("a", (2, 3)), g.input("b", (2, 3))
    out = nn.CosineSimilarity(dim=1)(a, b) + nn.PairwiseDistance()(a, b)
    assert out.shape == (2,)
    with pytest.raises(TypeError, match="^cosine_similarity: x2 must be a GraphTensor, got ndarray"):
        nn.CosineSimilarity()(a, np.zeros((2, 3)))
    with pytest.raises(TypeError, match="^pairwise_distance: x1 must be a GraphTensor, got NoneType"):
        nn.PairwiseDistance()(None, b)

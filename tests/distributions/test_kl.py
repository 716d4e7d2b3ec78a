"""kl_divergence against torch's for every pair torch registers among lm.distributions' (values and
gradients by both distributions' parameters, batch shapes broadcast), its infinite cases written out,
the dispatch (most specific pair, register_kl) and the NotImplementedError of an unregistered pair."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.distributions as TD
from parity import check, rand

import luminal as lm
import luminal.distributions as D

DTYPES = [lm.float32, lm.float64]


def _pos(shape, dtype, seed, low=0.5, high=2.0):
    return rand(shape, dtype, seed=seed, low=low, high=high)


def _tril(M, a):
    return M.tril(a, -1) + M.diag_embed(M.exp(M.diagonal(a, 0, -2, -1)))


PAIRS = {
    # name: (make(M, lib, *inputs) -> (p, q), inputs(dtype))
    "Normal": (lambda M, lib, a, b, c, d: (M.Normal(a, b), M.Normal(c, d)),
               lambda t: [rand((3, 1), t, 1), _pos((3, 1), t, 2), rand((4,), t, 3), _pos((4,), t, 4)]),
    "LogNormal": (lambda M, lib, a, b, c, d: (M.LogNormal(a, b), M.LogNormal(c, d)),
                  lambda t: [rand((3, 1), t, 1), _pos((3, 1), t, 2), rand((4,), t, 3), _pos((4,), t, 4)]),
    # (same shapes: torch's Bernoulli KL fails on broadcast batch shapes, an IndexError of its masks)
    "Bernoulli": (lambda M, lib, p, q: (M.Bernoulli(probs=p), M.Bernoulli(logits=q)),
                  lambda t: [_pos((3, 4), t, 1, 0.05, 0.95), rand((3, 4), t, 2, -3, 3)]),
    "Poisson": (lambda M, lib, a, b: (M.Poisson(a), M.Poisson(b)), lambda t: [_pos((3, 1), t, 1), _pos((4,), t, 2)]),
    "Categorical": (lambda M, lib, p, q: (M.Categorical(probs=p), M.Categorical(logits=q)),
                    lambda t: [_pos((3, 1, 5), t, 1, 0.1, 2), rand((4, 5), t, 2)]),
    "OneHotCategorical": (lambda M, lib, p, q: (M.OneHotCategorical(logits=p), M.OneHotCategorical(probs=q)),
                          lambda t: [rand((3, 5), t, 1), _pos((5,), t, 2, 0.1, 2)]),
    "Uniform": (lambda M, lib, a, b, c, d: (M.Uniform(a, b), M.Uniform(c, d)),
                lambda t: [rand((3, 1), t, 1, -1, 0), rand((3, 1), t, 2, 0.5, 1), rand((4,), t, 3, -3, -1.5),
                           rand((4,), t, 4, 1.5, 3)]),
    "Exponential": (lambda M, lib, a, b: (M.Exponential(a), M.Exponential(b)),
                    lambda t: [_pos((3, 1), t, 1), _pos((4,), t, 2)]),
    "Laplace": (lambda M, lib, a, b, c, d: (M.Laplace(a, b), M.Laplace(c, d)),
                lambda t: [rand((3, 1), t, 1), _pos((3, 1), t, 2), rand((4,), t, 3), _pos((4,), t, 4)]),
    "Gamma": (lambda M, lib, a, b, c, d: (M.Gamma(a, b), M.Gamma(c, d)),
              lambda t: [_pos((3, 1), t, 1, 0.5, 3), _pos((3, 1), t, 2), _pos((4,), t, 3, 0.5, 3), _pos((4,), t, 4)]),
    "Beta": (lambda M, lib, a, b, c, d: (M.Beta(a, b), M.Beta(c, d)),
             lambda t: [_pos((3, 1), t, 1, 0.5, 3), _pos((3, 1), t, 2, 0.5, 3), _pos((4,), t, 3, 0.5, 3),
                        _pos((4,), t, 4, 0.5, 3)]),
    "MultivariateNormal": (lambda M, lib, a, b, c, d: (M.MultivariateNormal(a, scale_tril=_tril(lib, b)),
                                                       M.MultivariateNormal(c, covariance_matrix=_tril(lib, d)
                                                                            @ _tril(lib, d).mT)),
                           lambda t: [rand((2, 3), t, 1), rand((4, 1, 3, 3), t, 2, -0.5, 0.5), rand((3,), t, 3),
                                      rand((3, 3), t, 4, -0.5, 0.5)]),
    "Independent": (lambda M, lib, a, b, c, d: (M.Independent(M.Normal(a, b), 1), M.Independent(M.Normal(c, d), 1)),
                    lambda t: [rand((3, 1), t, 1), _pos((3, 1), t, 2), rand((4,), t, 3), _pos((4,), t, 4)]),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("name", PAIRS)
def test_kl_divergence_matches_torch(name, dtype):
    make, inputs = PAIRS[name]
    loose = dtype == lm.float32 and name == "MultivariateNormal"
    check(lambda *xs: D.kl_divergence(*make(D, lm, *xs)), inputs(dtype),
          torch_op=lambda *ts: TD.kl_divergence(*make(TD, torch, *ts)), backend="cpu",
          rtol=1e-4 if loose else None, grad_rtol=1e-3 if loose else None)


def test_kl_infinite_where_q_misses_p_support():
    """KL(p || q) is +inf where q gives zero mass to what p can draw, and 0-weighted terms add 0."""
    g = lm.Graph()
    p = D.Bernoulli(probs=g.constant(np.array([0.0, 1.0, 0.3, 0.3], np.float64)))
    q = D.Bernoulli(probs=g.constant(np.array([0.0, 1.0, 0.0, 1.0], np.float64)))
    u = D.kl_divergence(D.Uniform(g.constant(np.array([0.0, 0.0])), 1.0), D.Uniform(g.constant(np.array([0.5, -1.0])),
                                                                                      2.0))
    c = D.kl_divergence(D.Categorical(probs=g.constant(np.array([[0.5, 0.5, 0.0], [0.5, 0.0, 0.5]]))),
                        D.Categorical(probs=g.constant(np.array([0.5, 0.5, 0.0]))))
    kb, ku, kc = lm.compile([D.kl_divergence(p, q), u, c], backend="cpu")()
    np.testing.assert_array_equal(kb, [0.0, 0.0, math.inf, math.inf])
    assert ku[0] == math.inf and np.isclose(ku[1], math.log(3.0))
    assert kc[0] == 0.0 and kc[1] == math.inf


def test_unregistered_pair_raises_as_torch():
    for M, lib in ((D, lm), (TD, torch)):
        with pytest.raises(NotImplementedError):
            M.kl_divergence(M.Categorical(probs=lib.ones(3)), M.Normal(0.0, 1.0))


def test_register_kl_most_specific_pair_wins():
    class MyNormal(D.Normal):
        pass

    g = lm.Graph()
    p, q = MyNormal(g.constant(np.zeros(2)), 1.0), D.Normal(1.0, 2.0)
    assert D.kl_divergence(p, q) is not None  # (Normal's, through the subclass)

    @D.register_kl(MyNormal, D.Normal)
    def _mine(p, q):
        return p.loc * 0 + 7.0

    (got,) = lm.compile([D.kl_divergence(p, q)], backend="cpu")()
    np.testing.assert_array_equal(got, [7.0, 7.0])
    with pytest.raises(TypeError, match="subclass of Distribution"):
        D.register_kl(int, D.Normal)

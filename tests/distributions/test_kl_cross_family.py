"""kl_divergence across families, against torch's for every cross-family pair torch registers among
lm.distributions' (values and gradients by both distributions' parameters), the infinite ones (a
support the other's misses) written out, and an unregistered pair's NotImplementedError."""

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


P, Q, SAME = (3, 1), (4,), (3, 4)  # p's and q's parameter shapes (broadcast); SAME: torch's masked pairs need one
PAIRS = {
    # name: (make(M, *inputs) -> (p, q), inputs(dtype))
    "Bernoulli-Poisson": (lambda M, a, b: (M.Bernoulli(probs=a), M.Poisson(b)),
                          lambda t: [_pos(P, t, 1, 0.05, 0.95), _pos(Q, t, 2)]),
    "Beta-Exponential": (lambda M, a, b, r: (M.Beta(a, b), M.Exponential(r)),
                         lambda t: [_pos(P, t, 1, 0.5, 3), _pos(P, t, 2, 0.5, 3), _pos(Q, t, 3)]),
    "Beta-Gamma": (lambda M, a, b, c, r: (M.Beta(a, b), M.Gamma(c, r)),
                   lambda t: [_pos(P, t, 1, 0.5, 3), _pos(P, t, 2, 0.5, 3), _pos(Q, t, 3, 0.5, 3), _pos(Q, t, 4)]),
    "Beta-Normal": (lambda M, a, b, m, s: (M.Beta(a, b), M.Normal(m, s)),
                    lambda t: [_pos(P, t, 1, 0.5, 3), _pos(P, t, 2, 0.5, 3), rand(Q, t, 3), _pos(Q, t, 4)]),
    "Beta-Uniform": (lambda M, a, b, lo, hi: (M.Beta(a, b), M.Uniform(lo, hi)),
                     lambda t: [_pos(SAME, t, 1, 0.5, 3), _pos(SAME, t, 2, 0.5, 3), rand(SAME, t, 3, -1, -0.1),
                                rand(SAME, t, 4, 1.1, 2)]),
    "Exponential-Gamma": (lambda M, r, c, s: (M.Exponential(r), M.Gamma(c, s)),
                          lambda t: [_pos(P, t, 1), _pos(Q, t, 2, 0.5, 3), _pos(Q, t, 3)]),
    "Exponential-Normal": (lambda M, r, m, s: (M.Exponential(r), M.Normal(m, s)),
                           lambda t: [_pos(P, t, 1), rand(Q, t, 2), _pos(Q, t, 3)]),
    "Gamma-Exponential": (lambda M, c, r, s: (M.Gamma(c, r), M.Exponential(s)),
                          lambda t: [_pos(P, t, 1, 0.5, 3), _pos(P, t, 2), _pos(Q, t, 3)]),
    "Gamma-Normal": (lambda M, c, r, m, s: (M.Gamma(c, r), M.Normal(m, s)),
                     lambda t: [_pos(P, t, 1, 0.5, 3), _pos(P, t, 2), rand(Q, t, 3), _pos(Q, t, 4)]),
    "Laplace-Normal": (lambda M, a, b, m, s: (M.Laplace(a, b), M.Normal(m, s)),
                       lambda t: [rand(P, t, 1), _pos(P, t, 2), rand(Q, t, 3), _pos(Q, t, 4)]),
    "Normal-Laplace": (lambda M, a, b, m, s: (M.Normal(a, b), M.Laplace(m, s)),
                       lambda t: [rand(P, t, 1), _pos(P, t, 2), rand(Q, t, 3), _pos(Q, t, 4)]),
    "Uniform-Beta": (lambda M, lo, hi, a, b: (M.Uniform(lo, hi), M.Beta(a, b)),
                     lambda t: [rand(SAME, t, 1, 0.05, 0.4), rand(SAME, t, 2, 0.5, 0.95), _pos(SAME, t, 3, 0.5, 3),
                                _pos(SAME, t, 4, 0.5, 3)]),
    "Uniform-Exponential": (lambda M, lo, hi, r: (M.Uniform(lo, hi), M.Exponential(r)),
                            lambda t: [rand(SAME, t, 1, 0.1, 1), rand(SAME, t, 2, 1.5, 3), _pos(SAME, t, 3)]),
    "Uniform-Gamma": (lambda M, lo, hi, c, r: (M.Uniform(lo, hi), M.Gamma(c, r)),
                      lambda t: [rand(SAME, t, 1, 0.1, 1), rand(SAME, t, 2, 1.5, 3), _pos(SAME, t, 3, 0.5, 3),
                                 _pos(SAME, t, 4)]),
    "Uniform-Normal": (lambda M, lo, hi, m, s: (M.Uniform(lo, hi), M.Normal(m, s)),
                       lambda t: [rand(P, t, 1, -2, -0.5), rand(P, t, 2, 0, 2), rand(Q, t, 3), _pos(Q, t, 4)]),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("name", PAIRS)
def test_cross_family_kl_matches_torch(name, dtype):
    make, inputs = PAIRS[name]
    check(lambda *xs: D.kl_divergence(*make(D, *xs)), inputs(dtype),
          torch_op=lambda *ts: TD.kl_divergence(*make(TD, *ts)), backend="cpu")


INFINITE = [  # p's support not inside q's: torch's inf
    ("Exponential", "Beta"), ("Exponential", "Uniform"), ("Gamma", "Beta"), ("Gamma", "Uniform"),
    ("Laplace", "Beta"), ("Laplace", "Exponential"), ("Laplace", "Gamma"), ("Laplace", "Uniform"),
    ("Normal", "Beta"), ("Normal", "Exponential"), ("Normal", "Gamma"), ("Normal", "Uniform"),
    ("Poisson", "Bernoulli"),
]
ARGS = {"Exponential": 1, "Beta": 2, "Uniform": 2, "Gamma": 2, "Laplace": 2, "Normal": 2, "Poisson": 1, "Bernoulli": 1}


@pytest.mark.parametrize("pair", INFINITE, ids="-".join)
def test_infinite_pairs(pair):
    """inf over the broadcast batch shape of both (torch's has p's shape alone)."""
    g = lm.Graph()
    vals = {"p": np.full((3, 1), 0.5), "q": np.array([0.25, 0.5, 0.75, 0.9])}
    dists = []
    for who, fam in zip("pq", pair):
        args = [g.constant(vals[who])] + [2.0] * (ARGS[fam] - 1)
        if fam == "Bernoulli":
            args = [args[0]]
        dists.append(getattr(D, fam)(*args))
    (kl,) = lm.compile([D.kl_divergence(*dists)], backend="cpu")()
    assert kl.shape == (3, 4) and (kl == math.inf).all()
    torch_dists = [getattr(TD, fam)(*([torch.tensor(0.5)] + [2.0] * (ARGS[fam] - 1))) for fam in pair]
    assert TD.kl_divergence(*torch_dists).item() == math.inf


def test_masked_pairs_are_infinite_where_the_supports_miss():
    """Beta || Uniform: inf where the interval misses part of [0, 1]; Uniform || Beta: where the interval
    leaves [0, 1]; Uniform || Exponential and Uniform || Gamma: where it reaches below 0. The finite
    entries are torch's."""
    lo, hi = np.array([-0.5, 0.2, 0.0, 0.3]), np.array([0.8, 1.5, 0.9, 0.6])
    g = lm.Graph()
    low, high = g.constant(lo), g.constant(hi)
    got = lm.compile([D.kl_divergence(D.Beta(2.0, 3.0), D.Uniform(low, high)),
                      D.kl_divergence(D.Uniform(low, high), D.Beta(2.0, 3.0)),
                      D.kl_divergence(D.Uniform(low, high), D.Exponential(2.0)),
                      D.kl_divergence(D.Uniform(low, high), D.Gamma(2.0, 3.0))], backend="cpu")()
    inf = math.inf
    assert got[0][:2].tolist() == [inf, inf] and got[1][:2].tolist() == [inf, inf]
    assert got[2][0] == inf and got[3][0] == inf
    tlo, thi = torch.from_numpy(lo), torch.from_numpy(hi)
    want = [TD.kl_divergence(TD.Beta(2.0, 3.0), TD.Uniform(tlo, thi)), TD.kl_divergence(TD.Uniform(tlo, thi),
            TD.Beta(2.0, 3.0)), TD.kl_divergence(TD.Uniform(tlo, thi), TD.Exponential(2.0)),
            TD.kl_divergence(TD.Uniform(tlo, thi), TD.Gamma(2.0, 3.0))]
    np.testing.assert_allclose(got[0], want[0].numpy(), rtol=1e-12)  # (inf where torch's is)
    for k in (1, 2, 3):
        np.testing.assert_allclose(got[k][3], want[k][3].item(), rtol=1e-12)


def test_uniform_from_zero_is_finite():
    """Uniform(0, h) || Beta / Gamma: the ``x log x`` terms at 0 are their limit 0, so the KL is finite
    (torch's ``t * log(t)`` gives NaN there): written out, Uniform(0, 1) || Beta(2, 3) = -E[log pdf] =
    log B(2, 3) - (E[log x] + 2 E[log(1 - x)]) = log(1/12) + 3."""
    g = lm.Graph()
    (kl,) = lm.compile([D.kl_divergence(D.Uniform(g.constant(np.array(0.0)), 1.0),
                                     D.Beta(g.constant(np.array(2.0)), 3.0))],
                       backend="cpu")()
    np.testing.assert_allclose(kl, math.log(1 / 12) + 3, rtol=1e-12)


def test_unregistered_pairs_still_raise():
    g = lm.Graph()
    for p, q in ((D.Categorical(probs=g.constant(np.ones(3))), D.Normal(0.0, 1.0)),
                 (D.Exponential(1.0), D.Laplace(0.0, 1.0)), (D.Bernoulli(0.5), D.Beta(1.0, 1.0))):
        with pytest.raises(NotImplementedError, match=f"p = {type(p).__name__}, q = {type(q).__name__}"):
            D.kl_divergence(p, q)

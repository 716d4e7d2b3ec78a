"""lm.distributions against torch.distributions: log_prob, entropy, the moments, cdf/icdf (values and
the gradients by every parameter and the value, ``parity.check`` on the cpu backend), in float32 and
float64, with parameters of different shapes broadcast together (the batch shape (3, 4) from (3, 1)
and (4,), and values with a leading sample dim)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributions as TD
from parity import check, rand

import luminal as lm
import luminal.distributions as D

DTYPES = [lm.float32, lm.float64]
B1, B2, X = (3, 1), (4,), (2, 3, 4)  # two parameter shapes broadcast to the batch (3, 4), values of (2, 3, 4)


def _pos(shape, dtype, seed, low=0.5, high=2.0):
    return rand(shape, dtype, seed=seed, low=low, high=high)


def _moments(d, x, p=None, mode=True):
    """The float results a distribution has: log_prob(x), entropy, mean, variance, stddev, mode, icdf(p)."""
    out = [d.log_prob(x), d.entropy(), d.mean, d.variance, d.stddev]
    if mode:
        out.append(d.mode)
    if p is not None:
        out += [d.cdf(x), d.icdf(p)]
    return tuple(out)


CASES = {
    # name: (op(M, *inputs) with M = lm.distributions or torch.distributions, inputs(dtype))
    "Normal": (lambda M, loc, scale, x, p: _moments(M.Normal(loc, scale), x, p),
               lambda d: [rand(B1, d, 1), _pos(B2, d, 2), rand(X, d, 3), _pos((3, 4), d, 4, 0.05, 0.95)]),
    "LogNormal": (lambda M, loc, scale, x, p: _moments(M.LogNormal(loc, scale), x, p),
                  lambda d: [rand(B1, d, 1, -1, 1), _pos(B2, d, 2, 0.3, 1.0), _pos(X, d, 3, 0.1, 4),
                             _pos((3, 4), d, 4, 0.05, 0.95)]),
    "Uniform": (lambda M, lo, hi, x, p: _moments(M.Uniform(lo, hi), x, p, mode=False),
                lambda d: [rand(B1, d, 1, -2, -1), rand(B2, d, 2, 1, 2), rand(X, d, 3, -0.9, 0.9),
                           _pos((3, 4), d, 4, 0.05, 0.95)]),
    "Exponential": (lambda M, rate, x, p: _moments(M.Exponential(rate), x, p),
                    lambda d: [_pos(B2, d, 1), _pos(X, d, 2, 0.01, 3), _pos((4,), d, 3, 0.05, 0.95)]),
    "Laplace": (lambda M, loc, scale, x, p: _moments(M.Laplace(loc, scale), x, p),
                lambda d: [rand(B1, d, 1), _pos(B2, d, 2), rand(X, d, 3), _pos((3, 4), d, 4, 0.05, 0.95)]),
    "Gamma": (lambda M, c, rate, x: _moments(M.Gamma(c, rate), x),
              lambda d: [_pos(B1, d, 1, 0.5, 3), _pos(B2, d, 2), _pos(X, d, 3, 0.05, 4)]),
    "Beta": (lambda M, a, b, x: _moments(M.Beta(a, b), x, mode=False),
             lambda d: [_pos(B1, d, 1, 0.5, 3), _pos(B2, d, 2, 0.5, 3), _pos(X, d, 3, 0.05, 0.95)]),
    "Poisson": (lambda M, rate, k: (M.Poisson(rate).log_prob(k), M.Poisson(rate).mean, M.Poisson(rate).variance,
                                    M.Poisson(rate).mode),  # (no entropy: torch's has none either)
                lambda d: [_pos(B2, d, 1, 0.5, 5), np.floor(_pos(X, d, 2, 0, 6))]),
    "Bernoulli(probs)": (lambda M, p, x: _moments(M.Bernoulli(probs=p), x, mode=False),
                         lambda d: [_pos(B1, d, 1, 0.05, 0.95), (rand(X, d, 2) > 0).astype(d.np)]),
    "Bernoulli(logits)": (lambda M, logits, x: _moments(M.Bernoulli(logits=logits), x, mode=False),
                          lambda d: [rand(B2, d, 1, -3, 3), (rand(X, d, 2) > 0).astype(d.np)]),
    "Independent(Normal)": (lambda M, loc, scale, x: _moments(M.Independent(M.Normal(loc, scale), 1), x),
                            lambda d: [rand(B1, d, 1), _pos(B2, d, 2), rand(X, d, 3)]),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("name", CASES)
def test_values_and_gradients_match_torch(name, dtype):
    op, inputs = CASES[name]
    check(lambda *xs: op(D, *xs), inputs(dtype), torch_op=lambda *ts: op(TD, *ts), backend="cpu")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_gamma_cdf_matches_torch(dtype):
    """By the rate and the value (torch's gives no gradient by the concentration: neither does this)."""
    check(lambda rate, x: D.Gamma(2.5, rate).cdf(x), [_pos(B2, dtype, 1), _pos(X, dtype, 2, 0.05, 4)],
          torch_op=lambda rate, x: TD.Gamma(2.5, rate).cdf(x), backend="cpu")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("given", ["probs", "logits"])
def test_categorical_matches_torch(given, dtype):
    """log_prob at int indices broadcast against the batch (2, 3), entropy, probs and logits."""
    def op(M, w, idx):
        d = M.Categorical(**{given: w})
        return d.log_prob(idx), d.entropy(), d.probs, d.logits

    w = _pos((2, 3, 5), dtype, 1, 0.1, 2) if given == "probs" else rand((2, 3, 5), dtype, 1)
    idx = np.random.default_rng(2).integers(0, 5, (4, 2, 3)).astype(np.int32)
    check(lambda *xs: op(D, *xs), [w, idx], torch_op=lambda w, i: op(TD, w, i.long()), backend="cpu")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_one_hot_categorical_matches_torch(dtype):
    def op(M, one_hot, probs, idx):
        d = M.OneHotCategorical(probs=probs)
        return d.log_prob(one_hot(idx, 5).to(probs.dtype) if M is TD else lm.cast(one_hot(idx, 5), probs.dtype)), \
            d.entropy(), d.mean, d.variance, d.mode

    idx = np.random.default_rng(2).integers(0, 5, (4, 3)).astype(np.int32)
    check(lambda p, i: op(D, lm.one_hot, p, i), [_pos((3, 5), dtype, 1, 0.1, 2), idx],
          torch_op=lambda p, i: op(TD, torch.nn.functional.one_hot, p, i.long()), backend="cpu")


def _tril(M, a):
    """A lower-triangular factor with a positive diagonal from any square ``a`` (torch and lm alike)."""
    return M.tril(a, -1) + M.diag_embed(M.exp(M.diagonal(a, 0, -2, -1)))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("given", ["scale_tril", "covariance_matrix", "precision_matrix"])
def test_multivariate_normal_matches_torch(given, dtype):
    """loc (2, 3) against a (4, 1, 3, 3) matrix: batch (4, 2); values (5, 4, 2, 3)."""
    def op(M, lib, loc, a, x):
        low = _tril(lib, a)
        matrix = low if given == "scale_tril" else low @ low.mT + 0.5 * lib.eye(3, dtype=a.dtype)
        d = M.MultivariateNormal(loc, **{given: matrix})
        return d.log_prob(x), d.entropy(), d.mean, d.variance, d.scale_tril, d.covariance_matrix

    inputs = [rand((2, 3), dtype, 1), rand((4, 1, 3, 3), dtype, 2, -0.5, 0.5), rand((5, 4, 2, 3), dtype, 3)]
    check(lambda *xs: op(D, lm, *xs), inputs, torch_op=lambda *ts: op(TD, torch, *ts), backend="cpu",
          rtol=1e-4 if dtype == lm.float32 else None, grad_rtol=1e-3 if dtype == lm.float32 else None)


def test_modes_match_torch():
    """Bernoulli's mode is NaN at 1/2; Beta's is 1 where both concentrations are < 1 (torch's choice), NaN at
    (0.5, 1)."""
    p = np.array([0.1, 0.5, 0.7, 1.0], np.float32)
    check(lambda p: D.Bernoulli(p).mode, [p], torch_op=lambda p: TD.Bernoulli(p).mode, backend="cpu", grad=False)
    a = np.array([0.5, 0.5, 0.3, 2.0, 3.0, 0.5], np.float64)
    b = np.array([0.3, 0.7, 0.3, 0.5, 4.0, 1.0], np.float64)
    check(lambda a, b: D.Beta(a, b).mode, [a, b], torch_op=lambda a, b: TD.Beta(a, b).mode, backend="cpu",
          grad=False)


def test_numbers_broadcast_with_tensors_in_their_dtype():
    """``Normal(0., scale)``: the number takes the tensor's dtype (torch's broadcast_all)."""
    s = _pos((3,), lm.float64, 1)
    check(lambda s: D.Normal(0.0, s).log_prob(1.0), [s],
          torch_op=lambda s: TD.Normal(0.0, s).log_prob(torch.tensor(1.0, dtype=s.dtype)), backend="cpu")


def test_shapes_as_torch():
    g = lm.Graph()
    loc, scale = g.input("loc", (3, 1)), g.input("scale", (4,))
    for M, a, b in ((D, loc, scale), (TD, torch.zeros(3, 1), torch.ones(4))):
        n = M.Normal(a, b)
        assert tuple(n.batch_shape) == (3, 4) and tuple(n.event_shape) == ()
        i = M.Independent(n, 1)
        assert (tuple(i.batch_shape), tuple(i.event_shape)) == ((3,), (4,))
        e = n.expand((2, 3, 4))
        assert tuple(e.batch_shape) == (2, 3, 4) and tuple(e.sample((5,)).shape) == (5, 2, 3, 4)
        assert tuple(i.expand((2, 3)).batch_shape) == (2, 3)
    c = D.Categorical(logits=g.input("l", (2, 5)))
    assert (c.batch_shape, c.event_shape, c.sample((7,)).shape, c.sample().dtype) == ((2,), (), (7, 2), lm.int32)
    o = D.OneHotCategorical(logits=g.input("l2", (2, 5)))
    assert (o.batch_shape, o.event_shape, o.sample((7,)).shape) == ((2,), (5,), (7, 2, 5))
    m = D.MultivariateNormal(g.input("m", (3,)), scale_tril=g.input("L", (2, 3, 3)))
    assert (m.batch_shape, m.event_shape, m.rsample((4,)).shape) == ((2,), (3,), (4, 2, 3))

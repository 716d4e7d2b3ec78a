"""A torch user's review of lm.distributions against torch.distributions 2.13: extreme parameters
(logits at +-30 and +-100, masked classes, probabilities of exactly 0 and 1, tiny and huge scales and
concentrations, a Poisson rate of 0), MultivariateNormal's batch broadcasting and parameterisations,
shapes (Independent over every k, sample shapes, 0-d and empty batches), mixed inputs (two graphs,
numbers, numpy arrays, dtypes), the API surface and a VAE step under ``compile_step`` against torch's
SGD step. Values and gradients by every parameter are torch's, except where torch's are wrong: there
the mathematically defined value is written out."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.distributions as TD
from parity import TORCH_DTYPE, check, rand

import luminal as lm
import luminal.distributions as D
from luminal import nn, train


def _run(outs, **feeds):
    return lm.compile(list(outs), backend="cpu")(**feeds)


# ----------------------------------------------------------------------------------------- extreme parameters

def test_bernoulli_logits_at_30_and_100_match_torch_and_the_exact_entropy():
    """log_prob and its gradient are torch's; the entropy is the exact ``sigmoid(-|l|) (1 + |l|)`` to first
    order, where torch's (``softplus(l) - probs l``) cancels to 0 or to ``sigmoid(-l)`` (100% off)."""
    logits = np.array([-100, -30, -1, 0, 2, 30, 100], np.float32)
    x = np.array([1, 0, 1, 0, 1, 0, 1], np.float32)
    check(lambda lg, x: D.Bernoulli(logits=lg).log_prob(x), [logits, x],
          torch_op=lambda lg, x: TD.Bernoulli(logits=lg).log_prob(x), backend="cpu")
    g = lm.Graph()
    lg = g.input("l", logits.shape)
    h = D.Bernoulli(logits=lg).entropy()
    got, dh = _run([h, train.grad(h.sum(), lg)], l=logits)
    a = np.abs(logits.astype(np.float64))
    want = np.log1p(np.exp(-a)) + a / (1 + np.exp(a))  # softplus(-a) + a sigmoid(-a), no cancellation in float64
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-43)  # (float32 subnormals near 4e-42)
    l64 = logits.astype(np.float64)
    p_q = 1 / ((1 + np.exp(-l64)) * (1 + np.exp(l64)))  # p (1 - p), without 1 - p's cancellation
    np.testing.assert_allclose(dh, -l64 * p_q, rtol=1e-5, atol=1e-43)  # dH/dl = -l p (1 - p)


def test_probabilities_of_exactly_0_and_1_give_exact_log_probs():
    """Bernoulli(probs) and Categorical(probs) at a probability of 0 or 1: log_prob of the impossible value
    is -inf and of the certain one 0 (torch's clamped logits give log(eps) = -15.9 and log(1 - eps));
    the gradients are torch's (0 there: its clamp's), finite everywhere."""
    p = np.array([0, 0, 1, 1, 0.25], np.float32)
    x = np.array([0, 1, 1, 0, 1], np.float32)
    g = lm.Graph()
    pp, xx = g.input("p", (5,)), g.input("x", (5,))
    lp = D.Bernoulli(probs=pp).log_prob(xx)
    got, dp = _run([lp, train.grad(lp.sum(), pp)], p=p, x=x)
    np.testing.assert_array_equal(got[:4], [0, -math.inf, 0, -math.inf])
    np.testing.assert_allclose(got[4], math.log(0.25), rtol=1e-6)
    tp = torch.tensor(p, requires_grad=True)
    (want,) = torch.autograd.grad(TD.Bernoulli(probs=tp).log_prob(torch.tensor(x)).sum(), tp)
    np.testing.assert_allclose(dp, want.numpy(), rtol=1e-5)

    w = np.array([[2, 0, 2], [0, 5, 0], [1, 1, 2]], np.float32)  # (unnormalised: torch normalises)
    idx = np.array([1, 1, 2], np.int32)
    g = lm.Graph()
    ww, ii = g.input("w", (3, 3)), g.input("i", (3,), dtype=lm.int32)
    lp = D.Categorical(probs=ww).log_prob(ii)
    got, dw = _run([lp, train.grad(lp.sum(), ww)], w=w, i=idx)
    np.testing.assert_array_equal(got[:2], [-math.inf, 0])
    np.testing.assert_allclose(got[2], math.log(0.5), rtol=1e-6)
    tw = torch.tensor(w, requires_grad=True)
    (want,) = torch.autograd.grad(TD.Categorical(probs=tw).log_prob(torch.tensor(idx).long()).sum(), tw)
    np.testing.assert_allclose(dw, want.numpy(), rtol=1e-5, atol=1e-6)
    assert np.isfinite(dw).all()


def test_categorical_logits_with_masked_classes_and_extremes_match_torch():
    """A -inf logit (a masked class), logits at +-30 and +-100: log_prob, entropy, probs and logits, with
    gradients by the logits."""
    logits = np.array([[0, -np.inf, 1], [30, -30, 0], [100, -100, 0]], np.float32)
    idx = np.array([[0, 1, 2], [2, 0, 1]], np.int32)

    def op(M, lg, i):
        d = M.Categorical(logits=lg)
        return d.log_prob(i), d.entropy(), d.probs, d.logits

    check(lambda lg, i: op(D, lg, i), [logits, idx], torch_op=lambda lg, i: op(TD, lg, i.long()), backend="cpu",
          rtol=1e-5, atol=1e-30)


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16], ids=lambda d: d.name)
def test_low_precision_parameters_are_accepted_as_torchs(dtype):
    """float16/bfloat16 logits and Normal parameters: torch's values (within the dtype's resolution)."""
    logits = rand((2, 5), dtype, 1, -3, 3)
    idx = np.array([0, 4], np.int32)

    def cat(M, lg, i):
        d = M.Categorical(logits=lg)
        return d.log_prob(i), d.entropy()

    check(lambda lg, i: cat(D, lg, i), [logits, idx], dtypes=[dtype, lm.int32],
          torch_op=lambda lg, i: cat(TD, lg, i.long()), backend="cpu", rtol=2e-2, atol=2e-2, grad=False)
    x = (rand((3,), lm.float32, 2) > 0).astype(np.float32)
    check(lambda lg, x: (D.Bernoulli(logits=lg).log_prob(x), D.Bernoulli(logits=lg).entropy()),
          [rand((3,), dtype, 3), lm.core.dtype.to_storage(x, dtype)], dtypes=[dtype, dtype],
          torch_op=lambda lg, x: (TD.Bernoulli(logits=lg).log_prob(x), TD.Bernoulli(logits=lg).entropy()),
          backend="cpu", rtol=2e-2, atol=2e-2, grad=False)
    check(lambda m, s, x: D.Normal(m, s).log_prob(x),
          [rand((3,), dtype, 4), rand((3,), dtype, 5, 0.5, 2), rand((3,), dtype, 6)], dtypes=[dtype] * 3,
          torch_op=lambda m, s, x: TD.Normal(m, s).log_prob(x), backend="cpu", rtol=2e-2, atol=2e-2, grad=False)


def test_multivariate_normal_of_16_bit_parameters_is_a_clear_error():
    """torch's MultivariateNormal has no half-precision Cholesky/solve on the CPU either; luminal says so
    when the distribution is made (it named solve_triangular at log_prob)."""
    g = lm.Graph()
    for dtype in (lm.float16, lm.bfloat16):
        with pytest.raises(TypeError, match=rf"MultivariateNormal: needs float32 or float64.*of {dtype.name}"):
            D.MultivariateNormal(g.input(f"l{dtype.name}", (3,), dtype=dtype),
                                 scale_tril=g.input(f"s{dtype.name}", (3, 3), dtype=dtype))


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64], ids=lambda d: d.name)
def test_tiny_huge_scales_and_extreme_concentrations_match_torch(dtype):
    """Normal with scales 1e-20 and 1e20; Gamma and Beta with concentrations 1e-3 and 1e3 (lgamma and
    digamma far from 1): log_prob, entropy and the gradients by every parameter."""
    big = 1e20 if dtype == lm.float32 else 1e200
    check(lambda m, s, x: (D.Normal(m, s).log_prob(x), D.Normal(m, s).entropy()),
          [np.zeros(2, dtype.np), np.array([1 / big, big], dtype.np), np.array([1 / big, big], dtype.np)],
          torch_op=lambda m, s, x: (TD.Normal(m, s).log_prob(x), TD.Normal(m, s).entropy()), backend="cpu")
    conc = np.array([1e-3, 1e3, 1e-3, 1e3], dtype.np)
    rate = np.array([1, 1, 1e3, 1e-3], dtype.np)
    check(lambda c, r, x: (D.Gamma(c, r).log_prob(x), D.Gamma(c, r).entropy()),
          [conc, rate, np.array([0.5, 1e3, 1e-6, 1e6], dtype.np)],
          torch_op=lambda c, r, x: (TD.Gamma(c, r).log_prob(x), TD.Gamma(c, r).entropy()), backend="cpu",
          rtol=1e-5 if dtype == lm.float64 else 1e-4, atol=1e-4 if dtype == lm.float32 else None,
          grad_rtol=1e-3 if dtype == lm.float32 else None, grad_atol=1e-5 if dtype == lm.float32 else None)
    if dtype == lm.float64:  # (float32's lgamma(a) + lgamma(b) - lgamma(a + b) cancels at a = b = 1e3, torch's too)
        b = np.array([1e-3, 1e3, 1e3, 1e-3], dtype.np)
        check(lambda a, b, x: (D.Beta(a, b).log_prob(x), D.Beta(a, b).entropy()),
              [conc, b, np.array([0.5, 0.5, 1e-6, 0.999], dtype.np)],
              torch_op=lambda a, b, x: (TD.Beta(a, b).log_prob(x), TD.Beta(a, b).entropy()), backend="cpu",
              rtol=1e-8, atol=1e-8, grad_rtol=1e-6)


def test_poisson_rate_zero():
    """Rate 0: log P(0) = 0 and its gradient -1 (d(-rate)/d rate; torch's is NaN: its xlogy's 0/0), log P(3)
    = -inf; a large rate as torch's."""
    g = lm.Graph()
    r, k = g.input("r", (4,), dtype=lm.float64), g.input("k", (4,), dtype=lm.float64)
    lp = D.Poisson(r).log_prob(k)
    got, dr = _run([lp, train.grad(lp.sum(), r)], r=np.array([0, 0, 1e6, 2.5]), k=np.array([0, 3, 1e6, 0]))
    want = TD.Poisson(torch.tensor([0, 0, 1e6, 2.5], dtype=torch.float64)).log_prob(
        torch.tensor([0, 3, 1e6, 0], dtype=torch.float64)).numpy()
    np.testing.assert_array_equal(got[:2], [0, -math.inf])
    np.testing.assert_allclose(got[2:], want[2:], rtol=1e-12)
    np.testing.assert_allclose(dr, [-1, math.inf, 0, -1], atol=1e-12)


def test_support_edges_match_torch():
    """Exponential and Gamma(1) at 0, Uniform at low (inside) and high (-inf: torch's), Laplace at loc,
    Beta(1, 1) at 0 and 1, with the gradients by the parameters."""
    check(lambda r: (D.Exponential(r).log_prob(0.0), D.Gamma(1.0, r).log_prob(0.0)),
          [np.array([0.5, 2.0], np.float64)],
          torch_op=lambda r: (TD.Exponential(r).log_prob(torch.zeros((), dtype=r.dtype)),
                              TD.Gamma(1.0, r).log_prob(torch.zeros((), dtype=r.dtype))), backend="cpu")
    check(lambda lo, hi, x: D.Uniform(lo, hi).log_prob(x),
          [np.array([-1.0, -1.0]), np.array([3.0, 3.0]), np.array([-1.0, 3.0])],
          torch_op=lambda lo, hi, x: TD.Uniform(lo, hi).log_prob(x), backend="cpu")
    check(lambda m, s: D.Laplace(m, s).log_prob(m), [np.array([0.5, -1.0]), np.array([1.0, 2.0])],
          torch_op=lambda m, s: TD.Laplace(m, s).log_prob(m), backend="cpu")
    check(lambda a, x: D.Beta(a, a).log_prob(x), [np.ones(2), np.array([0.0, 1.0])],
          torch_op=lambda a, x: TD.Beta(a, a).log_prob(x), backend="cpu")


# ------------------------------------------------------------------------------------------ MultivariateNormal

def _spd(rng, n, batch=()):
    a = rng.normal(size=(*batch, n, n))
    return a @ np.swapaxes(a, -1, -2) + 0.5 * np.eye(n)


@pytest.mark.parametrize("loc_shape, matrix_batch", [((2, 3), ()), ((3,), (2,)), ((4, 1, 3), (2,))])
def test_mvn_batch_broadcasting_matches_torch(loc_shape, matrix_batch):
    """loc (B, D) with one (D, D) scale_tril and vice versa: log_prob, entropy, rsample's shape and the
    gradients by loc and by scale_tril (its lower triangle: ``tril`` of the input), float64."""
    rng = np.random.default_rng(0)
    tril = np.linalg.cholesky(_spd(rng, 3, matrix_batch))
    loc, x = rng.normal(size=loc_shape), rng.normal(size=(5, 1, 1, 3))

    def op(M, lib, loc, tril, x):
        d = M.MultivariateNormal(loc, scale_tril=lib.tril(tril))
        return d.log_prob(x), d.entropy()

    check(lambda *a: op(D, lm, *a), [loc, tril, x], torch_op=lambda *a: op(TD, torch, *a), backend="cpu")
    g = lm.Graph()
    d = D.MultivariateNormal(g.input("l", loc_shape, dtype=lm.float64),
                             scale_tril=g.input("s", tril.shape, dtype=lm.float64))
    batch = tuple(TD.MultivariateNormal(torch.tensor(loc), scale_tril=torch.tensor(tril)).batch_shape)
    assert d.batch_shape == batch
    assert d.rsample((6, 2)).shape == (6, 2, *batch, 3) and d.rsample(4).shape == (4, *batch, 3)


def test_mvn_gradient_by_a_raw_scale_tril_over_a_broadcast_batch():
    """(It was NaN in the upper triangle: a unary op on a broadcast of one element of scale_tril ran
    on the whole node, ``ops/core.py``'s ``_under_broadcast``; test_unary_on_broadcast.py has the
    minimal case.)"""
    rng = np.random.default_rng(0)
    check(lambda m, L, x: D.MultivariateNormal(m, scale_tril=L).log_prob(x),
          [rng.normal(size=(2, 3)), np.linalg.cholesky(_spd(rng, 3)), rng.normal(size=(5, 1, 1, 3))],
          torch_op=lambda m, L, x: TD.MultivariateNormal(m, scale_tril=L).log_prob(x), backend="cpu")


def test_mvn_parameterisations_agree_and_d1_is_a_normal():
    """covariance_matrix, precision_matrix and scale_tril of one Gaussian give one log_prob and entropy (also
    for an ill-conditioned covariance, eigenvalues 1 to 1e-9, in float64); D = 1 is the Normal of that
    variance."""
    rng = np.random.default_rng(1)
    q = np.linalg.qr(rng.normal(size=(4, 4)))[0]
    for cov in (_spd(rng, 4), q @ np.diag([1, 1e-3, 1e-6, 1e-9]) @ q.T):
        cov = (cov + cov.T) / 2
        x = rng.normal(size=(3, 4)) * 1e-3
        tril = np.linalg.cholesky(cov)
        outs = []
        rtol = 1e-6 if np.linalg.cond(cov) < 1e3 else 1e-5  # (inv then cholesky of a condition number of 1e9)
        for kw, m in (("covariance_matrix", cov), ("precision_matrix", np.linalg.inv(cov)), ("scale_tril", tril)):
            g = lm.Graph()
            f64 = {"dtype": lm.float64}
            d = D.MultivariateNormal(g.input("l", (4,), **f64), **{kw: g.input("m", (4, 4), **f64)})
            outs.append(_run([d.log_prob(g.input("x", (3, 4), **f64)), d.entropy()], l=np.zeros(4), m=m, x=x))
        want = TD.MultivariateNormal(torch.zeros(4, dtype=torch.float64), scale_tril=torch.tensor(tril))
        for lp, h in outs:
            np.testing.assert_allclose(lp, want.log_prob(torch.tensor(x)).numpy(), rtol=rtol)
            np.testing.assert_allclose(h, want.entropy().numpy(), rtol=rtol)
    check(lambda m, c, x: (D.MultivariateNormal(m, c).log_prob(x), D.MultivariateNormal(m, c).entropy()),
          [np.array([0.5]), np.array([[4.0]]), np.array([[1.0], [-2.0]])],
          torch_op=lambda m, c, x: (TD.Normal(m[0], c[0, 0].sqrt()).log_prob(x[:, 0]),
                                    TD.Normal(m[0], c[0, 0].sqrt()).entropy()), backend="cpu")


def test_mvn_kl_over_different_batch_shapes_matches_torch():
    rng = np.random.default_rng(2)
    a = rng.normal(size=(4, 1, 3, 3)) * 0.3
    lq = np.tril(a, -1) + np.eye(3) * np.exp(np.diagonal(a, 0, -2, -1))[..., None]
    inputs = [rng.normal(size=(2, 3)), np.linalg.cholesky(_spd(rng, 3)), rng.normal(size=(3,)), lq]
    def op(M, a, b, c, d):
        return M.kl_divergence(M.MultivariateNormal(a, scale_tril=b), M.MultivariateNormal(c, scale_tril=d))

    check(lambda *xs: op(D, *xs), inputs, torch_op=lambda *ts: op(TD, *ts), backend="cpu")


# ------------------------------------------------------------------------------------------------------ shapes

@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_independent_over_every_k_as_torch(k):
    g = lm.Graph()
    d = D.Independent(D.Normal(g.input("l", (2, 3, 4)), g.input("s", (3, 1))), k)
    t = TD.Independent(TD.Normal(torch.zeros(2, 3, 4), torch.ones(3, 1)), k)
    assert (d.batch_shape, d.event_shape) == (tuple(t.batch_shape), tuple(t.event_shape))
    assert d.log_prob(g.input("x", (5, 2, 3, 4))).shape == tuple(t.log_prob(torch.zeros(5, 2, 3, 4)).shape)
    assert d.entropy().shape == tuple(t.entropy().shape)
    assert d.sample((6,)).shape == tuple(t.sample((6,)).shape)
    assert d.expand((7, *d.batch_shape)).batch_shape == tuple(t.expand((7, *t.batch_shape)).batch_shape)
    check(lambda m, s, x: (D.Independent(D.Normal(m, s), k).log_prob(x), D.Independent(D.Normal(m, s), k).entropy()),
          [rand((2, 3, 4), lm.float32, 1), rand((3, 1), lm.float32, 2, 0.5, 2), rand((5, 2, 3, 4), lm.float32, 3)],
          torch_op=lambda m, s, x: (TD.Independent(TD.Normal(m, s), k).log_prob(x),
                                    TD.Independent(TD.Normal(m, s), k).entropy()), backend="cpu")


def test_sample_shapes_and_value_broadcasting_as_torch():
    """sample_shape as an int, a tuple, a list or a torch.Size; 0-d parameters; values of shape
    (S, *batch) and (*batch[1:]); expand then log_prob."""
    g = lm.Graph()
    d, t = D.Normal(g.input("l", (2, 3)), 1.0), TD.Normal(torch.zeros(2, 3), 1.0)
    for s in ((4,), [4, 5], torch.Size([4, 5]), ()):
        assert d.sample(s).shape == tuple(t.sample(s).shape) == d.rsample(s).shape
    assert d.sample(4).shape == (4, 2, 3) == d.rsample(4).shape  # (an int, which torch's refuses)
    for i, shape in enumerate(((5, 2, 3), (3,), (5, 1, 1))):
        assert d.log_prob(g.input(f"x{i}", shape)).shape == tuple(t.log_prob(torch.zeros(shape)).shape)
    z = D.Normal(g.input("m", ()), g.input("s", ()))
    assert (z.batch_shape, z.sample().shape, z.sample(3).shape, z.entropy().shape) == ((), (), (3,), ())
    check(lambda m, s, x: D.Normal(m, s).expand((2, 3)).log_prob(x),
          [rand((3,), lm.float32, 1), rand((3,), lm.float32, 2, 0.5, 2), rand((2, 3), lm.float32, 3)],
          torch_op=lambda m, s, x: TD.Normal(m, s).expand((2, 3)).log_prob(x), backend="cpu")


@pytest.mark.parametrize("name", ["Normal", "Bernoulli", "Gamma", "Beta", "Uniform", "Categorical",
                                  "OneHotCategorical", "MultivariateNormal", "Independent"])
def test_an_empty_batch_gives_empty_results(name):
    """A batch dim of size 0 (torch's empty results): sample, log_prob of it and entropy. Categorical and
    MultivariateNormal failed while validating (a constraint reshaped its (0, K) check to (0, -1))."""
    g = lm.Graph()
    shape = (0, 3) if name in ("Categorical", "OneHotCategorical", "MultivariateNormal", "Independent") else (0,)
    x = g.input("x", shape)
    d = {"Normal": lambda: D.Normal(x, 1.0), "Bernoulli": lambda: D.Bernoulli(logits=x),
         "Gamma": lambda: D.Gamma(x + 1, 1.0), "Beta": lambda: D.Beta(x + 1, 1.0), "Uniform": lambda: D.Uniform(x, 1.0),
         "Categorical": lambda: D.Categorical(logits=x), "OneHotCategorical": lambda: D.OneHotCategorical(logits=x),
         "MultivariateNormal": lambda: D.MultivariateNormal(x, scale_tril=lm.eye(3)),
         "Independent": lambda: D.Independent(D.Normal(x, 1.0), 1)}[name]()
    s = d.sample((2,))
    got = _run([s, d.log_prob(s), d.entropy()], x=np.zeros(shape, np.float32))
    assert [a.shape for a in got] == [(2, *d.batch_shape, *d.event_shape), (2, 0), (0,)]


# ------------------------------------------------------------------------------------------------ mixed inputs

def test_parameters_of_two_graphs_are_an_error_naming_the_distribution():
    """torch's tensors have no graphs; luminal's parameters must share one: the error names the
    distribution when it is made (it was the first op that met both, at log_prob: 'div'), log_prob's value
    of another graph names log_prob, and kl_divergence of distributions of two graphs names itself."""
    g1, g2 = lm.Graph(), lm.Graph()
    a, b = g1.input("a", (3,)), g2.input("b", (3,))
    with pytest.raises(ValueError, match="Normal: the parameters belong to different graphs"):
        D.Normal(a, b)
    with pytest.raises(ValueError, match="MultivariateNormal: the parameters belong to different graphs"):
        D.MultivariateNormal(a, scale_tril=g2.input("L", (3, 3)))
    with pytest.raises(ValueError, match=r"Normal.log_prob: the value and the distribution's parameters belong"):
        D.Normal(a, 1.0).log_prob(b)
    with pytest.raises(ValueError, match=r"Categorical.log_prob: the value and the distribution's parameters"):
        D.Categorical(logits=a).log_prob(g2.input("i", (), dtype=lm.int32))
    with pytest.raises(ValueError, match=r"kl_divergence: p \(Normal\) and q \(Normal\) belong to different graphs"):
        D.kl_divergence(D.Normal(a, 1.0), D.Normal(b, 1.0))
    # a Parameter, numbers and a host distribution join the graph they meet, as before
    w = nn.Parameter(np.full(3, 2.0, np.float32))
    lp = D.Normal(a, w).log_prob(0.0) + D.Normal(0.0, 1.0).log_prob(a)
    got, dw = _run([lp, train.grad(lp.sum(), w)], a=np.ones(3, np.float32))
    want = TD.Normal(torch.ones(3), torch.full((3,), 2.0, requires_grad=True))
    np.testing.assert_allclose(got, (want.log_prob(torch.zeros(3)) + TD.Normal(0.0, 1.0).log_prob(torch.ones(3)))
                               .detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(dw, np.full(3, -0.5 + 0.125), rtol=1e-6)  # d/ds of -log s - 1 / (2 s^2) at s = 2


def test_numbers_numpy_and_dtype_promotion():
    """Python ints promote to float32 (torch's default dtype); float64 parameters with a float32 value give
    float64 (torch's promotion); numpy arrays are refused with a TypeError naming the distribution (torch
    refuses them too, with a ValueError)."""
    d = D.Normal(0, 1)
    assert d.loc.dtype == lm.float32 and d.log_prob(1).dtype == lm.float32
    assert TD.Normal(0, 1).loc.dtype == TORCH_DTYPE[lm.float32]
    g = lm.Graph()
    lp = D.Normal(g.input("m", (3,), dtype=lm.float64), 1).log_prob(g.input("x", (3,)))
    assert lp.dtype == lm.float64
    assert TD.Normal(torch.zeros(3, dtype=torch.float64), 1).log_prob(torch.zeros(3)).dtype == torch.float64
    with pytest.raises(ValueError):
        TD.Normal(np.zeros(3), 1.0)
    with pytest.raises(TypeError, match="Normal: the parameters must be tensors, Parameters or numbers, got ndarray"):
        D.Normal(np.zeros(3), 1.0)
    with pytest.raises(TypeError, match="Normal.log_prob: expects a tensor, got ndarray"):
        D.Normal(0.0, 1.0).log_prob(np.zeros(3))


# --------------------------------------------------------------------------------------------------------- API

def test_validation_switches():
    """validate_args=False skips the checks (NaN results as torch's); set_default_validate_args changes the
    default for distributions made afterwards and refuses a non-bool."""
    assert math.isnan(float(lm.frontend.host.value(D.Normal(0.0, -1.0, validate_args=False).entropy())))
    assert math.isnan(float(TD.Normal(0.0, -1.0, validate_args=False).entropy()))
    try:
        D.Distribution.set_default_validate_args(False)
        D.Exponential(-1.0)
        D.Normal(0.0, 1.0).log_prob(math.nan)
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError, match="Exponential.*parameter rate"):
        D.Exponential(-1.0)
    with pytest.raises(ValueError, match="set_default_validate_args: expects True or False"):
        D.Distribution.set_default_validate_args("no")


# ------------------------------------------------------------------------------------------ a VAE compile_step

def test_a_vae_sgd_step_equals_torchs():
    """Encoder -> Normal posterior -> rsample -> decoder's Independent Normal likelihood, minus the KL to a
    standard normal prior: one SGD step of luminal's compile_step and of torch on the same weights and the
    same noise (recovered from luminal's draws) gives the same loss and the same new weights."""
    rng = np.random.default_rng(0)
    data = rng.normal(size=(8, 4)).astype(np.float32)
    lm.manual_seed(0)
    enc, dec = nn.Linear(4, 4), nn.Linear(2, 4)
    start = {n: p.data.copy() for n, p in [*(("e" + k, v) for k, v in enc.named_parameters()),
                                           *(("d" + k, v) for k, v in dec.named_parameters())]}
    g = lm.Graph()
    x = g.input("x", (8, 4))
    h = enc(x)
    q = D.Normal(h[:, :2], lm.exp(0.5 * h[:, 2:]))
    z = q.rsample()
    eps = ((z - q.loc) / q.scale).detach()
    like = D.Independent(D.Normal(dec(z), 0.5), 1)
    loss = (D.kl_divergence(q, D.Normal(0.0, 1.0)).sum(-1) - like.log_prob(x)).mean()
    step = train.compile_step(loss, train.SGD([*enc.parameters(), *dec.parameters()], lr=0.1), backend="cpu",
                              outputs=[eps])
    got_loss, noise = step(x=data)

    tp = {k: torch.tensor(v, requires_grad=True) for k, v in start.items()}
    tx = torch.tensor(data)
    th = tx @ tp["eweight"].T + tp["ebias"]
    tq = TD.Normal(th[:, :2], torch.exp(0.5 * th[:, 2:]))
    tz = tq.loc + tq.scale * torch.tensor(noise)
    tlike = TD.Independent(TD.Normal(tz @ tp["dweight"].T + tp["dbias"], 0.5), 1)
    tloss = (TD.kl_divergence(tq, TD.Normal(0.0, 1.0)).sum(-1) - tlike.log_prob(tx)).mean()
    grads = dict(zip(tp, torch.autograd.grad(tloss, list(tp.values()))))
    np.testing.assert_allclose(got_loss, tloss.item(), rtol=1e-5)
    now = {"e" + k: v.data for k, v in enc.named_parameters()} | {"d" + k: v.data for k, v in dec.named_parameters()}
    for k in tp:
        np.testing.assert_allclose(now[k], start[k] - 0.1 * grads[k].numpy(), rtol=1e-5, atol=1e-6, err_msg=k)


def test_independent_support_is_torchs():
    """``independent(base support, k)``, torch's (it was the base's support: checked entry by entry, not
    per event); k = 0 keeps the base's."""
    for k in (0, 1, 2):
        d = D.Independent(D.MultivariateNormal(lm.zeros((2, 3)), lm.eye(3)), k if k < 2 else 1)
        t = TD.Independent(TD.MultivariateNormal(torch.zeros(2, 3), torch.eye(3)), k if k < 2 else 1)
        assert repr(d.support) == repr(t.support) and d.support.event_dim == t.support.event_dim
        d = D.Independent(D.Gamma(lm.ones((2, 3)), 1.0), k)
        t = TD.Independent(TD.Gamma(torch.ones(2, 3), 1.0), k)
        assert repr(d.support) == repr(t.support) and d.support.event_dim == t.support.event_dim
    x = np.array([[0.5, -1.0, 1.0], [1.0, 2.0, 3.0]], np.float32)
    (ok,) = _run([D.Independent(D.Gamma(lm.ones((2, 3)), 1.0), 1).support.check(lm.Graph().constant(x))])
    np.testing.assert_array_equal(ok, TD.Independent(TD.Gamma(torch.ones(2, 3), 1.0), 1).support.check(torch.tensor(x)))


def test_register_kl_for_a_users_distribution_without_luminal_parameters():
    """A user's Distribution subclass (no luminal parameters of its own) dispatches to its registered KL."""

    class Point(D.Distribution):
        def __init__(self, at):
            self.at = at
            super().__init__(validate_args=False)

    @D.register_kl(Point, Point)
    def _kl_point(p, q):
        return abs(p.at - q.at)

    assert D.kl_divergence(Point(1.0), Point(3.5)) == 2.5


def test_categorical_index_outside_the_classes_without_validation_is_impossible():
    """validate_args=False and an index outside [0, K) (torch's gather raises): log_prob is -inf
    (probability 0), not the log-probability of the nearest class (the clamped index's)."""
    g = lm.Graph()
    logits, i = g.input("l", (2, 3)), g.input("i", (2, 2), dtype=lm.int32)
    lp = D.Categorical(logits=logits, validate_args=False).log_prob(i)
    (got,) = _run([lp], l=np.zeros((2, 3), np.float32), i=np.array([[-1, 3], [1, 7]], np.int32))
    np.testing.assert_array_equal(got[0], [-math.inf, -math.inf])
    np.testing.assert_allclose(got[1], [-math.log(3), -math.inf])
    with pytest.raises(RuntimeError, match="out of bounds"):
        TD.Categorical(logits=torch.zeros(2, 3), validate_args=False).log_prob(torch.tensor([1, 7]))

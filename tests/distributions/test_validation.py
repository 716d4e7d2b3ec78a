"""Validation as torch's (``validate_args``, default True): invalid parameters and values outside the
support are torch's exception types with messages naming the distribution, the parameter and the
constraint; raised now where the values are known, else when a program computing the distribution's
results is called (``Graph.guard``). Also: probs/logits given both or neither, the unsupported samplers'
NotImplementedError, Parameters with no graph, ``validate_args=False``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.distributions as TD

import luminal as lm
import luminal.distributions as D
from luminal import nn


@pytest.mark.parametrize("make, match", [
    (lambda M, t: M.Normal(0.0, t([1.0, -1.0])), r"Normal.*parameter scale.*GreaterThan\(lower_bound=0.0\)"),
    (lambda M, t: M.Laplace(t([0.0]), 0.0), r"Laplace.*parameter scale.*GreaterThan"),
    (lambda M, t: M.Exponential(t([-2.0])), r"Exponential.*parameter rate"),
    (lambda M, t: M.Gamma(t([1.0]), -1.0), r"Gamma.*parameter rate"),
    (lambda M, t: M.Beta(t([0.0]), 1.0), r"Beta.*parameter concentration1"),
    (lambda M, t: M.Poisson(t([-0.5])), r"Poisson.*parameter rate.*GreaterThanEq"),
    (lambda M, t: M.Bernoulli(probs=t([0.5, 1.5])), r"Bernoulli.*parameter probs.*Interval"),
    (lambda M, t: M.Categorical(probs=t([-1.0, 2.0])), r"Categorical.*parameter probs.*Simplex"),
    (lambda M, t: M.Uniform(t([1.0]), 0.0), r"Uniform.*parameter low.*LessThan\(upper_bound=tensor of shape \(1,\)\)"),
    (lambda M, t: M.LogNormal(0.0, t([-1.0])), r"Normal.*parameter scale"),
    (lambda M, t: M.Normal(t([math.nan]), 1.0), r"Normal.*parameter loc.*Real\(\)"),
    (lambda M, t: M.MultivariateNormal(t([0.0, 0.0]), covariance_matrix=t([[1.0, 2.0], [2.0, 1.0]])),
     r"MultivariateNormal.*covariance_matrix.*PositiveDefinite"),
    (lambda M, t: M.MultivariateNormal(t([0.0, 0.0]), scale_tril=t([[1.0, 1.0], [0.0, 1.0]])),
     r"MultivariateNormal.*scale_tril.*LowerCholesky"),
])
def test_invalid_known_parameters_raise_now(make, match):
    with pytest.raises(ValueError):
        make(TD, lambda v: torch.tensor(v))
    g = lm.Graph()  # (one graph for all the parameters: those of two graphs are an error of their own)
    with pytest.raises(ValueError, match=match):
        make(D, lambda v: g.constant(np.array(v, np.float32)))
    with pytest.raises(ValueError, match=match):  # (a host tensor, made outside any graph: its values are known)
        make(D, lambda v: lm.zeros(np.shape(v)) + np.array(v, np.float32))
    D.Normal(0.0, -1.0, validate_args=False)  # no check asked for


def test_probs_and_logits_exactly_one():
    for M in (D, TD):
        for cls in (M.Bernoulli, M.Categorical, M.OneHotCategorical):
            with pytest.raises(ValueError, match="(?i)either `probs` or `logits`"):
                cls()
            with pytest.raises(ValueError, match="(?i)either `probs` or `logits`"):
                cls(probs=lm.ones(2) if M is D else torch.ones(2), logits=lm.ones(2) if M is D else torch.ones(2))
    with pytest.raises(ValueError, match="exactly one of covariance_matrix"):
        D.MultivariateNormal(lm.zeros(2), covariance_matrix=lm.eye(2), scale_tril=lm.eye(2))
    with pytest.raises(ValueError, match="(?i)exactly one of covariance_matrix"):
        TD.MultivariateNormal(torch.zeros(2))


def test_invalid_graph_parameters_raise_when_the_program_is_called():
    g = lm.Graph()
    loc, scale, x = g.input("loc", (3,)), g.input("scale", (3,)), g.input("x", (3,))
    f = lm.compile([D.Normal(loc, scale).log_prob(x)], backend="cpu")
    ok = dict(loc=np.zeros(3, np.float32), x=np.ones(3, np.float32))
    f(scale=np.ones(3, np.float32), **ok)
    with pytest.raises(ValueError, match=r"Normal.*parameter scale.*GreaterThan\(lower_bound=0.0\).*: 2 of them"):
        f(scale=np.array([1.0, 0.0, -1.0], np.float32), **ok)
    # a program of the same graph that computes nothing of the distribution is not guarded
    (y,) = lm.compile([loc * 2], backend="cpu")(loc=np.ones(3, np.float32))
    np.testing.assert_array_equal(y, 2.0)


def test_log_prob_outside_the_support():
    """Known values: now, as torch's ValueError; graph values: when the program is called."""
    for M, t in ((D, lambda v: lm.Graph().constant(np.array(v, np.float32))), (TD, torch.tensor)):
        with pytest.raises(ValueError, match=r"Exponential.*value argument.*GreaterThanEq" if M is D else None):
            M.Exponential(1.0).log_prob(t([1.0, -1.0]))
        with pytest.raises(ValueError, match=r"Bernoulli.*value argument.*Boolean" if M is D else None):
            M.Bernoulli(probs=0.3).log_prob(t([0.5]))
        with pytest.raises(ValueError, match=r"Uniform.*value argument.*Interval" if M is D else None):
            M.Uniform(0.0, 1.0).log_prob(t([1.5]))
        with pytest.raises(ValueError, match=r"Poisson.*value argument.*IntegerGreaterThanEq" if M is D else None):
            M.Poisson(2.0).log_prob(t([1.5]))
    g = lm.Graph()
    idx = g.input("i", (2,), dtype=lm.int32)
    f = lm.compile([D.Categorical(logits=g.constant(np.zeros((2, 3), np.float32))).log_prob(idx)], backend="cpu")
    np.testing.assert_allclose(f(i=np.array([0, 2], np.int32))[0], -math.log(3), rtol=1e-6)
    with pytest.raises(ValueError, match=r"Categorical.*value argument.*IntegerInterval.*: 1 of them"):
        f(i=np.array([0, 3], np.int32))
    # validate_args=False: torch's formula, unchecked (log(rate) - rate x at x = -1)
    (v,) = lm.compile([D.Exponential(1.0, validate_args=False).log_prob(g.constant(-1.0))], backend="cpu")()
    assert v == pytest.approx(1.0)


def test_value_shape_must_broadcast():
    g = lm.Graph()
    d = D.Normal(g.input("loc", (3,)), 1.0)
    with pytest.raises(ValueError, match=r"Normal.log_prob: the value's shape \(4,\) does not broadcast"):
        d.log_prob(g.input("x", (4,)))


def test_unsupported_samplers_name_torchs():
    with pytest.raises(NotImplementedError, match="Bernoulli has no rsample"):
        D.Bernoulli(probs=0.5).rsample()


def test_parameters_join_the_graph_and_need_one():
    w = nn.Parameter(np.array([0.5, 2.0], np.float32))
    with pytest.raises(TypeError, match="Normal: .*has no graph to join"):
        D.Normal(0.0, w)
    g = lm.Graph()
    x = g.input("x", (2,))
    d = D.Normal(x, w)  # (the Parameter joins x's graph: its current values, its gradient)
    (lp,) = lm.compile([d.log_prob(g.constant(np.zeros(2, np.float32)))], backend="cpu")(x=np.ones(2, np.float32))
    want = TD.Normal(torch.ones(2), torch.tensor([0.5, 2.0])).log_prob(torch.zeros(2)).numpy()
    np.testing.assert_allclose(lp, want, rtol=1e-6)
    with pytest.raises(TypeError, match="Normal: the parameters must be tensors, Parameters or numbers"):
        D.Normal("0", 1.0)


def test_default_validation_can_be_switched_off():
    try:
        D.Distribution.set_default_validate_args(False)
        D.Normal(0.0, -1.0)
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Normal(0.0, -1.0)


def test_uniform_support_is_closed_as_torchs():
    """torch's Uniform support is the closed interval: log_prob at ``high`` is -inf, no error."""
    g = lm.Graph()
    (lp,) = lm.compile([D.Uniform(0.0, 1.0).log_prob(g.constant(np.array([0.0, 1.0], np.float32)))],
                       backend="cpu")()
    want = TD.Uniform(0.0, 1.0).log_prob(torch.tensor([0.0, 1.0])).numpy()
    np.testing.assert_array_equal(lp, want)
    np.testing.assert_array_equal(lp, [0.0, -math.inf])


def test_a_value_check_guards_only_its_own_result():
    """log_prob's support check of a graph value guards that log_prob, not the distribution's other
    results (a program computing the entropy and reading the same value is not refused)."""
    g = lm.Graph()
    rate, x = g.input("rate", (2,)), g.input("x", (2,))
    d = D.Exponential(rate)
    lp = d.log_prob(x)
    bad = dict(rate=np.ones(2, np.float32), x=np.array([1.0, -1.0], np.float32))
    entropy, twice = lm.compile([d.entropy(), x * 2], backend="cpu")(**bad)
    np.testing.assert_allclose(entropy, 1.0)
    with pytest.raises(ValueError, match=r"Exponential.*value argument.*GreaterThanEq.*: 1 of them"):
        lm.compile([lp], backend="cpu")(**bad)


def test_symbolic_batch_with_constant_parameters():
    """A constant parameter broadcast against a symbolic batch ("B") cannot be evaluated now (its shape
    has no value yet): it is checked when the program is called, as a graph input is."""
    g = lm.Graph()
    mu = g.input("mu", ("B", 2))
    good = D.MultivariateNormal(mu, scale_tril=g.constant(np.eye(2, dtype=np.float32)))
    bad = D.MultivariateNormal(mu, scale_tril=g.constant(-np.eye(2, dtype=np.float32)))
    q = D.Normal(mu, 1.0)
    f = lm.compile([good.log_prob(mu), D.kl_divergence(q, D.Normal(0.0, 1.0)), q.rsample((3,))], backend="cpu")
    lp, kl, z = f(mu=np.zeros((5, 2), np.float32))
    np.testing.assert_allclose(lp, -math.log(2 * math.pi), rtol=1e-6)
    assert kl.shape == (5, 2) and z.shape == (3, 5, 2)
    with pytest.raises(ValueError, match=r"MultivariateNormal.*scale_tril.*LowerCholesky.*: 5 of them"):
        lm.compile([bad.log_prob(mu)], backend="cpu")(mu=np.zeros((5, 2), np.float32))

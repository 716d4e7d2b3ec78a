"""Sampling: seeded large samples have the distribution's moments (tolerances of several standard
errors of the sample size N), ``rsample``'s gradients are the reparameterisation's (checked by
identities on the same draws), ``sample`` gives no gradient, and a VAE step (``rsample`` +
``kl_divergence``, compiled with ``compile_step``) trains."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import luminal as lm
import luminal.distributions as D
from luminal import nn, train
from luminal.train.autograd import has_grad

N = 100_000
SE = 6 / math.sqrt(N)  # six standard errors (per unit of standard deviation)


def _draw(make, shapes, values, sample_shape=(N,)):
    """Samples of the distribution ``make(*inputs)`` (inputs of ``shapes`` fed ``values``), float64."""
    lm.manual_seed(0)
    g = lm.Graph()
    xs = [g.input(f"p{i}", np.shape(v), dtype=lm.float64) for i, v in enumerate(values)]
    (s,) = lm.compile([make(*xs).sample(sample_shape)], backend="cpu")(
        **{f"p{i}": np.asarray(v, np.float64) for i, v in enumerate(values)})
    return np.asarray(s, np.float64)


@pytest.mark.parametrize("name, make, values, mean, var", [
    ("Normal", D.Normal, [[-1.0, 2.0], [0.5, 3.0]], [-1.0, 2.0], [0.25, 9.0]),
    ("LogNormal", D.LogNormal, [[0.0, 0.5], [0.25, 0.5]], [math.exp(0.25**2 / 2), math.exp(0.5 + 0.125)],
     [math.expm1(0.0625) * math.exp(0.0625), math.expm1(0.25) * math.exp(1.25)]),
    ("Uniform", D.Uniform, [[-1.0, 2.0], [3.0, 2.5]], [1.0, 2.25], [16 / 12, 0.25 / 12]),
    ("Exponential", D.Exponential, [[0.5, 4.0]], [2.0, 0.25], [4.0, 1 / 16]),
    ("Laplace", D.Laplace, [[1.0, -2.0], [0.5, 2.0]], [1.0, -2.0], [0.5, 8.0]),
    ("Bernoulli", lambda p: D.Bernoulli(probs=p), [[0.2, 0.7]], [0.2, 0.7], [0.16, 0.21]),
])
def test_sample_moments(name, make, values, mean, var):
    s = _draw(make, None, values)
    assert s.shape == (N, 2)
    sd = np.sqrt(var)
    np.testing.assert_array_less(np.abs(s.mean(0) - mean), SE * sd)
    # the variance's standard error: sqrt((mu4 - var^2) / N), mu4 at most 25 var^2 for these (LogNormal's kurtosis)
    np.testing.assert_array_less(np.abs(s.var(0) - var), 6 * 5 * np.array(var) / math.sqrt(N))
    if name == "Bernoulli":
        assert set(np.unique(s)) == {0.0, 1.0}
    if name in ("Exponential", "LogNormal"):
        assert s.min() >= 0
    if name == "Uniform":
        assert (s >= [-1.0, 2.0]).all() and (s < [3.0, 2.5]).all()


def _ks_uniform(u: np.ndarray) -> float:
    """The Kolmogorov-Smirnov statistic of ``u`` against the uniform distribution on [0, 1]."""
    u = np.sort(u.ravel())
    i = np.arange(1, len(u) + 1)
    return float(max((i / len(u) - u).max(), (u - (i - 1) / len(u)).max()))


def test_gamma_and_beta_samples():
    """Gamma draws (Marsaglia-Tsang, boosted below shape 1): torch's cdf of them is uniform (KS at a
    tail probability of 1e-9: 0.0103 for N = 1e5); Beta draws (two Gammas) have the Beta's moments."""
    conc, rate = np.array([0.05, 0.5, 1.0, 2.5, 30.0]), np.array([1.0, 2.0, 0.5, 1.0, 3.0])
    s = _draw(D.Gamma, None, [conc, rate])
    assert s.shape == (N, 5) and (s > 0).all()
    u = torch.special.gammainc(torch.from_numpy(conc), torch.from_numpy(s * rate)).numpy()
    for k in range(5):
        assert _ks_uniform(u[:, k]) < 0.011, (conc[k], _ks_uniform(u[:, k]))
    b = _draw(D.Beta, None, [conc, rate])
    assert (b > 0).all() and (b < 1).all()
    total = conc + rate
    mean, var = conc / total, conc * rate / (total**2 * (total + 1))
    np.testing.assert_array_less(np.abs(b.mean(0) - mean), SE * np.sqrt(var))
    # the variance's standard error sqrt((mu4 - var**2) / N), mu4 estimated (Beta(0.05, 1)'s kurtosis is 19.5)
    mu4 = ((b - b.mean(0)) ** 4).mean(0)
    np.testing.assert_array_less(np.abs(b.var(0) - var), 6 * np.sqrt((mu4 - var**2) / N))


def test_categorical_and_one_hot_frequencies():
    """Each index comes with its probability; a zero probability never comes."""
    p = np.array([0.1, 0.2, 0.3, 0.4, 0.0])
    for make in (lambda w: D.Categorical(probs=w), lambda w: D.Categorical(logits=lm.log(w))):
        s = _draw(make, None, [p * 3])  # (unnormalised weights)
        counts = np.bincount(s.astype(np.int64).ravel(), minlength=5) / N
        np.testing.assert_array_less(np.abs(counts - p), SE * np.sqrt(p * (1 - p)) + 1e-12)
    oh = _draw(lambda w: D.OneHotCategorical(probs=w), None, [p], sample_shape=(N,))
    assert oh.shape == (N, 5) and (oh.sum(-1) == 1).all()
    np.testing.assert_array_less(np.abs(oh.mean(0) - p), SE * np.sqrt(p * (1 - p)) + 1e-12)


def test_multivariate_normal_sample_covariance():
    low = np.array([[1.0, 0.0, 0.0], [0.5, 2.0, 0.0], [-1.0, 0.3, 0.5]])
    loc = np.array([1.0, -2.0, 0.5])
    s = _draw(lambda m, L: D.MultivariateNormal(m, scale_tril=L), None, [loc, low])
    cov = low @ low.T
    np.testing.assert_array_less(np.abs(s.mean(0) - loc), SE * np.sqrt(np.diag(cov)))
    # each covariance entry's standard error is at most sqrt(2 / N) * (the product of the two stds)
    sd = np.sqrt(np.diag(cov))
    np.testing.assert_array_less(np.abs(np.cov(s.T) - cov), 6 * math.sqrt(2 / N) * np.outer(sd, sd))


def _rsample_grads(make, values, identities, n=1000):
    """The gradients of ``sum(rsample)`` by each parameter, and ``identities(x, *params)`` computed on
    the same draws ``x`` (one program call): each pair must agree."""
    g = lm.Graph()
    ps = [g.input(f"p{i}", np.shape(v), dtype=lm.float64) for i, v in enumerate(values)]
    x = make(*ps).rsample((n,))
    grads = [train.grad(x.sum(), p) for p in ps]
    want = identities(x, *ps)
    out = lm.compile([*grads, *want], backend="cpu")(**{f"p{i}": np.asarray(v, np.float64)
                                                         for i, v in enumerate(values)})
    k = len(grads)
    for got, expect in zip(out[:k], out[k:]):
        np.testing.assert_allclose(got, expect, rtol=1e-9, atol=1e-9)


def test_rsample_gradients_are_the_reparameterisations():
    n = 1000
    # Normal, x = loc + scale eps: d sum(x) / d loc = n, / d scale = sum((x - loc) / scale)
    _rsample_grads(D.Normal, [[0.5, -1.0], [2.0, 0.3]],
                   lambda x, loc, s: [lm.full_like(loc, float(n)), ((x - loc) / s).sum(0)])
    _rsample_grads(D.Laplace, [[0.5, -1.0], [2.0, 0.3]],
                   lambda x, loc, s: [lm.full_like(loc, float(n)), ((x - loc) / s).sum(0)])
    # LogNormal, x = exp(loc + scale eps): d/d loc = sum(x), d/d scale = sum(x (log x - loc) / scale)
    _rsample_grads(D.LogNormal, [[0.5, -1.0], [0.5, 0.3]],
                   lambda x, loc, s: [x.sum(0), (x * (lm.log(x) - loc) / s).sum(0)])
    # Exponential, x = E / rate: d/d rate = -sum(x) / rate
    _rsample_grads(D.Exponential, [[0.5, 3.0]], lambda x, r: [-x.sum(0) / r])
    # Uniform, x = low + u (high - low): d/d low = sum((high - x) / (high - low)), d/d high = sum((x - low) / ...)
    _rsample_grads(D.Uniform, [[-1.0, 0.0], [1.0, 0.5]],
                   lambda x, lo, hi: [((hi - x) / (hi - lo)).sum(0), ((x - lo) / (hi - lo)).sum(0)])
    # MultivariateNormal, x = loc + L eps: d/d loc = n; d/d L[i, j] = sum over draws of eps_j
    low = [[1.0, 0.0], [0.5, 2.0]]

    def mvn_identities(x, loc, L):  # noqa: N803
        eps = lm.linalg.solve_triangular(L, (x - loc).unsqueeze(-1), upper=False).squeeze(-1).sum(0)
        return [lm.full_like(loc, float(n)), eps.unsqueeze(0).expand(2, 2)]

    _rsample_grads(lambda m, L: D.MultivariateNormal(m, scale_tril=L), [[0.5, -1.0], low], mvn_identities)


def test_rsample_mean_gradient_is_one_and_scale_free_noise():
    """d/d loc of mean(rsample) is 1; (x - loc) / scale is the noise, whose gradient by scale is 0."""
    g = lm.Graph()
    loc, scale = g.input("loc", ()), g.input("scale", ())
    x = D.Normal(loc, scale).rsample((500,))
    dl = train.grad(x.mean(), loc)
    ds = train.grad(((x - loc) / scale).mean(), scale)
    got = lm.compile([dl, ds], backend="cpu")(loc=np.float32(0.3), scale=np.float32(1.7))
    np.testing.assert_allclose(got[0], 1.0, rtol=1e-5)
    np.testing.assert_allclose(got[1], 0.0, atol=1e-6)


def test_sample_gives_no_gradient():
    g = lm.Graph()
    loc = g.input("loc", (2,))
    s = D.Normal(loc, 1.0).sample((3,))
    assert not has_grad(s.sum(), [loc])[0]
    assert has_grad(D.Normal(loc, 1.0).rsample((3,)).sum(), [loc])[0]


def test_a_vae_step_trains():
    """An encoder's Normal posterior, ``rsample`` into a decoder, reconstruction + KL to the standard
    normal prior, compiled by ``compile_step``: the loss falls well below where it starts."""
    lm.manual_seed(0)
    rng = np.random.default_rng(0)
    data = (rng.normal(size=(64, 2)) @ np.array([[1.0, 0.5, -0.3, 0.8], [0.2, -1.0, 0.7, 0.1]])).astype(np.float32)
    enc, dec = nn.Linear(4, 4), nn.Linear(2, 4)
    g = lm.Graph()
    x = g.input("x", (64, 4))
    h = enc(x)
    mu, log_var = h[:, :2], h[:, 2:]
    q = D.Normal(mu, lm.exp(0.5 * log_var))
    z = q.rsample()
    recon = ((dec(z) - x) ** 2).sum(-1).mean()
    kl = D.kl_divergence(q, D.Normal(0.0, 1.0)).sum(-1).mean()
    loss = recon + kl
    step = train.compile_step(loss, train.Adam([*enc.parameters(), *dec.parameters()], lr=0.02), backend="cpu")
    losses = [step(x=data) for _ in range(300)]
    first, last = np.mean(losses[:10]), np.mean(losses[-10:])
    assert np.isfinite(losses).all() and last < 0.5 * first, (first, last)


def test_parameters_of_a_module_train_by_maximum_likelihood():
    """torch's pattern: a module's forward builds ``Normal(self.loc, self.log_scale.exp())`` from its
    Parameters (they join the call's graph) and the negative log-likelihood trains them to the data's
    mean and standard deviation."""

    class Fit(nn.Module):
        def __init__(self):
            super().__init__()
            self.loc, self.log_scale = nn.Parameter(np.zeros(2, np.float32)), nn.Parameter(np.zeros(2, np.float32))

        def forward(self, x):
            return -D.Normal(self.loc, self.log_scale.exp()).log_prob(x).mean()

    data = np.random.default_rng(1).normal([3.0, -1.0], [0.5, 2.0], size=(256, 2)).astype(np.float32)
    m = Fit()
    g = lm.Graph()
    step = train.compile_step(m(g.input("x", (256, 2))), train.Adam(m.parameters(), lr=0.05), backend="cpu")
    for _ in range(400):
        step(x=data)
    np.testing.assert_allclose(m.loc.data, data.mean(0), atol=0.02)
    np.testing.assert_allclose(np.exp(m.log_scale.data), data.std(0), rtol=0.02)


def test_expanded_distributions_sample_the_new_batch():
    g = lm.Graph()
    cases = [
        (D.Categorical(logits=g.input("l", (5,))), (4, 3), ()),
        (D.OneHotCategorical(probs=g.input("p", (5,))), (4, 3), (5,)),
        (D.LogNormal(g.input("m", ()), 1.0), (4, 3), ()),
        (D.MultivariateNormal(g.input("mu", (2,)), covariance_matrix=g.input("c", (2, 2))), (4, 3), (2,)),
        (D.Bernoulli(logits=g.input("b", (3,))), (4, 3), ()),
    ]
    for d, batch, event in cases:
        e = d.expand(batch)
        assert (e.batch_shape, e.event_shape) == (batch, event)
        assert e.sample((2,)).shape == (2, *batch, *event)
        assert e.log_prob(e.sample()).shape == batch

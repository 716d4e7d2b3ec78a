"""The gaps a review of lm.distributions left, closed: Gamma/Beta ``rsample`` (torch's implicit
gradients, ``_standard_gamma_grad``, on the same draws, and unbiased gradients of expectations),
``Poisson.sample`` (moments and the pmf, chi-square bounds), bools as numbers (``Bernoulli(True)``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.distributions as TD
from parity import TORCH_DTYPE

import luminal as lm
import luminal.distributions as D
from luminal import train
from luminal.distributions.gamma import standard_gamma_grad

N = 100_000
# torch's _standard_gamma_grad approximates d x / d alpha (series, saddle point, rational): measured
# against the implicit derivative -(dF/da) / pdf (central differences of torch.special.gammainc in
# float64) on 20,000 draws each of alpha in 0.05 ... 50, its relative error is at most 1.3e-3
APPROX = 2e-3


@pytest.mark.parametrize("dtype", [lm.float64, lm.float32], ids=lambda d: d.name)
def test_standard_gamma_grad_is_torchs(dtype):
    """Every branch of torch's formula: x < 0.8 (series), alpha > 8 (within 10% of alpha and outside),
    and the rational approximation; torch computes in double, hence float32's 1e-4."""
    xs = np.array([1e-20, 1e-5, 0.05, 0.3, 0.79, 0.81, 1.5, 3.0, 7.0, 9.0, 10.0, 11.0, 12.0, 20.0, 40.0])
    alphas = np.array([0.01, 0.1, 0.5, 1.0, 2.5, 7.9, 8.5, 10.0, 30.0])
    x, a = (v.astype(dtype.np) for v in np.meshgrid(xs, alphas))
    keep = ~((a > 8) & (x < 1e-4))  # (where torch's x**alpha underflows: its 0/0 gives 0, this the limit)
    g = lm.Graph()
    (got,) = lm.compile([standard_gamma_grad(g.input("x", x.shape, dtype=dtype), g.input("a", x.shape, dtype=dtype))],
                        backend="cpu")(x=x, a=a)
    want = torch._standard_gamma_grad(torch.from_numpy(a), torch.from_numpy(x)).numpy()
    rtol = 1e-10 if dtype is lm.float64 else 1e-4
    np.testing.assert_allclose(got[keep], want[keep], rtol=rtol, atol=0)


def _per_draw(make, values, sample_shape=()):
    """The draws of ``make(*params)`` (params float64 inputs fed ``values``, one per draw, so that each
    draw's gradient is its own) and the gradients of their sum by each parameter."""
    lm.manual_seed(0)
    g = lm.Graph()
    ps = [g.input(f"p{i}", np.shape(v), dtype=lm.float64) for i, v in enumerate(values)]
    x = make(*ps).rsample(sample_shape)
    out = lm.compile([x, *[train.grad(x.sum(), p) for p in ps]], backend="cpu")(
        **{f"p{i}": np.asarray(v, np.float64) for i, v in enumerate(values)})
    return out[0], out[1:]


def test_gamma_rsample_gradients_are_torchs_on_the_same_draws():
    """d x / d concentration = _standard_gamma_grad(c, x rate) / rate, d x / d rate = -x / rate."""
    conc = np.tile([0.3, 2.0, 20.0], (1000, 1))
    rate = np.array([0.5, 1.0, 2.0])
    x, (dc, dr) = _per_draw(D.Gamma, [conc, rate])
    assert x.shape == (1000, 3) and (x > 0).all()
    want = torch._standard_gamma_grad(torch.from_numpy(conc), torch.from_numpy(x * rate)).numpy() / rate
    np.testing.assert_allclose(dc, want, rtol=1e-9)
    np.testing.assert_allclose(dr, -(x / rate).sum(0), rtol=1e-9)


def test_gamma_rsample_gradient_by_a_broadcast_concentration_and_no_second_order():
    """A concentration of shape (3,) under 1000 draws: its gradient sums the draws' (of x**2 here,
    2 x dx/dc); the gradient of that gradient raises, as torch's."""
    c = np.array([0.5, 2.0, 9.0])
    g = lm.Graph()
    cs = g.input("c", (3,), dtype=lm.float64)
    x = D.Gamma(cs, 2.0).rsample((1000,))
    dc = train.grad(lm.square(x).sum(), cs)
    xv, dcv = lm.compile([x, dc], backend="cpu")(c=c)
    slope = torch._standard_gamma_grad(torch.from_numpy(c).expand(1000, 3), torch.from_numpy(xv * 2)).numpy() / 2
    np.testing.assert_allclose(dcv, (2 * xv * slope).sum(0), rtol=1e-9)
    with pytest.raises(NotImplementedError, match="Gamma.rsample: the gradient of rsample's gradient"):
        train.grad(dc.sum(), cs)


def _mean_within(per_draw, analytic, what):
    """The mean of per-draw gradients estimates the gradient of an expectation: within six standard
    errors of N draws, plus the approximation's bias (``APPROX`` of the mean of their sizes)."""
    est, se = per_draw.mean(0), per_draw.std(0) / math.sqrt(len(per_draw))
    tol = 6 * se + APPROX * np.abs(per_draw).mean(0)
    assert (np.abs(est - analytic) < tol).all(), (what, est, analytic, tol)


def test_gamma_rsample_moments_and_gradients_of_expectations():
    """Gamma(c, r): E[X] = c / r, Var = c / r**2; d/dc E[X**2] = (2c + 1) / r**2, d/dr E[X**2] =
    -2c(c + 1) / r**3, estimated by rsample's per-draw gradients of X**2."""
    c, r = np.array([0.2, 1.0, 3.5, 12.0]), np.array([2.0, 1.0, 0.5, 3.0])
    g = lm.Graph()
    cs, rs = g.input("c", (N, 4), dtype=lm.float64), g.input("r", (N, 4), dtype=lm.float64)
    lm.manual_seed(1)
    x = D.Gamma(cs, rs).rsample()
    y = lm.square(x)
    xv, dc, dr = lm.compile([x, train.grad(y.sum(), cs), train.grad(y.sum(), rs)], backend="cpu")(
        c=np.tile(c, (N, 1)), r=np.tile(r, (N, 1)))
    mean, var = c / r, c / r**2
    np.testing.assert_array_less(np.abs(xv.mean(0) - mean), 6 * np.sqrt(var / N))
    mu4 = ((xv - xv.mean(0)) ** 4).mean(0)  # (the sample variance's standard error sqrt((mu4 - var**2) / N))
    np.testing.assert_array_less(np.abs(xv.var(0) - var), 6 * np.sqrt((mu4 - var**2) / N))
    _mean_within(dc, (2 * c + 1) / r**2, "d/dc")
    _mean_within(dr, -2 * c * (c + 1) / r**3, "d/dr")


def test_beta_rsample_moments_and_gradients_of_expectations():
    """Beta(a, b): E[X] = a / (a + b); d/da E[X] = b / (a + b)**2, d/db E[X] = -a / (a + b)**2 (torch's
    per-draw gradients differ, another coupling: ``Beta.rsample``)."""
    a, b = np.array([0.3, 1.0, 2.5, 15.0]), np.array([0.7, 1.0, 9.0, 4.0])
    x, (da, db) = _per_draw(D.Beta, [np.tile(a, (N, 1)), np.tile(b, (N, 1))])
    assert (x > 0).all() and (x < 1).all()
    total = a + b
    mean, var = a / total, a * b / (total**2 * (total + 1))
    np.testing.assert_array_less(np.abs(x.mean(0) - mean), 6 * np.sqrt(var / N))
    mu4 = ((x - x.mean(0)) ** 4).mean(0)
    np.testing.assert_array_less(np.abs(x.var(0) - var), 6 * np.sqrt((mu4 - var**2) / N))
    _mean_within(da, b / total**2, "d/da")
    _mean_within(db, -a / total**2, "d/db")


def test_gamma_and_beta_have_rsample_and_sample_has_no_gradient():
    g = lm.Graph()
    c = g.input("c", (2,))
    for d, t in ((D.Gamma(c, 1.0), TD.Gamma), (D.Beta(c, 2.0), TD.Beta)):
        assert d.has_rsample and t.has_rsample
        assert d.rsample((3,)).shape == (3, 2) and d.sample(4).shape == (4, 2)
        assert train.autograd.has_grad(d.rsample().sum(), [c])[0]
        assert not train.autograd.has_grad(d.sample().sum(), [c])[0]


def _poisson_draws(rates, n, dtype=lm.float64):
    lm.manual_seed(2)
    g = lm.Graph()
    r = g.input("r", (len(rates),), dtype=dtype)
    (s,) = lm.compile([D.Poisson(r).sample((n,))], backend="cpu")(r=np.asarray(rates, dtype.np))
    return s


def _chi_square_ok(counts: np.ndarray, expected: np.ndarray) -> None:
    """Pearson's statistic over the bins, the tail pooled into bins of expected count >= 5, below
    ``df + 6 sqrt(2 df)`` (six standard deviations of the chi-square distribution of df degrees)."""
    big = expected >= 5
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    if exp[-1] < 5:  # (pool a small remainder into the last big bin)
        obs, exp = np.append(obs[:-2], obs[-2:].sum()), np.append(exp[:-2], exp[-2:].sum())
    stat, df = float(((obs - exp) ** 2 / exp).sum()), len(obs) - 1
    assert stat < df + 6 * math.sqrt(2 * df), (stat, df)


def _pmf(rate: float, ks: np.ndarray) -> np.ndarray:
    return np.exp([k * math.log(rate) - rate - math.lgamma(k + 1) for k in ks])


@pytest.mark.parametrize("rates", [[0.0, 0.3, 3.0, 9.9], [10.0, 27.5, 1000.0]], ids=["inversion", "ptrs"])
def test_poisson_sample_is_exact(rates):
    """Below rate 10 (inversion) and from it on (PTRS): non-negative integers with the mean and
    variance ``rate`` (within six standard errors; the sample variance's from ``mu4 = rate (1 + 3 rate)``),
    and the empirical pmf of each rate passes a chi-square test against the exact pmf."""
    n = 50_000
    s = _poisson_draws(rates, n)
    assert s.shape == (n, len(rates)) and (s >= 0).all() and (s == np.floor(s)).all()
    lam = np.array(rates)
    np.testing.assert_array_less(np.abs(s.mean(0) - lam), 6 * np.sqrt(lam / n) + 1e-12)
    np.testing.assert_array_less(np.abs(s.var(0) - lam), 6 * np.sqrt((lam * (1 + 3 * lam) - lam**2) / n) + 1e-12)
    assert (s[:, 0] == 0).all() if rates[0] == 0 else True
    for j, rate in enumerate(rates):
        if rate == 0:
            continue
        top = int(rate + 10 * math.sqrt(rate) + 10)
        ks = np.arange(top + 1)
        counts = np.bincount(s[:, j].astype(np.int64), minlength=top + 1)
        assert counts[top + 1:].sum() == 0  # (P(X > rate + 10 sd + 10) < 1e-15 for these rates)
        _chi_square_ok(counts[:top + 1].astype(np.float64), n * _pmf(rate, ks))


def test_poisson_sample_dtype_and_shapes():
    """torch's: counts in the rate's float dtype, of shape sample_shape + batch_shape; no gradient."""
    s = _poisson_draws([2.5, 40.0], 20_000, lm.float32)
    assert s.dtype == np.float32 and s.shape == (20_000, 2)
    np.testing.assert_array_less(np.abs(s.mean(0) - [2.5, 40.0]), 6 * np.sqrt(np.array([2.5, 40.0]) / 20_000))
    g = lm.Graph()
    r = g.input("r", (3,))
    assert D.Poisson(r).sample((4, 2)).shape == (4, 2, 3)
    assert not train.autograd.has_grad(D.Poisson(r).sample().sum(), [r])[0]


@pytest.mark.parametrize("make", [
    lambda M, v: M.Bernoulli(v), lambda M, v: M.Bernoulli(probs=v), lambda M, v: M.Bernoulli(logits=v),
    lambda M, v: M.Normal(v, 1.0), lambda M, v: M.Poisson(v), lambda M, v: M.Uniform(v, 2.0),
    lambda M, v: M.Gamma(True, 2.0 - v), lambda M, v: M.Exponential(True),
])
@pytest.mark.parametrize("value", [True, False])
def test_bools_are_numbers_as_torchs(make, value):
    """torch's broadcast_all takes Python bools as numbers (0.0 and 1.0, of the default float dtype)."""
    d, t = make(D, value), make(TD, value)
    assert d.batch_shape == tuple(t.batch_shape) == ()
    (mean,) = lm.compile([d.mean], backend="cpu")()
    assert mean.dtype == np.float32 and t.mean.dtype == TORCH_DTYPE[lm.float32]
    np.testing.assert_allclose(mean, t.mean.numpy(), rtol=1e-6)


def test_other_number_likes():
    """Complex numbers and strings stay refused (torch's ValueError; here a TypeError naming the family
    and the value); numpy's real scalars are taken, as numbers (torch refuses those but float64's)."""
    with pytest.raises(TypeError, match=r"Poisson: the parameters must be tensors, Parameters or numbers, got complex"):
        D.Poisson(1 + 0j)
    with pytest.raises(ValueError):
        TD.Poisson(1 + 0j)
    (got,) = lm.compile([D.Normal(np.float32(0.5), np.int64(2)).variance], backend="cpu")()
    assert got == 4.0


def test_poissons_log_factorial_is_lgamma_of_k_plus_one():
    """PTRS's ``log k!`` (a product below 10, Stirling's series from 10 on, in place of ``lgamma``) within a
    few float64 ulps of math.lgamma(k + 1) for every whole k up to 3000 (0 at k = 0 and 1)."""
    from luminal.distributions.poisson import _log_factorial

    k = np.arange(3001, dtype=np.float64)
    g = lm.Graph()
    t = g.input("k", k.shape, dtype=lm.float64)
    got = np.asarray(lm.compile(_log_factorial(t), backend="cpu")(k=k))
    want = np.array([math.lgamma(v + 1.0) for v in k])
    assert got[0] == 0.0 and got[1] == 0.0
    np.testing.assert_allclose(got[2:], want[2:], rtol=2e-15, atol=0)

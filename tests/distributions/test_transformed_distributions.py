"""Transforms (Exp, Affine, Sigmoid, Tanh, Compose and their inverses) and TransformedDistribution
against torch.distributions': the maps, their inverses and log_abs_det_jacobian, log_prob, cdf and
icdf (values and gradients by every input), shapes, rsample's gradients, the transforms' cache, KL of
two transformed distributions, LogNormal as one, and the errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.distributions as TD
from parity import check, rand

import luminal as lm
import luminal.distributions as D
from luminal import train

DTYPES = [lm.float32, lm.float64]


def _pos(shape, dtype, seed, low=0.5, high=2.0):
    return rand(shape, dtype, seed=seed, low=low, high=high)


def _maps(t, x, y):
    """A transform's results: t(x), t.inv(y), log_abs_det_jacobian(x, t(x)) and its inverse's at y."""
    fx = t(x)
    return fx, t.inv(y), t.log_abs_det_jacobian(x, fx), t.inv.log_abs_det_jacobian(y, t.inv(y))


TRANSFORMS = {
    # name: (make(M, *params) -> Transform, params(dtype), x(dtype), y(dtype): a point of the codomain)
    "Exp": (lambda M: M.ExpTransform(), lambda d: [], lambda d: rand((3, 4), d, 1), lambda d: _pos((3, 4), d, 2)),
    "Sigmoid": (lambda M: M.SigmoidTransform(), lambda d: [], lambda d: rand((3, 4), d, 1, -4, 4),
                lambda d: _pos((3, 4), d, 2, 0.05, 0.95)),
    "Tanh": (lambda M: M.TanhTransform(), lambda d: [], lambda d: rand((3, 4), d, 1, -3, 3),
             lambda d: rand((3, 4), d, 2, -0.95, 0.95)),
    "Affine(tensors)": (lambda M, loc, scale: M.AffineTransform(loc, scale), lambda d: [rand((4,), d, 3), rand(
        (3, 1), d, 4, 0.5, 2) * np.array([[1], [-1], [1]], d.np)], lambda d: rand((3, 4), d, 1), lambda d: rand(
        (3, 4), d, 2)),
    "Affine(numbers)": (lambda M: M.AffineTransform(1.5, -0.5), lambda d: [], lambda d: rand((3, 4), d, 1),
                        lambda d: rand((3, 4), d, 2)),
    "Affine(event_dim=1)": (lambda M, scale: M.AffineTransform(0.5, scale, event_dim=1),
                            lambda d: [rand((4,), d, 3, 0.5, 2)], lambda d: rand((3, 4), d, 1),
                            lambda d: rand((3, 4), d, 2)),
    "Compose(Affine, Tanh)": (lambda M, scale: M.ComposeTransform([M.AffineTransform(0.3, scale), M.TanhTransform()]),
                              lambda d: [rand((4,), d, 3, 0.5, 1.5)], lambda d: rand((3, 4), d, 1),
                              lambda d: rand((3, 4), d, 2, -0.95, 0.95)),
    "Compose(Exp, Affine(event_dim=1))": (lambda M: M.ComposeTransform([M.ExpTransform(), M.AffineTransform(
        1.0, 2.0, event_dim=1)]), lambda d: [], lambda d: rand((3, 4), d, 1), lambda d: _pos((3, 4), d, 2, 1.5, 4)),
    "Sigmoid.inv": (lambda M: M.SigmoidTransform().inv, lambda d: [], lambda d: _pos((3, 4), d, 2, 0.05, 0.95),
                    lambda d: rand((3, 4), d, 1, -4, 4)),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("name", TRANSFORMS)
def test_transforms_match_torch(name, dtype):
    make, params, x, y = TRANSFORMS[name]
    n = len(params(dtype))
    check(lambda *a: _maps(make(D, *a[:n]), *a[n:]), [*params(dtype), x(dtype), y(dtype)],
          torch_op=lambda *a: _maps(make(TD, *a[:n]), *a[n:]), backend="cpu")


def test_transform_attributes_are_torchs():
    T = TD.transforms
    for mine, theirs in ((D.ExpTransform(), T.ExpTransform()), (D.SigmoidTransform(), T.SigmoidTransform()),
                         (D.TanhTransform(), T.TanhTransform()), (D.AffineTransform(1.0, -2.0), T.AffineTransform(
                             1.0, -2.0)), (D.AffineTransform(0.0, 1.0, event_dim=2), T.AffineTransform(0.0, 1.0, 2))):
        for t, u in ((mine, theirs), (mine.inv, theirs.inv)):
            assert t.sign == u.sign and t.bijective == u.bijective and t.event_dim == u.event_dim
            assert (t.domain.event_dim, t.codomain.event_dim) == (u.domain.event_dim, u.codomain.event_dim)
        assert mine.inv.inv is mine
    compose = D.ComposeTransform([D.AffineTransform(0.0, -1.0), D.ExpTransform(), D.AffineTransform(0.0, 1.0, 1)])
    assert compose.sign == -1 and compose.domain.event_dim == 1 and compose.codomain.event_dim == 1
    assert D.ComposeTransform([D.ExpTransform()]) == D.ComposeTransform([D.ExpTransform()])
    assert D.AffineTransform(0.0, 2.0) != D.AffineTransform(0.0, 3.0)
    g = lm.Graph()
    assert D.AffineTransform(0.0, g.input("s", (5,))).forward_shape((3, 1)) == (3, 5)


def _stats(d, y, p=None):
    out = [d.log_prob(y)]
    if p is not None:
        out += [d.cdf(y), d.icdf(p)]
    return tuple(out)


DISTS = {
    # name: (make(M, *params) -> distribution, params(dtype), y(dtype), p(dtype) or None: no cdf)
    "Normal->Affine->Sigmoid": (lambda M, loc, scale, a: M.TransformedDistribution(M.Normal(loc, scale), [
        M.AffineTransform(0.5, a), M.SigmoidTransform()]), lambda d: [rand((3, 1), d, 1), _pos((4,), d, 2),
                                                                       _pos((4,), d, 3)],
        lambda d: _pos((2, 3, 4), d, 4, 0.05, 0.95), lambda d: _pos((3, 4), d, 5, 0.05, 0.95)),
    "Normal->Tanh": (lambda M, loc, scale: M.TransformedDistribution(M.Normal(loc, scale), M.TanhTransform()),
                     lambda d: [rand((3, 1), d, 1), _pos((4,), d, 2)], lambda d: rand((2, 3, 4), d, 4, -0.95, 0.95),
                     lambda d: _pos((3, 4), d, 5, 0.05, 0.95)),
    "Normal->Affine(negative)": (lambda M, loc, scale: M.TransformedDistribution(M.Normal(loc, scale), [
        M.AffineTransform(1.0, -2.0)]), lambda d: [rand((3, 1), d, 1), _pos((4,), d, 2)], lambda d: rand((3, 4), d, 4),
        lambda d: _pos((3, 4), d, 5, 0.05, 0.95)),
    "Normal->Affine(signed tensor)": (lambda M, loc, scale: M.TransformedDistribution(M.Normal(loc, 1.0), [
        M.AffineTransform(1.0, scale)]), lambda d: [rand((3, 1), d, 1), rand((4,), d, 2, 0.5, 2) * np.array(
            [1, -1, 1, -1], d.np)], lambda d: rand((3, 4), d, 4), lambda d: _pos((3, 4), d, 5, 0.05, 0.95)),
    "Uniform->Sigmoid.inv (logistic)": (lambda M, lo: M.TransformedDistribution(M.Uniform(lo, 1.0), [
        M.SigmoidTransform().inv, M.AffineTransform(0.0, 2.0)]), lambda d: [_pos((4,), d, 1, 0.0, 0.1)],
        lambda d: rand((3, 4), d, 4, -3, 3), lambda d: _pos((3, 4), d, 5, 0.2, 0.95)),
    "Normal->Affine(event_dim=1)": (lambda M, loc, scale: M.TransformedDistribution(M.Normal(loc, 1.0), [
        M.AffineTransform(0.0, scale, event_dim=1)]), lambda d: [rand((3, 4), d, 1), _pos((4,), d, 2)],
        lambda d: rand((2, 3, 4), d, 4), None),
    "Exponential->Affine(broadcast)": (lambda M, rate, loc: M.TransformedDistribution(M.Exponential(rate), [
        M.AffineTransform(loc, 3.0)]), lambda d: [_pos((), d, 1), rand((4,), d, 2, -1, 0)],
        lambda d: _pos((3, 4), d, 4, 0.1, 3), lambda d: _pos((3, 4), d, 5, 0.05, 0.95)),
    "Gamma->Exp": (lambda M, c, r: M.TransformedDistribution(M.Gamma(c, r), M.ExpTransform()),
                   lambda d: [_pos((3, 1), d, 1, 0.5, 3), _pos((4,), d, 2)], lambda d: _pos((3, 4), d, 4, 1.1, 4),
                   None),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("name", DISTS)
def test_transformed_distributions_match_torch(name, dtype):
    make, params, y, p = DISTS[name]
    inputs = [*params(dtype), y(dtype)] + ([p(dtype)] if p else [])
    n = len(params(dtype))
    check(lambda *a: _stats(make(D, *a[:n]), *a[n:]), inputs, torch_op=lambda *a: _stats(make(TD, *a[:n]), *a[n:]),
          backend="cpu")


def test_shapes_and_support_are_torchs():
    g = lm.Graph()
    for name, (make, params, _, _) in DISTS.items():
        ps = params(lm.float32)
        d = make(D, *[g.constant(v) for v in ps])
        t = make(TD, *[torch.from_numpy(v) for v in ps])
        assert (d.batch_shape, d.event_shape) == (tuple(t.batch_shape), tuple(t.event_shape)), name
        assert d.sample((2,)).shape == tuple(t.sample((2,)).shape), name
        assert d.support.event_dim == t.support.event_dim and d.has_rsample == t.has_rsample, name
        e = d.expand((5, *d.batch_shape))
        assert e.batch_shape == tuple(t.expand((5, *t.batch_shape)).batch_shape) and e.sample().shape == (
            5, *d.batch_shape, *d.event_shape), name


def test_lognormal_is_a_transformed_normal():
    d = D.LogNormal(0.5, 2.0)
    assert isinstance(d, D.TransformedDistribution) and isinstance(TD.LogNormal(0.5, 2.0), TD.TransformedDistribution)
    assert isinstance(d.base_dist, D.Normal) and d.transforms == [D.ExpTransform()]
    with pytest.raises(ValueError, match="Normal.*scale"):
        D.LogNormal(0.0, -1.0)


def test_rsample_gradients_of_an_expectation():
    """Y = exp(m + s Z): E[Y] = exp(m + s**2 / 2), whose gradients by m and s are E[Y] and s E[Y];
    rsample's per-draw gradients average to them within six standard errors of N draws."""
    n = 100_000
    m, s = 0.3, 0.5
    lm.manual_seed(3)
    g = lm.Graph()
    ms, ss = g.input("m", (n,), dtype=lm.float64), g.input("s", (n,), dtype=lm.float64)
    y = D.TransformedDistribution(D.Normal(ms, ss), [D.ExpTransform()]).rsample()
    yv, dm, ds = lm.compile([y, train.grad(y.sum(), ms), train.grad(y.sum(), ss)], backend="cpu")(
        m=np.full(n, m), s=np.full(n, s))
    mean = math.exp(m + s * s / 2)
    for got, want in ((yv, mean), (dm, mean), (ds, s * mean)):
        assert abs(got.mean() - want) < 6 * got.std() / math.sqrt(n), (got.mean(), want)


def test_cache_keeps_the_inverse_of_a_saturated_draw():
    """Tanh of Normal(0, 10) draws rounds to +-1 in float32 often: with cache_size=1 the log_prob of
    rsample's own draws inverts to the cached x (finite, torch's pattern for squashed policies); a
    fresh transform inverts atanh(+-1) = +-inf."""
    lm.manual_seed(4)
    g = lm.Graph()
    loc = g.input("loc", (1000,))
    cached = D.TransformedDistribution(D.Normal(loc, 10.0), D.TanhTransform(cache_size=1), validate_args=False)
    y = cached.rsample()
    plain = D.TransformedDistribution(D.Normal(loc, 10.0), D.TanhTransform(), validate_args=False)
    yv, lp, lp_plain, dl = lm.compile([y, cached.log_prob(y), plain.log_prob(y), train.grad(cached.log_prob(y).sum(),
                                                                                             loc)],
                                      backend="cpu")(loc=np.zeros(1000, np.float32))
    assert (np.abs(yv) == 1).any() and np.isfinite(lp).all() and np.isfinite(dl).all()
    assert not np.isfinite(lp_plain[np.abs(yv) == 1]).any()


def test_kl_of_transformed_distributions():
    """torch's: the bases' KL when the transforms are equal; NotImplementedError when they differ."""
    def make(M, a, b, c, d):
        return (M.TransformedDistribution(M.Normal(a, b), [M.ExpTransform(), M.AffineTransform(1.0, 2.0)]),
                M.TransformedDistribution(M.Normal(c, d), [M.ExpTransform(), M.AffineTransform(1.0, 2.0)]))

    t = lm.float64
    check(lambda *a: D.kl_divergence(*make(D, *a)), [rand((3, 1), t, 1), _pos((3, 1), t, 2), rand((4,), t, 3),
                                                      _pos((4,), t, 4)],
          torch_op=lambda *a: TD.kl_divergence(*make(TD, *a)), backend="cpu")
    with pytest.raises(NotImplementedError, match="different transforms"):
        D.kl_divergence(D.TransformedDistribution(D.Normal(0.0, 1.0), D.ExpTransform()),
                        D.TransformedDistribution(D.Normal(0.0, 1.0), D.TanhTransform()))


def test_errors_name_the_op():
    g = lm.Graph()
    x = g.input("x", (3,))
    with pytest.raises(ValueError, match="TransformedDistribution: transforms must be a Transform or a list"):
        D.TransformedDistribution(D.Normal(0.0, 1.0), lm.exp)
    with pytest.raises(TypeError, match="TransformedDistribution: base_distribution must be a Distribution"):
        D.TransformedDistribution(x, D.ExpTransform())
    with pytest.raises(TypeError, match="ExpTransform.__call__: expects a GraphTensor, got float"):
        D.ExpTransform()(1.0)
    with pytest.raises(ValueError, match="TanhTransform: cache_size must be 0 or 1, got 2"):
        D.TanhTransform(cache_size=2)
    with pytest.raises(TypeError, match="ComposeTransform: parts must be Transforms"):
        D.ComposeTransform([D.ExpTransform(), lm.exp])
    with pytest.raises(ValueError, match="AffineTransform: event_dim must be a non-negative int"):
        D.AffineTransform(0.0, 1.0, event_dim=-1)
    d = D.TransformedDistribution(D.Normal(x, 1.0), D.ExpTransform())
    for what in ("mean", "variance"):
        with pytest.raises(NotImplementedError):
            getattr(d, what)
    with pytest.raises(NotImplementedError):
        d.entropy()
    with pytest.raises(ValueError, match=r"expected value argument .* to satisfy the constraint"):
        D.TransformedDistribution(D.Normal(0.0, 1.0), D.SigmoidTransform()).log_prob(g.constant(np.array([1.5])))

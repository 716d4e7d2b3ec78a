"""Poisson(rate), torch.distributions' (``sample`` by inversion below rate 10, else Hormann's PTRS over a
fixed number of proposals)."""

from __future__ import annotations

import math

import numpy as np

from luminal.core import dtype as dt
from luminal.distributions import constraints
from luminal.distributions.distribution import Distribution, broadcast_all
from luminal.frontend import ops
from luminal.frontend.ops.random import uniform_fill
from luminal.frontend.tensor import GraphTensor

SMALL = 10.0  # rates below: inversion; from it on: PTRS (numpy's split)
TERMS = 50  # inversion's last count: P(Poisson(10) > 50) < 2e-19
ROUNDS = 32  # PTRS proposals per draw: each is rejected with probability below 0.25 (rate >= 10): 0.25**32 < 6e-20
_COUNTS = np.arange(TERMS + 1, dtype=np.float64)  # inversion's k = 0 .. TERMS, and log k! of each
_LOG_FACTORIALS = np.array([math.lgamma(k + 1.0) for k in range(TERMS + 1)])


def _inversion(lam: GraphTensor) -> GraphTensor:
    """Poisson(``lam``) draws for ``lam < SMALL``: the count of cdf values ``F(k)``, ``k <= TERMS``, at
    or below a uniform ``u`` (``min{k: u < F(k)}``). The pmf's terms lie along a trailing axis,
    ``exp(k log(lam) - lam - log k!)`` with the log factorials constants, summed by a cumsum: one op
    each for them all. (Written as 50 steps of ``p(k) = p(k - 1) lam / k``, the chain was 150 ops a
    draw, which compiled into a loop of stored kernels: 8 s to the first 100,000 draws, 1.1 s each
    call after.)"""
    u = uniform_fill(lam)
    logp = ops.xlogy(_COUNTS, lam.unsqueeze(-1)) - lam.unsqueeze(-1) - _LOG_FACTORIALS
    cdf = ops.cumsum(ops.exp(logp), -1)
    return ops.cast(ops.le(cdf, u.unsqueeze(-1)), lam.dtype).sum(-1)


def _ptrs(lam: GraphTensor) -> GraphTensor:
    """Poisson(``lam``) draws for ``lam >= SMALL`` by Hormann's transformed rejection with squeeze
    (PTRS, 1993, as numpy's ``random_poisson_ptrs``), exact: each draw is the first of ``ROUNDS``
    proposals accepted (the last if none is, with probability below 6e-20). The proposals of a draw
    lie along a trailing axis, one op each for them all."""
    lam = lam.unsqueeze(-1).expand(*lam.shape, ROUNDS)
    slam, loglam = ops.sqrt(lam), ops.log(lam)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    log_inv_alpha = ops.log(1.1239 + 1.1328 / (b - 3.4))
    vr = 0.9277 - 3.6224 / (b - 2)
    u, v = uniform_fill(lam) - 0.5, uniform_fill(lam)
    us = 0.5 - ops.abs(u)
    k = ops.floor((2 * a / us + b) * u + lam + 0.43)
    squeeze = ops.logical_and(ops.ge(us, 0.07), ops.le(v, vr))
    k0 = ops.clamp(k, min=0)  # (a negative k is rejected below; its lgamma is not needed)
    bound = ops.le(ops.log(v) + log_inv_alpha - ops.log(a / ops.square(us) + b),
                   -lam + k0 * loglam - _log_factorial(k0))
    tail_ok = ops.logical_and(ops.ge(k, 0), ops.logical_not(ops.logical_and(ops.lt(us, 0.013), ops.gt(v, us))))
    accept = ops.cast(ops.logical_or(squeeze, ops.logical_and(tail_ok, bound)), lam.dtype)
    first = ops.logical_and(ops.eq(accept, 1), ops.eq(ops.cumsum(accept, -1), 1))
    return ops.where(ops.gt(accept.sum(-1), 0), ops.where(first, k0, 0.0).sum(-1), k0[..., -1])


def _log_factorial(k: GraphTensor) -> GraphTensor:
    """``log k!`` of whole numbers ``k >= 0`` (float64): below 10 the log of the product ``1 * 2 * ... * k``
    (exact), from 10 on Stirling's series in ``x = k + 1`` to ``x**-13`` (its first dropped term is under
    2e-17 there). ``lgamma``, for every real, made most of a PTRS proposal's cost."""
    small = ops.lt(k, 10.0)
    prod = 1.0
    for j in range(2, 10):
        prod = prod * ops.where(ops.le(j, k), float(j), 1.0)
    x = ops.where(small, 11.0, k + 1.0)
    r = 1.0 / x
    r2 = r * r
    series = r * (1 / 12 + r2 * (-1 / 360 + r2 * (1 / 1260 + r2 * (-1 / 1680 + r2 * (1 / 1188 + r2 * (
        -691 / 360360 + r2 / 156))))))
    stirling = (x - 0.5) * ops.log(x) - x + 0.5 * math.log(2 * math.pi) + series
    return ops.where(small, ops.log(ops.cast(prod, k.dtype)), stirling)  # (9! is exact in any float)


def poisson_draws(rate: GraphTensor, shape) -> GraphTensor:
    """Poisson(``rate``) draws of ``shape`` (``rate`` broadcast to it), in float64 and then ``rate``'s
    dtype; no gradient. Both methods run on every entry (a static graph), each on rates it is meant for."""
    lam = ops.cast(rate.detach(), dt.float64).expand(*shape)
    small = ops.lt(lam, SMALL)
    draws = ops.where(small, _inversion(ops.where(small, lam, 0.0)), _ptrs(ops.where(small, SMALL, lam)))
    return ops.cast(draws, rate.dtype)


class Poisson(Distribution):
    """torch.distributions.Poisson: ``P(k) = rate**k exp(-rate) / k!`` on the integers ``k >= 0``,
    ``rate >= 0``. ``log_prob``, moments and ``sample`` (``poisson_draws``).

    Args:
        rate: the mean, non-negative.
        validate_args: check the parameter (and ``log_prob``'s values); default torch's, True.
    """

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer
    _params = {"rate": 0}

    def __init__(self, rate, validate_args=None) -> None:
        (self.rate,) = broadcast_all("Poisson", rate)
        super().__init__(self.rate.shape, validate_args=validate_args)

    @property
    def mean(self) -> GraphTensor:
        """``rate``."""
        return self._guarded(self.rate)

    @property
    def mode(self) -> GraphTensor:
        """``floor(rate)``."""
        return self._guarded(ops.floor(self.rate))

    @property
    def variance(self) -> GraphTensor:
        """``rate``."""
        return self._guarded(self.rate)

    def sample(self, sample_shape=()) -> GraphTensor:
        """Counts of shape ``sample_shape + batch_shape``, in ``rate``'s float dtype as torch's
        (``poisson_draws``: exact, by inversion below rate 10 and by PTRS from it on); no gradient."""
        return self._guarded(poisson_draws(self.rate, self._extended_shape(sample_shape)))

    def log_prob(self, value) -> GraphTensor:
        """``xlogy(k, rate) - rate - lgamma(k + 1)``. At ``k = 0`` the first term is 0 for every rate, so at
        ``k = rate = 0`` the rate it reads is 1: its gradient by the rate is then 0, where ``k / rate`` is
        0/0 = NaN (torch's), and the gradient of ``log P(0) = -rate`` is -1, as it should be."""
        x = self._value(value, "log_prob")
        k = ops.cast(x, self.rate.dtype)  # (counts may come as integers)
        rate = ops.where(ops.logical_and(ops.eq(k, 0), ops.eq(self.rate, 0)), 1.0, self.rate)
        return self._validate_sample(x, ops.xlogy(k, rate) - self.rate - ops.lgamma(k + 1))

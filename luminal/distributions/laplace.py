"""Laplace(loc, scale), torch.distributions' (reparameterised sampling)."""

from __future__ import annotations

import math

from luminal.distributions import constraints
from luminal.distributions.distribution import Distribution, broadcast_all
from luminal.frontend import ops
from luminal.frontend.ops.random import exponential_fill
from luminal.frontend.tensor import GraphTensor


class Laplace(Distribution):
    """torch.distributions.Laplace: density ``exp(-|x - loc| / scale) / (2 scale)``, ``scale > 0``.

    Args:
        loc: the location (mean, median and mode).
        scale: the scale, positive.
        validate_args: check the parameters (and ``log_prob``'s values); default torch's, True.
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _params = {"loc": 0, "scale": 0}

    def __init__(self, loc, scale, validate_args=None) -> None:
        self.loc, self.scale = broadcast_all("Laplace", loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    @property
    def mean(self) -> GraphTensor:
        """``loc``."""
        return self._guarded(self.loc)

    @property
    def mode(self) -> GraphTensor:
        """``loc``."""
        return self._guarded(self.loc)

    @property
    def stddev(self) -> GraphTensor:
        """``sqrt(2) scale``."""
        return self._guarded(math.sqrt(2) * self.scale)

    @property
    def variance(self) -> GraphTensor:
        """``2 scale**2``."""
        return self._guarded(2 * ops.square(self.scale))

    def rsample(self, sample_shape=()) -> GraphTensor:
        """``loc + scale (E1 - E2)``: the difference of two independent standard exponentials is a
        standard Laplace variable (finite everywhere, where the inverse cdf of a uniform needs its ends
        clamped, as torch's does)."""
        shape = self._extended_shape(sample_shape)
        e = exponential_fill(self._noise_like(shape)) - exponential_fill(self._noise_like(shape))
        return self._guarded(self.loc + self.scale * e)

    def log_prob(self, value) -> GraphTensor:
        """``-log(2 scale) - |x - loc| / scale``."""
        x = self._value(value, "log_prob")
        return self._validate_sample(x, -ops.log(2 * self.scale) - ops.abs(x - self.loc) / self.scale)

    def cdf(self, value) -> GraphTensor:
        """``1/2 - sign(x - loc) expm1(-|x - loc| / scale) / 2``."""
        x = self._value(value, "cdf")
        d = x - self.loc
        return self._validate_sample(x, 0.5 - 0.5 * ops.sign(d) * ops.expm1(-ops.abs(d) / self.scale))

    def icdf(self, value) -> GraphTensor:
        """``loc - scale sign(p - 1/2) log1p(-2 |p - 1/2|)``."""
        p = self._value(value, "icdf")
        t = p - 0.5
        return self._guarded(self.loc - self.scale * ops.sign(t) * ops.log1p(-2 * ops.abs(t)))

    def entropy(self) -> GraphTensor:
        """``1 + log(2 scale)``."""
        return self._guarded(1 + ops.log(2 * self.scale))

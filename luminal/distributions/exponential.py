"""Exponential(rate), torch.distributions' (reparameterised sampling)."""

from __future__ import annotations

from luminal.distributions import constraints
from luminal.distributions.distribution import Distribution, broadcast_all
from luminal.frontend import ops
from luminal.frontend.ops.random import exponential_fill
from luminal.frontend.tensor import GraphTensor


class Exponential(Distribution):
    """torch.distributions.Exponential: density ``rate exp(-rate x)`` on ``x >= 0``, ``rate > 0``.

    Args:
        rate: the rate (1 / mean), positive.
        validate_args: check the parameter (and ``log_prob``'s values); default torch's, True.
    """

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _params = {"rate": 0}

    def __init__(self, rate, validate_args=None) -> None:
        (self.rate,) = broadcast_all("Exponential", rate)
        super().__init__(self.rate.shape, validate_args=validate_args)

    @property
    def mean(self) -> GraphTensor:
        """``1 / rate``."""
        return self._guarded(ops.reciprocal(self.rate))

    @property
    def mode(self) -> GraphTensor:
        """0."""
        return self._guarded(ops.zeros_like(self.rate))

    @property
    def stddev(self) -> GraphTensor:
        """``1 / rate``."""
        return self._guarded(ops.reciprocal(self.rate))

    @property
    def variance(self) -> GraphTensor:
        """``rate ** -2``."""
        return self._guarded(ops.reciprocal(ops.square(self.rate)))

    def rsample(self, sample_shape=()) -> GraphTensor:
        """``E / rate`` for exponential noise ``E`` of mean 1 (``Tensor.exponential_``'s, 48-bit)."""
        e = exponential_fill(self._noise_like(self._extended_shape(sample_shape)))
        return self._guarded(e / self.rate)

    def log_prob(self, value) -> GraphTensor:
        """``log(rate) - rate x``."""
        x = self._value(value, "log_prob")
        return self._validate_sample(x, ops.log(self.rate) - self.rate * x)

    def cdf(self, value) -> GraphTensor:
        """``1 - exp(-rate x)``."""
        x = self._value(value, "cdf")
        return self._validate_sample(x, 1 - ops.exp(-self.rate * x))

    def icdf(self, value) -> GraphTensor:
        """``-log1p(-p) / rate``."""
        p = self._value(value, "icdf")
        return self._guarded(-ops.log1p(-p) / self.rate)

    def entropy(self) -> GraphTensor:
        """``1 - log(rate)``."""
        return self._guarded(1 - ops.log(self.rate))

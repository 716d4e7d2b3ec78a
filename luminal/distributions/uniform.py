"""Uniform(low, high), torch.distributions' (reparameterised sampling)."""

from __future__ import annotations

import math

from luminal.distributions import constraints
from luminal.distributions.distribution import Distribution, broadcast_all
from luminal.frontend import ops
from luminal.frontend.ops.random import uniform_fill
from luminal.frontend.tensor import GraphTensor


class Uniform(Distribution):
    """torch.distributions.Uniform: uniform on ``[low, high)``, ``low < high``.

    Args:
        low: the lower end (inclusive).
        high: the upper end (exclusive).
        validate_args: check the parameters (and ``log_prob``'s values); default torch's, True.
    """

    arg_constraints = {"low": constraints.real, "high": constraints.real}  # (torch's: low < high, checked below)
    has_rsample = True
    _params = {"low": 0, "high": 0}

    def __init__(self, low, high, validate_args=None) -> None:
        self.low, self.high = broadcast_all("Uniform", low, high)
        super().__init__(self.low.shape, validate_args=validate_args)
        if self._validate_args:  # torch's constraint of low: less than high (NaN fails it too)
            self._check(self.low, constraints.less_than(self.high), "parameter low")

    @property
    def support(self) -> constraints.Constraint:
        """``interval(low, high)``: closed, as torch's (``log_prob`` is -inf at ``high`` itself)."""
        return constraints.interval(self.low, self.high)

    @property
    def mean(self) -> GraphTensor:
        """``(low + high) / 2``."""
        return self._guarded((self.low + self.high) / 2)

    @property
    def mode(self) -> GraphTensor:
        """NaN (every point of the interval is one), as torch's."""
        return self._guarded(self.high * math.nan)

    @property
    def stddev(self) -> GraphTensor:
        """``(high - low) / sqrt(12)``."""
        return self._guarded((self.high - self.low) / 12**0.5)

    @property
    def variance(self) -> GraphTensor:
        """``(high - low)**2 / 12``."""
        return self._guarded(ops.square(self.high - self.low) / 12)

    def rsample(self, sample_shape=()) -> GraphTensor:
        """``low + u (high - low)`` for a uniform ``u`` in ``[0, 1)`` (``Tensor.uniform_``'s: 48 bits for
        float64, 24 else)."""
        u = uniform_fill(self._noise_like(self._extended_shape(sample_shape)))
        return self._guarded(self.low + u * (self.high - self.low))

    def log_prob(self, value) -> GraphTensor:
        """``-log(high - low)`` inside ``[low, high)``, ``-inf`` outside (an error when validating)."""
        x = self._value(value, "log_prob")
        inside = ops.logical_and(ops.le(self.low, x), ops.gt(self.high, x))
        return self._validate_sample(x, ops.log(ops.cast(inside, self.low.dtype)) - ops.log(self.high - self.low))

    def cdf(self, value) -> GraphTensor:
        """``(x - low) / (high - low)`` clamped to ``[0, 1]``."""
        x = self._value(value, "cdf")
        return self._validate_sample(x, ops.clamp((x - self.low) / (self.high - self.low), 0, 1))

    def icdf(self, value) -> GraphTensor:
        """``low + p (high - low)``."""
        p = self._value(value, "icdf")
        return self._guarded(p * (self.high - self.low) + self.low)

    def entropy(self) -> GraphTensor:
        """``log(high - low)``."""
        return self._guarded(ops.log(self.high - self.low))

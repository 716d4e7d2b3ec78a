"""Poisson(rate), torch.distributions' mass function (no sampler: see ``Poisson.sample``)."""

from __future__ import annotations

from luminal.distributions import constraints
from luminal.distributions.distribution import Distribution, broadcast_all
from luminal.frontend import ops
from luminal.frontend.tensor import GraphTensor


class Poisson(Distribution):
    """torch.distributions.Poisson: ``P(k) = rate**k exp(-rate) / k!`` on the integers ``k >= 0``,
    ``rate >= 0``. ``log_prob`` and moments; ``sample`` raises NotImplementedError.

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
        """Not implemented: torch's draws by rejection (a loop of data-dependent length)."""
        raise NotImplementedError("Poisson.sample: luminal has no Poisson sampler (torch's draws by rejection, a "
                                  "loop of data-dependent length, which a static graph lacks)")

    def log_prob(self, value) -> GraphTensor:
        """``xlogy(k, rate) - rate - lgamma(k + 1)``. At ``k = 0`` the first term is 0 for every rate, so at
        ``k = rate = 0`` the rate it reads is 1: its gradient by the rate is then 0, where ``k / rate`` is
        0/0 = NaN (torch's), and the gradient of ``log P(0) = -rate`` is -1, as it should be."""
        x = self._value(value, "log_prob")
        k = ops.cast(x, self.rate.dtype)  # (counts may come as integers)
        rate = ops.where(ops.logical_and(ops.eq(k, 0), ops.eq(self.rate, 0)), 1.0, self.rate)
        return self._validate_sample(x, ops.xlogy(k, rate) - self.rate - ops.lgamma(k + 1))

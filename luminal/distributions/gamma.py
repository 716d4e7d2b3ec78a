"""Gamma(concentration, rate), torch.distributions' densities (no sampling: see ``Gamma.rsample``)."""

from __future__ import annotations

from luminal.distributions import constraints
from luminal.distributions.distribution import Distribution, broadcast_all
from luminal.frontend import ops
from luminal.frontend.ops.special import gammainc
from luminal.frontend.tensor import GraphTensor

NO_GAMMA_SAMPLES = ("luminal has no Gamma sampler: torch's draws by Marsaglia-Tsang rejection (a loop of data-"
                    "dependent length) with implicit reparameterisation gradients, which a static graph lacks")


class Gamma(Distribution):
    """torch.distributions.Gamma: density ``rate**c x**(c - 1) exp(-rate x) / Gamma(c)`` for
    ``concentration`` ``c > 0``, ``rate > 0``. ``log_prob``, ``entropy``, ``cdf``, moments and KL;
    ``sample``/``rsample`` raise NotImplementedError (``NO_GAMMA_SAMPLES``).

    Args:
        concentration: the shape parameter, positive.
        rate: the rate (1 / scale), positive.
        validate_args: check the parameters (and ``log_prob``'s values); default torch's, True.
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    _params = {"concentration": 0, "rate": 0}

    def __init__(self, concentration, rate, validate_args=None) -> None:
        self.concentration, self.rate = broadcast_all("Gamma", concentration, rate)
        super().__init__(self.rate.shape, validate_args=validate_args)

    @property
    def mean(self) -> GraphTensor:
        """``concentration / rate``."""
        return self._guarded(self.concentration / self.rate)

    @property
    def mode(self) -> GraphTensor:
        """``max(concentration - 1, 0) / rate``."""
        return self._guarded(ops.clamp((self.concentration - 1) / self.rate, min=0))

    @property
    def variance(self) -> GraphTensor:
        """``concentration / rate**2``."""
        return self._guarded(self.concentration / ops.square(self.rate))

    def sample(self, sample_shape=()) -> GraphTensor:
        """Not implemented (``NO_GAMMA_SAMPLES``)."""
        raise NotImplementedError(f"Gamma.sample: {NO_GAMMA_SAMPLES}")

    def rsample(self, sample_shape=()) -> GraphTensor:
        """Not implemented (``NO_GAMMA_SAMPLES``)."""
        raise NotImplementedError(f"Gamma.rsample: {NO_GAMMA_SAMPLES}")

    def log_prob(self, value) -> GraphTensor:
        """``xlogy(c, rate) + xlogy(c - 1, x) - rate x - lgamma(c)``."""
        x = self._value(value, "log_prob")
        c = self.concentration
        out = ops.xlogy(c, self.rate) + ops.xlogy(c - 1, x) - self.rate * x - ops.lgamma(c)
        return self._validate_sample(x, out)

    def cdf(self, value) -> GraphTensor:
        """The regularised lower incomplete gamma function ``gammainc(c, rate x)`` (the gradient by the
        concentration raises, as torch's)."""
        x = self._value(value, "cdf")
        return self._validate_sample(x, gammainc(self.concentration, self.rate * x))

    def entropy(self) -> GraphTensor:
        """``c - log(rate) + lgamma(c) + (1 - c) digamma(c)``."""
        c = self.concentration
        return self._guarded(c - ops.log(self.rate) + ops.lgamma(c) + (1 - c) * ops.digamma(c))

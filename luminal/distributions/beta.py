"""Beta(concentration1, concentration0), torch.distributions' (draws from two Gammas, reparameterised)."""

from __future__ import annotations

from luminal.core import dtype as dt
from luminal.distributions import constraints
from luminal.distributions.distribution import Distribution, broadcast_all
from luminal.distributions.gamma import rstandard_gamma
from luminal.frontend import ops
from luminal.frontend.tensor import GraphTensor


def log_beta(a: GraphTensor, b: GraphTensor) -> GraphTensor:
    """``log B(a, b) = lgamma(a) + lgamma(b) - lgamma(a + b)``."""
    return ops.lgamma(a) + ops.lgamma(b) - ops.lgamma(a + b)


class Beta(Distribution):
    """torch.distributions.Beta: density ``x**(a - 1) (1 - x)**(b - 1) / B(a, b)`` on ``[0, 1]`` for
    ``a = concentration1 > 0``, ``b = concentration0 > 0``. ``log_prob``, ``entropy``, moments and KL;
    ``sample``/``rsample`` are ``X / (X + Y)`` for Gamma draws ``X`` of ``a`` and ``Y`` of ``b``, as torch's.

    Args:
        concentration1: ``a``, positive.
        concentration0: ``b``, positive.
        validate_args: check the parameters (and ``log_prob``'s values); default torch's, True.
    """

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True
    _params = {"concentration1": 0, "concentration0": 0}

    def __init__(self, concentration1, concentration0, validate_args=None) -> None:
        self.concentration1, self.concentration0 = broadcast_all("Beta", concentration1, concentration0)
        super().__init__(self.concentration1.shape, validate_args=validate_args)

    @property
    def mean(self) -> GraphTensor:
        """``a / (a + b)``."""
        return self._guarded(self.concentration1 / (self.concentration1 + self.concentration0))

    @property
    def mode(self) -> GraphTensor:
        """torch's (its Dirichlet's): ``(a - 1) / (a + b - 2)`` with ``a - 1`` and ``b - 1`` clamped at 0
        (NaN where both clamp to 0 without both being below 1), and 1 where ``a`` and ``b`` are both
        below 1 (the density is then infinite at both ends; torch's picks 1)."""
        a, b = self.concentration1, self.concentration0
        m1, m0 = ops.clamp(a - 1, min=0), ops.clamp(b - 1, min=0)
        return self._guarded(ops.where(ops.logical_and(ops.lt(a, 1), ops.lt(b, 1)), 1.0, m1 / (m1 + m0)))

    @property
    def variance(self) -> GraphTensor:
        """``a b / ((a + b)**2 (a + b + 1))``."""
        a, b = self.concentration1, self.concentration0
        total = a + b
        return self._guarded(a * b / (ops.square(total) * (total + 1)))

    def rsample(self, sample_shape=()) -> GraphTensor:
        """``X / (X + Y)`` for ``X ~ Gamma(a)``, ``Y ~ Gamma(b)``, clamped into ``[tiny, 1 - eps]`` as
        torch's; differentiated through the two Gamma draws (``rstandard_gamma``: each held at its cdf
        value). torch's Beta differentiates the Beta draw at its own cdf value instead (its Dirichlet's
        ``_dirichlet_grad``): another coupling of the same distribution, so the gradients of expectations
        agree, not those of single draws."""
        shape = self._extended_shape(sample_shape)
        x, y = rstandard_gamma(self.concentration1, shape), rstandard_gamma(self.concentration0, shape)
        f = dt.finfo(x.dtype)
        return self._guarded(ops.clamp(x / (x + y), float(f.tiny), 1 - float(f.eps)))

    def log_prob(self, value) -> GraphTensor:
        """``xlogy(a - 1, x) + xlogy(b - 1, 1 - x) - log B(a, b)``."""
        x = self._value(value, "log_prob")
        a, b = self.concentration1, self.concentration0
        out = ops.xlogy(a - 1, x) + ops.xlogy(b - 1, 1 - x) - log_beta(a, b)
        return self._validate_sample(x, out)

    def entropy(self) -> GraphTensor:
        """``log B(a, b) - (a - 1) digamma(a) - (b - 1) digamma(b) + (a + b - 2) digamma(a + b)``."""
        a, b = self.concentration1, self.concentration0
        return self._guarded(log_beta(a, b) - (a - 1) * ops.digamma(a) - (b - 1) * ops.digamma(b)
                             + (a + b - 2) * ops.digamma(a + b))



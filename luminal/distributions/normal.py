"""Normal(loc, scale) and LogNormal(loc, scale) (a TransformedDistribution, as torch's), torch.distributions'
(reparameterised sampling)."""

from __future__ import annotations

import math

from luminal.core.symbolic import shape_str
from luminal.distributions import constraints
from luminal.distributions.distribution import Distribution, broadcast_all
from luminal.distributions.transformed_distribution import TransformedDistribution
from luminal.distributions.transforms import ExpTransform
from luminal.frontend import ops
from luminal.frontend.tensor import GraphTensor


class Normal(Distribution):
    """torch.distributions.Normal: the Gaussian of mean ``loc`` and standard deviation ``scale > 0``.

    Args:
        loc: the mean (a tensor, Parameter or number).
        scale: the standard deviation, positive.
        validate_args: check the parameters (and ``log_prob``'s values); default torch's, True.
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _params = {"loc": 0, "scale": 0}

    def __init__(self, loc, scale, validate_args=None) -> None:
        self.loc, self.scale = broadcast_all("Normal", loc, scale)
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
        """``scale``."""
        return self._guarded(self.scale)

    @property
    def variance(self) -> GraphTensor:
        """``scale ** 2``."""
        return self._guarded(ops.square(self.scale))

    def rsample(self, sample_shape=()) -> GraphTensor:
        """``loc + scale * eps`` for standard normal noise ``eps`` (``lm.randn_like``)."""
        eps = ops.randn_like(self._noise_like(self._extended_shape(sample_shape)))
        return self._guarded(self.loc + eps * self.scale)

    def log_prob(self, value) -> GraphTensor:
        """``-(x - loc)**2 / (2 scale**2) - log(scale) - log(sqrt(2 pi))``."""
        x = self._value(value, "log_prob")
        out = -ops.square(x - self.loc) / (2 * ops.square(self.scale)) - ops.log(self.scale) \
            - math.log(math.sqrt(2 * math.pi))
        return self._validate_sample(x, out)

    def cdf(self, value) -> GraphTensor:
        """``(1 + erf((x - loc) / (scale sqrt 2))) / 2``."""
        x = self._value(value, "cdf")
        return self._validate_sample(x, 0.5 * (1 + ops.erf((x - self.loc) / (self.scale * math.sqrt(2)))))

    def icdf(self, value) -> GraphTensor:
        """``loc + scale sqrt(2) erfinv(2 p - 1)``."""
        p = self._value(value, "icdf")
        return self._guarded(self.loc + self.scale * ops.erfinv(2 * p - 1) * math.sqrt(2))

    def entropy(self) -> GraphTensor:
        """``1/2 + log(2 pi)/2 + log(scale)``."""
        return self._guarded(0.5 + 0.5 * math.log(2 * math.pi) + ops.log(self.scale))


class LogNormal(TransformedDistribution):
    """torch.distributions.LogNormal: ``exp`` of a ``Normal(loc, scale)``, as torch's a
    TransformedDistribution of ``base_dist`` (that Normal) by ``ExpTransform``, with the closed forms
    of the moments and the entropy.

    Args:
        loc: the mean of the log.
        scale: the standard deviation of the log, positive.
        validate_args: check the parameters (and ``log_prob``'s values); default torch's, True.
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None) -> None:
        base = Normal(loc, scale, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args=base._validate_args)

    @property
    def loc(self) -> GraphTensor:
        """The base Normal's ``loc``."""
        return self.base_dist.loc

    @property
    def scale(self) -> GraphTensor:
        """The base Normal's ``scale``."""
        return self.base_dist.scale

    @property
    def mean(self) -> GraphTensor:
        """``exp(loc + scale**2 / 2)``."""
        return self._guarded(ops.exp(self.loc + ops.square(self.scale) / 2))

    @property
    def mode(self) -> GraphTensor:
        """``exp(loc - scale**2)``."""
        return self._guarded(ops.exp(self.loc - ops.square(self.scale)))

    @property
    def variance(self) -> GraphTensor:
        """``expm1(scale**2) exp(2 loc + scale**2)``."""
        s2 = ops.square(self.scale)
        return self._guarded(ops.expm1(s2) * ops.exp(2 * self.loc + s2))

    def entropy(self) -> GraphTensor:
        """The Normal's entropy plus ``loc``."""
        return self.base_dist.entropy() + self.loc

    def __repr__(self) -> str:
        return f"LogNormal(loc: {shape_str(self.loc.shape)}, scale: {shape_str(self.scale.shape)})"

"""Gamma(concentration, rate), torch.distributions' (``sample`` by Marsaglia-Tsang over a fixed number of
proposals; no ``rsample``: see ``NO_GAMMA_RSAMPLE``)."""

from __future__ import annotations

from luminal.core import dtype as dt
from luminal.distributions import constraints
from luminal.distributions.distribution import Distribution, broadcast_all
from luminal.frontend import ops
from luminal.frontend.ops.random import uniform_fill
from luminal.frontend.ops.special import gammainc
from luminal.frontend.tensor import GraphTensor

NO_GAMMA_RSAMPLE = ("luminal has no reparameterised Gamma draws: torch's rsample differentiates its Marsaglia-Tsang "
                    "draws implicitly (through the derivative of the incomplete gamma function by the concentration, "
                    "which luminal lacks); use sample() for draws without a gradient")
ROUNDS = 16  # Marsaglia-Tsang proposals per draw: each is accepted with probability > 0.95 (for shape >= 1)


def standard_gamma(concentration: GraphTensor, shape) -> GraphTensor:
    """Gamma(``concentration``, 1) draws of ``shape`` (``concentration`` broadcast to it), no gradient.

    Marsaglia and Tsang's method for shape ``a + 1 >= 1`` (``d = a + 2/3``, ``c = 1 / sqrt(9 d)``: the
    proposal ``d (1 + c z)**3`` of a standard normal ``z``, accepted when ``log u < z**2 / 2 + d - d v
    + d log v``), then Gamma(``a``) as ``Gamma(a + 1) u**(1/a)`` (torch's boost, in logs; clamped to
    the dtype's smallest normal number, as torch's). A static graph has no loop of data-dependent
    length, so each draw takes the first of ``ROUNDS`` proposals accepted: every proposal is accepted
    with probability above 0.95, so all 16 fail with probability below ``0.05**16 = 1.5e-21`` per draw
    (then the last proposal is kept)."""
    a = concentration.detach().expand(*shape)
    w = a.dtype
    d = a + (1.0 - 1.0 / 3.0)  # (for a + 1: d = (a + 1) - 1/3)
    c = ops.rsqrt(9 * d)
    out, done = None, None
    for _ in range(ROUNDS):
        z = ops.randn_like(a)
        v = ops.clamp(1 + c * z, min=0) ** 3
        log_u = ops.log1p(-uniform_fill(a))
        accept = ops.logical_and(ops.gt(v, 0), ops.lt(log_u, 0.5 * z * z + d - d * v + d * ops.log(v)))
        draw = d * v
        if out is None:
            out, done = draw, accept
        else:
            out = ops.where(done, out, draw)
            done = ops.logical_or(done, accept)
    log_boost = ops.log1p(-uniform_fill(a)) / a  # log(u**(1/a)) for u in (0, 1]
    tiny = float(dt.finfo(w).tiny)
    return ops.clamp(ops.exp(ops.log(out) + log_boost), min=tiny)


class Gamma(Distribution):
    """torch.distributions.Gamma: density ``rate**c x**(c - 1) exp(-rate x) / Gamma(c)`` for
    ``concentration`` ``c > 0``, ``rate > 0``. ``log_prob``, ``entropy``, ``cdf``, moments and KL;
    ``sample`` draws by Marsaglia-Tsang (``standard_gamma``); ``rsample`` raises NotImplementedError
    (``NO_GAMMA_RSAMPLE``).

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
        """Draws ``standard_gamma(concentration) / rate``, at least the dtype's smallest normal number
        (torch's clamp); no gradient."""
        shape = self._extended_shape(sample_shape)
        return self._guarded(standard_gamma(self.concentration, shape) / self.rate.detach())

    def rsample(self, sample_shape=()) -> GraphTensor:
        """Not implemented (``NO_GAMMA_RSAMPLE``)."""
        raise NotImplementedError(f"Gamma.rsample: {NO_GAMMA_RSAMPLE}")

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

"""Gamma(concentration, rate), torch.distributions' (``sample`` by Marsaglia-Tsang over a fixed number of
proposals; ``rsample`` differentiates those draws implicitly, by torch's ``_standard_gamma_grad``)."""

from __future__ import annotations

from luminal.core import dtype as dt
from luminal.core.errors import op_error
from luminal.distributions import constraints
from luminal.distributions.distribution import Distribution, broadcast_all
from luminal.frontend import ops
from luminal.frontend.ops.random import uniform_fill
from luminal.frontend.ops.special import gammainc
from luminal.frontend.tensor import GraphTensor

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


# torch's bivariate rational approximation of d x / d alpha (ATen/native/Distributions.h): rows are the
# coefficients of 1, u, u**2 (u = log(x / alpha)); columns those of the numerator and denominator
# polynomials in v = log(alpha)
_RATIONAL = ((0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084),
             (0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915,
              -0.00058392623),
             (0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326,
              0.00085092367, -1.5247877e-07))


def standard_gamma_grad(x: GraphTensor, alpha: GraphTensor) -> GraphTensor:
    """torch's ``_standard_gamma_grad(x, alpha)``: ``d x / d alpha`` of a Gamma(``alpha``, 1) draw ``x``
    held at a fixed cdf value (implicit differentiation: ``-(dF/d alpha) / pdf``), by torch's three
    approximations, so that ``rsample``'s gradients are torch's on the same draws:

    - ``x < 0.8``: the incomplete gamma function's series (6 terms) differentiated by ``alpha``,
      ``x e**x (s2 - (log x - digamma(alpha)) s1)`` (torch's ``-cdf_alpha / pdf``, its powers cancelled);
    - ``alpha > 8``: Rice's saddle point expansion (a polynomial within 10% of ``alpha``);
    - else torch's bivariate rational approximation in ``log(x / alpha)`` and ``log(alpha)``.

    float16 and bfloat16 are computed in float32, as torch's (its ``accscalar_t``): the saddle point's
    ``1244160 alpha**4`` overflows float16 (a NaN gradient for ``alpha > 8``) and bfloat16's 8 bits lose
    its cancellations.
    """
    if x.dtype.itemsize < 4:
        return ops.cast(standard_gamma_grad(ops.cast(x, dt.float32), ops.cast(alpha, dt.float32)), x.dtype)
    numer, denom = 1.0, alpha
    s1, s2 = 1 / alpha, 1 / ops.square(alpha)
    for i in range(1, 6):
        numer = numer * (-x / i)
        denom = denom + 1
        s1, s2 = s1 + numer / denom, s2 + numer / ops.square(denom)
    series = x * ops.exp(x) * (s2 - (ops.log(x) - ops.digamma(alpha)) * s1)
    a2 = ops.square(alpha)
    near = (1 + 24 * alpha * (1 + 12 * alpha)) * (1440 * a2 + 6 * x * (53 - 120 * x) - 65 * ops.square(x) / alpha
                                                  + alpha * (107 + 3600 * x)) / (1244160 * a2 * a2)
    root = ops.sqrt(8 * alpha)
    log_ratio = ops.log(x / alpha)
    term2 = root / (alpha - x)
    term3 = (x - alpha - alpha * log_ratio) ** -1.5
    term1 = log_ratio * ops.where(ops.lt(x, alpha), term2 - term3, term2 + term3) \
        - ops.sqrt(2 / alpha) * (alpha + x) / ops.square(alpha - x)
    stirling = 1 + 1 / (12 * alpha) * (1 + 1 / (24 * alpha))
    far = -stirling * x * term1 / root
    v = ops.log(alpha)
    c = [row0 + log_ratio * (row1 + log_ratio * row2) for row0, row1, row2 in zip(*_RATIONAL)]
    rational = ops.exp((c[0] + v * (c[1] + v * (c[2] + v * c[3]))) / (c[4] + v * (c[5] + v * (c[6] + v * c[7]))))
    within = ops.logical_and(ops.le(0.9 * alpha, x), ops.le(x, 1.1 * alpha))
    large = ops.where(within, near, far)
    return ops.where(ops.lt(x, 0.8), series, ops.where(ops.gt(alpha, 8.0), large, rational))


def rstandard_gamma(concentration: GraphTensor, shape) -> GraphTensor:
    """``standard_gamma(concentration, shape)`` with torch's reparameterised gradient by the
    concentration, ``standard_gamma_grad(x, concentration)`` per draw (``Graph.custom_vjp``). That
    gradient's own gradient raises NotImplementedError, as torch's (``_standard_gamma_grad`` has none):
    differentiating the approximations would give their derivative, not the draw's."""
    a = concentration.expand(*shape)
    x = standard_gamma(a, shape)
    refused = op_error(NotImplementedError, "Gamma.rsample", "the gradient of rsample's gradient by the "
                       "concentration is not implemented, as torch's ('the derivative for _standard_gamma_grad is not "
                       "implemented')", a)

    def rule(out, adjoint, alpha):
        slope = standard_gamma_grad(out, alpha)
        return [adjoint * out.graph.custom_vjp(slope, [alpha, out], lambda *_: [refused, refused])]

    return a.graph.custom_vjp(x, [a], rule)


class Gamma(Distribution):
    """torch.distributions.Gamma: density ``rate**c x**(c - 1) exp(-rate x) / Gamma(c)`` for
    ``concentration`` ``c > 0``, ``rate > 0``. ``log_prob``, ``entropy``, ``cdf``, moments and KL;
    ``sample`` draws by Marsaglia-Tsang (``standard_gamma``); ``rsample`` too, differentiated as torch's
    (``rstandard_gamma``).

    Args:
        concentration: the shape parameter, positive.
        rate: the rate (1 / scale), positive.
        validate_args: check the parameters (and ``log_prob``'s values); default torch's, True.
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
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

    def rsample(self, sample_shape=()) -> GraphTensor:
        """Draws ``standard_gamma(concentration) / rate``, at least the dtype's smallest normal number
        after the division as torch's (its in-place clamp of the detached value: a small concentration
        and a large rate gave subnormal draws, and 0 past them), with torch's gradients, which the clamp
        leaves alone: ``standard_gamma_grad(x, concentration) / rate`` by the concentration, ``-draw /
        rate`` by the rate."""
        shape = self._extended_shape(sample_shape)
        x = rstandard_gamma(self.concentration, shape) / self.rate
        clamped = ops.clamp(x, min=float(dt.finfo(x.dtype).tiny))
        return self._guarded(x + (clamped - x).detach())

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

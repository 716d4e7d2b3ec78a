"""kl_divergence(p, q) and register_kl, torch.distributions.kl's, with torch's closed forms for every
pair it registers among luminal's distributions: those of one family and the cross-family ones
(Normal-Laplace, Exponential-Gamma, Uniform-Normal, ..., and those torch defines as infinite, a support
that the other's does not cover). Any other pair raises NotImplementedError until registered."""

from __future__ import annotations

import math
from collections.abc import Callable

from luminal.core.errors import op_error
from luminal.distributions.bernoulli import Bernoulli
from luminal.distributions.beta import Beta, log_beta
from luminal.distributions.categorical import Categorical, OneHotCategorical
from luminal.distributions.distribution import Distribution
from luminal.distributions.exponential import Exponential
from luminal.distributions.gamma import Gamma
from luminal.distributions.independent import Independent, sum_rightmost
from luminal.distributions.laplace import Laplace
from luminal.distributions.multivariate_normal import MultivariateNormal, half_log_det, mahalanobis
from luminal.distributions.normal import LogNormal, Normal
from luminal.distributions.poisson import Poisson
from luminal.distributions.transformed_distribution import TransformedDistribution
from luminal.distributions.uniform import Uniform
from luminal.frontend import ops
from luminal.frontend.ops.core import broadcast_shapes
from luminal.frontend.tensor import GraphTensor
from luminal.linalg import solve_triangular

_KL_REGISTRY: dict[tuple[type, type], Callable] = {}


def register_kl(type_p: type, type_q: type) -> Callable:
    """torch's ``register_kl``: a decorator registering ``fn(p, q)`` as ``kl_divergence`` for
    instances of ``type_p`` and ``type_q`` (subclasses included; the most specific pair wins).

    Args:
        type_p: a subclass of Distribution.
        type_q: a subclass of Distribution.
    """
    for t in (type_p, type_q):
        if not (isinstance(t, type) and issubclass(t, Distribution)):
            raise TypeError(f"register_kl: expected a subclass of Distribution, got {t!r}")

    def decorator(fn: Callable) -> Callable:
        _KL_REGISTRY[type_p, type_q] = fn
        return fn

    return decorator


def kl_divergence(p: Distribution, q: Distribution) -> GraphTensor:
    """torch's ``kl_divergence``: ``KL(p || q)``, of the broadcast batch shape, by the function
    registered for the most specific pair of (base) classes; NotImplementedError for a pair none is.

    Args:
        p: a Distribution.
        q: a Distribution.
    """
    tp, tq = type(p), type(q)
    pt, qt = next(iter(p._tensors()), None), next(iter(q._tensors()), None)  # (none for a user's subclass)
    if pt is not None and qt is not None and pt.graph is not qt.graph and not (pt.graph.host or qt.graph.host):
        raise op_error(ValueError, "kl_divergence", f"p ({tp.__name__}) and q ({tq.__name__}) belong to different "
                       "graphs", pt, qt)
    matches = [(tp.__mro__.index(a), tq.__mro__.index(b), fn) for (a, b), fn in _KL_REGISTRY.items()
               if isinstance(p, a) and isinstance(q, b)]
    if not matches:
        raise NotImplementedError(f"No KL(p || q) is implemented for p = {tp.__name__}, q = {tq.__name__}")
    return min(matches, key=lambda m: (m[0] + m[1], m[0]))[2](p, q)


def _infinite_where(cond: GraphTensor, x: GraphTensor) -> GraphTensor:
    return ops.where(cond, math.inf, x)


def _infinite(p: Distribution, q: Distribution) -> GraphTensor:
    """inf over the broadcast batch shape of ``p`` and ``q`` (a constant: no gradient, as torch's
    ``_infinite_like``, which has ``p``'s shape alone)."""
    zero = ops.zeros_like(p._tensors()[0]) + ops.zeros_like(q._tensors()[0])
    return ops.full_like(zero, math.inf)


def _beta_mean(p: Beta) -> GraphTensor:
    return p.concentration1 / (p.concentration1 + p.concentration0)


@register_kl(Normal, Normal)
def _kl_normal_normal(p: Normal, q: Normal) -> GraphTensor:
    var_ratio = ops.square(p.scale / q.scale)
    t1 = ops.square((p.loc - q.loc) / q.scale)
    return 0.5 * (var_ratio + t1 - 1 - ops.log(var_ratio))


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p: TransformedDistribution, q: TransformedDistribution) -> GraphTensor:
    """torch's: the base distributions' KL when both push them through equal transforms (KL is invariant
    under one bijection); else NotImplementedError."""
    if p.transforms != q.transforms or p.event_shape != q.event_shape:
        raise NotImplementedError(f"kl_divergence: TransformedDistributions with different transforms or event "
                                  f"shapes ({p.transforms} of {p.event_shape}, {q.transforms} of {q.event_shape})")
    return kl_divergence(p.base_dist, q.base_dist)


@register_kl(LogNormal, LogNormal)
def _kl_lognormal_lognormal(p: LogNormal, q: LogNormal) -> GraphTensor:
    return _kl_normal_normal(p.base_dist, q.base_dist)  # (KL is invariant under the same bijection)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p: Bernoulli, q: Bernoulli) -> GraphTensor:
    t1 = p.probs * (ops.softplus(-q.logits) - ops.softplus(-p.logits))
    t1 = ops.where(ops.eq(p.probs, 0), 0.0, _infinite_where(ops.eq(q.probs, 0), t1))
    t2 = (1 - p.probs) * (ops.softplus(q.logits) - ops.softplus(p.logits))
    t2 = ops.where(ops.eq(p.probs, 1), 0.0, _infinite_where(ops.eq(q.probs, 1), t2))
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p: Categorical, q: Categorical) -> GraphTensor:
    t = p.probs * (p.logits - q.logits)
    t = ops.where(ops.eq(p.probs, 0), 0.0, _infinite_where(ops.eq(q.probs, 0), t))
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p: OneHotCategorical, q: OneHotCategorical) -> GraphTensor:
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p: Uniform, q: Uniform) -> GraphTensor:
    out = ops.log((q.high - q.low) / (p.high - p.low))
    return _infinite_where(ops.logical_or(ops.gt(q.low, p.low), ops.lt(q.high, p.high)), out)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p: Exponential, q: Exponential) -> GraphTensor:
    ratio = q.rate / p.rate
    return -ops.log(ratio) + ratio - 1


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p: Laplace, q: Laplace) -> GraphTensor:
    ratio = p.scale / q.scale
    dist = ops.abs(p.loc - q.loc)
    return -ops.log(ratio) + dist / q.scale + ratio * ops.exp(-dist / p.scale) - 1


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p: Poisson, q: Poisson) -> GraphTensor:
    return p.rate * (ops.log(p.rate) - ops.log(q.rate)) - (p.rate - q.rate)


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p: Gamma, q: Gamma) -> GraphTensor:
    t1 = q.concentration * ops.log(p.rate / q.rate)
    t2 = ops.lgamma(q.concentration) - ops.lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * ops.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Beta, Beta)
def _kl_beta_beta(p: Beta, q: Beta) -> GraphTensor:
    a1, b1, a2, b2 = p.concentration1, p.concentration0, q.concentration1, q.concentration0
    d_total = ops.digamma(a1 + b1)
    return (log_beta(a2, b2) - log_beta(a1, b1) + (a1 - a2) * (ops.digamma(a1) - d_total)
            + (b1 - b2) * (ops.digamma(b1) - d_total))


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p: MultivariateNormal, q: MultivariateNormal) -> GraphTensor:
    if p.event_shape != q.event_shape:
        raise ValueError(f"KL-divergence between two Multivariate Normals with different event shapes cannot be "
                         f"computed: {p.event_shape} and {q.event_shape}")
    n = p.event_shape[0]
    batch = broadcast_shapes("kl_divergence", shapes=[p.scale_tril.shape[:-2], q.scale_tril.shape[:-2]])
    lq, lp = q.scale_tril.expand(*batch, n, n), p.scale_tril.expand(*batch, n, n)
    term2 = ops.square(solve_triangular(lq, lp, upper=False)).sum((-2, -1))  # trace(Sq^-1 Sp)
    term3 = mahalanobis(q.scale_tril, q.loc - p.loc)
    return half_log_det(q.scale_tril) - half_log_det(p.scale_tril) + 0.5 * (term2 + term3 - n)


@register_kl(Independent, Independent)
def _kl_independent_independent(p: Independent, q: Independent) -> GraphTensor:
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("kl_divergence: Independent distributions with different "
                                  f"reinterpreted_batch_ndims ({p.reinterpreted_batch_ndims} and "
                                  f"{q.reinterpreted_batch_ndims})")
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


# torch's cross-family pairs (torch/distributions/kl.py), term for term


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p: Bernoulli, q: Poisson) -> GraphTensor:
    return -p.entropy() - (p.probs * ops.log(q.rate) - q.rate)


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p: Beta, q: Exponential) -> GraphTensor:
    return -p.entropy() - ops.log(q.rate) + q.rate * _beta_mean(p)


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p: Beta, q: Gamma) -> GraphTensor:
    t2 = ops.lgamma(q.concentration) - q.concentration * ops.log(q.rate)
    t3 = (q.concentration - 1) * (ops.digamma(p.concentration1) - ops.digamma(p.concentration1 + p.concentration0))
    return -p.entropy() + t2 - t3 + q.rate * _beta_mean(p)


@register_kl(Beta, Normal)
def _kl_beta_normal(p: Beta, q: Normal) -> GraphTensor:
    mean, var = _beta_mean(p), ops.square(q.scale)
    t2 = 0.5 * ops.log(var * 2 * math.pi)
    t3 = (mean * (1 - mean) / (p.concentration1 + p.concentration0 + 1) + ops.square(mean)) * 0.5
    return -p.entropy() + t2 + (t3 - q.loc * mean + ops.square(q.loc) * 0.5) / var


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p: Beta, q: Uniform) -> GraphTensor:
    out = -p.entropy() + ops.log(q.high - q.low)
    return _infinite_where(ops.logical_or(ops.gt(q.low, 0.0), ops.lt(q.high, 1.0)), out)


@register_kl(Exponential, Beta)
@register_kl(Exponential, Uniform)
@register_kl(Gamma, Beta)
@register_kl(Gamma, Uniform)
@register_kl(Laplace, Beta)
@register_kl(Laplace, Exponential)
@register_kl(Laplace, Gamma)
@register_kl(Laplace, Uniform)
@register_kl(Normal, Beta)
@register_kl(Normal, Exponential)
@register_kl(Normal, Gamma)
@register_kl(Normal, Uniform)
@register_kl(Poisson, Bernoulli)
def _kl_infinity(p: Distribution, q: Distribution) -> GraphTensor:
    """p's support is not inside q's (an unbounded one in a bounded or half-line one; Poisson's counts
    above 1): inf, as torch's."""
    return _infinite(p, q)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p: Exponential, q: Gamma) -> GraphTensor:
    ratio = q.rate / p.rate
    euler = 0.57721566490153286060
    return -q.concentration * ops.log(ratio) + ratio + ops.lgamma(q.concentration) + q.concentration * euler \
        - (1 + euler)


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p: Exponential, q: Normal) -> GraphTensor:
    var, rate2 = ops.square(q.scale), ops.square(p.rate)
    t1 = 0.5 * ops.log(rate2 * var * 2 * math.pi)
    return t1 - 1 + (ops.reciprocal(rate2) - q.loc / p.rate + ops.square(q.loc) * 0.5) / var


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p: Gamma, q: Exponential) -> GraphTensor:
    return -p.entropy() - ops.log(q.rate) + q.rate * p.concentration / p.rate


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p: Gamma, q: Normal) -> GraphTensor:
    c, var, rate2 = p.concentration, ops.square(q.scale), ops.square(p.rate)
    t1 = 0.5 * ops.log(rate2 * var * 2 * math.pi) - c - ops.lgamma(c)
    t2 = 0.5 * (ops.square(c) + c) / rate2
    return t1 + (c - 1) * ops.digamma(c) + (t2 - q.loc * c / p.rate + 0.5 * ops.square(q.loc)) / var


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p: Laplace, q: Normal) -> GraphTensor:
    var = ops.square(q.scale)
    ratio = ops.square(p.scale) / var
    t1 = 0.5 * ops.log(2 * ratio / math.pi)
    return -t1 + ratio + (0.5 * ops.square(p.loc) - p.loc * q.loc + 0.5 * ops.square(q.loc)) / var - 1


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p: Normal, q: Laplace) -> GraphTensor:
    diff = p.loc - q.loc
    z = diff / p.scale
    t2 = math.sqrt(2 / math.pi) * p.scale * ops.exp(-0.5 * ops.square(z))
    t3 = diff * ops.erf(math.sqrt(0.5) * z)
    return -ops.log(p.scale / q.scale) + (t2 + t3) / q.scale - 0.5 * (1 + math.log(0.5 * math.pi))


def _x_log_x(t: GraphTensor) -> GraphTensor:
    """``t log t``, 0 at 0 (its limit; torch's ``_x_log_x`` gives NaN there)."""
    return ops.xlogy(t, t)


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p: Uniform, q: Beta) -> GraphTensor:
    width = p.high - p.low
    t2 = (q.concentration1 - 1) * (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    t3 = (q.concentration0 - 1) * (_x_log_x(1 - p.high) - _x_log_x(1 - p.low) + width) / width
    out = t3 + log_beta(q.concentration1, q.concentration0) - ops.log(width) - t2
    return _infinite_where(ops.logical_or(ops.gt(p.high, 1.0), ops.lt(p.low, 0.0)), out)


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p: Uniform, q: Exponential) -> GraphTensor:
    out = q.rate * (p.high + p.low) / 2 - ops.log((p.high - p.low) * q.rate)
    return _infinite_where(ops.lt(p.low, 0.0), out)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p: Uniform, q: Gamma) -> GraphTensor:
    width = p.high - p.low
    t2 = ops.lgamma(q.concentration) - q.concentration * ops.log(q.rate)
    t3 = (1 - q.concentration) * (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    out = -ops.log(width) + t2 + t3 + q.rate * (p.high + p.low) / 2
    return _infinite_where(ops.lt(p.low, 0.0), out)


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p: Uniform, q: Normal) -> GraphTensor:
    width = p.high - p.low
    t1 = ops.log(math.sqrt(math.pi * 2) * q.scale / width)
    t3 = ops.square((p.high + p.low - 2 * q.loc) / 2)
    return t1 + 0.5 * (ops.square(width) / 12 + t3) / ops.square(q.scale)

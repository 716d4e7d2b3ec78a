"""kl_divergence(p, q) and register_kl, torch.distributions.kl's, with torch's closed forms for the
pairs of one family that it registers among luminal's distributions (torch's cross-family pairs, such
as Normal-Laplace or Exponential-Gamma, are not here: kl_divergence raises NotImplementedError for
them until registered)."""

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


@register_kl(Normal, Normal)
def _kl_normal_normal(p: Normal, q: Normal) -> GraphTensor:
    var_ratio = ops.square(p.scale / q.scale)
    t1 = ops.square((p.loc - q.loc) / q.scale)
    return 0.5 * (var_ratio + t1 - 1 - ops.log(var_ratio))


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

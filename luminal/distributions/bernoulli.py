"""Bernoulli(probs | logits), torch.distributions'."""

from __future__ import annotations

import math

from luminal.core import dtype as dt
from luminal.distributions import constraints
from luminal.distributions.distribution import Distribution, broadcast_all
from luminal.frontend import ops
from luminal.frontend.tensor import GraphTensor


def probs_or_logits(name: str, probs, logits) -> str:
    """Which of ``probs`` and ``logits`` was given: exactly one must be (torch's ValueError)."""
    if (probs is None) == (logits is None):
        raise ValueError(f"{name}: either `probs` or `logits` must be specified, but not both (got "
                         f"{'both' if probs is not None else 'neither'})")
    return "probs" if probs is not None else "logits"


def clamp_probs(p: GraphTensor) -> GraphTensor:
    """torch's ``clamp_probs``: ``p`` in ``[eps, 1 - eps]`` (its dtype's eps), so that logs stay finite."""
    eps = float(dt.finfo(p.dtype).eps)
    return ops.clamp(p, eps, 1 - eps)


def exact_at_certainty(p: GraphTensor, hit: GraphTensor, out: GraphTensor) -> GraphTensor:
    """``out`` (a log-probability from the clamped logits), where the probability ``p`` of the outcome is
    exactly 0 or 1 replaced by its exact log: 0 where ``hit`` (the value is the certain outcome), -inf
    else. The replacement is constant, so the gradient there is 0, as through torch's clamp."""
    edge = ops.logical_or(ops.eq(p, 0), ops.eq(p, 1))
    return ops.where(edge, ops.log(ops.cast(hit, out.dtype)), out)


class Bernoulli(Distribution):
    """torch.distributions.Bernoulli: 1 with probability ``probs`` (or ``sigmoid(logits)``), else 0.

    Args:
        probs: the probabilities of 1, in [0, 1] (exactly one of ``probs`` and ``logits``).
        logits: their log-odds.
        validate_args: check the parameter (and ``log_prob``'s values); default torch's, True.
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    _params = {"probs": 0, "logits": 0}

    def __init__(self, probs=None, logits=None, validate_args=None) -> None:
        given = probs_or_logits("Bernoulli", probs, logits)
        self._given = (given,)
        if given == "probs":
            (self.probs,) = broadcast_all("Bernoulli", probs)
            p = clamp_probs(self.probs)
            self.logits = ops.log(p) - ops.log1p(-p)
        else:
            (self.logits,) = broadcast_all("Bernoulli", logits)
            self.probs = ops.sigmoid(self.logits)
        super().__init__(self.probs.shape, validate_args=validate_args)

    @property
    def param_shape(self) -> tuple:
        """The shape of ``probs`` (torch's ``param_shape``)."""
        return tuple(self.probs.shape)

    @property
    def mean(self) -> GraphTensor:
        """``probs``."""
        return self._guarded(self.probs)

    @property
    def mode(self) -> GraphTensor:
        """1 where ``probs > 1/2``, 0 below, NaN at 1/2 (torch's)."""
        p = self.probs
        return self._guarded(ops.where(ops.eq(p, 0.5), math.nan, ops.cast(ops.ge(p, 0.5), p.dtype)))

    @property
    def variance(self) -> GraphTensor:
        """``probs (1 - probs)``."""
        return self._guarded(self.probs * (1 - self.probs))

    def sample(self, sample_shape=()) -> GraphTensor:
        """0/1 draws (of ``probs``' dtype) by ``lm.bernoulli``; no gradient."""
        p = self.probs.detach()
        return self._guarded(ops.bernoulli(p.expand(*self._extended_shape(sample_shape))))

    def log_prob(self, value) -> GraphTensor:
        """``x logits - softplus(logits)`` (torch's ``-binary_cross_entropy_with_logits``); given ``probs``
        of exactly 0 or 1, the exact 0 at the certain value and -inf elsewhere (torch's clamped logits give
        ``log(1 - eps)`` and ``log(eps)``), with torch's gradient there (0: the clamp's)."""
        x = self._value(value, "log_prob")
        out = x * self.logits - ops.softplus(self.logits)
        if self._given == ("probs",):
            out = exact_at_certainty(self.probs, ops.eq(x, self.probs), out)
        return self._validate_sample(x, out)

    def entropy(self) -> GraphTensor:
        """``softplus(logits) - probs logits`` (torch's ``binary_cross_entropy_with_logits``); given
        ``logits``, as ``softplus(-|l|) + |l| sigmoid(-|l|)`` (the same, by the symmetry ``H(l) = H(-l)``),
        whose terms do not cancel: exact to the last bits where ``probs`` rounds to 1 (torch's is 0 or
        ``sigmoid(-l)`` there, its true value ``sigmoid(-l) (1 + l)``)."""
        if self._given == ("logits",):
            a = ops.abs(self.logits)
            return self._guarded(ops.softplus(-a) + a * ops.sigmoid(-a))
        return self._guarded(ops.softplus(self.logits) - self.probs * self.logits)

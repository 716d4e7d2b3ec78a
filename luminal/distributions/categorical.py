"""Categorical and OneHotCategorical (probs | logits over the last dim), torch.distributions'."""

from __future__ import annotations

import math

from luminal.core import dtype as dt
from luminal.core.errors import op_error
from luminal.distributions import constraints
from luminal.distributions.bernoulli import clamp_probs, exact_at_certainty, probs_or_logits
from luminal.distributions.distribution import Distribution, broadcast_all
from luminal.frontend import ops
from luminal.frontend.ops.core import broadcast_shapes
from luminal.frontend.ops.random import exponential_fill
from luminal.frontend.tensor import GraphTensor


class Categorical(Distribution):
    """torch.distributions.Categorical: the index ``i`` of the last dim with probability ``probs[..., i]``
    (normalised to sum 1) or ``softmax(logits)[..., i]``; samples are int32 (luminal's integer type).

    Args:
        probs: non-negative weights along the last dim (exactly one of ``probs`` and ``logits``).
        logits: unnormalised log-probabilities along the last dim.
        validate_args: check the parameter (and ``log_prob``'s values); default torch's, True.
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    _params = {"probs": 1, "logits": 1}

    def __init__(self, probs=None, logits=None, validate_args=None) -> None:
        given = probs_or_logits(type(self).__name__, probs, logits)
        self._given = (given,)
        (t,) = broadcast_all(type(self).__name__, probs if given == "probs" else logits, event_dims=[1])
        if t.ndim < 1:
            raise op_error(ValueError, type(self).__name__, f"`{given}` must be at least one-dimensional")
        if given == "probs":
            self.probs = t / t.sum(-1, keepdim=True)
            self.logits = ops.log(clamp_probs(self.probs))
        else:
            self.logits = t - ops.logsumexp(t, -1, keepdim=True)
            self.probs = ops.softmax(t, -1)
        self._num_events = t.shape[-1]
        super().__init__(t.shape[:-1], validate_args=validate_args)  # (probs checked normalised, as torch's)

    @property
    def support(self) -> constraints.Constraint:
        """``integer_interval(0, K - 1)``."""
        return constraints.integer_interval(0, self._num_events - 1)

    @property
    def param_shape(self) -> tuple:
        """The shape of ``probs`` (torch's ``param_shape``)."""
        return tuple(self.probs.shape)

    @property
    def mean(self) -> GraphTensor:
        """NaN (the indices have no meaningful mean), as torch's."""
        return self._guarded(ops.full_like(self.probs[..., 0], math.nan))

    @property
    def variance(self) -> GraphTensor:
        """NaN, as torch's."""
        return self._guarded(ops.full_like(self.probs[..., 0], math.nan))

    @property
    def mode(self) -> GraphTensor:
        """The most probable index (the first among ties)."""
        return self._guarded(ops.argmax(self.probs, -1))

    def sample(self, sample_shape=()) -> GraphTensor:
        """int32 indices by the Gumbel-max race: ``argmax(log(probs) - log(E))`` for independent
        standard exponentials ``E`` (``Tensor.exponential_``'s): each index wins with its probability,
        and a zero probability never does. No gradient."""
        shape = self._extended_shape(sample_shape)
        e = exponential_fill(self._noise_like((*shape, self._num_events)))
        return self._guarded(ops.argmax(ops.log(self.probs.detach()) - ops.log(e), -1))

    def log_prob(self, value) -> GraphTensor:
        """``logits`` at the index ``value`` (an integer tensor broadcast against ``batch_shape``); given
        ``probs``, exactly -inf at a class of probability 0 and 0 at one of probability 1
        (``exact_at_certainty``)."""
        x = self._value(value, "log_prob")
        idx = ops.cast(x, dt.int32) if x.dtype != dt.int32 else x
        shape = broadcast_shapes("Categorical.log_prob", shapes=[idx.shape, self._batch_shape])
        logits = self.logits.expand(*shape, self._num_events)
        safe = ops.clamp(idx, 0, self._num_events - 1)  # (an index outside is the support error when validating)
        at = safe.expand(*shape).unsqueeze(-1)
        out = ops.take_along_dim(logits, at, -1).squeeze(-1)
        if self._given == ("probs",):  # (a probability of exactly 0 or 1: -inf or 0, not log(eps) or log(1 - eps))
            p = ops.take_along_dim(self.probs.expand(*shape, self._num_events), at, -1).squeeze(-1)
            out = exact_at_certainty(p, ops.eq(p, 1), out)
        # an index outside [0, K) (validate_args=False: torch's gather raises) has probability 0, not the
        # clamped index's
        out = ops.where(ops.eq(safe, idx), out, -math.inf)
        return self._validate_sample(x, out)

    def entropy(self) -> GraphTensor:
        """``-sum(probs logits)`` (logits clamped to the dtype's most negative number, so that a zero
        probability adds 0, as torch's)."""
        logits = ops.clamp(self.logits, min=float(dt.finfo(self.logits.dtype).min))
        return self._guarded(-(logits * self.probs).sum(-1))


class OneHotCategorical(Distribution):
    """torch.distributions.OneHotCategorical: a Categorical's index as a one-hot vector along the last
    dim (of the parameters' float dtype); ``event_shape`` is ``(K,)``.

    Args:
        probs: non-negative weights along the last dim (exactly one of ``probs`` and ``logits``).
        logits: unnormalised log-probabilities along the last dim.
        validate_args: check the parameter (and ``log_prob``'s values); default torch's, True.
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    _params = {"probs": 1, "logits": 1}

    def __init__(self, probs=None, logits=None, validate_args=None) -> None:
        self._categorical = Categorical(probs, logits, validate_args)
        self.probs, self.logits = self._categorical.probs, self._categorical.logits
        self._given = self._categorical._given
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:], validate_args=False)
        self._validate_args, self._guards = self._categorical._validate_args, self._categorical._guards

    def expand(self, batch_shape, _instance=None) -> OneHotCategorical:
        """torch's ``expand``: the parameters broadcast to ``batch_shape``."""
        new = super().expand(batch_shape)
        new._categorical = self._categorical.expand(batch_shape)
        return new

    @property
    def param_shape(self) -> tuple:
        """The shape of ``probs``."""
        return tuple(self.probs.shape)

    @property
    def mean(self) -> GraphTensor:
        """``probs``."""
        return self._guarded(self.probs)

    @property
    def mode(self) -> GraphTensor:
        """The one-hot vector of the most probable index."""
        k = self.probs.shape[-1]
        return self._guarded(ops.cast(ops.one_hot(ops.argmax(self.probs, -1), k), self.probs.dtype))

    @property
    def variance(self) -> GraphTensor:
        """``probs (1 - probs)``."""
        return self._guarded(self.probs * (1 - self.probs))

    def sample(self, sample_shape=()) -> GraphTensor:
        """One-hot vectors of the Categorical's draws; no gradient."""
        k = self.probs.shape[-1]
        return ops.cast(ops.one_hot(self._categorical.sample(sample_shape), k), self.probs.dtype)

    def log_prob(self, value) -> GraphTensor:
        """The Categorical's ``log_prob`` at the index of the 1 in each vector."""
        x = self._value(value, "log_prob")
        return self._validate_sample(x, self._categorical.log_prob(ops.argmax(x, -1)))

    def entropy(self) -> GraphTensor:
        """The Categorical's entropy."""
        return self._categorical.entropy()

"""TransformedDistribution, torch.distributions': a base distribution pushed through Transforms
(``transforms.py``): draws are ``t(base draw)``, ``log_prob`` the base's at ``t.inv(y)`` minus the
Jacobian's log-determinant, ``cdf``/``icdf`` the base's through monotone transforms."""

from __future__ import annotations

import copy

from luminal.core.errors import op_error
from luminal.distributions import constraints
from luminal.distributions.distribution import Distribution
from luminal.distributions.independent import Independent, sum_rightmost
from luminal.distributions.transforms import ComposeTransform, Transform
from luminal.frontend.tensor import GraphTensor


class TransformedDistribution(Distribution):
    """torch.distributions.TransformedDistribution: ``X = f(Z)`` for ``Z ~ base_distribution`` and ``f``
    the composition of ``transforms`` (in order). ``sample``/``rsample`` (when the base has it),
    ``log_prob``, ``cdf``/``icdf`` (monotone transforms); mean, variance and entropy raise
    NotImplementedError, as torch's (no closed form in general).

    Args:
        base_distribution: the Distribution of ``Z``.
        transforms: a Transform or a list of them.
        validate_args: check ``log_prob``'s values against the support; default torch's, True.
    """

    arg_constraints: dict = {}

    def __init__(self, base_distribution: Distribution, transforms, validate_args=None) -> None:
        if isinstance(transforms, Transform):
            transforms = [transforms]
        elif isinstance(transforms, (list, tuple)) and all(isinstance(t, Transform) for t in transforms):
            transforms = list(transforms)
        else:
            raise op_error(ValueError, "TransformedDistribution", f"transforms must be a Transform or a list of "
                           f"Transforms, got {transforms!r}")
        if not isinstance(base_distribution, Distribution):
            raise op_error(TypeError, "TransformedDistribution", f"base_distribution must be a Distribution, got "
                           f"{type(base_distribution).__name__}")
        self.transforms = transforms
        base_shape = (*base_distribution.batch_shape, *base_distribution.event_shape)
        base_event_dim = len(base_distribution.event_shape)
        t = ComposeTransform(transforms)
        if len(base_shape) < t.domain.event_dim:
            raise op_error(ValueError, "TransformedDistribution", f"base_distribution needs at least "
                           f"{t.domain.event_dim} dims but has shape {base_shape}")
        shape = t.forward_shape(base_shape)
        expanded = t.inverse_shape(shape)
        if expanded != base_shape:  # (a transform's parameters broadcast the base's batch)
            base_distribution = base_distribution.expand(expanded[:len(expanded) - base_event_dim])
        if t.domain.event_dim > base_event_dim:
            base_distribution = Independent(base_distribution, t.domain.event_dim - base_event_dim)
        self.base_dist = base_distribution
        event_dim = max(t.codomain.event_dim, base_event_dim + t.codomain.event_dim - t.domain.event_dim)
        cut = len(shape) - event_dim
        super().__init__(shape[:cut], shape[cut:], validate_args=validate_args)
        self._guards = list(base_distribution._guards)

    @property
    def has_rsample(self) -> bool:  # type: ignore[override]
        """The base distribution's."""
        return self.base_dist.has_rsample

    @property
    def support(self) -> constraints.Constraint | None:  # type: ignore[override]
        """The last transform's codomain (over the event's dims), or the base's support without transforms."""
        if not self.transforms:
            return self.base_dist.support
        support = self.transforms[-1].codomain
        extra = len(self.event_shape) - support.event_dim
        return constraints.independent(support, extra) if extra > 0 else support

    def _tensors(self):
        return self.base_dist._tensors()

    def expand(self, batch_shape, _instance=None) -> TransformedDistribution:
        """torch's ``expand``: the base expanded to the batch shape the transforms map to ``batch_shape``."""
        batch_shape = tuple(batch_shape)
        shape = (*batch_shape, *self.event_shape)
        for t in reversed(self.transforms):
            shape = t.inverse_shape(shape)
        new = copy.copy(self)
        new.base_dist = self.base_dist.expand(shape[:len(shape) - len(self.base_dist.event_shape)])
        new._batch_shape = batch_shape
        new._guards = list(self._guards)
        return new

    def sample(self, sample_shape=()) -> GraphTensor:
        """The base's draws through the transforms; no gradient."""
        x = self.base_dist.sample(sample_shape)
        for t in self.transforms:
            x = t(x)
        return self._guarded(x)

    def rsample(self, sample_shape=()) -> GraphTensor:
        """The base's reparameterised draws through the transforms (gradients through both)."""
        x = self.base_dist.rsample(sample_shape)
        for t in self.transforms:
            x = t(x)
        return self._guarded(x)

    def log_prob(self, value) -> GraphTensor:
        """The base's ``log_prob`` at ``x = f.inv(y)`` minus each transform's ``log_abs_det_jacobian``
        (each summed over the event's dims), torch's change of variables."""
        y = self._value(value, "log_prob")
        guard, before = self._support_guard(y)
        event_dim = len(self.event_shape)
        out = None
        for t in reversed(self.transforms):
            x = t.inv(y)
            event_dim += t.domain.event_dim - t.codomain.event_dim
            term = -sum_rightmost(t.log_abs_det_jacobian(x, y), event_dim - t.domain.event_dim)
            out = term if out is None else out + term
            y = x
        base = sum_rightmost(self.base_dist.log_prob(y), event_dim - len(self.base_dist.event_shape))
        return self._guarded_first(base if out is None else out + base, guard, before)

    def _monotonize_cdf(self, p: GraphTensor) -> GraphTensor:
        """torch's ``_monotonize_cdf``: ``p`` where the transforms' signs multiply to 1, else
        ``sign (p - 1/2) + 1/2`` (``1 - p`` where the composition decreases; a tensor sign entry by entry)."""
        sign = 1
        for t in self.transforms:
            sign = sign * t.sign
        return p if isinstance(sign, int) and sign == 1 else sign * (p - 0.5) + 0.5

    def cdf(self, value) -> GraphTensor:
        """The base's cdf at ``f.inv(y)``, monotonized (``1 -`` it where ``f`` decreases)."""
        y = self._value(value, "cdf")
        guard, before = self._support_guard(y)
        x = y
        for t in reversed(self.transforms):
            x = t.inv(x)
        return self._guarded_first(self._monotonize_cdf(self.base_dist.cdf(x)), guard, before)

    def _support_guard(self, y: GraphTensor) -> tuple[list, tuple]:
        """torch's check of ``y`` against this distribution's support, made before the base sees
        ``t.inv(y)``: a value outside it (``LogNormal.log_prob(-1.)``) is named as this distribution's
        support, not as the base's (a NaN from ``log(-1)`` is outside ``Normal``'s real line too).
        Returns the run-time guard to add, as a list (empty when the values were known and valid, or
        when not validating), and the graph the result will be in with its number of guards before the
        base adds its own."""
        g = self._graph() if y.graph.host else y.graph
        before = (g, len(g.guards))
        if not (self._validate_args and self.support):
            return [], before
        guard = self._test(y, self.support, "value argument")
        return ([guard] if guard else []), before

    def _guarded_first(self, out: GraphTensor, guard: list, before: tuple) -> GraphTensor:
        """``_guarded(out, guard)`` with the support check moved ahead of the base's check of its value,
        after the parameters' checks (a run raises the first failed guard, torch checks the parameters
        when the distribution is made): a bad value is reported as torch reports it, by this
        distribution."""
        out = self._guarded(out, guard)
        g, at = before
        if guard and out.graph is g:
            params = {message for _, message in self._guards}
            while at < len(g.guards) - 1 and g.guards[at][3] in params:
                at += 1
            g.guards.insert(at, g.guards.pop())  # (``_guarded`` registers ``guard`` last)
        return out

    def icdf(self, value) -> GraphTensor:
        """``f`` of the base's icdf at the monotonized ``p``."""
        x = self.base_dist.icdf(self._monotonize_cdf(self._value(value, "icdf")))
        for t in self.transforms:
            x = t(x)
        return self._guarded(x)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_dist!r}, {self.transforms!r})"

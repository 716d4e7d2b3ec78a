"""torch.distributions.transforms' common bijections over GraphTensors: ``ExpTransform``,
``AffineTransform``, ``SigmoidTransform``, ``TanhTransform``, ``ComposeTransform`` and their inverses
(``t.inv``), under torch's names and semantics: ``t(x)``, ``t.inv(y)``, ``log_abs_det_jacobian(x, y)``,
``domain``/``codomain`` constraints, ``sign``, ``forward_shape``/``inverse_shape`` and ``cache_size``
(1 keeps the last ``x``, ``y`` pair, so that ``t.inv(t(x))`` is ``x`` itself, not a round trip through
``tanh``'s flat ends). ``TransformedDistribution`` (``transformed_distribution.py``) pushes a
distribution through them."""

from __future__ import annotations

import math
import numbers

from luminal.core import dtype as dt
from luminal.core.errors import op_error
from luminal.distributions import constraints
from luminal.distributions.independent import sum_rightmost
from luminal.frontend import ops
from luminal.frontend.ops.core import broadcast_shapes
from luminal.frontend.state import State
from luminal.frontend.tensor import GraphTensor


class Transform:
    """torch.distributions.transforms.Transform: an invertible map ``y = t(x)`` with ``t.inv`` and the
    log of the absolute determinant of its Jacobian, ``log_abs_det_jacobian(x, y)``, summed over the
    last ``domain.event_dim`` dims of ``x``.

    Args:
        cache_size: 0 (torch's default) or 1: remember the last ``(x, y)`` pair, so that the inverse of
            a ``y`` just made is its ``x`` exactly (and the forward map of that ``x`` its ``y``).
    """

    bijective = True
    domain: constraints.Constraint = constraints.real
    codomain: constraints.Constraint = constraints.real

    def __init__(self, cache_size: int = 0) -> None:
        if cache_size not in (0, 1) or isinstance(cache_size, bool):
            raise op_error(ValueError, type(self).__name__, f"cache_size must be 0 or 1, got {cache_size!r} (as "
                           "torch's)")
        self._cache_size, self._cached = cache_size, None

    @property
    def event_dim(self) -> int:
        """The number of dims of ``x`` one map acts on together (``domain.event_dim``)."""
        return self.domain.event_dim

    @property
    def sign(self) -> int | GraphTensor:
        """+1 or -1: whether the map increases or decreases (a tensor for an elementwise one whose
        direction varies, as AffineTransform's with a tensor scale)."""
        raise NotImplementedError(f"{type(self).__name__}.sign")

    @property
    def inv(self) -> Transform:
        """The inverse map, ``_InverseTransform(self)``: ``t.inv(t(x)) == x``."""
        return _InverseTransform(self)

    def _tensor(self, x, op: str) -> GraphTensor:
        if isinstance(x, State):
            raise op_error(TypeError, f"{type(self).__name__}.{op}", "expects a GraphTensor; a Parameter or Buffer "
                           "joins a graph through an op first (x * 1, or lm.Graph's input)")
        if not isinstance(x, GraphTensor):
            raise op_error(TypeError, f"{type(self).__name__}.{op}", f"expects a GraphTensor, got "
                           f"{type(x).__name__}")
        return x

    def __call__(self, x) -> GraphTensor:
        """``y = t(x)`` (the cached ``y`` when ``x`` is the cached ``x``)."""
        x = self._tensor(x, "__call__")
        if self._cached is not None and x is self._cached[0]:
            return self._cached[1]
        y = self._call(x)
        if self._cache_size:
            self._cached = (x, y)
        return y

    def _inv_call(self, y) -> GraphTensor:
        """``x = t.inv(y)`` (the cached ``x`` when ``y`` is the cached ``y``)."""
        y = self._tensor(y, "inv")
        if self._cached is not None and y is self._cached[1]:
            return self._cached[0]
        x = self._inverse(y)
        if self._cache_size:
            self._cached = (x, y)
        return x

    def _call(self, x: GraphTensor) -> GraphTensor:
        raise NotImplementedError(f"{type(self).__name__}.__call__")

    def _inverse(self, y: GraphTensor) -> GraphTensor:
        raise NotImplementedError(f"{type(self).__name__}.inv")

    def log_abs_det_jacobian(self, x, y) -> GraphTensor:
        """``log |dy/dx|`` at ``x`` (with ``y = t(x)``)."""
        raise NotImplementedError(f"{type(self).__name__}.log_abs_det_jacobian")

    def forward_shape(self, shape) -> tuple:
        """The shape of ``t(x)`` for an ``x`` of ``shape``."""
        return tuple(shape)

    def inverse_shape(self, shape) -> tuple:
        """The shape of ``t.inv(y)`` for a ``y`` of ``shape``."""
        return tuple(shape)

    def __eq__(self, other) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class _InverseTransform(Transform):
    """``t.inv``: ``t`` backwards (its domain and codomain swapped, ``-log_abs_det_jacobian(y, x)``)."""

    def __init__(self, transform: Transform) -> None:
        super().__init__(transform._cache_size)
        self._inv = transform

    @property
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        """The forward map's codomain."""
        return self._inv.codomain

    @property
    def codomain(self) -> constraints.Constraint:  # type: ignore[override]
        """The forward map's domain."""
        return self._inv.domain

    @property
    def sign(self) -> int | GraphTensor:
        """The forward map's."""
        return self._inv.sign

    @property
    def inv(self) -> Transform:
        """The forward map."""
        return self._inv

    def __call__(self, x) -> GraphTensor:
        """The forward map's inverse at ``x``."""
        return self._inv._inv_call(x)

    def _inv_call(self, y) -> GraphTensor:
        return self._inv(y)

    def log_abs_det_jacobian(self, x, y) -> GraphTensor:
        """``-log |det|`` of the forward map at ``y``."""
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape) -> tuple:
        """The forward map's ``inverse_shape``."""
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape) -> tuple:
        """The forward map's ``forward_shape``."""
        return self._inv.forward_shape(shape)

    def __eq__(self, other) -> bool:
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    def __hash__(self) -> int:
        return hash(("inv", self._inv))

    def __repr__(self) -> str:
        return f"{self._inv!r}.inv"


class ExpTransform(Transform):
    """torch's ExpTransform: ``y = exp(x)``, ``log |dy/dx| = x``.

    Args:
        cache_size: 0 or 1 (``Transform``).
    """

    codomain = constraints.positive
    sign = 1

    def _call(self, x: GraphTensor) -> GraphTensor:
        return ops.exp(x)

    def _inverse(self, y: GraphTensor) -> GraphTensor:
        return ops.log(y)

    def log_abs_det_jacobian(self, x, y) -> GraphTensor:
        """``x``."""
        return x


def _clipped(p: GraphTensor) -> GraphTensor:
    """torch's ``_clipped_sigmoid`` bounds: ``[tiny, 1 - eps]`` of ``p``'s dtype."""
    f = dt.finfo(p.dtype)
    return ops.clamp(p, float(f.tiny), 1 - float(f.eps))


class SigmoidTransform(Transform):
    """torch's SigmoidTransform: ``y = sigmoid(x)`` clamped into ``[tiny, 1 - eps]`` (so that the inverse,
    ``logit``, stays finite), ``log |dy/dx| = -softplus(-x) - softplus(x)``.

    Args:
        cache_size: 0 or 1 (``Transform``).
    """

    codomain = constraints.unit_interval
    sign = 1

    def _call(self, x: GraphTensor) -> GraphTensor:
        return _clipped(ops.sigmoid(x))

    def _inverse(self, y: GraphTensor) -> GraphTensor:
        y = _clipped(y)
        return ops.log(y) - ops.log1p(-y)

    def log_abs_det_jacobian(self, x, y) -> GraphTensor:
        """``-softplus(-x) - softplus(x)``."""
        return -ops.softplus(-x) - ops.softplus(x)


class TanhTransform(Transform):
    """torch's TanhTransform: ``y = tanh(x)``, ``x = atanh(y)`` (not clamped, as torch's: use
    ``cache_size=1`` to keep the ``x`` of a ``y`` near +-1), ``log |dy/dx| = 2 (log 2 - x - softplus(-2x))``.

    Args:
        cache_size: 0 or 1 (``Transform``).
    """

    codomain = constraints.interval(-1.0, 1.0)
    sign = 1

    def _call(self, x: GraphTensor) -> GraphTensor:
        return ops.tanh(x)

    def _inverse(self, y: GraphTensor) -> GraphTensor:
        return ops.atanh(y)

    def log_abs_det_jacobian(self, x, y) -> GraphTensor:
        """``2 (log 2 - x - softplus(-2 x))``, stable where ``1 - tanh(x)**2`` underflows."""
        return 2.0 * (math.log(2.0) - x - ops.softplus(-2.0 * x))


class AffineTransform(Transform):
    """torch's AffineTransform: ``y = loc + scale x``, ``log |dy/dx| = log |scale|`` per entry (summed over
    the last ``event_dim`` dims).

    Args:
        loc: a number or GraphTensor, broadcast with ``x``.
        scale: a number or GraphTensor (non-zero), broadcast with ``x``.
        event_dim: how many trailing dims form one event (torch's; 0: elementwise).
        cache_size: 0 or 1 (``Transform``).
    """

    def __init__(self, loc, scale, event_dim: int = 0, cache_size: int = 0) -> None:
        super().__init__(cache_size)
        for what, v in (("loc", loc), ("scale", scale)):
            if isinstance(v, bool) or not isinstance(v, (GraphTensor, numbers.Real)):
                raise op_error(TypeError, "AffineTransform", f"{what} must be a number or a GraphTensor, got "
                               f"{type(v).__name__}")
        if isinstance(event_dim, bool) or not isinstance(event_dim, int) or event_dim < 0:
            raise op_error(ValueError, "AffineTransform", f"event_dim must be a non-negative int, got {event_dim!r}")
        self.loc, self.scale, self._event_dim = loc, scale, event_dim

    @property
    def event_dim(self) -> int:
        """The ``event_dim`` given."""
        return self._event_dim

    @property
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        """``real``, over ``event_dim`` dims."""
        return constraints.real if self._event_dim == 0 else constraints.independent(constraints.real, self._event_dim)

    codomain = domain

    @property
    def sign(self) -> int | GraphTensor:
        """The sign of ``scale`` (a tensor when ``scale`` is one)."""
        if isinstance(self.scale, numbers.Real):
            return 1 if self.scale > 0 else -1 if self.scale < 0 else 0
        return ops.sign(self.scale)

    def _call(self, x: GraphTensor) -> GraphTensor:
        return self.loc + self.scale * x

    def _inverse(self, y: GraphTensor) -> GraphTensor:
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y) -> GraphTensor:
        """``log |scale|`` at every entry of ``x`` (broadcast), summed over the last ``event_dim`` dims."""
        if isinstance(self.scale, numbers.Real):
            out = ops.full_like(x, math.log(abs(self.scale)))
        else:
            out = ops.log(ops.abs(self.scale)) + ops.zeros_like(x)
        return sum_rightmost(out, self._event_dim)

    def forward_shape(self, shape) -> tuple:
        """``shape`` broadcast with ``loc``'s and ``scale``'s."""
        return tuple(broadcast_shapes("AffineTransform", shapes=[tuple(shape), *[
            tuple(v.shape) for v in (self.loc, self.scale) if isinstance(v, GraphTensor)]]))

    inverse_shape = forward_shape

    def __eq__(self, other) -> bool:
        def same(a, b):
            return a is b or (isinstance(a, numbers.Real) and isinstance(b, numbers.Real) and a == b)

        return (isinstance(other, AffineTransform) and same(self.loc, other.loc) and same(self.scale, other.scale)
                and self._event_dim == other._event_dim)

    def __hash__(self) -> int:
        return hash(("affine", self._event_dim))

    def __repr__(self) -> str:
        return f"AffineTransform(loc={self.loc!r}, scale={self.scale!r}, event_dim={self._event_dim})"


class ComposeTransform(Transform):
    """torch's ComposeTransform: ``parts`` applied in order; ``log_abs_det_jacobian`` sums theirs (each
    summed over the dims it leaves to the composition's event); no parts is the identity.

    Args:
        parts: a list of Transforms.
        cache_size: 0 or 1 (``Transform``).
    """

    def __init__(self, parts, cache_size: int = 0) -> None:
        super().__init__(cache_size)
        parts = list(parts)
        for p in parts:
            if not isinstance(p, Transform):
                raise op_error(TypeError, "ComposeTransform", f"parts must be Transforms, got {type(p).__name__}")
        self.parts = parts

    @property
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        """The first part's domain, over as many dims as the composition acts on (torch's)."""
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        event_dim = self.parts[-1].codomain.event_dim
        for part in reversed(self.parts):
            event_dim = max(event_dim + part.domain.event_dim - part.codomain.event_dim, part.domain.event_dim)
        return constraints.independent(domain, event_dim - domain.event_dim) if event_dim > domain.event_dim else domain

    @property
    def codomain(self) -> constraints.Constraint:  # type: ignore[override]
        """The last part's codomain, over as many dims as the composition acts on (torch's)."""
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim = max(event_dim + part.codomain.event_dim - part.domain.event_dim, part.codomain.event_dim)
        return (constraints.independent(codomain, event_dim - codomain.event_dim) if event_dim > codomain.event_dim
                else codomain)

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        """Whether every part is."""
        return all(p.bijective for p in self.parts)

    @property
    def sign(self) -> int | GraphTensor:
        """The product of the parts' signs."""
        s = 1
        for p in self.parts:
            s = s * p.sign
        return s

    @property
    def inv(self) -> Transform:
        """The parts' inverses in reverse order."""
        return ComposeTransform([p.inv for p in reversed(self.parts)], self._cache_size)

    def _call(self, x: GraphTensor) -> GraphTensor:
        for p in self.parts:
            x = p(x)
        return x

    def _inverse(self, y: GraphTensor) -> GraphTensor:
        for p in reversed(self.parts):
            y = p.inv(y)
        return y

    def log_abs_det_jacobian(self, x, y) -> GraphTensor:
        """The parts' terms at their own inputs (recomputed from ``x``; free where the parts cache)."""
        if not self.parts:
            return ops.zeros_like(x)
        xs = [x]
        for p in self.parts[:-1]:
            xs.append(p(xs[-1]))
        xs.append(y)
        event_dim, total = self.domain.event_dim, None
        for p, a, b in zip(self.parts, xs[:-1], xs[1:]):
            term = sum_rightmost(p.log_abs_det_jacobian(a, b), event_dim - p.domain.event_dim)
            total = term if total is None else total + term
            event_dim += p.codomain.event_dim - p.domain.event_dim
        return total

    def forward_shape(self, shape) -> tuple:
        """The parts' forward shapes in order."""
        for p in self.parts:
            shape = p.forward_shape(shape)
        return tuple(shape)

    def inverse_shape(self, shape) -> tuple:
        """The parts' inverse shapes in reverse order."""
        for p in reversed(self.parts):
            shape = p.inverse_shape(shape)
        return tuple(shape)

    def __eq__(self, other) -> bool:
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    def __hash__(self) -> int:
        return hash(tuple(self.parts))

    def __repr__(self) -> str:
        return "ComposeTransform(" + ", ".join(repr(p) for p in self.parts) + ")"


__all__ = ["AffineTransform", "ComposeTransform", "ExpTransform", "SigmoidTransform", "TanhTransform", "Transform"]

"""torch.distributions.constraints' names for the sets a parameter or a value must lie in.

Each constraint's ``check(x)`` is a bool GraphTensor of ``x``'s batch shape (its last ``event_dim``
dims reduced: a simplex is checked row by row), built from luminal ops so that the same test runs on
a host tensor now (values known when the distribution is made) or in a graph (a ``Graph.guard``, see
``distribution.py``). ``repr`` is torch's, so that the errors name the constraint as torch's do.
"""

from __future__ import annotations

from luminal.frontend import ops
from luminal.frontend.ops.linalg_more import cholesky_ex
from luminal.frontend.tensor import GraphTensor


def _event_dims(x: GraphTensor, n: int) -> tuple:
    """The last ``n`` dims of ``x``, to reduce a check over (no reshape to ``(*batch, -1)``, which an empty
    batch cannot infer)."""
    return tuple(range(x.ndim - n, x.ndim))


class Constraint:
    """A set of values: ``check(x)`` says which of ``x``'s (batch) entries are in it."""

    is_discrete = False
    event_dim = 0

    def check(self, x: GraphTensor) -> GraphTensor:
        """A bool tensor: True where ``x`` (reduced over the last ``event_dim`` dims) is in the set."""
        raise NotImplementedError(f"{type(self).__name__}.check")

    def __repr__(self) -> str:
        return f"{type(self).__name__[1:]}()"


class _Real(Constraint):
    def check(self, x: GraphTensor) -> GraphTensor:
        return ops.eq(x, x)  # (not NaN)


class _Boolean(Constraint):
    is_discrete = True

    def check(self, x: GraphTensor) -> GraphTensor:
        return ops.logical_or(ops.eq(x, 0), ops.eq(x, 1))


class _GreaterThan(Constraint):
    def __init__(self, lower_bound: float) -> None:
        self.lower_bound = lower_bound

    def check(self, x: GraphTensor) -> GraphTensor:
        return ops.gt(x, self.lower_bound)

    def __repr__(self) -> str:
        return f"{type(self).__name__[1:]}(lower_bound={self.lower_bound})"


class _LessThan(Constraint):
    """``x < upper_bound`` (the bound may be a tensor: Uniform's ``low < high``)."""

    def __init__(self, upper_bound) -> None:
        self.upper_bound = upper_bound

    def check(self, x: GraphTensor) -> GraphTensor:
        return ops.lt(x, self.upper_bound)

    def __repr__(self) -> str:
        b = self.upper_bound
        return f"LessThan(upper_bound={f'tensor of shape {tuple(b.shape)}' if isinstance(b, GraphTensor) else b})"


class _GreaterThanEq(_GreaterThan):
    def check(self, x: GraphTensor) -> GraphTensor:
        return ops.ge(x, self.lower_bound)


class _Interval(Constraint):
    """``lower_bound <= x <= upper_bound`` (the bounds may be tensors: Uniform's support)."""

    def __init__(self, lower_bound, upper_bound) -> None:
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, x: GraphTensor) -> GraphTensor:
        return ops.logical_and(ops.ge(x, self.lower_bound), ops.le(x, self.upper_bound))

    def __repr__(self) -> str:
        def show(b):
            return f"tensor of shape {tuple(b.shape)}" if isinstance(b, GraphTensor) else b
        return f"{type(self).__name__[1:]}(lower_bound={show(self.lower_bound)}, upper_bound={show(self.upper_bound)})"


class _HalfOpenInterval(_Interval):
    """``lower_bound <= x < upper_bound``."""

    def check(self, x: GraphTensor) -> GraphTensor:
        return ops.logical_and(ops.ge(x, self.lower_bound), ops.lt(x, self.upper_bound))


class _IntegerInterval(_Interval):
    is_discrete = True

    def check(self, x: GraphTensor) -> GraphTensor:
        return ops.logical_and(super().check(x), ops.eq(x, ops.floor(x) if x.dtype.is_float else x))


class _IntegerGreaterThanEq(_GreaterThan):
    is_discrete = True

    def check(self, x: GraphTensor) -> GraphTensor:
        return ops.logical_and(ops.ge(x, self.lower_bound), ops.eq(x, ops.floor(x) if x.dtype.is_float else x))


class _Simplex(Constraint):
    """Non-negative entries summing to 1 (within 1e-6, torch's tolerance) along the last dim."""

    event_dim = 1

    def check(self, x: GraphTensor) -> GraphTensor:
        return ops.logical_and(ops.all(ops.ge(x, 0), -1), ops.lt(ops.abs(ops.sub(x.sum(-1), 1)), 1e-6))


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, x: GraphTensor) -> GraphTensor:
        return ops.logical_and(ops.all(_Boolean().check(x), -1), ops.eq(x.sum(-1), 1))


class _Independent(Constraint):
    """torch's ``independent(base, n)``: ``base`` holds at every entry of the last ``n`` dims of its
    batch (they become event dims: an Independent distribution's support, ``real_vector``)."""

    def __init__(self, base: Constraint, reinterpreted_batch_ndims: int) -> None:
        self.base_constraint, self.reinterpreted_batch_ndims = base, reinterpreted_batch_ndims
        self.is_discrete, self.event_dim = base.is_discrete, base.event_dim + reinterpreted_batch_ndims

    def check(self, x: GraphTensor) -> GraphTensor:
        ok = self.base_constraint.check(x)
        return ops.all(ok, _event_dims(ok, self.reinterpreted_batch_ndims)) if self.reinterpreted_batch_ndims else ok

    def __repr__(self) -> str:
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class _LowerCholesky(Constraint):
    """Lower-triangular square matrices with a positive diagonal."""

    event_dim = 2

    def check(self, x: GraphTensor) -> GraphTensor:
        lower = ops.all(ops.eq(ops.tril(x), x), _event_dims(x, 2))
        return ops.logical_and(lower, ops.all(ops.gt(ops.diagonal(x, 0, -2, -1), 0), -1))


class _PositiveDefinite(Constraint):
    """Symmetric matrices whose Cholesky factorisation succeeds (torch's test, ``cholesky_ex``'s info 0)."""

    event_dim = 2

    def check(self, x: GraphTensor) -> GraphTensor:
        sym = ops.all(ops.isclose(x, x.mT, atol=1e-6), _event_dims(x, 2))
        return ops.logical_and(sym, ops.eq(cholesky_ex(x).info, 0))


real = _Real()
boolean = _Boolean()
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
unit_interval = _Interval(0.0, 1.0)
nonnegative_integer = _IntegerGreaterThanEq(0)
simplex = _Simplex()
one_hot = _OneHot()
real_vector = _Independent(real, 1)
lower_cholesky = _LowerCholesky()
positive_definite = _PositiveDefinite()
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
independent = _Independent
interval = _Interval
half_open_interval = _HalfOpenInterval
integer_interval = _IntegerInterval

__all__ = ["Constraint", "boolean", "greater_than", "greater_than_eq", "half_open_interval", "independent",
           "integer_interval", "interval", "less_than", "lower_cholesky", "nonnegative", "nonnegative_integer",
           "one_hot", "positive", "positive_definite", "real", "real_vector", "simplex", "unit_interval"]

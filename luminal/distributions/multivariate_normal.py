"""MultivariateNormal(loc, covariance_matrix | precision_matrix | scale_tril), torch.distributions'."""

from __future__ import annotations

import math

from luminal import linalg
from luminal.core import dtype as dt
from luminal.core.errors import op_error
from luminal.distributions import constraints
from luminal.distributions.distribution import Distribution, broadcast_all
from luminal.frontend import ops
from luminal.frontend.ops.core import broadcast_shapes
from luminal.frontend.tensor import GraphTensor


def mahalanobis(scale_tril: GraphTensor, diff: GraphTensor) -> GraphTensor:
    """``|L^-1 diff|**2`` over the last dim (a triangular solve), batch dims broadcast."""
    n = diff.shape[-1]
    batch = broadcast_shapes("MultivariateNormal", shapes=[scale_tril.shape[:-2], diff.shape[:-1]])
    low, d = scale_tril.expand(*batch, n, n), diff.expand(*batch, n)
    return ops.square(linalg.solve_triangular(low, d.unsqueeze(-1), upper=False).squeeze(-1)).sum(-1)


def half_log_det(scale_tril: GraphTensor) -> GraphTensor:
    """``log det(L L^T) / 2 = sum(log(diag(L)))``."""
    return ops.log(ops.diagonal(scale_tril, 0, -2, -1)).sum(-1)


class MultivariateNormal(Distribution):
    """torch.distributions.MultivariateNormal: the Gaussian over vectors of mean ``loc`` and covariance
    ``L L^T``, given by exactly one of ``covariance_matrix`` (factored by ``lm.linalg.cholesky``),
    ``precision_matrix`` (its inverse, ``lm.linalg.inv``, factored) or ``scale_tril`` (``L`` itself,
    lower triangular with a positive diagonal). ``event_shape`` is ``(n,)``; batch dims broadcast.

    Args:
        loc: the mean, ``(*, n)``.
        covariance_matrix: a positive-definite ``(*, n, n)``.
        precision_matrix: a positive-definite ``(*, n, n)``, the covariance's inverse.
        scale_tril: a lower-triangular ``(*, n, n)`` with a positive diagonal.
        validate_args: check the parameters (and ``log_prob``'s values); default torch's, True.
    """

    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True
    _params = {"loc": 1, "scale_tril": 2}

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None) -> None:
        given = {k: v for k, v in (("covariance_matrix", covariance_matrix), ("precision_matrix", precision_matrix),
                                   ("scale_tril", scale_tril)) if v is not None}
        if len(given) != 1:
            raise ValueError("MultivariateNormal: exactly one of covariance_matrix or precision_matrix or scale_tril "
                             f"may be specified, got {', '.join(given) or 'none'}")
        (name, matrix), = given.items()
        self.loc, m = broadcast_all("MultivariateNormal", loc, matrix, event_dims=[1, 2])
        if self.loc.ndim < 1 or m.ndim < 2:
            raise op_error(ValueError, "MultivariateNormal", f"loc must be at least one-dimensional and {name} at "
                           f"least two-dimensional, got shapes {tuple(self.loc.shape)} and {tuple(m.shape)}")
        if m.dtype not in (dt.float32, dt.float64):  # (lm.linalg's factorisations and solves: torch's CPU ones too)
            raise op_error(TypeError, "MultivariateNormal", f"needs float32 or float64 parameters (its Cholesky "
                           f"factor and triangular solves), got loc and {name} of {m.dtype.name}", self.loc, m)
        n = self.loc.shape[-1]
        if m.shape[-2:] != (n, n):
            raise op_error(ValueError, "MultivariateNormal", f"{name} must be (*, {n}, {n}) for a loc of {n} "
                           f"entries, got shape {tuple(m.shape)}")
        self._given, self._matrix = ("loc", name), m
        if name == "scale_tril":
            self.scale_tril = m
        elif name == "covariance_matrix":
            self.scale_tril = linalg.cholesky(m)
        else:
            self.scale_tril = linalg.cholesky(linalg.inv(m))
        super().__init__(self.loc.shape[:-1], (n,), validate_args=validate_args)

    @property
    def covariance_matrix(self) -> GraphTensor:
        """``L L^T`` (or the matrix given)."""
        return self._matrix if self._given[1] == "covariance_matrix" else self.scale_tril @ self.scale_tril.mT

    @property
    def precision_matrix(self) -> GraphTensor:
        """The covariance's inverse (or the matrix given)."""
        return self._matrix if self._given[1] == "precision_matrix" else linalg.inv(self.covariance_matrix)

    def expand(self, batch_shape, _instance=None) -> MultivariateNormal:
        """torch's ``expand``: the parameters broadcast to ``batch_shape``."""
        new = super().expand(batch_shape)
        new._matrix = self._matrix.expand(*batch_shape, *self._matrix.shape[-2:])
        return new

    @property
    def mean(self) -> GraphTensor:
        """``loc``."""
        return self._guarded(self.loc)

    @property
    def mode(self) -> GraphTensor:
        """``loc``."""
        return self._guarded(self.loc)

    @property
    def variance(self) -> GraphTensor:
        """The covariance's diagonal, the row sums of ``L**2``."""
        return self._guarded(ops.square(self.scale_tril).sum(-1).expand(*self._batch_shape, *self._event_shape))

    def rsample(self, sample_shape=()) -> GraphTensor:
        """``loc + L eps`` for standard normal vectors ``eps`` (``lm.randn_like``)."""
        eps = ops.randn_like(self._noise_like(self._extended_shape(sample_shape)))
        return self._guarded(self.loc + (self.scale_tril @ eps.unsqueeze(-1)).squeeze(-1))

    def log_prob(self, value) -> GraphTensor:
        """``-(n log(2 pi) + |L^-1 (x - loc)|**2) / 2 - sum(log(diag(L)))``."""
        x = self._value(value, "log_prob")
        n = self._event_shape[0]
        m = mahalanobis(self.scale_tril, x - self.loc)
        return self._validate_sample(x, -0.5 * (n * math.log(2 * math.pi) + m) - half_log_det(self.scale_tril))

    def entropy(self) -> GraphTensor:
        """``n (1 + log(2 pi)) / 2 + sum(log(diag(L)))``."""
        n = self._event_shape[0]
        return self._guarded((0.5 * n * (1 + math.log(2 * math.pi)) + half_log_det(self.scale_tril))
                             .expand(*self._batch_shape))

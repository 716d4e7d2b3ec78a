"""Independent(base_distribution, reinterpreted_batch_ndims), torch.distributions'."""

from __future__ import annotations

from luminal.core.errors import op_error
from luminal.distributions.constraints import Constraint, independent
from luminal.distributions.distribution import Distribution
from luminal.frontend.tensor import GraphTensor


def sum_rightmost(x: GraphTensor, n: int) -> GraphTensor:
    """``x`` summed over its last ``n`` dims (torch's ``_sum_rightmost``)."""
    return x.sum(tuple(range(x.ndim - n, x.ndim))) if n > 0 else x


class Independent(Distribution):
    """torch.distributions.Independent: ``base_distribution`` with its last ``reinterpreted_batch_ndims``
    batch dims read as event dims (``log_prob`` and ``entropy`` summed over them): a diagonal Normal
    as one distribution over vectors.

    Args:
        base_distribution: the distribution.
        reinterpreted_batch_ndims: how many of its batch dims (from the right) become event dims.
        validate_args: check ``log_prob``'s values; default the base distribution's.
    """

    arg_constraints: dict = {}

    def __init__(self, base_distribution: Distribution, reinterpreted_batch_ndims: int, validate_args=None) -> None:
        n = reinterpreted_batch_ndims
        shape = base_distribution.batch_shape
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= len(shape):
            raise op_error(ValueError, "Independent", f"expected 0 <= reinterpreted_batch_ndims <= "
                           f"len(base_distribution.batch_shape) = {len(shape)}, actual {n!r}")
        self.base_dist, self.reinterpreted_batch_ndims = base_distribution, n
        cut = len(shape) - n
        super().__init__(shape[:cut], (*shape[cut:], *base_distribution.event_shape),
                         validate_args=base_distribution._validate_args if validate_args is None else validate_args)
        self._guards = base_distribution._guards

    @property
    def has_rsample(self) -> bool:  # type: ignore[override]
        """The base distribution's."""
        return self.base_dist.has_rsample

    @property
    def support(self) -> Constraint | None:  # type: ignore[override]
        """torch's: the base distribution's support over the reinterpreted dims too,
        ``independent(base support, reinterpreted_batch_ndims)`` (``log_prob`` leaves the check of a value
        to the base's, entry by entry)."""
        base = self.base_dist.support
        return independent(base, self.reinterpreted_batch_ndims) if base and self.reinterpreted_batch_ndims else base

    def _tensors(self):
        return self.base_dist._tensors()

    def expand(self, batch_shape, _instance=None) -> Independent:
        """torch's ``expand``: the base expanded to ``batch_shape`` plus the reinterpreted dims."""
        n = self.reinterpreted_batch_ndims
        base_shape = self.base_dist.batch_shape
        return Independent(self.base_dist.expand((*batch_shape, *base_shape[len(base_shape) - n:])), n,
                           self._validate_args)

    @property
    def mean(self) -> GraphTensor:
        """The base distribution's."""
        return self.base_dist.mean

    @property
    def mode(self) -> GraphTensor:
        """The base distribution's."""
        return self.base_dist.mode

    @property
    def variance(self) -> GraphTensor:
        """The base distribution's."""
        return self.base_dist.variance

    def sample(self, sample_shape=()) -> GraphTensor:
        """The base distribution's draws."""
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()) -> GraphTensor:
        """The base distribution's reparameterised draws."""
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value) -> GraphTensor:
        """The base's ``log_prob`` summed over the reinterpreted dims."""
        return sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self) -> GraphTensor:
        """The base's entropy summed over the reinterpreted dims."""
        return sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def cdf(self, value) -> GraphTensor:
        """Not defined for the joint (torch's raises NotImplementedError too)."""
        raise NotImplementedError("Independent.cdf")

    def __repr__(self) -> str:
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"

"""Dropout: in training mode a fresh random mask on every run of the compiled program."""

from __future__ import annotations

import warnings

from luminal.core.errors import check_number, op_error, user_stacklevel
from luminal.frontend.checks import check_tensors
from luminal.nn.module import Module


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False):  # noqa: A002
    """torch's ``F.dropout``: zero each element with probability ``p`` and scale the survivors by
    ``1/(1-p)`` so the expectation is unchanged. The noise is a graph input drawn from ``x.graph.rng``
    on every call, so masks differ between runs and are reproducible by seeding that generator.

    Args:
        input: the tensor.
        p: the probability of an element being zeroed.
        training: apply it (else the input is returned).
        inplace: ignored (graphs have no in-place ops).
    """
    x = input
    check_tensors("dropout", input=x)
    if not 0.0 <= check_number("dropout", "p", p, x) <= 1.0:
        raise op_error(ValueError, "dropout", f"probability has to be between 0 and 1, but got {p}", x)
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    keep = x.graph.rand(x.shape) >= p
    return x * keep.to(x.dtype) * (1.0 / (1.0 - p))


class Dropout(Module):
    """torch's ``nn.Dropout(p=0.5, inplace=False)``: ``dropout`` in training mode, the identity in eval mode.

    Args:
        p: the probability of an element being zeroed. inplace: ignored.
    """

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= check_number("Dropout", "p", p) <= 1.0:
            raise ValueError(f"Dropout: probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, x):
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


def _channel_dropout(x, p: float, training: bool, nd: int, name: str):
    """Zero whole channels (every spatial element of one (sample, channel) at once) with probability
    ``p``; the survivors are scaled by ``1/(1-p)``. ``x`` is (N, C, *spatial) or unbatched (C, *spatial)
    with ``nd`` spatial dims."""
    check_tensors(name, input=x)
    if nd == 2 and x.ndim == 3:  # torch 2.13's reading, with its warning (torch says (C, H, W) in the future)
        warnings.warn(f"{name}: received a 3-d input, taken as (N, C, L) with one mask per (sample, channel), as "
                      f"torch 2.13 does (torch says a future release takes it as (C, H, W)); dropout1d keeps this",
                      UserWarning, stacklevel=user_stacklevel())
        nd = 1
    if not 0.0 <= check_number(name, "p", p, x) <= 1.0:
        raise op_error(ValueError, name, f"probability has to be between 0 and 1, but got {p}", x)
    if x.ndim not in (nd + 1, nd + 2):
        raise op_error(ValueError, name, f"expected an input of {nd + 1} (unbatched) or {nd + 2} (batched) dims, "
                       f"got shape {tuple(x.shape)}", x)
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    lead = x.ndim - nd
    keep = x.graph.rand(tuple(x.shape[:lead]) + (1,) * nd) >= p
    return x * keep.to(x.dtype) * (1.0 / (1.0 - p))


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False):  # noqa: A002
    """torch's ``F.dropout1d``: zero whole channels of an (N, C, L) or (C, L) input.

    Args:
        input: the tensor.
        p: the probability of a channel being zeroed.
        training: apply it (else the input is returned).
        inplace: ignored.
    """
    return _channel_dropout(input, p, training, 1, "dropout1d")


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False):  # noqa: A002
    """torch's ``F.dropout2d``: zero whole channels of an (N, C, H, W) or (C, H, W) input.

    Args:
        input: the tensor. p: the probability of a channel being zeroed. training: apply it. inplace: ignored.

    A 3-d input is taken as (N, C, L), as torch 2.13 does (``_channel_dropout``).
    """
    return _channel_dropout(input, p, training, 2, "dropout2d")


def dropout3d(input, p: float = 0.5, training: bool = True, inplace: bool = False):  # noqa: A002
    """torch's ``F.dropout3d``: zero whole channels of an (N, C, D, H, W) or (C, D, H, W) input.

    Args:
        input: the tensor. p: the probability of a channel being zeroed. training: apply it. inplace: ignored.
    """
    return _channel_dropout(input, p, training, 3, "dropout3d")


class _DropoutNd(Dropout):
    _nd = 1

    def forward(self, x):
        return _channel_dropout(x, self.p, self.training, self._nd, type(self).__name__)


class Dropout1d(_DropoutNd):
    """torch's ``nn.Dropout1d(p=0.5, inplace=False)``: in training mode, zero whole channels of an
    (N, C, L) or (C, L) input with probability ``p`` and scale the rest by ``1/(1-p)``.

    Args:
        p: the probability of a channel being zeroed. inplace: ignored.
    """

    _nd = 1


class Dropout2d(_DropoutNd):
    """torch's ``nn.Dropout2d(p=0.5, inplace=False)``: channel dropout for (N, C, H, W) or (C, H, W).

    Args:
        p: the probability of a channel being zeroed. inplace: ignored.
    """

    _nd = 2


class Dropout3d(_DropoutNd):
    """torch's ``nn.Dropout3d(p=0.5, inplace=False)``: channel dropout for (N, C, D, H, W) or (C, D, H, W).

    Args:
        p: the probability of a channel being zeroed. inplace: ignored.
    """

    _nd = 3

"""Alpha dropout (``nn.AlphaDropout``, ``nn.FeatureAlphaDropout``): dropout for self-normalising (SELU)
networks, with torch's formula.

Plain dropout's zeros would shift a SELU network's activations away from mean 0 and variance 1. Here a
dropped element is set to SELU's negative saturation ``-alpha`` (``alpha = 1.6732... * 1.0507... =
1.7580993408473766``), and then every element goes through the affine map ``a * x + b`` that restores
mean 0 and variance 1 for inputs that had them: ``a = 1 / sqrt((alpha**2 * p + 1) * (1 - p))`` and
``b = a * alpha * p``. As torch writes it, with ``keep`` the 0/1 mask: ``x * (keep * a) + (keep - 1) *
alpha * a + alpha * a * p``, so the gradient is ``a * keep``.

The mask is a graph input drawn on every run (``Graph.rand``, as ``dropout.py``'s): one per element, or
one per (sample, channel) for the feature variant. Eval mode (``training=False``) is the identity."""

from __future__ import annotations

import math

from luminal.core.errors import check_number, op_error
from luminal.frontend.checks import check_tensors
from luminal.frontend.tensor import GraphTensor
from luminal.nn.layers._util import check_float
from luminal.nn.module import Module

ALPHA = 1.7580993408473766
"""SELU's ``scale * alpha``: ``-ALPHA`` is the value SELU tends to at minus infinity."""


def affine_constants(p: float) -> tuple[float, float]:
    """``(a, b)`` of the affine map after dropping with probability ``p`` (torch's, in double):
    ``a = 1 / sqrt((ALPHA**2 * p + 1) * (1 - p))`` and ``b = ALPHA * a * p``. For ``p < 1``."""
    a = 1.0 / math.sqrt((ALPHA * ALPHA * p + 1) * (1 - p))
    return a, ALPHA * a * p


def _check_p(name: str, p, *operands) -> None:
    if not 0.0 <= check_number(name, "p", p, *operands) <= 1.0:
        raise op_error(ValueError, name, f"dropout probability has to be between 0 and 1, but got {p}", *operands)


def _alpha_dropout(x: GraphTensor, p: float, training: bool, feature: bool, name: str) -> GraphTensor:
    check_tensors(name, input=x)
    _check_p(name, p, x)
    if not training or p == 0.0:  # (torch checks the input only when it draws a mask)
        return x
    check_float(name, x)
    if feature and x.ndim < 2:
        raise op_error(ValueError, name, f"feature dropout needs an input of at least 2 dims (N, C, *), got "
                       f"{x.ndim}", x)
    if p == 1.0:
        return x * 0.0  # torch: input * 0 (a is infinite at p = 1)
    shape = tuple(x.shape[:2]) + (1,) * (x.ndim - 2) if feature else tuple(x.shape)
    keep = (x.graph.rand(shape) >= p).to(x.dtype)  # kept with probability 1 - p
    a, b = affine_constants(p)
    shift = (keep - 1.0) * (ALPHA * a) + b  # -ALPHA * a + b where dropped, b where kept
    return x * (keep * a) + shift


def alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False) -> GraphTensor:  # noqa: A002
    """torch's ``F.alpha_dropout``: each element dropped with probability ``p`` (set to ``-ALPHA``),
    then ``a * x + b`` keeps mean 0 and variance 1 (module docstring). Note torch's default
    ``training=False``: the identity unless asked.

    Args:
        input: a float tensor.
        p: the probability of an element being dropped.
        training: apply it (else the input is returned).
        inplace: ignored (graphs have no in-place ops).
    """
    return _alpha_dropout(input, p, training, False, "alpha_dropout")


def feature_alpha_dropout(input, p: float = 0.5, training: bool = False,  # noqa: A002
                          inplace: bool = False) -> GraphTensor:
    """torch's ``F.feature_alpha_dropout``: ``alpha_dropout`` with one draw per (sample, channel) of an
    (N, C, *) input, dropping whole channels. torch's default ``training=False``.

    Args:
        input: a float tensor of at least 2 dims.
        p: the probability of a channel being dropped.
        training: apply it (else the input is returned).
        inplace: ignored.
    """
    return _alpha_dropout(input, p, training, True, "feature_alpha_dropout")


class AlphaDropout(Module):
    """torch's ``nn.AlphaDropout(p=0.5, inplace=False)``: ``alpha_dropout`` in training mode, the identity
    in eval mode.

    Args:
        p: the probability of an element being dropped. inplace: ignored.
    """

    _feature = False

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        _check_p(type(self).__name__, p)
        self.p, self.inplace = p, inplace

    def forward(self, x):
        return _alpha_dropout(x, self.p, self.training, self._feature, f"{type(self).__name__}({self.extra_repr()})")

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class FeatureAlphaDropout(AlphaDropout):
    """torch's ``nn.FeatureAlphaDropout(p=0.5, inplace=False)``: ``feature_alpha_dropout`` (whole
    channels of an (N, C, *) input) in training mode, the identity in eval mode.

    Args:
        p: the probability of a channel being dropped. inplace: ignored.
    """

    _feature = True

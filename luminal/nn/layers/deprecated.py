"""torch's deprecated aliases, kept so that older torch code ports unchanged: ``nn.NLLLoss2d`` (now
``NLLLoss``, which takes (N, C, H, W) inputs itself), ``F.upsample_nearest`` and ``F.upsample_bilinear``
(now ``interpolate``). Each warns as torch's does, with torch's warning category."""

from __future__ import annotations

import warnings

from luminal.core.errors import renamed, user_stacklevel
from luminal.nn.layers.loss import NLLLoss
from luminal.nn.layers.sampling import interpolate


class NLLLoss2d(NLLLoss):
    """torch's deprecated ``nn.NLLLoss2d(weight=None, size_average=None, ignore_index=-100, reduce=None,
    reduction='mean')``: ``NLLLoss`` (it warns with torch's FutureWarning when made).

    Args:
        weight, size_average, ignore_index, reduce, reduction: as ``NLLLoss``.
    """

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean"):
        warnings.warn("`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a drop-in replacement.",
                      FutureWarning, stacklevel=user_stacklevel())
        super().__init__(weight, size_average, ignore_index, reduce, reduction)


def upsample_nearest(input, size=None, scale_factor=None):  # noqa: A002
    """torch's deprecated ``F.upsample_nearest``: ``interpolate(input, size, scale_factor, mode='nearest')``
    (it warns as torch's does).

    Args:
        input: (N, C, *spatial). size: the output spatial size. scale_factor: the multiplier of it.
    """
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=user_stacklevel())
    with renamed("upsample_nearest"):  # (its errors name the function called)
        return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):  # noqa: A002
    """torch's deprecated ``F.upsample_bilinear``: ``interpolate(input, size, scale_factor,
    mode='bilinear', align_corners=True)`` (it warns as torch's does).

    Args:
        input: (N, C, H, W). size: the output (H, W). scale_factor: the multiplier of it.
    """
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=user_stacklevel())
    with renamed("upsample_bilinear"):
        return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)

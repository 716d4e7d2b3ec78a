"""Layers over the channel dim that torch has beside its common ones: ``Softmax2d`` (a softmax over the
channels at each pixel) and ``ChannelShuffle`` / ``channel_shuffle`` / ``native_channel_shuffle``
(ShuffleNet's interleaving of grouped convolutions' channels), with torch's checks and messages.

Channel shuffle is a view: (N, C, *) reshaped to (N, g, C/g, *), the two group dims swapped and
reshaped back, so its gradient is the inverse permutation and the channels may be symbolic (a multiple
of the groups, ``3*c`` for 3 groups)."""

from __future__ import annotations

import numbers

from luminal.core.errors import op_error
from luminal.core.symbolic import exact_div, shape_str
from luminal.frontend import ops
from luminal.frontend.checks import check_tensors
from luminal.nn.layers._util import bad_input
from luminal.nn.module import Module


class Softmax2d(Module):
    """torch's ``nn.Softmax2d()``: a softmax over the channels of (N, C, H, W) or (C, H, W) (dim -3), so
    each pixel's channel values sum to 1. No parameters."""

    def forward(self, x):
        check_tensors("Softmax2d", input=x)
        if x.ndim not in (3, 4):  # torch's check (a softmax over dim -3 of any rank would run)
            raise bad_input("Softmax2d", "(N, C, H, W) or (C, H, W) (3D or 4D)", x)
        return ops.softmax(x, -3)


def _channel_shuffle(name: str, input, groups):  # noqa: A002
    check_tensors(name, input=input)
    if isinstance(groups, bool) or not isinstance(groups, numbers.Integral):
        raise op_error(TypeError, name, f"groups must be an int, got {type(groups).__name__} {groups!r}", input)
    if groups < 1:
        raise op_error(ValueError, name, f"the number of groups to divide channels in must be positive, got "
                       f"{groups}", input)
    if input.ndim <= 2:
        raise op_error(ValueError, name, f"expected an input (N, C, *) with more than 2 dims, got "
                       f"{shape_str(input.shape)}", input)
    n, c, *rest = input.shape
    per_group = exact_div(c, int(groups))
    if per_group is None:
        raise op_error(ValueError, name, f"the number of channels must be divisible by groups: got {c} channels "
                       f"and {groups} groups (input {shape_str(input.shape)})", input)
    y = input.reshape(n, int(groups), per_group, *rest).transpose(1, 2)
    return y.reshape(n, c, *rest)


def channel_shuffle(input, groups: int):  # noqa: A002
    """torch's ``F.channel_shuffle``: the C channels of (N, C, *) taken as ``groups`` groups of C/groups
    and interleaved, output channel ``i * groups + j`` being input channel ``j * C/groups + i``. Any
    dtype; at least 3 dims, as torch.

    Args:
        input: (N, C, *), C divisible by groups. groups: the number of groups, positive.
    """
    return _channel_shuffle("channel_shuffle", input, groups)


def native_channel_shuffle(input, groups: int):  # noqa: A002
    """torch's ``F.native_channel_shuffle``: ``channel_shuffle`` (torch's native kernel of it).

    Args:
        input: (N, C, *), C divisible by groups. groups: the number of groups, positive.
    """
    return _channel_shuffle("native_channel_shuffle", input, groups)


class ChannelShuffle(Module):
    """torch's ``nn.ChannelShuffle(groups)``: ``channel_shuffle`` as a layer. No parameters.

    Args:
        groups: the number of groups the channels are divided in.
    """

    def __init__(self, groups: int):
        super().__init__()
        self.groups = groups

    def forward(self, x):
        return _channel_shuffle("ChannelShuffle", x, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"

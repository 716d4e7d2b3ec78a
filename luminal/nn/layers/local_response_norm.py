"""Local response normalisation (AlexNet's): each element divided by ``(k + alpha * mean) ** beta``,
the mean of the squares over ``size`` neighbouring channels, as torch computes it.

torch averages the zero-padded squares with an average pool along the channels (``size // 2`` zeros
before, ``(size - 1) // 2`` after, always divided by ``size``); here the same window sum is a pad and an
``unfold`` along the channel dim (views) summed over the window, divided by ``size``: the same values,
and gradients through ordinary ops."""

from __future__ import annotations

from luminal.core.errors import check_int, check_number, renamed
from luminal.core.symbolic import prod
from luminal.frontend.checks import check_tensors
from luminal.frontend.ops.elementwise import _opmath
from luminal.frontend.tensor import GraphTensor
from luminal.nn.layers._util import bad_input, check_float, layer_forward, layer_name
from luminal.nn.module import Module


@_opmath  # (16-bit inputs: the squares and their window sums in float32, as torch's; they overflowed)
def _lrn(x: GraphTensor, size: int, alpha: float, beta: float, k: float, name: str) -> GraphTensor:
    check_float(name, x)
    if x.ndim < 3:
        raise bad_input(name, "(N, C, *) of at least 3 dims", x)
    n, c = x.shape[0], x.shape[1]
    # (N, C, rest): the window runs over the channels only (rest spelled out: -1 is ambiguous when empty)
    sq = (x * x).reshape(n, c, prod(x.shape[2:]))
    # one zero more after the channels than torch's padding, so that a window fits when C is 0 (an
    # unfold needs size <= the padded C + size - 1, a requirement a symbolic C bound to 0 failed at
    # run time): C + 1 windows, the last dropped
    sq = sq.pad([0, 0, size // 2, (size - 1) // 2 + 1])
    avg = sq.unfold(1, size, 1)[:, :c].sum(-1) / float(size)  # (N, C, rest)
    div = (avg * alpha + k) ** beta
    return x / div.reshape(*x.shape)


def _check_args(name: str, size, alpha, beta, k) -> int:
    size = check_int(name, "size", size, 1)
    for what, v in (("alpha", alpha), ("beta", beta), ("k", k)):
        check_number(name, what, v)
    return size


def local_response_norm(input, size: int, alpha: float = 1e-4, beta: float = 0.75,  # noqa: A002
                        k: float = 1.0) -> GraphTensor:
    """torch's ``F.local_response_norm``: ``x / (k + alpha / size * sum of x**2 over the size channels
    around each one) ** beta``, the channels beyond the edges counting as 0.

    Args:
        input: a float tensor (N, C, *) of at least 3 dims.
        size: the number of neighbouring channels averaged (``size // 2`` before, ``(size - 1) // 2``
            after each channel).
        alpha: the multiplicative factor. beta: the exponent. k: the additive factor.
    """
    name = "local_response_norm"
    check_tensors(name, input=input)
    size = _check_args(name, size, alpha, beta, k)
    with renamed(name):
        return _lrn(input, size, alpha, beta, k, name)


class LocalResponseNorm(Module):
    """torch's ``nn.LocalResponseNorm(size, alpha=1e-4, beta=0.75, k=1.0)`` over (N, C, *) inputs:
    ``local_response_norm`` across the channels. No parameters.

    Args:
        size: the number of neighbouring channels averaged.
        alpha: the multiplicative factor. beta: the exponent. k: the additive factor.
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size = _check_args(type(self).__name__, size, alpha, beta, k)
        self.alpha, self.beta, self.k = alpha, beta, k

    @layer_forward
    def forward(self, x):
        return _lrn(x, self.size, self.alpha, self.beta, self.k, layer_name(self))

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"

"""``F.gumbel_softmax``: a differentiable sample of a categorical distribution (Jang et al. 2016, Maddison
et al. 2016), torch's formula: ``softmax((logits + G) / tau)`` over ``dim`` with ``G`` standard Gumbel
noise, and with ``hard=True`` the one-hot of its argmax whose gradient is the soft sample's (the
straight-through ``y_hard - y_soft.detach() + y_soft``).

The noise is drawn in the graph (``Graph.rand``), afresh on every call of a compiled program, as
torch's ``exponential_`` is on every call: ``G = -log(-log(v))`` for a uniform ``v`` of 48 bits
(two draws) moved half a step off 0, so ``v`` is in (0, 1) and ``G`` finite (from -3.5 to 33.3; the
Gumbel's mass beyond is below 1e-14). The argmax of ``logits + G`` is distributed as
``softmax(logits)``; the streams differ from torch's."""

from __future__ import annotations

import warnings

from luminal.core.errors import check_number, renamed, user_stacklevel
from luminal.frontend import ops
from luminal.frontend.checks import check_tensors
from luminal.frontend.float64_paths import plain_unless_float64
from luminal.frontend.ops.core import cast
from luminal.frontend.ops.random import uniform48
from luminal.frontend.tensor import GraphTensor
from luminal.nn.layers._util import check_float

_NAME = "gumbel_softmax"


@plain_unless_float64  # (float32 noise rounds once: the plain float64 log suffices)
def _gumbel_noise(logits: GraphTensor) -> GraphTensor:
    """Standard Gumbel noise of ``logits``' shape and dtype, computed in float64 and rounded once."""
    g = logits.graph
    v = uniform48(g, logits.shape) + 2.0**-49  # (half a step off 0: the logs stay finite)
    return cast(-(-v.log()).log(), logits.dtype)


def gumbel_softmax(logits, tau: float = 1, hard: bool = False, eps: float = 1e-10, dim: int = -1):
    """torch's ``F.gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1)``: a sample of the
    Gumbel-softmax distribution, ``softmax((logits + G) / tau, dim)`` with ``G`` standard Gumbel noise
    drawn in the graph. Its gradient with respect to ``logits`` is the softmax's (the reparameterisation
    trick).

    Args:
        logits: a float tensor of unnormalised log-probabilities.
        tau: the temperature (torch does not check it; 0 gives NaN and inf as torch's).
        hard: return the one-hot of each sample's argmax (the first among ties), differentiated as the
            soft sample (straight-through: ``y_hard - y_soft.detach() + y_soft``).
        eps: deprecated in torch and unused; a value other than 1e-10 warns, as torch's.
        dim: the dim the categories lie along.
    """
    check_tensors(_NAME, logits=logits)
    check_float(_NAME, logits)
    tau = check_number(_NAME, "tau", tau)
    d = logits._axis(dim, _NAME)
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=user_stacklevel())
    with renamed(_NAME):
        y_soft = ops.softmax((logits + _gumbel_noise(logits)) / tau, d)
        if not hard:
            return y_soft
        if logits.ndim == 0:  # (a single category: its one-hot is 1)
            return ops.ones_like(y_soft) - y_soft.detach() + y_soft
        index = ops.argmax(y_soft, d, keepdim=True)
        n = logits.shape[d]
        classes = logits.graph.arange(n).reshape(*(n if i == d else 1 for i in range(logits.ndim)))
        y_hard = cast(ops.eq(index, classes), logits.dtype)
        return y_hard - y_soft.detach() + y_soft

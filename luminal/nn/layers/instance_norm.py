"""``F.instance_norm``: each sample's channels normalised over their own spatial positions (style
transfer, GANs), with torch's optional running statistics."""

from __future__ import annotations

from luminal.core.errors import op_error, renamed
from luminal.core.symbolic import is_static, prod
from luminal.frontend.checks import check_tensors
from luminal.frontend.ops.elementwise import _opmath
from luminal.frontend.state import State
from luminal.frontend.tensor import GraphTensor
from luminal.nn.layers._util import bad_input, check_float
from luminal.nn.layers.norm import _current, normalise, running_stats


def _running(name: str, what: str, s, use_input_stats: bool, momentum):
    """A running statistic as batch_norm takes it: a State (updated in place by the compiled program
    when the input statistics are used), a GraphTensor (read only), or None."""
    if isinstance(s, State):
        if use_input_stats and not isinstance(momentum, (int, float)):
            raise TypeError(f"{name}: momentum must be a number to update {what}, got {momentum!r}")
        return s
    if s is None or isinstance(s, GraphTensor):
        if use_input_stats and s is not None:
            raise TypeError(f"{name}: use_input_stats=True updates {what} in place, which needs a State (a "
                            f"module's Buffer), not a GraphTensor; pass the Buffer or None")
        return s
    raise TypeError(f"{name}: {what} must be a GraphTensor, a State or None, got {type(s).__name__}")


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,  # noqa: A002
                  use_input_stats: bool = True, momentum: float = 0.1, eps: float = 1e-5):
    """torch's ``F.instance_norm`` over an (N, C, *) input: each ``(n, c)`` normalised by the mean and
    (biased) variance of its own spatial positions, then ``* weight + bias`` per channel. With running
    statistics (States, as batch_norm takes them) each run moves them towards the batch's mean over N
    of the per-instance statistics (the variance unbiased), as torch; with ``use_input_stats=False``
    the running statistics normalise instead.

    Args:
        input: a float tensor (N, C, *) with more than one spatial element.
        running_mean, running_var: (C,) States (updated), GraphTensors (read, with
            ``use_input_stats=False``) or None.
        weight, bias: optional (C,) tensors.
        use_input_stats: normalise by each instance's statistics (else by the running ones).
        momentum: the running statistics' update factor.
        eps: added to the variance.
    """
    name = "instance_norm"
    check_tensors(name, optional=("weight", "bias"), input=input, weight=weight, bias=bias)
    check_float(name, input)
    if input.ndim < 3:
        raise bad_input(name, "(N, C, *) with at least one spatial dim", input)
    spatial = prod(input.shape[2:])
    if use_input_stats and is_static(spatial) and spatial <= 1:
        raise op_error(ValueError, name, "expected more than 1 spatial element when using the input's "
                       "statistics", input)
    rm = _running(name, "running_mean", running_mean, use_input_stats, momentum)
    rv = _running(name, "running_var", running_var, use_input_stats, momentum)
    if not use_input_stats and (rm is None or rv is None):
        raise op_error(ValueError, name, "use_input_stats=False needs running_mean and running_var", input)
    g, n, c = input.graph, input.shape[0], input.shape[1]
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise bad_input(f"{name} {what}", f"({c},)", t)
    per_channel = (1, c) + (1,) * (input.ndim - 2)
    axes = tuple(range(2, input.ndim))

    @_opmath
    def run(x):
        if use_input_stats:
            mean = x.mean(axes, keepdim=True)
            var = x.var(axes, keepdim=True, correction=0)
            for st, per in ((rm, mean), (rv, x.var(axes, correction=1))):
                if st is not None:
                    batch = per.reshape(n, c).mean(0).detach()
                    g.assign(st, _current(g, st) * (1 - momentum) + batch.to(st.dtype) * momentum)
        else:
            mean, var = running_stats(g, rm, rv, x.dtype, per_channel)
        return normalise(x, mean, var, eps, weight, bias, per_channel)

    with renamed(name):
        return run(input)

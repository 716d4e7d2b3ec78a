"""Negative log-likelihood losses of a predicted distribution: torch's ``F.poisson_nll_loss`` (counts)
and ``F.gaussian_nll_loss`` (a mean and a variance per target), with torch's names, defaults and
semantics, composed from frontend ops so that they differentiate like any other composition.

Why they are not ``nll_loss``: that one reads log-probabilities of classes; these score a real target
under a distribution whose parameters the model predicts, so the model can learn its own uncertainty
(the variance of ``gaussian_nll_loss``) or a rate (``poisson_nll_loss``).

As in ``losses.py``, torch's deprecated ``size_average``/``reduce`` are dropped and the arguments that
follow them in torch are keyword-only here (a positional torch call that would bind them fails loudly).
"""

from __future__ import annotations

import math

import numpy as np

from luminal.core.errors import check_number, op_error, renamed
from luminal.core.symbolic import shape_str
from luminal.frontend import ops
from luminal.frontend.checks import check_tensors
from luminal.frontend.float32_ops import float32_under_autocast
from luminal.frontend.ops.value_checks import known_values
from luminal.frontend.tensor import GraphTensor
from luminal.nn.losses import _float, _reduce, _reduction

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _target(loss: str, x: GraphTensor, t: GraphTensor) -> GraphTensor:
    """A float input and a numeric target broadcasting to it; an int target (counts) is read in the
    input's dtype, as torch's type promotion does."""
    check_tensors(loss, input=x, target=t)
    _float(loss, "input", x)
    if t.dtype.kind == "b":
        raise op_error(TypeError, loss, "target must be a float or int tensor, got bool", x, t)
    ops.broadcast_shapes(loss, x, t)
    return t if t.dtype.is_float else ops.cast(t, x.dtype)


@float32_under_autocast
@renamed("poisson_nll_loss")
def poisson_nll_loss(input: GraphTensor, target: GraphTensor, log_input: bool = True,  # noqa: A002
                     full: bool = False, *, eps: float = 1e-8, reduction: str = "mean") -> GraphTensor:
    """torch's ``F.poisson_nll_loss``: the negative log-likelihood of ``target`` under a Poisson
    distribution of rate ``exp(input)`` (``log_input``, the default) or ``input``, without the constant
    ``log(target!)``: ``exp(input) - target * input``, or ``input - target * log(input + eps)``.

    ``full`` adds Stirling's approximation of ``log(target!)``, ``t log t - t + log(2 pi t) / 2``, where
    ``target > 1`` (0 elsewhere, as torch: the approximation is poor there and ``log(0!) = log(1!) = 0``).

    Args:
        input: the log-rate (``log_input``) or the rate, a float tensor.
        target: the counts, broadcasting with ``input`` (float or int).
        log_input: ``input`` is the log of the rate (numerically safer than the rate itself).
        full: add the Stirling term.
        eps: keeps ``log(input + eps)`` finite at a zero rate (``log_input=False`` only).
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.
    """
    loss = "poisson_nll_loss"
    target = _target(loss, input, target)
    _reduction(loss, reduction, input)
    check_number(loss, "eps", eps, input)
    if log_input:
        out = ops.exp(input) - target * input
    else:
        out = input - target * ops.log(input + eps)
    if full:
        big = ops.gt(target, 1)
        t = ops.where(big, target, 1.0)  # log reads a safe value where the term is dropped (no NaN gradient)
        out = out + ops.where(big, t * ops.log(t) - t + 0.5 * ops.log(t * (2 * math.pi)), 0.0)
    return _reduce(out, reduction)


def _var_shape(loss: str, x: GraphTensor, var: GraphTensor) -> GraphTensor:
    """torch's rules for ``var``: the input's shape (heteroscedastic); or one dim short of it (one
    variance per vector, unsqueezed at the end); or the input's rank with exactly one dim where they
    differ, of size 1 there (shared along that dim). Anything else is refused, as in torch."""
    if var.shape == x.shape:
        return var
    if x.shape[:-1] == var.shape:
        return var.unsqueeze(-1)
    if var.ndim == x.ndim and sum(v for d, v in zip(x.shape, var.shape) if d != v) == 1:
        return var
    msg = (f"var shape {shape_str(var.shape)} does not fit the input shape {shape_str(x.shape)}: it must be "
           f"the input's shape, the input's without the last dim, or the input's with one dim of size 1")
    raise op_error(ValueError, loss, msg, x, var)


def _nonnegative(loss: str, var: GraphTensor, of_: GraphTensor) -> None:
    """A negative variance is an error, as in torch: now where ``var``'s values are known, else a
    guard of the programs computing the loss (the values arrive with a run)."""
    known = known_values(var)
    if known is not None:
        if (known < 0).any():
            raise op_error(ValueError, loss, f"var has negative entries (e.g. {known[known < 0].flat[0]})", var)
        return
    g = var.graph
    low = ops.amin(ops.cat([var.reshape(-1), g.constant(np.zeros(1, var.dtype.np))]))
    msg = str(op_error(ValueError, loss, "var has negative entries (the smallest is {value})", var))
    g.guard(ops.lt(low, 0), low, ValueError, msg, of=of_)


@renamed("gaussian_nll_loss")
def gaussian_nll_loss(input: GraphTensor, target: GraphTensor, var, full: bool = False,  # noqa: A002
                      eps: float = 1e-6, reduction: str = "mean") -> GraphTensor:
    """torch's ``F.gaussian_nll_loss``: the negative log-likelihood of ``target`` under a normal
    distribution of mean ``input`` and variance ``var``, ``(log(var) + (input - target)**2 / var) / 2``
    (plus ``log(2 pi) / 2`` with ``full``).

    ``var`` is clamped at ``eps`` for stability the way torch does it, in place without recording the
    clamp: the loss reads ``max(var, eps)`` but the gradient reaches ``var`` also where the clamp holds
    (so a model predicting a tiny variance is still pushed, instead of stopping on a flat 0 gradient).

    Args:
        input: the predicted means, a float tensor.
        target: the targets, broadcasting with ``input`` (float, or int read in the input's dtype).
        var: the predicted variances (>= 0): the input's shape, the input's without the last dim (one per
            vector), the input's with one dim of size 1 (shared along it), or a number.
        full: add the constant ``log(2 pi) / 2``.
        eps: the smallest variance the loss reads.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.
    """
    loss = "gaussian_nll_loss"
    target = _target(loss, input, target)  # (int targets are read as floats, as torch promotes them)
    check_number(loss, "eps", eps, input)
    given = var
    if isinstance(var, GraphTensor):
        check_tensors(loss, input=input, var=var)
        _float(loss, "var", var)
        var = _var_shape(loss, input, var)
    else:
        check_number(loss, "var", var, input)
        if var < 0:
            raise op_error(ValueError, loss, f"var has negative entries (got the number {var})", input)
        var = ops.full_like(input, float(var))
    ops.broadcast_shapes(loss, input, target, var)
    _reduction(loss, reduction, input)
    # max(var, eps) in value, var's own gradient (torch clamps a clone in place under no_grad)
    var_c = ops.where(ops.lt(var, eps), var - var.detach() + eps, var)
    d = input - target
    out = (ops.log(var_c) + d * d / var_c) * 0.5
    if full:
        out = out + _HALF_LOG_2PI
    out = _reduce(out, reduction)
    if isinstance(given, GraphTensor):
        _nonnegative(loss, given, out)
    return out

"""Margin (hinge) losses with torch.nn.functional's names, defaults and semantics, composed from
frontend ops: ``margin_ranking_loss``, ``hinge_embedding_loss``, ``soft_margin_loss``,
``multi_margin_loss``, ``multilabel_margin_loss`` and ``multilabel_soft_margin_loss``.

Why margins: these losses are zero once a score beats the alternatives by ``margin``, so the model
spends no effort on examples it already separates (an SVM's objective), unlike cross entropy, which
keeps pushing. Each clamp is written as the torch kernel writes it, so the gradient at the hinge's
corner is torch's too: ``clamp_min`` (the pointwise losses) passes it at exactly 0, the multi-class
kernels (``z > 0``) do not.

As in ``losses.py``, torch's deprecated ``size_average``/``reduce`` are dropped and the arguments that
follow them in torch are keyword-only here.
"""

from __future__ import annotations

from luminal.core.errors import check_number, op_error, renamed
from luminal.core.symbolic import shape_str
from luminal.frontend import ops
from luminal.frontend.checks import check_tensors
from luminal.frontend.float32_ops import float32_under_autocast
from luminal.frontend.ops import value_checks
from luminal.frontend.tensor import GraphTensor
from luminal.nn.losses import _float, _log_sigmoid, _over, _reduce, _reduction


def _labels(loss: str, what: str, t: GraphTensor, like: GraphTensor, promote: bool = False) -> GraphTensor:
    """A target of labels (+1/-1, or 0/1 probabilities) given as a float or int tensor, read in the
    dtype of ``like`` (torch promotes an int target the same way). With ``promote`` a float target keeps
    its dtype, so that the loss is computed in the wider of the two, as torch's composite losses
    (``margin_ranking_loss``, ``multilabel_soft_margin_loss``) do: a float32 soft label against
    float16 logits was rounded to float16 first, and the loss was float16 where torch's is float32."""
    if t.dtype.kind == "b":
        raise op_error(TypeError, loss, f"{what} must be a float or int tensor, got bool", like, t)
    if t.dtype is like.dtype or (promote and t.dtype.is_float):
        return t
    return ops.cast(t, like.dtype)


def _hinge(z: GraphTensor) -> GraphTensor:
    """``max(z, 0)`` as torch's ``clamp_min``: the gradient passes at ``z == 0``."""
    return ops.clamp(z, min=0.0)


def _positive_part(z: GraphTensor) -> GraphTensor:
    """``max(z, 0)`` as torch's multi-class margin kernels compute it (``if (z > 0)``): no gradient at 0."""
    return ops.where(ops.gt(z, 0), z, 0.0)


@float32_under_autocast
@renamed("margin_ranking_loss")
def margin_ranking_loss(input1: GraphTensor, input2: GraphTensor, target: GraphTensor, margin: float = 0.0, *,
                        reduction: str = "mean") -> GraphTensor:
    """torch's ``F.margin_ranking_loss``: ``max(0, -target * (input1 - input2) + margin)``, for learning
    to rank: ``target`` 1 says ``input1`` should score higher than ``input2`` by ``margin``, -1 lower.

    Args:
        input1, input2: the two scores (float), of one rank. target: +-1 labels (float or int), the same
            rank; the three broadcast. margin: the gap wanted between the scores.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.
    """
    loss = "margin_ranking_loss"
    check_tensors(loss, input1=input1, input2=input2, target=target)
    _float(loss, "input1", input1)
    _float(loss, "input2", input2)
    check_number(loss, "margin", margin, input1)
    if not input1.ndim == input2.ndim == target.ndim:
        msg = (f"input1, input2 and target must have the same number of dims, got shapes {shape_str(input1.shape)}, "
               f"{shape_str(input2.shape)} and {shape_str(target.shape)}")
        raise op_error(ValueError, loss, msg, input1, input2, target)
    _reduction(loss, reduction, input1)
    ops.broadcast_shapes(loss, input1, input2, target)
    t = _labels(loss, "target", target, input1, promote=True)
    return _reduce(_hinge(-t * (input1 - input2) + margin), reduction)


@float32_under_autocast
@renamed("hinge_embedding_loss")
def hinge_embedding_loss(input: GraphTensor, target: GraphTensor, margin: float = 1.0, *,  # noqa: A002
                         reduction: str = "mean") -> GraphTensor:
    """torch's ``F.hinge_embedding_loss``, for learning whether two inputs are similar from a distance
    ``input`` (e.g. an L1 distance): the distance itself where ``target`` is 1 (pull together),
    ``max(0, margin - input)`` where it is -1 (push apart to at least ``margin``). As in torch, a label
    that is neither gets both terms.

    Args:
        input: the distances (float). target: +-1 labels (float or int), broadcasting with ``input``.
        margin: the distance dissimilar pairs are pushed to. reduction: ``"mean"``, ``"sum"`` or ``"none"``.
    """
    loss = "hinge_embedding_loss"
    check_tensors(loss, input=input, target=target)
    _float(loss, "input", input)
    check_number(loss, "margin", margin, input)
    _reduction(loss, reduction, input)
    ops.broadcast_shapes(loss, input, target)
    t = _labels(loss, "target", target, input)
    out = ops.where(ops.ne(t, 1), _hinge(margin - input), 0.0) + ops.where(ops.ne(t, -1), input, 0.0)
    return _reduce(out, reduction)


@float32_under_autocast
@renamed("soft_margin_loss")
def soft_margin_loss(input: GraphTensor, target: GraphTensor, *, reduction: str = "mean") -> GraphTensor:  # noqa: A002
    """torch's ``F.soft_margin_loss``: the two-class logistic loss ``log(1 + exp(-target * input))`` of
    +-1 labels, a smooth hinge. Computed as ``-log_sigmoid(target * input)``, finite for any logit: torch
    evaluates ``log1p(exp(.))`` literally and gives inf (and a NaN gradient) once ``-target * input``
    passes ~88 in float32, where this gives the exact ``-target * input``.

    Args:
        input: the scores (float). target: +-1 labels (float or int), broadcasting with ``input``.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.
    """
    loss = "soft_margin_loss"
    check_tensors(loss, input=input, target=target)
    _float(loss, "input", input)
    _reduction(loss, reduction, input)
    ops.broadcast_shapes(loss, input, target)
    t = _labels(loss, "target", target, input)
    return _reduce(-_log_sigmoid(t * input), reduction)


@float32_under_autocast
@renamed("multilabel_soft_margin_loss")
def multilabel_soft_margin_loss(input: GraphTensor, target: GraphTensor,  # noqa: A002
                                weight: GraphTensor | None = None, *, reduction: str = "mean") -> GraphTensor:
    """torch's ``F.multilabel_soft_margin_loss``: one binary logistic loss per class (``target`` 1 where
    the class is present, 0 where absent), weighted by ``weight`` and averaged over the C classes of the
    last dim, so each sample's loss does not grow with C; then reduced over the samples. The log-sigmoids
    are the stable ones (finite for any logit).

    Args:
        input: logits (..., C). target: 0/1 (or soft) labels broadcasting with ``input``.
        weight: a per-class (or per-element) weight broadcasting with ``input``, or None.
        reduction: ``"mean"`` (default, over the samples), ``"sum"`` or ``"none"`` (one per sample).
    """
    loss = "multilabel_soft_margin_loss"
    check_tensors(loss, optional=("weight",), input=input, target=target, weight=weight)
    _float(loss, "input", input)
    if input.ndim == 0:
        raise op_error(ValueError, loss, "input needs a class dim: (C,) or (N, C)", input)
    _reduction(loss, reduction, input)
    ops.broadcast_shapes(loss, input, target)
    t = _labels(loss, "target", target, input, promote=True)
    out = -(t * _log_sigmoid(input) + (1.0 - t) * _log_sigmoid(-input))
    if weight is not None:
        _float(loss, "weight", weight)
        ops.broadcast_shapes(loss, out, weight)
        out = out * weight
    out = _over(out.sum(-1), input.shape[-1])
    return _reduce(out, reduction)


def _class_indices(loss: str, x: GraphTensor, target: GraphTensor):
    """``x`` as (n, C) rows and ``target`` as (n,) int32 class indices, one per row, for the multi-class
    losses: ``x`` (N, C) with target (N,), or ``x`` (C,) / 0-d with a 0-d or (1,) target (torch's shapes)."""
    if x.ndim > 2:
        raise op_error(ValueError, loss, f"input must be (N, C), (C,) or 0-d, got {shape_str(x.shape)}", x)
    if target.dtype.kind != "i":
        raise op_error(TypeError, loss, f"target of class indices must be int32, got {target.dtype.name}", x, target)
    rows = x.shape[0] if x.ndim == 2 else 1
    if target.ndim > 1 or (target.shape[0] if target.ndim else 1) != rows:
        msg = (f"target shape {shape_str(target.shape)} does not fit input shape {shape_str(x.shape)}: one class "
               f"index per row is needed ({'(' + str(rows) + ',)' if x.ndim == 2 else '() or (1,)'})")
        raise op_error(ValueError, loss, msg, x, target)
    c = x.shape[-1] if x.ndim else 1
    return x.reshape(rows, c), target.reshape(rows), c


@float32_under_autocast
@renamed("multi_margin_loss")
def multi_margin_loss(input: GraphTensor, target: GraphTensor, p: int = 1, margin: float = 1.0,  # noqa: A002
                      weight: GraphTensor | None = None, *, reduction: str = "mean") -> GraphTensor:
    """torch's ``F.multi_margin_loss``, the multi-class SVM loss: per sample,
    ``sum over i != y of w[y] * max(0, margin - x[y] + x[i]) ** p / C``, so the true class ``y`` must beat
    every other class by ``margin``.

    Args:
        input: scores (N, C), (C,) or 0-d (float). target: int32 class indices, (N,) (or 0-d / (1,) for
            one sample); torch's are int64. p: 1 (hinge) or 2 (squared hinge). margin: the gap wanted.
        weight: (C,) class weights (the true class's weights its sample), or None.
        reduction: ``"mean"`` (default, over the samples), ``"sum"`` or ``"none"`` (the target's shape).
    """
    loss = "multi_margin_loss"
    check_tensors(loss, optional=("weight",), input=input, target=target, weight=weight)
    _float(loss, "input", input)
    if p not in (1, 2) or isinstance(p, bool):
        raise op_error(ValueError, loss, f"only p == 1 and p == 2 are supported, got {p!r}", input)
    check_number(loss, "margin", margin, input)
    _reduction(loss, reduction, input)
    x, t, c = _class_indices(loss, input, target)
    if weight is not None:
        _float(loss, "weight", weight)
        if weight.ndim != 1 or weight.shape[0] != c:
            msg = f"weight must be one-dimensional with one entry per class ({c},), got {shape_str(weight.shape)}"
            raise op_error(ValueError, loss, msg, input, weight)
    check = value_checks.range_check(loss, t, c, lambda v: f"target holds class {v}, out of range for {c} classes",
                                     (input, target))
    safe = ops.clamp(t, 0, c - 1) if check is not None else t  # (a bad index never reaches the gather)
    xy = ops.gather(x, 1, safe.unsqueeze(1))  # (n, 1): the true class's score
    h = _positive_part(xy * -1.0 + margin + x)
    if p == 2:
        h = h * h
    h = ops.where(ops.eq(ops.arange(c, graph=x.graph), safe.unsqueeze(1)), 0.0, h)  # i != y
    if weight is not None:
        h = h * ops.index_select(weight, 0, safe).unsqueeze(1)
    out = _over(h.sum(1), c).reshape(target.shape)
    value_checks.guard(check, out)
    return _reduce(out, reduction)


@float32_under_autocast
@renamed("multilabel_margin_loss")
def multilabel_margin_loss(input: GraphTensor, target: GraphTensor, *,  # noqa: A002
                           reduction: str = "mean") -> GraphTensor:
    """torch's ``F.multilabel_margin_loss``, the multi-label SVM loss: per sample,
    ``sum over target classes j and non-target classes i of max(0, 1 - (x[j] - x[i])) / C``, so every
    present class must beat every absent one by 1.

    ``target`` lists the present classes' indices first and ends the list at the first -1 (the rest is
    ignored, e.g. ``[3, 0, -1, 1]`` means classes 3 and 0), as torch; a class listed twice counts twice.

    Args:
        input: scores (N, C), (C,) or 0-d (float). target: int32 of ``input``'s shape (torch's is int64),
            values in [-1, C).
        reduction: ``"mean"`` (default, over the samples), ``"sum"`` or ``"none"`` (one per sample).
    """
    loss = "multilabel_margin_loss"
    check_tensors(loss, input=input, target=target)
    _float(loss, "input", input)
    if input.ndim > 2:
        raise op_error(ValueError, loss, f"input must be (N, C), (C,) or 0-d, got {shape_str(input.shape)}", input)
    if target.dtype.kind != "i":
        raise op_error(TypeError, loss, f"target of class indices must be int32, got {target.dtype.name}",
                       input, target)
    if target.shape != input.shape:
        msg = f"target shape {shape_str(target.shape)} must equal the input shape {shape_str(input.shape)}"
        raise op_error(ValueError, loss, msg, input, target)
    _reduction(loss, reduction, input)
    c = input.shape[-1] if input.ndim else 1
    x = input.reshape(-1, c)
    t = target.reshape(-1, c)
    check = value_checks.range_check(loss, t, c, lambda v: f"target holds class {v}, out of range for {c} classes "
                                     "(-1 ends the list)", (input, target), ignore=-1)
    # the listed classes: those before the first -1
    listed = ops.eq(ops.cumsum(ops.cast(ops.eq(t, -1), t.dtype), 1), 0)  # (n, K)
    safe = ops.where(listed, ops.clamp(t, 0, c - 1), 0)
    classes = ops.arange(c, graph=x.graph)
    present = ops.any(ops.logical_and(listed.unsqueeze(2), ops.eq(safe.unsqueeze(2), classes)), 1)  # (n, C)
    xj = ops.gather(x, 1, safe)  # (n, K): the listed classes' scores
    z = _positive_part(xj.unsqueeze(2) * -1.0 + 1.0 + x.unsqueeze(1))  # (n, K, C)
    pairs = ops.logical_and(listed.unsqueeze(2), ops.logical_not(present).unsqueeze(1))
    out = _over(ops.where(pairs, z, 0.0).sum((1, 2)), c)
    out = out.reshape(input.shape[:-1])
    value_checks.guard(check, out)
    return _reduce(out, reduction)

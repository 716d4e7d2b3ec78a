"""Embedding (metric-learning) losses with torch.nn.functional's names, defaults and semantics:
``cosine_embedding_loss``, ``triplet_margin_loss`` and ``triplet_margin_with_distance_loss``.

Why: these train an embedding so that distances mean something (similar inputs close, dissimilar ones
at least a margin apart), for retrieval, face verification or contrastive pre-training, where there is
no fixed set of classes to score. They are composed from frontend ops (so they differentiate like any
other composition) in the order torch's kernels compute them, so values and gradients match.

As in ``losses.py``, torch's deprecated ``size_average``/``reduce`` are dropped and the arguments that
follow them in torch are keyword-only here.
"""

from __future__ import annotations

from luminal.core.errors import check_number, op_error, renamed
from luminal.core.symbolic import shape_str
from luminal.frontend import ops
from luminal.frontend.checks import check_tensors
from luminal.frontend.float32_ops import float32_under_autocast
from luminal.frontend.tensor import GraphTensor
from luminal.nn.losses import _float, _reduce, _reduction

_COS_EPS = 1e-12  # torch's EPSILON added to each squared norm in cosine_embedding_loss


@float32_under_autocast
@renamed("cosine_embedding_loss")
def cosine_embedding_loss(input1: GraphTensor, input2: GraphTensor, target: GraphTensor, margin: float = 0.0, *,
                          reduction: str = "mean") -> GraphTensor:
    """torch's ``F.cosine_embedding_loss``: from the cosine similarity ``cos`` of each pair of vectors,
    ``1 - cos`` where ``target`` is 1 (make them point the same way) and ``max(0, cos - margin)`` where it
    is -1 (make them at most ``margin`` alike); 0 for any other label. As in torch the cosine is
    ``x1.x2 / sqrt((|x1|^2 + 1e-12)(|x2|^2 + 1e-12))``, finite for zero vectors.

    Args:
        input1, input2: (N, D) vectors with a (N,) target, or (D,) with a 0-d target (float; they
            broadcast). target: +-1 labels (float or int). margin: in [-1, 1], 0 to 0.5 suggested.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"`` (one per pair).
    """
    loss = "cosine_embedding_loss"
    check_tensors(loss, input1=input1, input2=input2, target=target)
    _float(loss, "input1", input1)
    _float(loss, "input2", input2)
    check_number(loss, "margin", margin, input1)
    _reduction(loss, reduction, input1)
    if target.ndim > 1:
        msg = f"target must be 0-d or 1-d (one label per pair), got {shape_str(target.shape)}"
        raise op_error(ValueError, loss, msg, input1, input2, target)
    want = target.ndim + 1
    if input1.ndim != want or input2.ndim != want:
        msg = (f"a {target.ndim}-d target expects {want}-d inputs, got shapes {shape_str(input1.shape)} and "
               f"{shape_str(input2.shape)}")
        raise op_error(ValueError, loss, msg, input1, input2, target)
    if target.dtype.kind == "b":
        raise op_error(TypeError, loss, "target must be a float or int tensor, got bool", input1, target)
    shape = ops.broadcast_shapes(loss, input1, input2)
    ops.broadcast_shapes(loss, target, shapes=(target.shape, shape[:-1]))
    prod = (input1 * input2).sum(-1)
    m1 = (input1 * input1).sum(-1) + _COS_EPS
    m2 = (input2 * input2).sum(-1) + _COS_EPS
    cos = prod / ops.sqrt(m1 * m2)
    out = ops.where(ops.eq(target, 1), 1.0 - cos, 0.0) + ops.where(ops.eq(target, -1), ops.clamp(cos - margin, min=0.0),
                                                                   0.0)
    return _reduce(out, reduction)


def _triplet_checks(loss: str, anchor, positive, negative, margin) -> None:
    check_tensors(loss, anchor=anchor, positive=positive, negative=negative)
    check_number(loss, "margin", margin, anchor)
    if not margin > 0:
        raise op_error(ValueError, loss, f"margin must be greater than 0, got {margin!r}", anchor)
    if not anchor.ndim == positive.ndim == negative.ndim:
        msg = (f"anchor, positive and negative must have the same number of dims, got shapes "
               f"{shape_str(anchor.shape)}, {shape_str(positive.shape)} and {shape_str(negative.shape)}")
        raise op_error(ValueError, loss, msg, anchor, positive, negative)


def _triplet(dist, anchor, positive, negative, margin: float, swap: bool) -> GraphTensor:
    """``max(0, margin + d(a, p) - d(a, n))``; with ``swap``, ``d(a, n)`` is the smaller of it and
    ``d(p, n)`` (Balntas et al. 2016: the positive may be the harder anchor). torch's clamp_min and
    minimum, so the gradient at a tie is theirs."""
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = ops.minimum(d_neg, dist(positive, negative))
    return ops.clamp(d_pos - d_neg + margin, min=0.0)


def _pairwise_distance(p: float, eps: float):
    """torch's ``pairwise_distance``: ``||x1 - x2 + eps||_p`` over the last dim (a zero vector has
    gradient 0, as torch's norm)."""
    return lambda x1, x2: ops.vector_norm(x1 - x2 + eps, p, -1)


@float32_under_autocast
@renamed("triplet_margin_loss")
def triplet_margin_loss(anchor: GraphTensor, positive: GraphTensor, negative: GraphTensor, margin: float = 1.0,
                        p: float = 2, eps: float = 1e-6, swap: bool = False, *,
                        reduction: str = "mean") -> GraphTensor:
    """torch's ``F.triplet_margin_loss``: ``max(0, margin + d(a, p) - d(a, n))`` with ``d`` the
    ``p``-norm distance ``||x1 - x2 + eps||_p`` over the last dim, so each anchor is closer to its
    positive than to its negative by ``margin``.

    Args:
        anchor, positive, negative: (N, D) or (D,) embeddings (float), of one rank (they broadcast).
        margin: the gap wanted (> 0). p: the norm's order. eps: added to the differences, as torch
            (keeps the norm's gradient defined at equal vectors). swap: also use ``d(p, n)`` when smaller.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"`` (one per triplet).
    """
    loss = "triplet_margin_loss"
    _triplet_checks(loss, anchor, positive, negative, margin)
    for what, t in (("anchor", anchor), ("positive", positive), ("negative", negative)):
        _float(loss, what, t)
    check_number(loss, "p", p, anchor)
    check_number(loss, "eps", eps, anchor)
    if anchor.ndim == 0:
        raise op_error(ValueError, loss, "the embeddings need a dim: (N, D) or (D,), got 0-d", anchor)
    _reduction(loss, reduction, anchor)
    ops.broadcast_shapes(loss, anchor, positive, negative)
    return _reduce(_triplet(_pairwise_distance(p, eps), anchor, positive, negative, margin, swap), reduction)


@renamed("triplet_margin_with_distance_loss")
def triplet_margin_with_distance_loss(anchor: GraphTensor, positive: GraphTensor, negative: GraphTensor, *,
                                      distance_function=None, margin: float = 1.0, swap: bool = False,
                                      reduction: str = "mean") -> GraphTensor:
    """torch's ``F.triplet_margin_with_distance_loss``: ``triplet_margin_loss`` with any distance,
    ``distance_function(x1, x2)`` -> one non-negative distance per pair (default: the Euclidean
    ``pairwise_distance``), e.g. ``lambda a, b: 1 - F.cosine_similarity(a, b)``.

    Args:
        anchor, positive, negative: embeddings, of one rank (what ``distance_function`` takes).
        distance_function: a callable of two GraphTensors returning a GraphTensor, or None.
        margin: the gap wanted (> 0). swap: also use ``d(p, n)`` when smaller.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.
    """
    loss = "triplet_margin_with_distance_loss"
    check_tensors(loss, anchor=anchor, positive=positive, negative=negative)
    _reduction(loss, reduction, anchor)
    _triplet_checks(loss, anchor, positive, negative, margin)
    if distance_function is None:
        for what, t in (("anchor", anchor), ("positive", positive), ("negative", negative)):
            _float(loss, what, t)
        dist = _pairwise_distance(2.0, 1e-6)
    elif not callable(distance_function):
        raise op_error(TypeError, loss, f"distance_function must be callable, got {type(distance_function).__name__}",
                       anchor)
    else:
        def dist(x1, x2):
            d = distance_function(x1, x2)
            if not isinstance(d, GraphTensor) or not d.dtype.is_float:
                got = d.dtype.name if isinstance(d, GraphTensor) else type(d).__name__
                raise op_error(TypeError, loss, f"distance_function must return a float GraphTensor, got {got}",
                               x1, x2)
            return d
    return _reduce(_triplet(dist, anchor, positive, negative, margin, swap), reduction)

"""Loss functions with torch.nn.functional's names, defaults and semantics, composed from frontend ops
(so they differentiate like any other composition).

The forms are the numerically stable ones: log-softmax through log-sum-exp, log-sigmoid through
``exp(-|x|)`` (never overflows) and ``log1p``, and every ``log`` of something that can reach 0 reads
a safe value in the branch ``where`` discards, so no NaN appears there either (forward or backward).

Signatures are torch's without the deprecated ``size_average``/``reduce``: the arguments that follow
them in torch are keyword-only here, so a positional torch call that would have bound those two fails
loudly instead of binding the wrong argument.
"""

from __future__ import annotations

import warnings

from luminal.core import dtype as dt
from luminal.core.errors import check_int, check_number, op_error, renamed
from luminal.core.symbolic import is_static, shape_str
from luminal.frontend import ops
from luminal.frontend.checks import check_tensors
from luminal.frontend.float32_ops import float32_under_autocast
from luminal.frontend.ops import value_checks
from luminal.frontend.ops.elementwise import _opmath
from luminal.frontend.ops.reduce import log_softmax_parts
from luminal.frontend.tensor import GraphTensor

_REDUCTIONS = ("none", "mean", "sum")


# checks ---------------------------------------------------------------------------------------
def _float(loss: str, what: str, t: GraphTensor):
    if not t.dtype.is_float:
        raise op_error(TypeError, loss, f"{what} must be a float tensor, got {t.dtype.name}", t)


def _reduction(loss: str, reduction, x: GraphTensor, allowed=_REDUCTIONS):
    if reduction not in allowed:
        choices = ", ".join(repr(r) for r in allowed)
        raise op_error(ValueError, loss, f"reduction must be one of {choices}, got {reduction!r}", x)


def _same_shape(loss: str, what: str, x: GraphTensor, t: GraphTensor):
    if t.shape != x.shape:
        msg = f"{what} shape {shape_str(t.shape)} must equal the input shape {shape_str(x.shape)}"
        raise op_error(ValueError, loss, msg, x, t)


def _fits(loss: str, what: str, x: GraphTensor, w: GraphTensor | None):
    """``w`` must broadcast to ``x``'s shape without growing it (torch applies it in place)."""
    if w is not None and ops.broadcast_shapes(loss, x, w) != x.shape:
        msg = f"{what} shape {shape_str(w.shape)} does not broadcast to the input shape {shape_str(x.shape)}"
        raise op_error(ValueError, loss, msg, x, w)


def _pair(loss: str, x: GraphTensor, t: GraphTensor):
    """Pointwise losses broadcast input and target, as torch does, and warn as torch does when the
    shapes differ (it is usually a bug, e.g. (N, 1) against (N,))."""
    check_tensors(loss, input=x, target=t)
    ops.broadcast_shapes(loss, x, t)
    if not dt.promote(x.dtype, t.dtype).is_float:
        raise op_error(TypeError, loss, f"needs a float input or target, got {x.dtype.name} and {t.dtype.name}", x, t)
    if x.shape != t.shape:
        warnings.warn(f"{loss}: target shape {shape_str(t.shape)} differs from input shape {shape_str(x.shape)}; "
                      "they broadcast, which is usually a mistake", stacklevel=3)


# shared pieces --------------------------------------------------------------------------------
def _reduce(loss: GraphTensor, reduction: str) -> GraphTensor:
    return loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()


def _over(x: GraphTensor, n) -> GraphTensor:
    """``x / n`` for a dim ``n`` (a count of classes or samples), in ``x``'s dtype. A static ``n`` divides
    as a Python int (a 16-bit ``x`` in float32, rounded once: ``ops.div``); a symbolic one is read at run
    time and divides the same way (``_div_count``): cast to float16 it was inf beyond 65504, and a
    batchmean over 70000 samples was 0, with no gradient, where torch's is finite."""
    return x / n if is_static(n) else _div_count(x, n)


@_opmath
def _div_count(x: GraphTensor, n) -> GraphTensor:
    return x / ops.cast(x.graph.constant(n), x.dtype)


def _log1p(u: GraphTensor) -> GraphTensor:
    """``log(1 + u)`` accurate for small ``u`` (Goldberg: ``log(w) * u / (w - 1)``, ``w = 1 + u``)."""
    w = ops.add(u, 1.0)
    d = ops.sub(w, 1.0)
    exact = ops.eq(d, 0)
    return ops.where(exact, u, ops.log(w) * (u / ops.where(exact, 1.0, d)))


def _log_sigmoid(x: GraphTensor) -> GraphTensor:
    """``log(sigmoid(x))`` as ``min(x, 0) - log1p(exp(-|x|))`` (no overflow), each side smooth: a branch
    per sign, not ``minimum`` and ``abs``, whose kinks at 0 gave the right first derivative but a second
    derivative of 0 there (torch's: -0.25)."""
    neg_side = ops.lt(x, 0)
    return ops.where(neg_side, x, 0.0) - _log1p(ops.exp(ops.where(neg_side, x, -x)))


def _log_clamped(p: GraphTensor) -> GraphTensor:
    """torch's BCE log: ``max(log p, -100)``, so p = 0 or 1 costs 100 instead of inf."""
    zero = ops.eq(p, 0)
    return ops.where(zero, -100.0, ops.maximum(ops.log(ops.where(zero, 1.0, p)), -100.0))


def _bce(p: GraphTensor, t: GraphTensor) -> GraphTensor:
    """The elementwise BCE with torch's gradients (``Graph.custom_vjp``): w.r.t. ``p``,
    ``(p - t) / max(p (1 - p), 1e-12)``, which stays finite at saturated probabilities, where the
    clamped logs' own derivative, ``1 / p``, overflows to inf (p below about 3e-39; NaN where the clamp
    cuts it: 0 * inf) or is 0 at p = 0 exactly; w.r.t. ``t``, ``log(1 - p) - log(p)`` (-logit)."""
    out = ops.add((t - 1.0) * _log_clamped(1.0 - p) - t * _log_clamped(p), 0.0)  # (a node of its own)

    def rule(_, adjoint, p, t):
        d_p = (p - t) / ops.maximum(p * (1.0 - p), 1e-12)
        d_t = ops.log(1.0 - p) - ops.log(p)
        return [adjoint * d_p, adjoint * d_t]

    return p.graph.custom_vjp(out, [p, t], rule)


def _xlogy_self(t: GraphTensor) -> GraphTensor:
    """``t * log(t)`` with 0 at t = 0 (torch.xlogy(t, t))."""
    zero = ops.eq(t, 0)
    return ops.where(zero, 0.0, t * ops.log(ops.where(zero, 1.0, t)))


def _class_dim(loss: str, x: GraphTensor) -> int:
    if x.ndim == 0:
        raise op_error(ValueError, loss, "input needs a class dim: (C,), (N, C) or (N, C, d1, ...)", x)
    return 0 if x.ndim == 1 else 1


def _class_weight(loss: str, x: GraphTensor, weight, cdim: int):
    """A (C,) weight viewed along the class dim of ``x``."""
    if weight is None:
        return None
    _float(loss, "weight", weight)
    c = x.shape[cdim]
    if weight.shape != (c,):
        msg = f"weight must have shape ({c},), one per class, got {shape_str(weight.shape)}"
        raise op_error(ValueError, loss, msg, x, weight)
    return _as_input_dtype(weight, x).reshape((c,) + (1,) * (x.ndim - cdim - 1))


def _as_input_dtype(weight: GraphTensor, x: GraphTensor) -> GraphTensor:
    """A float weight in the input's dtype: a float64 numpy weight made a constant (torch refuses the
    mix) must not make the loss float64."""
    return weight if weight.dtype is x.dtype else ops.cast(weight, x.dtype)


def _check_label_range(loss: str, x: GraphTensor, target: GraphTensor, ignore_index: int):
    """Class indices out of [0, C) (other than ``ignore_index``) fail naming the loss and the target
    (``value_checks.range_check``): now where known, else the guard's parts (``value_checks.guard``)."""
    c = x.shape[_class_dim(loss, x)]
    return value_checks.range_check(
        loss, target, c, lambda v: f"target holds class {v}, out of range for {c} classes "
                                   f"(ignore_index={ignore_index})", (x, target), ignore=ignore_index)


def _check_indices(loss: str, x: GraphTensor, target: GraphTensor, weight, ignore_index: int):
    """Class indices: int32, of the input's shape without the class dim, in range where known now;
    weight one per class."""
    cdim = _class_dim(loss, x)
    if target.dtype.kind != "i":
        raise op_error(TypeError, loss, f"target of class indices must be int32, got {target.dtype.name}", x, target)
    want = x.shape[:cdim] + x.shape[cdim + 1:]
    if target.shape != want:
        msg = (f"target shape {shape_str(target.shape)} does not fit input shape {shape_str(x.shape)}: "
               f"class indices need shape {shape_str(want)}")
        raise op_error(ValueError, loss, msg, x, target)
    _class_weight(loss, x, weight, cdim)
    return _check_label_range(loss, x, target, ignore_index)


def _nll(logp: GraphTensor, target: GraphTensor, weight, ignore_index: int, parts=None):
    """``-w[t] * logp[t]`` per element (0 where ``t == ignore_index``), the weight each element
    counts for in a mean (0 where ignored), and the kept mask. With ``parts`` (``(x, m, lse)`` of
    ``ops.log_softmax_parts``) ``logp[t]`` is picked as ``(x[t] - m) - lse``: the same value, without
    materialising the whole log-softmax."""
    cdim = 0 if logp.ndim == 1 else 1
    keep = ops.ne(target, ignore_index)
    safe = ops.where(keep, target, 0)  # gather never reads ignore_index (it may be out of range)
    if parts is None:
        picked = ops.gather(logp, cdim, safe.unsqueeze(cdim)).squeeze(cdim)
    else:
        x, m, lse = parts
        picked = ((ops.gather(x, cdim, safe.unsqueeze(cdim)) - m) - lse).squeeze(cdim)
    if weight is None:
        w = ops.cast(keep, logp.dtype)
    else:
        weight = _as_input_dtype(weight, logp)
        w = ops.where(keep, ops.index_select(weight, 0, safe.reshape(-1)).reshape(target.shape), 0.0)
        picked = picked * w
    return ops.where(keep, -picked, 0.0), w, keep


def _weighted_mean(elem: GraphTensor, w: GraphTensor, reduction: str) -> GraphTensor:
    """torch's class-weighted mean divides by the summed weight of the kept targets (NaN if none). That
    denominator is registered as the loss's (``graph.mean_counts``), so that data parallel weighs each
    rank by the targets its share counts, not by its samples (``train/data_parallel.py``)."""
    if reduction != "mean":
        return _reduce(elem, reduction)
    count = w.sum()
    loss = elem.sum() / count
    loss.graph.mean_counts[loss.node.id] = count
    return loss


# classification -------------------------------------------------------------------------------
@float32_under_autocast
@renamed("nll_loss")
def nll_loss(input: GraphTensor, target: GraphTensor, weight: GraphTensor | None = None, *,  # noqa: A002
             ignore_index: int = -100, reduction: str = "mean") -> GraphTensor:
    """Negative log-likelihood of int32 class indices ``target`` (N, d1, ...) under log-probabilities
    ``input`` (N, C, d1, ...) (or (C,) against a 0-d target)."""
    check_tensors("nll_loss", optional=("weight",), input=input, target=target, weight=weight)
    _float("nll_loss", "input", input)
    _reduction("nll_loss", reduction, input)
    ignore_index = check_int("nll_loss", "ignore_index", ignore_index)
    check = _check_indices("nll_loss", input, target, weight, ignore_index)
    elem, w, _ = _nll(input, target, weight, ignore_index)
    value_checks.guard(check, elem)  # only programs computing the loss check its labels
    return _weighted_mean(elem, w, reduction)


@float32_under_autocast
@renamed("cross_entropy")
def cross_entropy(input: GraphTensor, target: GraphTensor, weight: GraphTensor | None = None, *,  # noqa: A002
                  ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0) -> GraphTensor:
    """Cross entropy of logits ``input`` (N, C, d1, ...) or (C,) against int32 class indices (the
    input's shape without C) or float class probabilities (the input's shape), told apart by the
    target's dtype; an int target of the input's shape is refused, as torch (which tells them apart by
    shape) refuses it. Label smoothing mixes in the uniform distribution over the C classes."""
    loss = "cross_entropy"
    check_tensors(loss, optional=("weight",), input=input, target=target, weight=weight)
    _float(loss, "input", input)
    _reduction(loss, reduction, input)
    ignore_index = check_int(loss, "ignore_index", ignore_index)
    if not 0.0 <= check_number(loss, "label_smoothing", label_smoothing, input) <= 1.0:
        raise op_error(ValueError, loss, f"label_smoothing must be in [0, 1], got {label_smoothing}", input)
    cdim = _class_dim(loss, input)
    soft = target.dtype.is_float
    check = None
    if not soft and target.shape == input.shape and target.dtype.kind in "iu":
        # (torch reads a target of the input's shape as class probabilities, which must be float)
        msg = (f"an int target of the input's shape {shape_str(input.shape)} reads as class probabilities, which "
               f"must be float (e.g. a one-hot target: cast it to float, or give its argmax as class indices of "
               f"shape {shape_str(input.shape[:cdim] + input.shape[cdim + 1:])})")
        raise op_error(TypeError, loss, msg, input, target)
    if not soft:
        check = _check_indices(loss, input, target, weight, ignore_index)
    elif target.shape != input.shape:
        want = input.shape[:cdim] + input.shape[cdim + 1:]
        msg = (f"a float target holds class probabilities and needs the input shape {shape_str(input.shape)}, "
               f"got {shape_str(target.shape)} (class indices are int32 of shape {shape_str(want)})")
        raise op_error(ValueError, loss, msg, input, target)
    elif ignore_index >= 0:
        raise op_error(ValueError, loss, "ignore_index is not supported with class-probability targets", input, target)
    wv = _class_weight(loss, input, weight, cdim)
    n_classes = input.shape[cdim]
    parts = log_softmax_parts(input, cdim)
    logp = input.log_softmax(cdim) if parts is None else (parts[0] - parts[1]) - parts[2]
    if soft:
        if label_smoothing > 0:
            target = target * (1.0 - label_smoothing) + _uniform(input, label_smoothing, n_classes)
        p = logp * target if wv is None else logp * target * wv
        return _reduce(-p.sum(cdim), reduction)  # the mean is over N, d1, ... (numel / C)
    elem, w, keep = _nll(logp, target, weight, ignore_index, parts)
    value_checks.guard(check, elem)  # only programs computing the loss check its labels
    if label_smoothing > 0:
        smooth = ops.where(keep, -(logp if wv is None else logp * wv).sum(cdim), 0.0)
        elem = elem * (1.0 - label_smoothing) + _over(smooth * label_smoothing, n_classes)
    return _weighted_mean(elem, w, reduction)


def _uniform(like: GraphTensor, mass: float, n):
    """``mass / n``, the uniform distribution's share of ``mass`` over ``n`` classes: a Python float for
    a static ``n``, else a 0-d tensor of ``like``'s dtype, divided in float32 or wider (``_over``)."""
    if is_static(n):
        return mass / n
    wide = dt.float64 if like.dtype is dt.float64 else dt.float32
    return ops.cast(_over(like.graph.constant(mass, wide), n), like.dtype)


@float32_under_autocast
@renamed("binary_cross_entropy")
def binary_cross_entropy(input: GraphTensor, target: GraphTensor, weight: GraphTensor | None = None, *,  # noqa: A002
                         reduction: str = "mean") -> GraphTensor:
    """BCE of probabilities ``input``; each log is clamped at -100 as in torch, so a saturated
    probability gives a finite loss, and the gradient is torch's (``_bce``). A probability outside
    [0, 1] gives NaN (torch raises: checking would mean computing the input twice, as it is the
    model's output). Prefer ``binary_cross_entropy_with_logits`` on logits."""
    loss = "binary_cross_entropy"
    check_tensors(loss, optional=("weight",), input=input, target=target, weight=weight)
    _float(loss, "input", input)
    _float(loss, "target", target)
    _reduction(loss, reduction, input)
    _same_shape(loss, "target", input, target)
    _fits(loss, "weight", input, weight)
    out = _bce(input, target)
    return _reduce(out if weight is None else out * _as_input_dtype(weight, input), reduction)


@float32_under_autocast
@renamed("binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(input: GraphTensor, target: GraphTensor,  # noqa: A002
                                     weight: GraphTensor | None = None, *, reduction: str = "mean",
                                     pos_weight: GraphTensor | None = None) -> GraphTensor:
    """BCE on logits: ``(1 - t) x - (1 + (pw - 1) t) log_sigmoid(x)``, finite for any logit.
    ``pos_weight`` scales the positive term (broadcast along the last dims, e.g. one per class)."""
    loss = "binary_cross_entropy_with_logits"
    check_tensors(loss, optional=("weight", "pos_weight"), input=input, target=target, weight=weight,
                  pos_weight=pos_weight)
    _float(loss, "input", input)
    _float(loss, "target", target)
    _reduction(loss, reduction, input)
    _same_shape(loss, "target", input, target)
    _fits(loss, "weight", input, weight)
    _fits(loss, "pos_weight", input, pos_weight)
    ls = _log_sigmoid(input)
    if pos_weight is not None:
        ls = ls * ((pos_weight - 1.0) * target + 1.0)
    out = (1.0 - target) * input - ls
    return _reduce(out if weight is None else out * weight, reduction)


@float32_under_autocast
@renamed("kl_div")
def kl_div(input: GraphTensor, target: GraphTensor, *, reduction: str = "mean",  # noqa: A002
           log_target: bool = False) -> GraphTensor:
    """KL(target || exp(input)) pointwise, ``input`` in log space. As in torch, ``"mean"`` divides
    by every element (not the KL divergence); ``"batchmean"`` divides by the batch size and is."""
    loss = "kl_div"
    check_tensors(loss, input=input, target=target)
    _float(loss, "input", input)
    _float(loss, "target", target)
    _reduction(loss, reduction, input, _REDUCTIONS + ("batchmean",))
    _pair(loss, input, target)
    if log_target:
        out = ops.exp(target) * (target - input)
    else:
        out = _xlogy_self(target) - target * input
    if reduction == "batchmean":
        s = out.sum()
        return _over(s, input.shape[0]) if input.ndim else s
    return _reduce(out, reduction)


# regression -----------------------------------------------------------------------------------
def _elementwise_weight(loss: str, x: GraphTensor, out: GraphTensor, weight, reduction: str, by_weight: bool):
    """torch's optional per-element ``weight`` (same shape as the input); a weighted mean divides by
    the summed weight for mse/l1 (``by_weight``) and by the element count for huber."""
    if weight is None:
        return _reduce(out, reduction)
    check_tensors(loss, input=x, weight=weight)
    if weight.shape != x.shape:
        msg = f"weight shape {shape_str(weight.shape)} must equal the input shape {shape_str(x.shape)}"
        raise op_error(ValueError, loss, msg, x, weight)
    out = out * weight
    return out.sum() / weight.sum() if by_weight and reduction == "mean" else _reduce(out, reduction)


@float32_under_autocast
@renamed("mse_loss")
def mse_loss(input: GraphTensor, target: GraphTensor, *, reduction: str = "mean",  # noqa: A002
             weight: GraphTensor | None = None) -> GraphTensor:
    """torch's ``F.mse_loss``: the squared error ``(input - target) ** 2``, reduced.

    Args:
        input: the predictions.
        target: the targets, of ``input``'s shape.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"`` (the per-element losses).
        weight: an optional per-element weight of ``input``'s shape; a weighted mean divides by the
            summed weight.
    """
    _pair("mse_loss", input, target)
    _reduction("mse_loss", reduction, input)
    d = input - target
    return _elementwise_weight("mse_loss", input, d * d, weight, reduction, by_weight=True)


@float32_under_autocast
@renamed("l1_loss")
def l1_loss(input: GraphTensor, target: GraphTensor, *, reduction: str = "mean",  # noqa: A002
            weight: GraphTensor | None = None) -> GraphTensor:
    """torch's ``F.l1_loss``: the absolute error ``|input - target|``, reduced.

    Args:
        input: the predictions.
        target: the targets, of ``input``'s shape.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"`` (the per-element losses).
        weight: an optional per-element weight of ``input``'s shape; a weighted mean divides by the
            summed weight.
    """
    _pair("l1_loss", input, target)
    _reduction("l1_loss", reduction, input)
    return _elementwise_weight("l1_loss", input, ops.abs(input - target), weight, reduction, by_weight=True)


@float32_under_autocast
@renamed("smooth_l1_loss")
def smooth_l1_loss(input: GraphTensor, target: GraphTensor, *, reduction: str = "mean",  # noqa: A002
                   beta: float = 1.0) -> GraphTensor:
    """Quadratic below ``beta``, linear above, slope 1 (continuous gradient); ``beta=0`` is L1."""
    _pair("smooth_l1_loss", input, target)
    _reduction("smooth_l1_loss", reduction, input)
    if not check_number("smooth_l1_loss", "beta", beta, input) >= 0:
        raise op_error(ValueError, "smooth_l1_loss", f"beta must be >= 0, got {beta}", input)
    z = ops.abs(input - target)
    if beta == 0:
        return _reduce(z, reduction)
    return _reduce(ops.where(ops.lt(z, beta), z * z * 0.5 / beta, z - 0.5 * beta), reduction)


@float32_under_autocast
@renamed("huber_loss")
def huber_loss(input: GraphTensor, target: GraphTensor, reduction: str = "mean", delta: float = 1.0,  # noqa: A002
               weight: GraphTensor | None = None) -> GraphTensor:
    """Quadratic below ``delta``, linear above with slope ``delta``: smooth_l1 scaled by ``delta``.

    The loss has the input's dtype, as torch's (its kernel writes into a tensor like the input; unlike
    mse/l1/smooth_l1, which promote): a float32 input against a float64 target gives float32."""
    _pair("huber_loss", input, target)
    _reduction("huber_loss", reduction, input)
    if not check_number("huber_loss", "delta", delta, input) > 0:
        raise op_error(ValueError, "huber_loss", f"delta must be > 0, got {delta}", input)
    z = ops.abs(input - target)
    out = ops.where(ops.lt(z, delta), z * z * 0.5, (z - 0.5 * delta) * delta)
    if input.dtype.is_float and out.dtype is not input.dtype:
        out = ops.cast(out, input.dtype)
    return _elementwise_weight("huber_loss", input, out, weight, reduction, by_weight=False)


@renamed("focal_loss")
def focal_loss(input: GraphTensor, target: GraphTensor, alpha: float = 0.25, gamma: float = 2.0,  # noqa: A002
               reduction: str = "none") -> GraphTensor:
    """Sigmoid focal loss (Lin et al., "Focal Loss for Dense Object Detection"), as
    ``torchvision.ops.sigmoid_focal_loss``: binary cross-entropy on logits, down-weighted for
    well-classified elements by ``(1 - p_t) ** gamma`` and balanced by ``alpha_t``.

    Args:
        input: logits of any shape (float).
        target: the same shape: 1 for the positive class, 0 for the negative (soft labels in [0, 1]
            are accepted, as in torchvision).
        alpha: weight of the positives in (0, 1), ``1 - alpha`` for the negatives; a negative alpha
            turns the balancing off (torchvision's convention).
        gamma: the focusing exponent (>= 0; 0 gives the alpha-balanced BCE).
        reduction: ``"none"`` (torchvision's default) | ``"mean"`` | ``"sum"``.

    Returns:
        The loss per element, or its mean or sum.
    """
    loss = "focal_loss"
    check_tensors(loss, input=input, target=target)
    _float(loss, "input", input)
    _float(loss, "target", target)
    _reduction(loss, reduction, input)
    _same_shape(loss, "target", input, target)
    check_number(loss, "alpha", alpha, input)
    check_number(loss, "gamma", gamma, input)
    if not gamma >= 0:
        raise op_error(ValueError, loss, f"gamma must be >= 0, got {gamma!r}", input)
    ce = (1.0 - target) * input - _log_sigmoid(input)  # binary_cross_entropy_with_logits, reduction="none"
    out = ce
    if gamma != 0:
        # 1 - p_t = p (1 - t) + (1 - p) t, with 1 - p = sigmoid(-x): no cancellation when p is near 1
        one_minus_pt = ops.sigmoid(input) * (1.0 - target) + ops.sigmoid(-input) * target
        out = out * (one_minus_pt * one_minus_pt if gamma == 2 else one_minus_pt ** gamma)
    if alpha >= 0:
        out = out * (target * alpha + (1.0 - target) * (1.0 - alpha))
    return _reduce(out, reduction)

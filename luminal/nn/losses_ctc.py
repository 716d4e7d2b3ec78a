"""torch's ``F.ctc_loss``: the Connectionist Temporal Classification loss (Graves et al. 2006), for
sequence models whose output frames are not aligned with the target labels (speech, handwriting):
``-log`` of the total probability of every frame-by-frame path that reads as the target once repeated
labels are merged and blanks removed.

Why it is written this way: the sum over paths is the forward (alpha) recursion over the extended label
sequence ``l' = (blank, l1, blank, l2, ..., blank)`` of each target, in log space (a product of T
probabilities underflows float32 after a few dozen frames). Each frame is a handful of graph ops on the
whole batch, (N, 2S+1) at a time; the loop over the T frames is unrolled when the graph is built, so T
must be static. The gradient is the project's autograd of that recursion (the beta recursion is what the
autograd of alpha computes), so nothing here is differentiated by hand.

Impossible alignments (a target longer than its input allows) keep ``-inf`` log-probabilities all the way
through; the log-sum-exp is -inf-safe (a max of -inf shifts by 0, and reads 1 inside the log where the
result is discarded), so the values are torch's (the loss is +inf) and every gradient stays finite (0
where the path set is empty). torch's own gradient of an infinite loss is NaN unless ``zero_infinity``.
"""

from __future__ import annotations

import numbers

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import check_int, op_error, renamed
from luminal.core.symbolic import is_static, shape_str
from luminal.frontend import ops
from luminal.frontend.checks import check_tensors
from luminal.frontend.float32_ops import float32_under_autocast
from luminal.frontend.ops import value_checks
from luminal.frontend.ops.value_checks import known_values
from luminal.frontend.tensor import GraphTensor
from luminal.nn.losses import _float, _reduction

_NEG = float("-inf")
LOSS = "ctc_loss"


def _lse(*terms: GraphTensor) -> GraphTensor:
    """``log(sum(exp(terms)))`` elementwise, -inf-safe: where every term is -inf the result is -inf and
    every gradient 0 (not ``0 * inf``). The max is a detached shift (its gradient share is exactly 0)."""
    m = terms[0]
    for t in terms[1:]:
        m = ops.maximum(m, t)
    m = m.detach()
    dead = ops.eq(m, _NEG)
    ms = ops.where(dead, 0.0, m)
    s = ops.exp(terms[0] - ms)
    for t in terms[1:]:
        s = s + ops.exp(t - ms)
    return ops.where(dead, _NEG, ms + ops.log(ops.where(dead, 1.0, s)))


def _lengths(what: str, v, n: int, batched: bool, g, like: GraphTensor):
    """``input_lengths``/``target_lengths`` as an int32 (n,) tensor and their values when known now (an
    int sequence, an int for an unbatched input, or a constant tensor), else None."""
    if isinstance(v, GraphTensor):
        check_tensors(LOSS, log_probs=like, **{what: v})
        if v.dtype.kind != "i":
            raise op_error(TypeError, LOSS, f"{what} must hold ints, got {v.dtype.name}", like, v)
        ok = v.shape == (n,) if batched else v.shape in ((), (1,))
        if not ok:
            want = f"({n},)" if batched else "() or (1,)"
            raise op_error(ValueError, LOSS, f"{what} must have shape {want}, one per sequence, got "
                           f"{shape_str(v.shape)}", like, v)
        v = v.reshape(n)
        if v.dtype is not dt.int32:
            v = ops.cast(v, dt.int32)
        known = known_values(v)
        return v, (None if known is None else np.asarray(known, np.int64).reshape(n))
    if isinstance(v, numbers.Integral) and not isinstance(v, bool) and not batched:
        v = [v]
    if isinstance(v, (list, tuple, np.ndarray)):
        arr = np.asarray(v)
        if arr.ndim == 1 and arr.dtype.kind in "iu" and len(arr) == n:
            return g.constant(arr.astype(np.int32)), arr.astype(np.int64)
        if arr.ndim == 1 and len(arr) != n and (arr.dtype.kind in "iu" or len(arr) == 0):
            raise op_error(ValueError, LOSS, f"{what} must have {n} entries, one per sequence, got {len(arr)}", like)
    raise op_error(TypeError, LOSS, f"{what} must be an int32 tensor or a sequence of ints, got "
                   f"{type(v).__name__} {v!r}", like)


def _in_range(what: str, t: GraphTensor, known, lo: int, hi: int, of_: GraphTensor, why: str, *operands) -> None:
    """Every value of ``t`` must be in [lo, hi], as torch checks its lengths: now where known (a
    ValueError naming the loss and the value), else a guard of the programs computing ``of_``."""
    if known is not None:
        bad = (known < lo) | (known > hi)
        if bad.any():
            raise op_error(ValueError, LOSS, f"{what} holds {known[bad][0]}, out of range [{lo}, {hi}] ({why})",
                           *operands)
        return
    g = t.graph
    worst = ops.where(ops.gt(ops.amax(t), hi), ops.amax(t), ops.amin(t))
    failed = ops.logical_or(ops.lt(ops.amin(t), lo), ops.gt(ops.amax(t), hi))
    msg = str(op_error(ValueError, LOSS, f"{what} holds {{value}}, out of range [{lo}, {hi}] ({why})", *operands))
    g.guard(failed, worst, ValueError, msg, of=of_)


def _padded_targets(targets, tl, tl_known, n: int, cap: int, guards: list):
    """The targets as (n, S) int32 rows (S <= ``cap``) and S. A 2-d ``targets`` is already padded
    (N, S); a 1-d one holds the sequences one after another (``sum(target_lengths)`` labels), cut here
    at each sequence's offset."""
    g = targets.graph
    if targets.ndim == 2:
        s_all = targets.shape[1]
        guards.append(("target_lengths", tl, tl_known, 0, s_all, "a padded target holds at most its width "
                       f"{s_all}"))
        s = min(s_all, cap) if tl_known is None else min(int(tl_known.max(initial=0)), s_all, cap)
        return targets[:, :s], s
    total = targets.shape[0]
    if tl_known is not None:
        if (tl_known < 0).any():
            raise op_error(ValueError, LOSS, f"target_lengths holds {tl_known[tl_known < 0][0]}, which is negative",
                           targets)
        if int(tl_known.sum()) != total:
            raise op_error(ValueError, LOSS, f"concatenated targets need sum(target_lengths) = {int(tl_known.sum())} "
                           f"labels, got {total}", targets)
        s = min(int(tl_known.max(initial=0)), cap)
        if s == 0:
            return g.constant(np.zeros((n, 0), np.int32)), 0
        offsets = np.concatenate([[0], np.cumsum(tl_known)[:-1]])
        idx = np.minimum(offsets[:, None] + np.arange(s)[None, :], total - 1).astype(np.int32)
        return ops.index_select(targets, 0, g.constant(idx.reshape(-1))).reshape(n, s), s
    guards.append(("target_lengths", tl, None, 0, total, "concatenated targets hold them all"))
    s = min(total, cap)
    if s == 0:
        return g.constant(np.zeros((n, 0), np.int32)), 0
    summed = ops.sum(tl)
    msg = str(op_error(ValueError, LOSS, f"concatenated targets need sum(target_lengths) = {{value}} labels, "
                       f"got {total}", targets))
    guards.append(lambda of_: g.guard(ops.ne(summed, total), summed, ValueError, msg, of=of_))
    offsets = ops.cumsum(tl, 0) - tl
    idx = ops.clamp(offsets.unsqueeze(1) + ops.arange(s, graph=g).unsqueeze(0), 0, total - 1)
    return ops.index_select(targets, 0, idx.reshape(-1)).reshape(n, s), s


@float32_under_autocast
@renamed("ctc_loss")
def ctc_loss(log_probs: GraphTensor, targets: GraphTensor, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> GraphTensor:
    """torch's ``F.ctc_loss``: ``-log p(target | input)`` summed over every alignment of the target to
    the input frames (blanks between and around labels, repeats merged).

    The gradient is the exact gradient of this loss w.r.t. ``log_probs``. torch's kernel returns
    ``exp(log_probs) - posterior`` instead (the gradient w.r.t. the logits, assuming ``log_probs`` is their
    ``log_softmax``), so the two agree once back-propagated through ``log_softmax``, as in any CTC model.

    Args:
        log_probs: (T, N, C) (or unbatched (T, C)) log-probabilities of the C classes per frame, usually
            a ``log_softmax``; float (16-bit inputs are computed in float32). T must be static.
        targets: int32 labels (torch's may be int64): (N, S) padded (values past each length are
            ignored), or 1-d, the N sequences one after another (``sum(target_lengths)`` labels).
            Labels are in [0, C) and should not be ``blank`` (the recursion still runs, as torch's, but
            torch's kernel gradient is then not the derivative of its own loss; ours is).
        input_lengths: the frames of each sequence, (N,) ints in [0, T]: a sequence of ints (an int when
            unbatched) or an int tensor (values known only at run time are checked before the run).
        target_lengths: the labels of each sequence, as ``input_lengths``.
        blank: the blank class's index.
        reduction: ``"mean"`` (each loss divided by its target length, at least 1, then the batch mean),
            ``"sum"`` or ``"none"`` ((N,), or 0-d unbatched).
        zero_infinity: impossible alignments (a target too long for its input) cost 0 and give 0
            gradients instead of inf.
    """
    check_tensors(LOSS, log_probs=log_probs, targets=targets)
    _float(LOSS, "log_probs", log_probs)
    _reduction(LOSS, reduction, log_probs)
    if log_probs.ndim not in (2, 3):
        raise op_error(ValueError, LOSS, f"log_probs must be (T, N, C) or unbatched (T, C), got "
                       f"{shape_str(log_probs.shape)}", log_probs)
    if not all(is_static(d) for d in log_probs.shape) or not all(is_static(d) for d in targets.shape):
        raise op_error(ValueError, LOSS, "needs static shapes: the recursion over the T frames is unrolled when "
                       "the graph is built", log_probs, targets)
    batched = log_probs.ndim == 3
    lp = log_probs if batched else log_probs.unsqueeze(1)
    t_max, n, c = lp.shape
    if t_max == 0 or n == 0 or c == 0:
        raise op_error(ValueError, LOSS, f"log_probs must not be empty, got {shape_str(log_probs.shape)}", log_probs)
    blank = check_int(LOSS, "blank", blank)
    if not 0 <= blank < c:
        raise op_error(ValueError, LOSS, f"blank must be in [0, {c}), got {blank}", log_probs)
    if targets.dtype.kind != "i":
        raise op_error(TypeError, LOSS, f"targets must hold int labels, got {targets.dtype.name}", log_probs, targets)
    if targets.ndim not in (1, 2) or (targets.ndim == 2 and targets.shape[0] != n):
        want = f"({n}, S) padded or 1-d concatenated" if batched else "1-d (or (1, S) padded)"
        raise op_error(ValueError, LOSS, f"targets must be {want}, got {shape_str(targets.shape)}", log_probs, targets)
    g = lp.graph
    targets = targets if targets.dtype is dt.int32 else ops.cast(targets, dt.int32)
    il, il_known = _lengths("input_lengths", input_lengths, n, batched, g, log_probs)
    tl, tl_known = _lengths("target_lengths", target_lengths, n, batched, g, log_probs)
    guards = [("input_lengths", il, il_known, 0, t_max, f"log_probs has {t_max} frames")]
    # a target longer than T frames cannot align: its labels past T are never read (the loss is inf)
    padded, s = _padded_targets(targets, tl, tl_known, n, t_max, guards)

    work = dt.float32 if log_probs.dtype.itemsize < 4 else log_probs.dtype
    lp = lp if lp.dtype is work else ops.cast(lp, work)
    nll = _negative_log_likelihood(lp, padded, s, il, tl, blank, guards)
    if zero_infinity:
        nll = ops.where(ops.eq(nll, float("inf")), 0.0, nll)
    if reduction == "none":
        out = nll if batched else nll.reshape(())
    elif reduction == "sum":
        out = nll.sum()
    else:
        out = (nll / ops.cast(ops.maximum(tl, 1), work)).mean()
    out = out if out.dtype is log_probs.dtype else ops.cast(out, log_probs.dtype)
    for gd in guards:
        if callable(gd):
            gd(out)
        else:
            what, t, known, lo, hi, why = gd
            _in_range(what, t, known, lo, hi, out, why, log_probs, targets)
    return out


def _negative_log_likelihood(lp, padded, s: int, il, tl, blank: int, guards: list) -> GraphTensor:
    """``-log p(target | input)`` per sequence, (N,): the alpha recursion over the extended labels."""
    g = lp.graph
    t_max, n, c = lp.shape
    width = 2 * s + 1  # blank, l1, blank, l2, ..., blank
    pos = np.arange(width)
    lab_pos = np.maximum((pos - 1) // 2, 0).astype(np.int32)
    # a label position counts where it is odd and within the sequence's target length
    is_label = ops.logical_and(g.constant(pos % 2 == 1).unsqueeze(0),
                               ops.lt(g.constant(lab_pos).unsqueeze(0), tl.unsqueeze(1)))  # (N, L)
    if s:
        labels = ops.index_select(padded, 1, g.constant(lab_pos))  # (N, L)
        check = value_checks.range_check(
            LOSS, ops.where(is_label, labels, 0), c,
            lambda v: f"targets hold label {v}, out of range for {c} classes", (lp, padded))
        if check is not None:
            guards.append(lambda of_: value_checks.guard(check, of_))
        ext = ops.where(is_label, ops.clamp(labels, 0, c - 1), blank)
    else:
        ext = ops.full((n, width), blank, dtype=dt.int32, graph=g)
    # the skip s-2 -> s: allowed into a label that differs from the label two back (torch's rule)
    if width > 2:
        prev2 = ops.cat([ops.full((n, 2), blank, dtype=dt.int32, graph=g), ext[:, :width - 2]], 1)
        skip = ops.logical_and(is_label, ops.ne(ext, prev2))
    else:
        skip = ops.full((n, width), False, dtype=dt.bool_, graph=g)
    skip_log = ops.where(skip, 0.0, _NEG)
    if skip_log.dtype is not lp.dtype:
        skip_log = ops.cast(skip_log, lp.dtype)
    lpe = ops.gather(lp, 2, ext.unsqueeze(0).expand(t_max, n, width))  # (T, N, L): log p of l'[s] at t
    frames = ops.lt(ops.arange(t_max, graph=g).unsqueeze(1), il.unsqueeze(0)).unsqueeze(2)  # (T, N, 1)
    neg2 = ops.full((n, 2), _NEG, dtype=lp.dtype, graph=g)

    start = ops.logical_or(g.constant(pos == 0).unsqueeze(0),
                           ops.logical_and(g.constant(pos == 1).unsqueeze(0), ops.gt(tl, 0).unsqueeze(1)))
    alpha = ops.where(start, lpe[0], _NEG)
    for t in range(1, t_max):
        ap = ops.cat([neg2, alpha], 1)
        new = _lse(alpha, ap[:, 1:width + 1], ap[:, :width] + skip_log) + lpe[t]
        alpha = ops.where(frames[t], new, alpha)  # past its input length a sequence's alpha stays
    end = ops.minimum(tl * 2, width - 1).unsqueeze(1)
    last = ops.gather(alpha, 1, end).squeeze(1)
    before = ops.where(ops.gt(tl, 0), ops.gather(alpha, 1, ops.maximum(end - 1, 0)).squeeze(1), _NEG)
    ll = _lse(last, before)
    ll = ops.where(ops.gt(tl, s), _NEG, ll)  # longer than the frames: no alignment
    ll = ops.where(ops.eq(il, 0), ops.where(ops.eq(tl, 0), 0.0, _NEG), ll)  # no frames: only the empty target
    return -ll

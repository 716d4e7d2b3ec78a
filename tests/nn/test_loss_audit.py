"""An audit of the losses against torch 2.13 (values, gradients, result dtypes, errors), for what the
other loss tests (test_losses.py, test_losses_more.py, test_loss_modules.py, test_ctc_loss.py,
test_edge_gradients.py) leave out: two spatial dims, every target ignored under label smoothing and
class weights, an ignore_index past the classes, mixed input/target dtypes, int targets, empty batches,
special norms of the triplet loss, and the errors of every loss for a bad reduction or target.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from error_table import raises_naming
from parity import TORCH_DTYPE, check, rand

import luminal as lm
from luminal.nn import losses as L
from luminal.nn import losses_embedding as LE
from luminal.nn import losses_likelihood as LL
from luminal.nn import losses_margin as LM
from luminal.nn.layers import loss as ML
from luminal.nn.layers import loss_more as MM

pytestmark = [pytest.mark.usefixtures("one_torch_thread")]
R = ("none", "mean", "sum")
C = 4
W = np.linspace(0.3, 1.7, C).astype(np.float32)


def _long(t):
    return t.long() if t.dtype == torch.int32 else t


def _all(ours, theirs, reductions=R, **kw):
    """One output per reduction, ours and torch's (int32 tensors reach torch as int64)."""
    return (lambda *xs: tuple(ours(*xs, reduction=r, **kw) for r in reductions),
            lambda *ts: tuple(theirs(*map(_long, ts), reduction=r, **kw) for r in reductions))


# classification -------------------------------------------------------------------------------
@pytest.mark.parametrize("label_smoothing", [0.0, 0.2, 1.0])
def test_cross_entropy_and_nll_two_spatial_dims(label_smoothing, backend):
    """(N, C, d1, d2) logits with class weights, an ignore_index of -1 and label smoothing."""
    x = rand((2, C, 3, 2), low=-3, high=3)
    t = np.random.default_rng(1).integers(0, C, (2, 3, 2)).astype(np.int32)
    t[0, 0, 0] = t[1, 2, 1] = -1
    kw = dict(ignore_index=-1)
    ours, theirs = _all(lambda x, t, **k: L.cross_entropy(x, t, x.graph.constant(W), label_smoothing=label_smoothing,
                                                           **k),
                        lambda x, t, **k: F.cross_entropy(x, t, torch.from_numpy(W), label_smoothing=label_smoothing,
                                                          **k), **kw)
    check(ours, [x, t], torch_op=theirs, backend=backend)
    ours, theirs = _all(lambda x, t, **k: L.nll_loss(x.log_softmax(1), t, x.graph.constant(W), **k),
                        lambda x, t, **k: F.nll_loss(x.log_softmax(1), t, torch.from_numpy(W), **k), **kw)
    check(ours, [x, t], torch_op=theirs, backend=backend)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.3])
def test_every_target_ignored_with_weights_and_smoothing(label_smoothing, backend):
    """No target kept: the mean is 0/0 = NaN (the weighted one and the smoothing term alike), the sum 0,
    each element 0; the gradient 0."""
    x = rand((2, C, 3))
    t = np.full((2, 3), 2, np.int32)
    f = lambda x, t, **k: L.cross_entropy(x, t, x.graph.constant(W), ignore_index=2,  # noqa: E731
                                          label_smoothing=label_smoothing, **k)
    g = lm.Graph()
    xi = g.input("x", x.shape)
    outs = [f(xi, g.constant(t), reduction=r) for r in R]
    grad = lm.train.grad(outs[2] + outs[0].sum(), xi)
    none, mean, total, dx = lm.compile(outs + [grad], backend=backend)(x=x)
    assert none.shape == (2, 3) and not none.any()
    assert np.isnan(mean) and total == 0
    assert not dx.any()


def test_ignore_index_past_the_classes(backend):
    """An ignore_index of 10 with 4 classes: those targets are skipped, never read, never range-checked."""
    x, t = rand((5, C)), np.array([0, 10, 3, 10, 1], np.int32)
    ours, theirs = _all(lambda x, t, **k: L.cross_entropy(x, t, x.graph.constant(W), **k),
                        lambda x, t, **k: F.cross_entropy(x, t, torch.from_numpy(W), **k),
                        ignore_index=10, label_smoothing=0.2)
    check(ours, [x, t], torch_op=theirs, backend=backend)


def test_an_int_target_of_the_input_shape_is_refused_as_torch_refuses_it():
    """torch reads a target of the input's shape as class probabilities and wants them float; the message
    said the (equal) shapes did not fit."""
    g = lm.Graph()
    x, onehot = g.input("x", (4, C)), g.input("t", (4, C), lm.int32)
    raises_naming(lambda: L.cross_entropy(x, onehot), TypeError,
                  ["cross_entropy", "int target", "(4, 4)", "class probabilities", "must be float", "(4,)"])
    raises_naming(lambda: ML.CrossEntropyLoss()(x, onehot), TypeError, ["cross_entropy", "must be float"])


def test_class_index_out_of_range_at_run_time_names_the_loss():
    g = lm.Graph()
    x, t = g.input("x", (3, C)), g.input("t", (3,), lm.int32)
    f = lm.compile([L.cross_entropy(x, t), L.nll_loss(x, t)], backend="cpu")
    f(x=np.zeros((3, C), np.float32), t=np.int32([0, -100, 3]))
    for bad in (4, -7):
        with pytest.raises(IndexError, match=f"^cross_entropy: target holds class {bad}, out of range for 4 classes"):
            f(x=np.zeros((3, C), np.float32), t=np.int32([0, bad, 1]))


# binary ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("pos_weight", [np.array([[2.0], [0.5]], np.float32), np.array(3.0, np.float32)],
                         ids=["per-row", "0-d"])
def test_bce_with_logits_pos_weight_broadcast_at_extreme_logits(pos_weight, backend):
    """A pos_weight per row ((N, 1)) or one for all (0-d), broadcast against logits of +-100."""
    x = np.array([[100, -100, 0.5], [-100, 100, 3]], np.float32)
    t = np.array([[1, 0, 1], [1, 0, 0.2]], np.float32)
    pw = torch.from_numpy(pos_weight)

    def ours(x, t, **k):
        return L.binary_cross_entropy_with_logits(x, t, pos_weight=x.graph.constant(pos_weight), **k)

    ours, theirs = _all(ours, lambda x, t, **k: F.binary_cross_entropy_with_logits(x, t, pos_weight=pw, **k))
    check(ours, [x, t], torch_op=theirs, backend=backend)


# result dtypes --------------------------------------------------------------------------------
MIXED = [(lm.float16, lm.float32), (lm.bfloat16, lm.float32), (lm.float32, lm.float64), (lm.float16, lm.float64)]


@pytest.mark.parametrize("dx,dt", MIXED, ids=lambda d: d.name)
def test_result_dtypes_of_mixed_input_and_target(dx, dt, backend):
    """torch promotes a wider float target in margin_ranking_loss and multilabel_soft_margin_loss (they
    were computed in the input's dtype: a float32 soft label rounded to float16 first), while huber_loss
    keeps the input's dtype (its kernel writes into a tensor like the input; ours promoted)."""
    x = rand((3, 5), dx, low=-3, high=3)
    y = rand((3, 5), dx, seed=1, low=-3, high=3)
    soft = lm.core.dtype.to_storage(np.random.default_rng(2).uniform(0, 1, (3, 5)), dt)
    signs = np.where(rand((3, 5), seed=3) > 0, 1.0, -1.0)
    labels = lm.core.dtype.to_storage(signs, dt)
    target = lm.core.dtype.to_storage(rand((3, 5), seed=4, low=-3, high=3), dt)

    def ours(x, y, soft, labels):
        return (*(LM.multilabel_soft_margin_loss(x, soft, reduction=r) for r in R),
                *(LM.margin_ranking_loss(x, y, labels, 0.3, reduction=r) for r in R))

    def theirs(x, y, soft, labels):
        return (*(F.multilabel_soft_margin_loss(x, soft, reduction=r) for r in R),
                *(F.margin_ranking_loss(x, y, labels, 0.3, reduction=r) for r in R))

    tol = dict(rtol=2e-2, atol=2e-2) if dx.itemsize == 2 else {}  # (16-bit inputs: 16-bit tolerances)
    check(ours, [x, y, soft, labels], torch_op=theirs, backend=backend, dtypes=[dx, dx, dt, dt], **tol,
          grad_rtol=tol.get("rtol"), grad_atol=tol.get("atol"))
    # (torch's huber_loss has no backward for a mixed pair: values only)
    check(lambda x, t: tuple(L.huber_loss(x, t, reduction=r, delta=0.7) for r in R), [x, target],
          torch_op=lambda x, t: tuple(F.huber_loss(x, t, reduction=r, delta=0.7) for r in R), backend=backend,
          dtypes=[dx, dt], grad=False, **tol)


def test_gaussian_nll_loss_takes_an_int_target(backend):
    """torch promotes an int target (counts, class-like values) to the input's dtype; ours refused it."""
    x, t = rand((3, 4)), np.random.default_rng(5).integers(-2, 3, (3, 4)).astype(np.int32)
    v = rand((3, 1), seed=6, low=0.2, high=2)
    ours, theirs = _all(lambda x, v, **k: LL.gaussian_nll_loss(x, x.graph.constant(t), v, full=True, **k),
                        lambda x, v, **k: F.gaussian_nll_loss(x, torch.from_numpy(t).long(), v, full=True, **k))
    check(ours, [x, v], torch_op=theirs, backend=backend)
    g = lm.Graph()
    xi = g.input("x", (3, 4), lm.float16)
    assert LL.gaussian_nll_loss(xi, g.input("t", (3, 4), lm.int32), 1.0).dtype is lm.float16
    raises_naming(lambda: LL.gaussian_nll_loss(xi, g.input("b", (3, 4), lm.bool), 1.0), TypeError,
                  ["gaussian_nll_loss", "target", "bool"])


@pytest.mark.parametrize("dx,dt", MIXED, ids=lambda d: d.name)
def test_result_dtypes_that_already_matched(dx, dt):
    """The other pointwise losses' result dtypes for a mixed pair, against torch's."""
    g = lm.Graph()
    x, t = g.input("x", (3, 4), dx), g.input("t", (3, 4), dt)
    tx, tt = torch.rand(3, 4).to(TORCH_DTYPE[dx]), torch.rand(3, 4).to(TORCH_DTYPE[dt])
    pairs = [(L.mse_loss, F.mse_loss), (L.l1_loss, F.l1_loss), (L.smooth_l1_loss, F.smooth_l1_loss),
             (L.kl_div, F.kl_div), (L.cross_entropy, F.cross_entropy), (LL.poisson_nll_loss, F.poisson_nll_loss),
             (LM.soft_margin_loss, F.soft_margin_loss), (LM.hinge_embedding_loss, F.hinge_embedding_loss)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for ours, theirs in pairs:
            assert TORCH_DTYPE[ours(x, t).dtype] == theirs(tx, tt).dtype, ours.__name__


# empty batches --------------------------------------------------------------------------------
def test_empty_batch(backend):
    """N = 0: every 'none' is empty, every 'sum' 0 and every 'mean' 0/0 = NaN (torch's too)."""
    g = lm.Graph()
    x, y = g.input("x", (0, 3)), g.input("y", (0, 3))
    ti = g.constant(np.zeros((0,), np.int32))
    calls = [lambda r: L.cross_entropy(x, ti, reduction=r), lambda r: L.cross_entropy(x, y.softmax(1), reduction=r),
             lambda r: L.nll_loss(x, ti, reduction=r), lambda r: L.mse_loss(x, y, reduction=r),
             lambda r: L.binary_cross_entropy(x.sigmoid(), y.sigmoid(), reduction=r),
             lambda r: L.binary_cross_entropy_with_logits(x, y, reduction=r),
             lambda r: LM.multilabel_soft_margin_loss(x, y, reduction=r),
             lambda r: LM.multi_margin_loss(x, ti, reduction=r),
             lambda r: LE.cosine_embedding_loss(x, y, g.constant(np.zeros((0,), np.float32)), reduction=r),
             lambda r: LE.triplet_margin_loss(x, y, y, reduction=r)]
    outs = [c(r) for c in calls for r in R]
    got = lm.compile(outs, backend=backend)(x=np.zeros((0, 3), np.float32), y=np.zeros((0, 3), np.float32))
    for k in range(len(calls)):
        none, mean, total = got[3 * k:3 * k + 3]
        assert none.size == 0 and np.isnan(mean) and total == 0, k


# embeddings -----------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [float("inf"), 0.5, 0.0])
def test_triplet_margin_loss_special_norms(p, backend):
    a, n = rand((3, 4)), rand((3, 4), seed=2)
    ours, theirs = _all(lambda a, b, c, **k: LE.triplet_margin_loss(a, b, c, p=p, swap=True, **k),
                        lambda a, b, c, **k: F.triplet_margin_loss(a, b, c, p=p, swap=True, **k))
    check(ours, [a, rand((3, 4), seed=1), n], torch_op=theirs, backend=backend)


@pytest.mark.parametrize("p", [2.0, 1.0, float("inf")])
def test_triplet_margin_loss_equal_vectors_without_eps(p, backend):
    """d(a, p) = 0 exactly (eps 0): the norm's gradient there is 0, as torch's."""
    a = rand((3, 4))
    check(lambda a, b, c: LE.triplet_margin_loss(a, b, c, eps=0.0, p=p, reduction="sum"),
          [a, a.copy(), rand((3, 4), seed=2)],
          torch_op=lambda a, b, c: F.triplet_margin_loss(a, b, c, eps=0.0, p=p, reduction="sum"), backend=backend)


# reductions ------------------------------------------------------------------------------------
def _functional_losses():
    g = lm.Graph()
    x, y = g.input("x", (4, 5)), g.input("y", (4, 5))
    ti, t5, t4 = g.input("ti", (4,), lm.int32), g.input("t5", (4, 5), lm.int32), g.input("t4", (4,))
    lp = g.input("lp", (6, 2, 5))
    return {
        "cross_entropy": lambda r: L.cross_entropy(x, ti, reduction=r),
        "nll_loss": lambda r: L.nll_loss(x, ti, reduction=r),
        "binary_cross_entropy": lambda r: L.binary_cross_entropy(x, y, reduction=r),
        "binary_cross_entropy_with_logits": lambda r: L.binary_cross_entropy_with_logits(x, y, reduction=r),
        "kl_div": lambda r: L.kl_div(x, y, reduction=r),
        "mse_loss": lambda r: L.mse_loss(x, y, reduction=r),
        "l1_loss": lambda r: L.l1_loss(x, y, reduction=r),
        "smooth_l1_loss": lambda r: L.smooth_l1_loss(x, y, reduction=r),
        "huber_loss": lambda r: L.huber_loss(x, y, reduction=r),
        "poisson_nll_loss": lambda r: LL.poisson_nll_loss(x, y, reduction=r),
        "gaussian_nll_loss": lambda r: LL.gaussian_nll_loss(x, y, x, reduction=r),
        "margin_ranking_loss": lambda r: LM.margin_ranking_loss(x, y, y, reduction=r),
        "hinge_embedding_loss": lambda r: LM.hinge_embedding_loss(x, y, reduction=r),
        "soft_margin_loss": lambda r: LM.soft_margin_loss(x, y, reduction=r),
        "multilabel_soft_margin_loss": lambda r: LM.multilabel_soft_margin_loss(x, y, reduction=r),
        "multi_margin_loss": lambda r: LM.multi_margin_loss(x, ti, reduction=r),
        "multilabel_margin_loss": lambda r: LM.multilabel_margin_loss(x, t5, reduction=r),
        "cosine_embedding_loss": lambda r: LE.cosine_embedding_loss(x, y, t4, reduction=r),
        "triplet_margin_loss": lambda r: LE.triplet_margin_loss(x, y, y, reduction=r),
        "triplet_margin_with_distance_loss": lambda r: LE.triplet_margin_with_distance_loss(x, y, y, reduction=r),
        "ctc_loss": lambda r: lm.nn.functional.ctc_loss(lp, g.constant(np.ones((2, 3), np.int32)), [6, 6], [3, 2],
                                                        reduction=r),
    }


@pytest.mark.parametrize("reduction", ["avg", "MEAN", None, "batchmean"])
def test_every_loss_refuses_a_bad_reduction(reduction):
    for name, call in _functional_losses().items():
        if name == "kl_div" and reduction == "batchmean":
            continue
        raises_naming(lambda: call(reduction), ValueError, [name, "reduction must be one of", repr(reduction)])
    for cls in (ML.L1Loss, ML.MSELoss, ML.SmoothL1Loss, ML.HuberLoss, ML.KLDivLoss, ML.BCELoss, ML.BCEWithLogitsLoss,
                ML.NLLLoss, ML.CrossEntropyLoss, MM.PoissonNLLLoss, MM.GaussianNLLLoss, MM.MarginRankingLoss,
                MM.HingeEmbeddingLoss, MM.SoftMarginLoss, MM.CosineEmbeddingLoss, MM.MultiLabelMarginLoss,
                MM.MultiLabelSoftMarginLoss, MM.MultiMarginLoss, MM.TripletMarginLoss,
                MM.TripletMarginWithDistanceLoss, MM.CTCLoss):
        if cls is ML.KLDivLoss and reduction == "batchmean":
            continue
        raises_naming(lambda: cls(reduction=reduction), ValueError, [cls.__name__, repr(reduction)])

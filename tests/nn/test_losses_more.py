"""torch's remaining losses against torch.nn.functional and torch.nn: poisson/gaussian NLL
(``luminal/nn/losses_likelihood.py``), the margin losses (``losses_margin.py``), the embedding losses
(``losses_embedding.py``) and their modules (``layers/loss_more.py``). Values and gradients through the
parity harness, every reduction in one graph; edge values; the errors for bad arguments. (CTC:
``test_ctc_loss.py``.)

Targets torch cannot or should not differentiate (class indices, the +-1 labels read only by a
comparison) are graph constants on our side (``C(...)``) and plain tensors on torch's; a float target
that torch differentiates is an input, and its gradient is compared too.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from error_table import raises_naming
from parity import check, rand

import luminal as lm
from luminal.nn import losses_embedding as LE
from luminal.nn import losses_likelihood as LL
from luminal.nn import losses_margin as LM
from luminal.nn.layers import loss_more as M

pytestmark = [pytest.mark.usefixtures("one_torch_thread")]
REDUCTIONS = ("none", "mean", "sum")
OURS = {n: getattr(m, n) for m in (LL, LM, LE) for n in dir(m) if n.endswith("_loss")}


class C:
    """An argument given as a graph constant (ours) and a plain tensor (torch's): not differentiated."""

    def __init__(self, a):
        self.a = np.asarray(a)


def _split(args):
    """The arrays that are graph inputs, and a builder of the call's arguments from the inputs."""
    inputs = [a for a in args if isinstance(a, np.ndarray)]

    def build(xs, const):
        it = iter(xs)
        return [next(it) if isinstance(a, np.ndarray) else const(a.a) if isinstance(a, C) else a for a in args]
    return inputs, build


def _torch_const(a):
    t = torch.from_numpy(np.array(a, copy=True))
    return t.long() if t.dtype == torch.int32 else t


def _run(name, args, backend, reductions=REDUCTIONS, ours=None, theirs=None, variants=({},), **kw):
    """``ours(*args, reduction=r, **kw, **v)`` (default our ``name``) against ``theirs`` (default
    ``F.<name>``) for every ``r`` and every option set ``v`` of ``variants``, all in one graph (one
    compile; the gradient compared is that of the sum of them all); int32 arrays reach torch as int64."""
    inputs, build = _split(args)
    ours = ours or OURS[name]
    theirs = theirs or getattr(F, name)
    cases = [(r, {**kw, **v}) for v in variants for r in reductions]

    def lum(*xs):
        a = build(xs, lambda v: xs[0].graph.constant(v[()] if v.ndim == 0 else v))  # (0-d: a scalar constant)
        return tuple(ours(*a, reduction=r, **k) for r, k in cases)

    def tor(*ts):
        ts = [t.long() if t.dtype == torch.int32 else t for t in ts]
        a = build(ts, _torch_const)
        return tuple(theirs(*a, reduction=r, **k) for r, k in cases)

    dtypes = [lm.core.dtype.as_dtype(a.dtype) for a in inputs]
    return check(lum, inputs, torch_op=tor, backend=backend, dtypes=dtypes)


def _signs(shape, seed=3, zeros=False):
    """+-1 labels (float32), with a 0 label somewhere when ``zeros`` (neither class: both terms)."""
    t = np.where(np.random.default_rng(seed).random(shape) < 0.5, -1.0, 1.0).astype(np.float32)
    if zeros:
        t.reshape(-1)[1] = 0.0
    return t


# poisson_nll_loss ------------------------------------------------------------------------------
@pytest.mark.parametrize("log_input", [True, False], ids=["log_input", "rate"])
def test_poisson_nll_loss(log_input, backend):
    """Counts from 0 to 6 (the Stirling term of ``full`` only where target > 1). The target is an input,
    so its gradient is compared too; at target 0 with ``full`` torch's is NaN (``0 * log 0`` in the
    backward of the dropped term), so there the target is a constant."""
    x = rand((4, 5), low=-2, high=2) if log_input else rand((4, 5), low=0.05, high=4)
    t = np.random.default_rng(1).integers(0, 7, (4, 5)).astype(np.float32)
    t[0, :3] = [0.0, 1.0, 1.5]
    full = ({"full": False}, {"full": True})
    _run("poisson_nll_loss", [x, C(t)], backend, log_input=log_input, variants=full)
    _run("poisson_nll_loss", [x, t + 0.25], backend, log_input=log_input, variants=full)  # no zeros: finite


def test_poisson_nll_loss_eps_and_int_counts(backend):
    """A zero rate reads ``log(eps)``; int32 counts are read as floats, as torch promotes them."""
    x = np.array([0.0, 0.5, 2.0, 0.0], np.float32)
    t = np.array([0, 1, 3, 2], np.int32)
    _run("poisson_nll_loss", [x, C(t)], backend, variants=(dict(log_input=False, eps=1e-3), dict(full=True)))


# gaussian_nll_loss -----------------------------------------------------------------------------
VAR_SHAPES = {"same": (3, 4), "one-short": (3,), "size-1-last": (3, 1), "size-1-first": (1, 4)}


@pytest.mark.parametrize("var_shape", VAR_SHAPES)
def test_gaussian_nll_loss(var_shape, backend):
    x, t = rand((3, 4)), rand((3, 4), seed=1)
    v = rand(VAR_SHAPES[var_shape], seed=2, low=0.1, high=2)
    _run("gaussian_nll_loss", [x, t, v], backend, variants=({}, {"full": True}))


def test_gaussian_nll_loss_eps_clamp_gradient(backend):
    """Variances at and below eps (0 included): the loss reads eps, the gradient still reaches var (torch
    clamps a clone in place without recording it). eps=1e-2 keeps the gradients in float32's range."""
    x, t = rand((2, 3)), rand((2, 3), seed=1)
    v = np.array([[0.0, 1e-3, 1e-2], [0.5, 2.0, 1e-4]], np.float32)
    _run("gaussian_nll_loss", [x, t, v], backend, eps=1e-2)


def test_gaussian_nll_loss_number_var_and_broadcast_target(backend):
    x, t = rand((3, 4)), rand((4,), seed=1)
    _run("gaussian_nll_loss", [x, t, 0.7], backend, full=True)
    _run("gaussian_nll_loss", [x, t, C(np.full((3, 1), 0.5, np.float32))], backend)


def test_gaussian_nll_loss_negative_var_fails():
    """A variance that only a run sees fails that run, naming the loss and the value, as torch fails;
    a known one fails at once."""
    g = lm.Graph()
    x, v = g.input("x", (2, 3)), g.input("v", (2, 3))
    y = LL.gaussian_nll_loss(x, x * 0.5, v)
    f = lm.compile(y, backend="reference")
    ok = np.ones((2, 3), np.float32)
    assert np.isfinite(f(x=ok, v=ok))
    with pytest.raises(ValueError, match=r"^gaussian_nll_loss: var has negative entries \(the smallest is -2"):
        f(x=ok, v=np.float32([[1, -2, 1], [1, 1, -0.5]]))
    with pytest.raises(ValueError, match=r"^gaussian_nll_loss: var has negative entries \(e.g. -1"):
        LL.gaussian_nll_loss(x, x, g.constant(np.float32([[1, -1, 1], [1, 1, 1]])))
    with pytest.raises(ValueError, match=r"^gaussian_nll_loss: var has negative entries \(got the number -0.5"):
        LL.gaussian_nll_loss(x, x, -0.5)


# pointwise margins -----------------------------------------------------------------------------
def test_margin_ranking_loss(backend):
    """Float +-1 targets are inputs (torch differentiates them: ``-(x1 - x2)`` where the hinge is on);
    one pair ties exactly at the hinge's corner (x1 == x2, margin 0), where clamp_min passes the
    gradient. Then (3, 1) against (1, 4) scores with an int target, broadcast."""
    x1, x2 = rand((6,)), rand((6,), seed=1)
    x2[0] = x1[0]
    _run("margin_ranking_loss", [x1, x2, _signs((6,))], backend, variants=({}, {"margin": 0.5}))
    _run("margin_ranking_loss", [rand((3, 1)), rand((1, 4), seed=1), C(_signs((3, 4)).astype(np.int32))], backend,
         margin=0.2)


def test_hinge_embedding_loss(backend):
    """A 0 label (neither class) gets both terms, as torch; one distance sits on the margin (1)."""
    x = rand((3, 4), low=0, high=2)
    x[0, 0] = 1.0
    margins = ({}, {"margin": 0.3})
    _run("hinge_embedding_loss", [x, _signs((3, 4), zeros=True)], backend, variants=margins)
    _run("hinge_embedding_loss", [x, C(_signs((4,), seed=4).astype(np.int32))], backend, variants=margins)


def test_soft_margin_loss(backend):
    """Ordinary logits (one at 0: log 2, gradient -t/2), then extreme ones: torch computes
    log1p(exp(-t x)) literally, inf past ~88 in float32; here the loss is exact (-t x) and finite, as
    torch's float64 is, which it is compared with. (torch refuses a target needing its gradient.)"""
    x = rand((3, 4), low=-4, high=4)
    x[0, 0] = 0.0
    _run("soft_margin_loss", [x, C(_signs((3, 4)))], backend)
    x = np.array([100.0, -100.0, 30.0, -30.0, 0.0], np.float32)
    t = np.array([-1.0, 1.0, 1.0, -1.0, 1.0], np.float32)
    _run("soft_margin_loss", [x, C(t)], backend,
         theirs=lambda x, t, **k: F.soft_margin_loss(x.double(), t.double(), **k).float())


# embedding losses -------------------------------------------------------------------------------
def test_cosine_embedding_loss(backend):
    """Pairs with a zero vector (cos 0 through torch's 1e-12), margins 0, 0.4, -0.3; one pair (0-d
    target); inputs broadcast with a label that is neither +1 nor -1 (loss 0)."""
    x1, x2 = rand((5, 3)), rand((5, 3), seed=1)
    x2[1] = 0.0
    t = C(np.int32([1, -1, 1, -1, -1]))
    _run("cosine_embedding_loss", [x1, x2, t], backend, variants=({}, {"margin": 0.4}, {"margin": -0.3}))
    _run("cosine_embedding_loss", [rand((4,)), rand((4,), seed=1), C(np.float32(-1))], backend, margin=-0.5)
    _run("cosine_embedding_loss", [rand((1, 4)), rand((3, 4), seed=1), C(np.float32([1, -1, 0]))], backend)


def test_triplet_margin_loss(backend):
    a, pos, neg = rand((5, 4)), rand((5, 4), seed=1), rand((5, 4), seed=2)
    variants = [dict(p=p, swap=swap) for p in (2.0, 1.0, 3.0) for swap in (False, True)]
    _run("triplet_margin_loss", [a, pos, neg], backend, margin=0.7, variants=variants)


def test_triplet_margin_loss_one_triplet_eps(backend):
    a = rand((4,))
    _run("triplet_margin_loss", [a, a.copy(), rand((4,), seed=2)], backend, eps=1e-3)  # d(a, p) = ||eps||


def test_triplet_margin_with_distance_loss(backend):
    """The default distance (pairwise_distance), and a cosine distance given as a callable."""
    a, pos, neg = rand((5, 4)), rand((5, 4), seed=1), rand((5, 4), seed=2)
    _run("triplet_margin_with_distance_loss", [a, pos, neg], backend, swap=True)

    def ours(x, y):
        return 1.0 - (x * y).sum(-1) / ((x * x).sum(-1) * (y * y).sum(-1)).sqrt()

    def theirs(x, y):
        return 1.0 - F.cosine_similarity(x, y, eps=0.0)

    _run("triplet_margin_with_distance_loss", [a, pos, neg], backend, margin=0.3, variants=({}, {"swap": True}),
         ours=lambda *xs, **k: LE.triplet_margin_with_distance_loss(*xs, distance_function=ours, **k),
         theirs=lambda *ts, **k: F.triplet_margin_with_distance_loss(*ts, distance_function=theirs, **k))


# multi-class and multi-label margins ----------------------------------------------------------
def test_multi_margin_loss(backend):
    """p 1 and 2, margins 1, 0.3 and 2.5, with and without class weights; one sample (0-d or (1,) target)."""
    x = rand((4, 5))
    t = C(np.int32([0, 4, 2, 2]))
    variants = [dict(p=p, margin=m) for p, m in ((1, 1.0), (2, 1.0), (1, 0.3), (2, 2.5))]
    _run("multi_margin_loss", [x, t], backend, variants=variants)
    _run("multi_margin_loss", [x, t, 1, 1.0, C(rand((5,), seed=7, low=0.2, high=2))], backend)
    _run("multi_margin_loss", [x, t, 2, 2.5, C(rand((5,), seed=8, low=0.2, high=2))], backend)
    _run("multi_margin_loss", [rand((5,)), C(np.int32(3))], backend, p=2)
    _run("multi_margin_loss", [rand((5,)), C(np.int32([1]))], backend)


def test_multilabel_margin_loss(backend):
    """Lists ended by -1 (values after it ignored), a class listed twice (counted twice), every class
    listed (nothing to beat), an empty list; one sample."""
    x = rand((5, 4))
    t = np.int32([[3, 0, -1, 1], [1, 1, -1, 0], [0, 1, 2, 3], [-1, 2, 2, 2], [2, -1, -1, 3]])
    _run("multilabel_margin_loss", [x, C(t)], backend)
    _run("multilabel_margin_loss", [rand((4,)), C(np.int32([2, -1, 0, 0]))], backend)


def test_multilabel_soft_margin_loss(backend):
    """With a weight torch differentiates (an input here) and without; saturated logits (+-60) give a
    finite loss and gradient; one sample."""
    x = rand((4, 5), low=-4, high=4)
    x[0, :2] = [60.0, -60.0]
    t = (np.random.default_rng(5).random((4, 5)) < 0.4).astype(np.float32)
    _run("multilabel_soft_margin_loss", [x, t, rand((5,), seed=6, low=0.2, high=2)], backend)
    _run("multilabel_soft_margin_loss", [x, C(t)], backend)
    _run("multilabel_soft_margin_loss", [rand((5,)), C(t[0])], backend)


# symbolic batch ---------------------------------------------------------------------------------
def test_symbolic_batch(backend):
    """A batch dim bound at run time: the means divide by runtime counts (values and gradients)."""
    x, y, v = rand((4, 5)), rand((4, 5), seed=1), rand((4,), seed=2, low=0.2, high=2)
    cls, lists = np.int32([0, 4, 2, 2]), np.int32([[3, 0, -1, 1, 2]] * 4)
    signs = _signs((4, 5))

    def ours(x, y, v, cls, lists, signs):
        return (LL.poisson_nll_loss(x, y.abs(), full=True), LL.gaussian_nll_loss(x, y, v),
                LM.margin_ranking_loss(x, y, signs), LM.soft_margin_loss(x, signs.detach()),
                LM.multilabel_soft_margin_loss(x, (signs > 0).float()), LM.multi_margin_loss(x, cls, p=2),
                LM.multilabel_margin_loss(x, lists), LE.cosine_embedding_loss(x, y, signs[:, 0]),
                LE.triplet_margin_loss(x, y, signs, swap=True))

    def theirs(x, y, v, cls, lists, signs):
        cls, lists = cls.long(), lists.long()
        return (F.poisson_nll_loss(x, y.abs(), full=True), F.gaussian_nll_loss(x, y, v),
                F.margin_ranking_loss(x, y, signs), F.soft_margin_loss(x, signs.detach()),
                F.multilabel_soft_margin_loss(x, (signs > 0).float()), F.multi_margin_loss(x, cls, p=2),
                F.multilabel_margin_loss(x, lists), F.cosine_embedding_loss(x, y, signs[:, 0]),
                F.triplet_margin_loss(x, y, signs, swap=True))

    check(ours, [x, y, v, cls, lists, signs], torch_op=theirs, backend=backend,
          shapes=[("B", 5), ("B", 5), ("B",), ("B",), ("B", 5), ("B", 5)])


# 16-bit -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [lm.bfloat16, lm.float16], ids=lambda d: d.name)
def test_low_precision(dtype, backend):
    """Each loss in 16 bits against torch in the same dtype (the harness's 16-bit tolerances); torch has
    no 16-bit CPU kernel for the two multi-class margins, so those are compared with its float32 result
    rounded to the dtype."""
    x, y = rand((4, 5), dtype), rand((4, 5), dtype, seed=1)
    pos = lm.core.dtype.to_storage(np.random.default_rng(2).uniform(0.2, 2, (4, 5)), dtype)
    t = C(_signs((4, 5)))
    cases = [("poisson_nll_loss", [x, C(np.abs(y) * 2)], dict(full=True)),
             ("gaussian_nll_loss", [x, y, pos], {}),
             ("margin_ranking_loss", [x, y, t], dict(margin=0.3)),
             ("hinge_embedding_loss", [pos, t], {}),
             ("soft_margin_loss", [x, t], {}),
             ("cosine_embedding_loss", [x, y, C(_signs((4,)))], dict(margin=0.2)),
             ("multi_margin_loss", [x, C(np.int32([0, 4, 2, 2]))], dict(p=2)),
             ("multilabel_margin_loss", [x, C(np.int32([[3, 0, -1, 1, 2]] * 4))], {}),
             ("multilabel_soft_margin_loss", [x, C(_signs((4, 5)) > 0)], {}),
             ("triplet_margin_loss", [x, y, pos], dict(swap=True))]
    inputs, builds = [], []
    for name, args, kw in cases:  # one graph for them all (one compile)
        args = [C(a.a.astype(np.float32)) if isinstance(a, C) and a.a.dtype == bool else a for a in args]
        ins, build = _split(args)
        builds.append((name, kw, build, slice(len(inputs), len(inputs) + len(ins))))
        inputs += ins

    def lum(*xs):
        const = lambda v: xs[0].graph.constant(v).to(dtype) if v.dtype.kind == "f" else xs[0].graph.constant(v)  # noqa: E731
        return tuple(OURS[name](*build(xs[at], const), reduction=r, **kw)
                     for name, kw, build, at in builds for r in REDUCTIONS)

    def tor(*ts):
        const = lambda v: _torch_const(v).to(ts[0].dtype) if v.dtype.kind == "f" else _torch_const(v)  # noqa: E731
        out = []
        for name, kw, build, at in builds:
            a = build(ts[at], const)
            up = name in ("multi_margin_loss", "multilabel_margin_loss")
            a = [v.float() if up and v.is_floating_point() else v for v in a]
            out += [getattr(F, name)(*a, reduction=r, **kw).to(ts[0].dtype) for r in REDUCTIONS]
        return tuple(out)

    check(lum, inputs, torch_op=tor, backend=backend, dtypes=[dtype] * len(inputs))


# errors -----------------------------------------------------------------------------------------
def _errors():
    g = lm.Graph()
    x, y, x1 = g.input("x", (4, 5)), g.input("y", (4, 5)), g.input("x1", (5,))
    t, ti, tb = g.input("t", (4,)), g.input("ti", (4,), lm.int32), g.input("tb", (4, 5), lm.bool)
    xi, t5 = g.input("xi", (4, 5), lm.int32), g.input("t5", (4, 5), lm.int32)
    return [
        (lambda: LL.poisson_nll_loss(x, y, reduction="avg"), ValueError, ["poisson_nll_loss", "'avg'"]),
        (lambda: LL.poisson_nll_loss(xi, y), TypeError, ["poisson_nll_loss", "float", "int32"]),
        (lambda: LL.poisson_nll_loss(x, tb), TypeError, ["poisson_nll_loss", "target", "bool"]),
        (lambda: LL.poisson_nll_loss(x, g.input("q", (3,))), ValueError, ["poisson_nll_loss", "(4, 5)", "(3,)"]),
        (lambda: LL.poisson_nll_loss(x, y, True, False, None), TypeError, ["positional"]),  # torch's size_average
        (lambda: LL.gaussian_nll_loss(x, y, g.input("v", (5,))), ValueError, ["gaussian_nll_loss", "var shape (5,)"]),
        (lambda: LL.gaussian_nll_loss(x, y, g.input("v", (4, 5, 1))), ValueError, ["gaussian_nll_loss", "(4, 5, 1)"]),
        (lambda: LL.gaussian_nll_loss(x, y, "1"), TypeError, ["gaussian_nll_loss", "var must be a number"]),
        (lambda: LL.gaussian_nll_loss(x, y, xi), TypeError, ["gaussian_nll_loss", "var", "int32"]),
        (lambda: LL.gaussian_nll_loss(x, y, 1.0, reduction="batchmean"), ValueError,
         ["gaussian_nll_loss", "batchmean"]),
        (lambda: LM.margin_ranking_loss(x1, x, t), ValueError, ["margin_ranking_loss", "same number of dims", "(5,)"]),
        (lambda: LM.margin_ranking_loss(x, y, tb), TypeError, ["margin_ranking_loss", "bool"]),
        (lambda: LM.margin_ranking_loss(x, y, g.input("t3", (4, 3))), ValueError, ["margin_ranking_loss", "(4, 3)"]),
        (lambda: LM.hinge_embedding_loss(xi, t5), TypeError, ["hinge_embedding_loss", "float", "int32"]),
        (lambda: LM.hinge_embedding_loss(x, y, margin="1"), TypeError, ["hinge_embedding_loss", "margin"]),
        (lambda: LM.soft_margin_loss(x, np.ones((4, 5))), TypeError, ["soft_margin_loss", "target", "ndarray"]),
        (lambda: LM.multilabel_soft_margin_loss(g.input("s", ()), g.input("st", ())), ValueError,
         ["multilabel_soft_margin_loss", "class dim"]),
        (lambda: LM.multilabel_soft_margin_loss(x, y, g.input("w", (4,))), ValueError,
         ["multilabel_soft_margin_loss", "(4,)"]),
        (lambda: LM.multi_margin_loss(x, ti, p=3), ValueError, ["multi_margin_loss", "p == 1 and p == 2", "3"]),
        (lambda: LM.multi_margin_loss(x, t), TypeError, ["multi_margin_loss", "int32", "float32"]),
        (lambda: LM.multi_margin_loss(x, g.input("t3", (3,), lm.int32)), ValueError,
         ["multi_margin_loss", "(3,)", "(4,)"]),
        (lambda: LM.multi_margin_loss(x, ti, weight=g.input("w", (4,))), ValueError,
         ["multi_margin_loss", "(5,)", "(4,)"]),
        (lambda: LM.multi_margin_loss(x, g.constant(np.int32([0, 5, 1, 1]))), IndexError,
         ["multi_margin_loss", "class 5", "5 classes"]),
        (lambda: LM.multi_margin_loss(g.input("x3", (2, 3, 4)), ti), ValueError, ["multi_margin_loss", "(2, 3, 4)"]),
        (lambda: LM.multilabel_margin_loss(x, ti), ValueError, ["multilabel_margin_loss", "(4,)", "(4, 5)"]),
        (lambda: LM.multilabel_margin_loss(x, y), TypeError, ["multilabel_margin_loss", "int32"]),
        (lambda: LM.multilabel_margin_loss(x, g.constant(np.full((4, 5), -2, np.int32))), IndexError,
         ["multilabel_margin_loss", "class -2", "-1 ends the list"]),
        (lambda: LE.cosine_embedding_loss(x, y, g.input("t2", (4, 5))), ValueError,
         ["cosine_embedding_loss", "0-d or 1-d", "(4, 5)"]),
        (lambda: LE.cosine_embedding_loss(x1, x1, t), ValueError, ["cosine_embedding_loss", "1-d target expects 2-d"]),
        (lambda: LE.cosine_embedding_loss(x, y, g.input("t3", (3,))), ValueError, ["cosine_embedding_loss", "(3,)"]),
        (lambda: LE.triplet_margin_loss(x, y, x1), ValueError, ["triplet_margin_loss", "same number of dims"]),
        (lambda: LE.triplet_margin_loss(x, y, y, margin=0.0), ValueError, ["triplet_margin_loss", "greater than 0"]),
        (lambda: LE.triplet_margin_loss(x, y, xi), TypeError, ["triplet_margin_loss", "negative", "int32"]),
        (lambda: LE.triplet_margin_loss(x, y, y, 1.0, 2, 1e-6, False, None), TypeError, ["positional"]),
        (lambda: LE.triplet_margin_with_distance_loss(x, y, y, distance_function=3), TypeError,
         ["triplet_margin_with_distance_loss", "callable"]),
        (lambda: LE.triplet_margin_with_distance_loss(x, y, y, distance_function=lambda a, b: 1.0), TypeError,
         ["triplet_margin_with_distance_loss", "float GraphTensor", "float"]),
        (lambda: LE.triplet_margin_with_distance_loss(x, y, y, margin=-1), ValueError,
         ["triplet_margin_with_distance_loss", "greater than 0"]),
        (lambda: LE.triplet_margin_with_distance_loss(x, y, y, x), TypeError, ["positional"]),
    ]


@pytest.mark.parametrize("k", range(len(_errors())))
def test_errors(k):
    _, _, parts = _errors()[k]
    error = raises_naming(*_errors()[k])
    if "positional" not in parts:
        assert "test_losses_more.py" in str(error), "the error names the user's line"


def test_class_index_out_of_range_fails_at_run():
    """Class indices that only a run sees are checked before it runs (as torch's kernels refuse them)."""
    g = lm.Graph()
    x, t = g.input("x", (2, 4)), g.input("t", (2,), lm.int32)
    f = lm.compile(LM.multi_margin_loss(x, t), backend="reference")
    assert np.isfinite(f(x=np.zeros((2, 4), np.float32), t=np.int32([0, 3])))
    with pytest.raises(IndexError, match="^multi_margin_loss: target holds class 4, out of range for 4 classes"):
        f(x=np.zeros((2, 4), np.float32), t=np.int32([0, 4]))
    tm = g.input("tm", (2, 4), lm.int32)
    f = lm.compile(LM.multilabel_margin_loss(x, tm), backend="reference")
    assert np.isfinite(f(x=np.zeros((2, 4), np.float32), tm=np.int32([[0, -1, 3, 3], [1, 2, 3, 0]])))
    for bad in (9, -3):  # also past the -1 that ends the list: torch checks every value
        with pytest.raises(IndexError, match=f"^multilabel_margin_loss: target holds class {bad}, out of range"):
            f(x=np.zeros((2, 4), np.float32), tm=np.int32([[0, -1, bad, 0], [1, 2, 3, 0]]))


# modules ----------------------------------------------------------------------------------------
W5 = np.linspace(0.5, 1.5, 5).astype(np.float32)


def _modules(m, w):
    """Each module, made from ``m`` (our layers or torch.nn) with torch's argument names and a weight ``w``,
    and how it is called: (module, indices of the inputs and constants it takes)."""
    return [
        (m.PoissonNLLLoss(), (0, "counts")),
        (m.PoissonNLLLoss(False, True, None, 1e-3, None, "sum"), (2, "counts")),  # positional, as torch's
        (m.GaussianNLLLoss(full=True, eps=1e-3, reduction="none"), (0, 1, 2)),
        (m.MarginRankingLoss(0.3), (0, 1, "signs")),
        (m.HingeEmbeddingLoss(0.5, reduction="sum"), (2, "signs")),
        (m.SoftMarginLoss(reduction="none"), (0, "signs")),
        (m.CosineEmbeddingLoss(margin=0.2), (0, 1, "signs4")),
        (m.MultiLabelMarginLoss(reduction="sum"), (0, "lists")),
        (m.MultiLabelSoftMarginLoss(w), (0, "present")),
        (m.MultiMarginLoss(2, 0.5, w, reduction="none"), (0, "classes")),
        (m.MultiMarginLoss(), (1, "classes")),
        (m.TripletMarginLoss(0.5, 1.0, swap=True), (0, 1, 2)),
        (m.TripletMarginWithDistanceLoss(margin=2.0, reduction="sum"), (0, 1, 2)),
    ]


def test_modules_match_torch(backend):
    """Every module against torch's, made with the same arguments (some positional, as torch's
    signatures place them), all in one graph."""
    consts = {"counts": np.random.default_rng(1).integers(0, 5, (4, 5)).astype(np.float32),
              "signs": _signs((4, 5)), "signs4": _signs((4,)), "present": (_signs((4, 5)) > 0).astype(np.float32),
              "lists": np.int32([[3, 0, -1, 1, 2]] * 4), "classes": np.int32([0, 4, 2, 2])}
    ours, theirs = _modules(M, W5), _modules(torch.nn, torch.from_numpy(W5))
    inputs = [rand((4, 5)), rand((4, 5), seed=1), rand((4, 5), seed=2, low=0.2, high=2)]

    def lum(*xs):
        arg = lambda a: xs[a] if isinstance(a, int) else xs[0].graph.constant(consts[a])  # noqa: E731
        return tuple(mod(*(arg(a) for a in args)) for mod, args in ours)

    def tor(*ts):
        arg = lambda a: ts[a] if isinstance(a, int) else _torch_const(consts[a])  # noqa: E731
        return tuple(mod(*(arg(a) for a in args)) for mod, args in theirs)

    check(lum, inputs, torch_op=tor, backend=backend)


@pytest.mark.parametrize("name", ["MultiMarginLoss", "MultiLabelSoftMarginLoss"])
def test_weighted_modules_state_dict_as_torch(name):
    ours, theirs = getattr(M, name)(weight=W5), getattr(torch.nn, name)(weight=torch.from_numpy(W5))
    sd = theirs.state_dict()
    assert list(ours.state_dict()) == list(sd) == ["weight"]
    assert not list(ours.parameters())
    ours.load_state_dict({k: v.numpy() * 2 for k, v in sd.items()})
    np.testing.assert_array_equal(ours.weight.data, W5 * 2)
    assert list(getattr(M, name)().state_dict()) == list(getattr(torch.nn, name)().state_dict()) == []


def test_module_signatures_are_torchs():
    import inspect

    for name in ("PoissonNLLLoss", "GaussianNLLLoss", "MarginRankingLoss", "HingeEmbeddingLoss", "SoftMarginLoss",
                 "CosineEmbeddingLoss", "MultiLabelMarginLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss",
                 "TripletMarginLoss", "TripletMarginWithDistanceLoss", "CTCLoss"):
        ours, theirs = getattr(M, name), getattr(torch.nn, name)
        for method in ("__init__", "forward"):
            a = inspect.signature(getattr(ours, method)).parameters
            b = inspect.signature(getattr(theirs, method)).parameters
            assert list(a) == list(b), f"{name}.{method}: {list(a)} vs torch's {list(b)}"
            for k in a:
                assert a[k].kind == b[k].kind, f"{name}.{method}({k}): {a[k].kind} vs torch's {b[k].kind}"
                if b[k].default is not inspect.Parameter.empty:
                    assert a[k].default == b[k].default, f"{name}.{method}({k}={a[k].default!r}) vs {b[k].default!r}"


def test_module_constructor_errors():
    cases = [
        (lambda: M.PoissonNLLLoss(size_average=False), TypeError, "^PoissonNLLLoss: size_average and reduce are"),
        (lambda: M.MarginRankingLoss(0.0, None, False), TypeError, "^MarginRankingLoss: size_average and reduce"),
        (lambda: M.SoftMarginLoss(reduction="batchmean"), ValueError, "^SoftMarginLoss: reduction must be one of"),
        (lambda: M.GaussianNLLLoss(eps="small"), TypeError, "^GaussianNLLLoss: eps must be a number"),
        (lambda: M.HingeEmbeddingLoss(margin=None), TypeError, "^HingeEmbeddingLoss: margin must be a number"),
        (lambda: M.MultiMarginLoss(p=3), ValueError, "^MultiMarginLoss: only p == 1 and p == 2 are supported, got 3"),
        (lambda: M.MultiMarginLoss(weight=np.ones((2, 5), np.float32)), ValueError,
         "^MultiMarginLoss: weight must be one-dimensional"),
        (lambda: M.MultiLabelSoftMarginLoss(weight=np.ones(5, np.int32)), TypeError,
         "^MultiLabelSoftMarginLoss: weight must hold floats, got int32"),
        (lambda: M.TripletMarginLoss(margin=0), ValueError, "^TripletMarginLoss: margin must be greater than 0, got 0"),
        (lambda: M.TripletMarginWithDistanceLoss(margin=-1.0), ValueError,
         "^TripletMarginWithDistanceLoss: margin must be greater than 0"),
        (lambda: M.TripletMarginWithDistanceLoss(distance_function="l2"), TypeError,
         "^TripletMarginWithDistanceLoss: distance_function must be callable, got str"),
        (lambda: M.CTCLoss(blank=-1), ValueError, "^CTCLoss: blank must be at least 0, got -1"),
        (lambda: M.CTCLoss(blank=1.0), TypeError, "^CTCLoss: blank must be an int, got float"),
        (lambda: M.CTCLoss(reduction="avg"), ValueError, "^CTCLoss: reduction must be one of"),
    ]
    for make, kind, msg in cases:
        with pytest.raises(kind, match=msg):
            make()

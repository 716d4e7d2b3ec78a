"""Parity with torch.nn.functional for luminal.nn.losses: values, and gradients of the float inputs.

Weights torch cannot differentiate (the class weights of cross_entropy/nll_loss, those of
binary_cross_entropy[_with_logits] and pos_weight) are graph constants on our side and plain tensors on
torch's; int32 targets are widened to the int64 torch's losses want.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from error_table import raises_naming
from parity import check, rand

import luminal as lm
from luminal.nn import losses as L

C = 5
LAYOUTS = {"1d": (C,), "2d": (4, C), "spatial": (3, C, 4)}  # input shapes; class dim 0 for 1-d, else 1
REDUCTIONS = ("none", "mean", "sum")
KL_REDUCTIONS = REDUCTIONS + ("batchmean",)
pytestmark = [pytest.mark.filterwarnings("ignore:reduction. 'mean' divides the total loss:UserWarning"),  # kl_div
              pytest.mark.filterwarnings("ignore:Using a target size:UserWarning"),  # torch's broadcast warning
              pytest.mark.usefixtures("one_torch_thread")]
CLASS_W = np.linspace(0.2, 1.8, C).astype(np.float32)



def _run(name, inputs, backend, consts=None, grad=True, reductions=REDUCTIONS, **kw):
    """Check ``L.<name>(*inputs, **consts, reduction=r, **kw)`` against ``F.<name>``, one output per
    reduction ``r`` (one graph: the gradient checked is that of the sum of all of them); ``consts``
    are constants, not inputs."""
    consts = {k: v for k, v in (consts or {}).items() if v is not None}

    def ours(*xs):
        cs = {k: xs[0].graph.constant(v) for k, v in consts.items()}
        return tuple(getattr(L, name)(*xs, **cs, reduction=r, **kw) for r in reductions)

    def theirs(*ts):
        ts = [t.long() if t.dtype == torch.int32 else t for t in ts]
        cs = {k: torch.from_numpy(v) for k, v in consts.items()}
        return tuple(getattr(F, name)(*ts, **cs, reduction=r, **kw) for r in reductions)

    return check(ours, inputs, torch_op=theirs, backend=backend, grad=grad)


def _indices(shape, ignore=None, seed=1):
    """Class indices of ``shape``; ``ignore`` (if given) is written at two places."""
    t = np.random.default_rng(seed).integers(0, C, size=shape).astype(np.int32)
    if ignore is not None:
        t.reshape(-1)[[0, -2]] = ignore
    return t


def _probs(shape, cdim, seed=2):
    p = np.random.default_rng(seed).random(shape) + 0.05
    return (p / p.sum(axis=cdim, keepdims=True)).astype(np.float32)


# cross_entropy / nll_loss ---------------------------------------------------------------------
IGNORE = {"none": {}, "-100 present": dict(ignore=-100), "in-range ignore_index=1": dict(ignore=1, ignore_index=1)}


# (layout, ignore); a 1-d input's single target ignored is all of them: that is test_all_ignored
INDEX_CASES = [(lay, ig) for lay in LAYOUTS for ig in IGNORE if lay != "1d" or ig == "none"]


def _index_case(layout, ignore):
    shape = LAYOUTS[layout]
    spec = dict(IGNORE[ignore])
    t = _indices(shape[:1] + shape[2:] if len(shape) > 1 else (), spec.pop("ignore", None))
    return shape, t, spec


@pytest.mark.parametrize("label_smoothing", [0.0, 0.15])
@pytest.mark.parametrize("weighted", [False, True], ids=["", "weight"])
@pytest.mark.parametrize("layout,ignore", INDEX_CASES)
def test_cross_entropy_indices(layout, ignore, weighted, label_smoothing, backend):
    shape, t, kw = _index_case(layout, ignore)
    _run("cross_entropy", [rand(shape, low=-3, high=3), t], backend, dict(weight=CLASS_W if weighted else None),
         label_smoothing=label_smoothing, **kw)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.15, 1.0])
@pytest.mark.parametrize("weighted", [False, True], ids=["", "weight"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cross_entropy_probabilities(layout, weighted, label_smoothing, backend):
    shape = LAYOUTS[layout]
    p = _probs(shape, 0 if len(shape) == 1 else 1)
    _run("cross_entropy", [rand(shape, low=-3, high=3), p], backend, dict(weight=CLASS_W if weighted else None),
         label_smoothing=label_smoothing)


@pytest.mark.parametrize("weighted", [False, True], ids=["", "weight"])
@pytest.mark.parametrize("layout,ignore", INDEX_CASES)
def test_nll_loss(layout, ignore, weighted, backend):
    shape, t, kw = _index_case(layout, ignore)
    logp = torch.from_numpy(rand(shape)).log_softmax(0 if len(shape) == 1 else 1).numpy()
    _run("nll_loss", [logp, t], backend, dict(weight=CLASS_W if weighted else None), **kw)


def _extreme(shape, dtype=np.float32):
    """Logits of +-80 (exp overflows float32 from 89): a row all -80, rows mixing +80 and -80."""
    x = rand(shape, low=-5, high=5).astype(dtype)
    x[0, :] = -80
    x[1, 0], x[1, 2] = 80, -80
    x[2, 1:] = 80
    return x


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_entropy_extreme_logits(dtype, label_smoothing, backend):
    x = _extreme((4, C), dtype)
    t = np.array([3, 2, 0, 1], np.int32)  # row 1 picks the -80 class: loss 160
    _run("cross_entropy", [x, t], backend, label_smoothing=label_smoothing)
    _run("cross_entropy", [x, _probs((4, C), 1).astype(dtype)], backend, label_smoothing=label_smoothing)


def test_symbolic_dims(backend):
    """Batch and class dims bound at run time: the means, label smoothing's 1/C and batchmean divide
    by runtime counts."""
    x, t, p = rand((6, C)), _indices((6,), ignore=-100), _probs((6, C), 1)
    for target, shapes in ((t, [("B", "K"), ("B",)]), (p, [("B", "K"), ("B", "K")])):
        check(lambda x, t: tuple(L.cross_entropy(x, t, reduction=r, label_smoothing=0.1) for r in REDUCTIONS),
              [x, target], shapes=shapes,
              torch_op=lambda x, t: tuple(F.cross_entropy(x, t.long() if t.dtype == torch.int32 else t, reduction=r,
                                                          label_smoothing=0.1) for r in REDUCTIONS), backend=backend)
    check(lambda x, p: L.kl_div(x, p, reduction="batchmean"), [x, p], shapes=[("B", C), ("B", C)],
          torch_op=lambda x, p: F.kl_div(x, p, reduction="batchmean"), backend=backend)


@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss"])
def test_all_ignored(name, backend):
    """torch: a mean over no kept target is 0/0 = NaN, a sum 0; the gradient is 0 either way."""
    x, t = rand((3, C)), np.full((3,), -100, np.int32)
    _run(name, [x, t], backend)
    _run(name, [rand((C,)), np.array(-100, np.int32)], backend, dict(weight=CLASS_W))


# binary cross entropy -------------------------------------------------------------------------
BCE_W = {"": None, "full": rand((4, 3), low=0.1, high=2, seed=5), "per-column": rand((3,), low=0.1, high=2, seed=6)}


@pytest.mark.parametrize("weight", BCE_W)
def test_binary_cross_entropy(weight, backend):
    p, t = rand((4, 3), low=0.02, high=0.98), rand((4, 3), low=0, high=1, seed=1)
    _run("binary_cross_entropy", [p, t], backend, dict(weight=BCE_W[weight]))


def test_binary_cross_entropy_saturated(backend):
    """p = 0 and p = 1 hit torch's log clamp at -100; the gradient is torch's 1e-12-clamped
    ``(p - t) / (p (1 - p))`` there and at subnormal p, where the clamped log's own derivative 1 / p
    overflowed to inf (NaN where the clamp cut it) and was 0 at p = 0 exactly."""
    p = np.array([0.0, 1.0, 0.0, 1.0, 1e-30, 0.5, 1e-45, 1e-40, 1e-39, 1 - 2**-24], np.float32)
    t = np.array([0.0, 1.0, 1.0, 0.0, 0.3, 0.5, 1.0, 1.0, 1.0, 0.0], np.float32)
    _run("binary_cross_entropy", [p, t], backend)


def test_binary_cross_entropy_of_a_saturated_sigmoid_has_a_finite_gradient():
    """BCE(sigmoid(x), 1) at x = -90 .. -103: the logits' gradient was NaN. (The values differ from
    torch's there: its float32 sigmoid is 0 where the exact value, ours, is a subnormal.)"""
    from luminal import train

    xs = np.array([-50, -88, -90, -100, -103, -110], np.float32)
    g = lm.Graph()
    x = g.input("x", xs.shape)
    loss = L.binary_cross_entropy(x.sigmoid(), g.constant(np.ones(6, np.float32)), reduction="sum")
    grad = lm.compile(train.grad(loss, x))(x=xs)
    assert np.all(np.isfinite(grad)) and np.all(grad <= 0) and grad[0] < 0, grad


@pytest.mark.parametrize("call, error, message", [
    (lambda x, t, c: L.smooth_l1_loss(x, t, beta=float("nan")), ValueError, "beta must be >= 0"),
    (lambda x, t, c: L.huber_loss(x, t, delta=float("nan")), ValueError, "delta must be > 0"),
    (lambda x, t, c: L.huber_loss(x, t, delta="1"), TypeError, "huber_loss: delta must be a number"),
    (lambda x, t, c: L.cross_entropy(x, c, ignore_index=1.5), TypeError, "ignore_index must be an int"),
    (lambda x, t, c: L.nll_loss(x, c, ignore_index=None), TypeError, "ignore_index must be an int"),
    (lambda x, t, c: L.cross_entropy(x, c, label_smoothing="0.1"), TypeError, "label_smoothing must be a number"),
])
def test_functional_arguments_are_checked_as_the_modules_check_them(call, error, message):
    """NaN compared False with the bounds, and a float ignore_index was compared with the labels."""
    g = lm.Graph()
    x, t, c = g.input("x", (4, 3)), g.input("t", (4, 3)), g.input("c", (4,), dtype=lm.int32)
    with pytest.raises(error, match=message):
        call(x, t, c)


def test_a_numpy_integer_ignore_index_is_taken():
    """A pad id read from a numpy array (np.int64) is an int, as torch takes it; the first check refused it."""
    g = lm.Graph()
    x, c = g.input("x", (4, 3)), g.input("c", (4,), dtype=lm.int32)
    f = lm.compile([L.cross_entropy(x, c, ignore_index=np.int64(0)), L.nll_loss(x, c, ignore_index=np.int32(0))])
    xs, cs = rand((4, 3)), np.array([0, 1, 2, 0], np.int32)
    want = F.cross_entropy(torch.from_numpy(xs), torch.from_numpy(cs).long(), ignore_index=0)
    np.testing.assert_allclose(f(x=xs, c=cs)[0], want.numpy(), rtol=1e-6)


def test_a_float64_class_weight_keeps_the_loss_in_the_input_dtype():
    """torch refuses the mix; the loss was silently float64 here."""
    g = lm.Graph()
    x, c = g.input("x", (4, 3)), g.input("c", (4,), dtype=lm.int32)
    w = g.constant(np.array([0.2, 1.0, 3.0]))
    assert w.dtype is lm.float64
    for fn in (L.cross_entropy, L.nll_loss):
        assert fn(x, c, w).dtype is lm.float32
    p = g.input("p", (4, 3))
    assert L.binary_cross_entropy(p.sigmoid(), p.sigmoid(), g.constant(np.ones((4, 3)))).dtype is lm.float32


@pytest.mark.parametrize("pos_weight", [False, True], ids=["", "pos_weight"])
@pytest.mark.parametrize("weight", BCE_W)
def test_bce_with_logits(weight, pos_weight, backend):
    x, t = rand((4, 3), low=-4, high=4), rand((4, 3), low=0, high=1, seed=1)
    consts = dict(weight=BCE_W[weight], pos_weight=np.array([0.5, 1.0, 3.0], np.float32) if pos_weight else None)
    _run("binary_cross_entropy_with_logits", [x, t], backend, consts)


@pytest.mark.parametrize("pos_weight", [False, True], ids=["", "pos_weight"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bce_with_logits_extreme(dtype, pos_weight, backend):
    """Logits of +-80 and +-200 (exp(200) is inf in float32): the loss stays finite, and the tiny
    losses of confident right answers (1e-35) keep their relative accuracy (log1p)."""
    x = np.array([80, -80, 80, -80, 200, -200, 16, -16, 0.0], dtype)
    t = np.array([1, 0, 0, 1, 1, 0, 1, 0, 0.5], dtype)
    pw = np.full((9,), 2.5, dtype) if pos_weight else None
    out = _run("binary_cross_entropy_with_logits", [x, t], backend, dict(pos_weight=pw), reductions=("none",))[0]
    want = F.binary_cross_entropy_with_logits(torch.from_numpy(x), torch.from_numpy(t), reduction="none",
                                              pos_weight=None if pw is None else torch.from_numpy(pw)).numpy()
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=0)  # relative, also for the 1e-35 losses


# kl_div ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(log_target, backend):
    logq = torch.from_numpy(rand((4, C))).log_softmax(1).numpy()
    p = _probs((4, C), 1)
    t = np.log(p) if log_target else p
    _run("kl_div", [logq, t], backend, reductions=KL_REDUCTIONS, log_target=log_target)


def test_kl_div_zero_target(backend):
    """target 0 contributes 0 (xlogy). The target is a constant here: torch's gradient for it at 0 is
    NaN (0/0 inside xlogy's backward), ours 0."""
    logq = torch.from_numpy(rand((3, C))).log_softmax(1).numpy()
    p = np.array([[0.5, 0.5, 0, 0, 0], [1, 0, 0, 0, 0], [0.2] * 5], np.float32)
    check(lambda x: tuple(L.kl_div(x, x.graph.constant(p), reduction=r) for r in KL_REDUCTIONS), [logq],
          torch_op=lambda x: tuple(F.kl_div(x, torch.from_numpy(p), reduction=r) for r in KL_REDUCTIONS),
          backend=backend)


def test_kl_div_0d_batchmean(backend):
    """batchmean of a 0-d input divides by nothing, as torch."""
    _run("kl_div", [np.array(-0.5, np.float32), np.array(0.3, np.float32)], backend, reductions=("batchmean",))


# regression -----------------------------------------------------------------------------------
def _xy(shape=(4, 3)):
    return rand(shape, low=-3, high=3), rand(shape, low=-3, high=3, seed=1)


@pytest.mark.parametrize("weighted", [False, True], ids=["", "weight"])
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "huber_loss"])
def test_pointwise(name, weighted, backend):
    """Their optional per-element weight is differentiable in torch too, so it is an input here."""
    x, y = _xy()
    if weighted:
        w = rand((4, 3), low=0.1, high=2, seed=2)
        check(lambda x, y, w: tuple(getattr(L, name)(x, y, reduction=r, weight=w) for r in REDUCTIONS), [x, y, w],
              torch_op=lambda x, y, w: tuple(getattr(F, name)(x, y, reduction=r, weight=w) for r in REDUCTIONS),
              backend=backend)
    else:
        _run(name, [x, y], backend)


@pytest.mark.parametrize("beta", [1.0, 0.4, 2.5, 0.0])
def test_smooth_l1(beta, backend):
    _run("smooth_l1_loss", [*_xy()], backend, beta=beta)


@pytest.mark.parametrize("delta", [1.0, 0.4, 2.5])
def test_huber_delta(delta, backend):
    _run("huber_loss", [*_xy()], backend, delta=delta)


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div"])
def test_broadcast_warns(name, backend):
    """Different shapes broadcast, with a warning, as torch."""
    x, y = rand((4, 3)), rand((3,), seed=1)
    with pytest.warns(UserWarning, match=f"{name}: target shape \\(3,\\) differs from input shape \\(4, 3\\)"):
        _run(name, [x, y], backend)


def test_float64(backend):
    x, y = (a.astype(np.float64) for a in _xy())
    for name in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"):
        _run(name, [x, y], backend)
    t = _indices((4,), ignore=-100)
    _run("cross_entropy", [rand((4, C)).astype(np.float64), t], backend, label_smoothing=0.2)


@pytest.mark.parametrize("dtype", [lm.bfloat16, lm.float16])
def test_low_precision(dtype, backend):
    x, y = rand((4, C), dtype), rand((4, C), dtype, seed=1)
    p = lm.core.dtype.to_storage(_probs((4, C), 1), dtype)
    t = _indices((4,), ignore=-100)
    cases = [("cross_entropy", [x, t], dict(label_smoothing=0.1)), ("cross_entropy", [x, p], {}),
             ("mse_loss", [x, y], {}), ("huber_loss", [x, y], dict(delta=0.5)),
             ("binary_cross_entropy_with_logits", [x, p], {}), ("kl_div", [x, p], dict(log_target=False))]
    for name, inputs, kw in cases:
        dtypes = [dtype if a.dtype != np.int32 else lm.int32 for a in inputs]
        check(lambda *xs: tuple(getattr(L, name)(*xs, reduction=r, **kw) for r in REDUCTIONS), inputs, dtypes=dtypes,
              torch_op=lambda *ts: tuple(getattr(F, name)(*[t.long() if t.dtype == torch.int32 else t for t in ts],
                                                          reduction=r, **kw) for r in REDUCTIONS), backend=backend)


def test_non_contiguous(backend):
    """Inputs read through views (a flip and a transposed spatial layout)."""
    x, t = rand((3, 4, C)), _indices((3, 4), ignore=-100)
    check(lambda x, t: L.cross_entropy(x.transpose(1, 2), t, label_smoothing=0.1), [x, t],
          torch_op=lambda x, t: F.cross_entropy(x.transpose(1, 2), t.long(), label_smoothing=0.1), backend=backend)
    x, y = _xy()
    check(lambda x, y: L.binary_cross_entropy_with_logits(x.flip(0), y.T.T.sigmoid()), [x, y],
          torch_op=lambda x, y: F.binary_cross_entropy_with_logits(x.flip(0), y.T.T.sigmoid()), backend=backend)


# errors ---------------------------------------------------------------------------------------
def _errors():
    g = lm.Graph()
    x, x1 = g.input("x", (4, C)), g.input("x1", (C,))
    t, tf, tb = g.input("t", (4,), lm.int32), g.input("tf", (4,)), g.input("tb", (4,), lm.bool)
    xi, p = g.input("xi", (4, C), lm.int32), g.input("p", (4, C))
    return [
        (lambda: L.cross_entropy(x, tf), ValueError, ["cross_entropy", "class probabilities", "(4, 5)", "(4,)"]),
        (lambda: L.cross_entropy(x, tb), TypeError, ["cross_entropy", "int32", "bool"]),
        (lambda: L.cross_entropy(x, g.input("t2", (5,), lm.int32)), ValueError, ["cross_entropy", "(5,)", "(4,)"]),
        (lambda: L.cross_entropy(x, t, reduction="avg"), ValueError, ["cross_entropy", "'avg'", "'mean'"]),
        (lambda: L.cross_entropy(x, t, reduction="batchmean"), ValueError, ["cross_entropy", "batchmean"]),
        (lambda: L.cross_entropy(x, t, label_smoothing=1.5), ValueError, ["cross_entropy", "label_smoothing"]),
        (lambda: L.cross_entropy(x, p, ignore_index=1), ValueError, ["cross_entropy", "ignore_index"]),
        (lambda: L.cross_entropy(x, t, g.input("w", (4,))), ValueError, ["cross_entropy", "weight", "(5,)", "(4,)"]),
        (lambda: L.cross_entropy(xi, t), TypeError, ["cross_entropy", "float", "int32"]),
        (lambda: L.cross_entropy(g.input("x0", ()), t), ValueError, ["cross_entropy", "class dim"]),
        (lambda: L.cross_entropy(x, np.zeros(4)), TypeError, ["cross_entropy", "target", "ndarray"]),
        (lambda: L.nll_loss(x1, t), ValueError, ["nll_loss", "()", "(4,)"]),
        (lambda: L.nll_loss(x, tf), TypeError, ["nll_loss", "int32", "float32"]),
        (lambda: L.binary_cross_entropy(p, tf), ValueError, ["binary_cross_entropy", "(4,)", "(4, 5)"]),
        (lambda: L.binary_cross_entropy(p, xi), TypeError, ["binary_cross_entropy", "target", "int32"]),
        (lambda: L.binary_cross_entropy(p, p, g.input("w", (3,))), ValueError, ["binary_cross_entropy", "(3,)"]),
        (lambda: L.binary_cross_entropy_with_logits(p, p, pos_weight=g.input("pw", (2, 4, C))), ValueError,
         ["binary_cross_entropy_with_logits", "pos_weight", "(2, 4, 5)"]),
        (lambda: L.kl_div(p, p, reduction="batch"), ValueError, ["kl_div", "'batchmean'"]),
        (lambda: L.mse_loss(p, g.input("q", (3,))), ValueError, ["mse_loss", "(4, 5)", "(3,)"]),
        (lambda: L.mse_loss(xi, xi), TypeError, ["mse_loss", "float", "int32"]),
        (lambda: L.mse_loss(p, p, weight=g.input("w", (5,))), ValueError, ["mse_loss", "weight", "(5,)"]),
        (lambda: L.smooth_l1_loss(p, p, beta=-1.0), ValueError, ["smooth_l1_loss", "beta"]),
        (lambda: L.huber_loss(p, p, delta=0.0), ValueError, ["huber_loss", "delta"]),
        (lambda: L.mse_loss(p, p, "sum"), TypeError, ["positional"]),  # torch's 3rd arg is size_average
    ]


@pytest.mark.parametrize("k", range(len(_errors())))
def test_errors(k):
    raises_naming(*_errors()[k])

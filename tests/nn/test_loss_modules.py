"""The loss modules (``nn.CrossEntropyLoss``, ``nn.MSELoss``, ...) against torch's: values and input
gradients (the parity harness, every reduction in one graph), ``state_dict`` keys and the weight
buffers, and the errors for bad constructor arguments. The functions they wrap are tested in depth in
``tests/train/test_losses.py``; here each module's arguments must reach them as torch's do."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity import check, rand

import luminal as lm
from luminal import nn

pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.filterwarnings("ignore:reduction. 'mean' divides the total loss:UserWarning")]  # kl_div
C = 4
CLASS_W = np.linspace(0.5, 1.5, C).astype(np.float32)
TARGET = np.array([0, 1, 3], np.int32)  # (3,) class indices for a (3, C) input


def _both(make, **kw):
    """Ours and torch's module made by ``make(nn, **kw)``, numpy arrays given to torch as tensors."""
    tkw = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    return make(nn, **kw), make(torch.nn, **tkw)


def _check(make, inputs, backend, reductions=("mean", "sum", "none"), **kw):
    """``make(nn, reduction=r, **kw)`` for every ``r`` in one graph, against torch's."""
    pairs = [_both(make, reduction=r, **kw) for r in reductions]

    def ours(*xs):
        return tuple(m(*xs) for m, _ in pairs)

    def theirs(*ts):
        ts = [t.long() if t.dtype == torch.int32 else t for t in ts]
        return tuple(tm(*ts) for _, tm in pairs)

    check(ours, inputs, torch_op=theirs, backend=backend)


@pytest.mark.parametrize("kw", [{}, dict(weight=CLASS_W, ignore_index=1, label_smoothing=0.1)],
                         ids=["default", "weight-ignore-smoothing"])
def test_cross_entropy_loss(kw, backend):
    _check(lambda m, **k: m.CrossEntropyLoss(**k), [rand((3, C)), TARGET], backend, **kw)


def test_cross_entropy_loss_probabilities_spatial(backend):
    p = np.random.default_rng(1).random((2, C, 3)).astype(np.float32) + 0.1
    p /= p.sum(1, keepdims=True)
    _check(lambda m, **k: m.CrossEntropyLoss(**k), [rand((2, C, 3)), p], backend, weight=CLASS_W,
           label_smoothing=0.2)


@pytest.mark.parametrize("kw", [{}, dict(weight=CLASS_W, ignore_index=3)], ids=["default", "weight-ignore"])
def test_nll_loss(kw, backend):
    logp = torch.from_numpy(rand((3, C))).log_softmax(1).numpy()
    _check(lambda m, **k: m.NLLLoss(**k), [logp, TARGET], backend, **kw)


@pytest.mark.parametrize("make", [lambda m, **k: m.MSELoss(**k), lambda m, **k: m.L1Loss(**k),
                                  lambda m, **k: m.SmoothL1Loss(**k, beta=0.5),
                                  lambda m, **k: m.HuberLoss(**k, delta=0.5)],
                         ids=["mse", "l1", "smooth_l1", "huber"])
def test_regression_losses(make, backend):
    _check(make, [rand((2, 3)), rand((2, 3), seed=1)], backend)


def test_bce_loss(backend):
    p = rand((2, 3), low=0.05, high=0.95)
    _check(lambda m, **k: m.BCELoss(**k), [p, rand((2, 3), seed=1, low=0, high=1)], backend,
           weight=rand((3,), seed=2, low=0.5, high=1.5))


@pytest.mark.parametrize("kw", [{}, dict(weight=np.float32([[0.5], [2.0]]), pos_weight=np.float32([1.0, 3.0, 0.5]))],
                         ids=["default", "weight-pos_weight"])
def test_bce_with_logits_loss(kw, backend):
    _check(lambda m, **k: m.BCEWithLogitsLoss(**k), [rand((2, 3)), rand((2, 3), seed=1, low=0, high=1)], backend,
           **kw)


@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_loss(log_target, backend):
    logp = torch.from_numpy(rand((2, 3))).log_softmax(1).numpy()
    q = torch.from_numpy(rand((2, 3), seed=1)).softmax(1)
    target = (q.log() if log_target else q).numpy()
    _check(lambda m, **k: m.KLDivLoss(**k), [logp, target], backend, ("mean", "batchmean", "sum", "none"),
           log_target=log_target)


@pytest.mark.parametrize("make", [
    lambda m, w: m.CrossEntropyLoss(w), lambda m, w: m.CrossEntropyLoss(), lambda m, w: m.NLLLoss(w),
    lambda m, w: m.BCELoss(w), lambda m, w: m.BCEWithLogitsLoss(w, pos_weight=w * 2),
    lambda m, w: m.BCEWithLogitsLoss(pos_weight=w), lambda m, w: m.MSELoss(), lambda m, w: m.KLDivLoss(),
], ids=["ce", "ce-no-weight", "nll", "bce", "bce_logits", "bce_logits-pos_weight", "mse", "kl_div"])
def test_state_dict_as_torch(make):
    ours, theirs = make(nn, CLASS_W), make(torch.nn, torch.from_numpy(CLASS_W))
    sd = theirs.state_dict()
    assert list(ours.state_dict()) == list(sd)
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert not list(ours.parameters())
    ours.load_state_dict({k: v.numpy() * 3 for k, v in sd.items()})
    for k, v in ours.state_dict().items():
        np.testing.assert_array_equal(v, sd[k].numpy() * 3)


def test_weight_from_a_tensor_is_a_buffer_cast_to_the_input():
    """A torch tensor or a float64 array as weight becomes a Buffer (its dtype kept, as torch's); the
    loss reads it in the input's dtype."""
    assert nn.CrossEntropyLoss(torch.ones(3)).weight.dtype is lm.float32
    m = nn.NLLLoss(np.array([1.0, 2.0, 0.0]))
    assert isinstance(m.weight, nn.Buffer) and m.weight.dtype is lm.float64
    g = lm.Graph()
    x, t = g.input("x", (2, 3)), g.input("t", (2,), dtype=lm.int32)
    y = m(x, t)
    assert y.dtype is lm.float32
    got = lm.compile(y)(x=-np.float32([[1, 2, 3], [4, 5, 6]]), t=np.int32([1, 0]))
    np.testing.assert_allclose(got, (2 * 2 + 4 * 1) / 3, rtol=1e-6)
    m.weight.data[:] = [1, 1, 1]  # the buffer is read at every run
    np.testing.assert_allclose(lm.compile(y)(x=-np.float32([[1, 2, 3], [4, 5, 6]]), t=np.int32([1, 0])), 3.0)


def test_constructor_errors():
    with pytest.raises(TypeError, match="^MSELoss: size_average and reduce are deprecated in torch and not supported"):
        nn.MSELoss(size_average=False)
    with pytest.raises(TypeError, match="^CrossEntropyLoss: size_average and reduce are deprecated"):
        nn.CrossEntropyLoss(None, None, -100, False)  # torch's positional reduce
    with pytest.raises(ValueError, match=r"^L1Loss: reduction must be one of 'none', 'mean', 'sum', got 'avg'"):
        nn.L1Loss(reduction="avg")
    with pytest.raises(ValueError, match="^HuberLoss: reduction must be one of .* got 'batchmean'"):
        nn.HuberLoss(reduction="batchmean")
    nn.KLDivLoss(reduction="batchmean")  # (only kl_div takes it)
    with pytest.raises(ValueError, match=r"^CrossEntropyLoss: label_smoothing must be in \[0, 1\], got 1.5"):
        nn.CrossEntropyLoss(label_smoothing=1.5)
    with pytest.raises(TypeError, match="^CrossEntropyLoss: ignore_index must be an int, got float"):
        nn.CrossEntropyLoss(ignore_index=1.0)
    with pytest.raises(ValueError, match="^SmoothL1Loss: beta must be >= 0, got -1"):
        nn.SmoothL1Loss(beta=-1)
    with pytest.raises(ValueError, match="^HuberLoss: delta must be > 0, got 0"):
        nn.HuberLoss(delta=0)
    with pytest.raises(TypeError, match="^HuberLoss: delta must be a number, got str"):
        nn.HuberLoss(delta="1")
    with pytest.raises(TypeError, match="^NLLLoss: weight must hold floats, got int32"):
        nn.NLLLoss(weight=np.array([1, 2, 3]))
    with pytest.raises(TypeError, match="^BCEWithLogitsLoss: pos_weight must hold floats, got bool"):
        nn.BCEWithLogitsLoss(pos_weight=np.array([True]))


def test_forward_errors_name_the_loss():
    g = lm.Graph()
    x = g.input("x", (2, C))
    with pytest.raises(ValueError, match=r"^cross_entropy: weight must have shape \(4,\), one per class"):
        nn.CrossEntropyLoss(np.ones(3, np.float32))(x, g.input("t", (2,), dtype=lm.int32))
    with pytest.raises(TypeError, match="^mse_loss: target must be a GraphTensor, got ndarray"):
        nn.MSELoss()(x, np.zeros((2, C), np.float32))


def test_a_class_weight_given_as_a_constant_tensor():
    """porting.md maps ``torch.tensor(w)`` to ``g.constant(w)``; given so to a loss module, it failed with an
    error about numpy() and lm.compile that did not say what the module wants. Its values are known, so it is
    taken; a tensor computed in a graph is refused, saying why."""
    g = lm.Graph()
    m = nn.CrossEntropyLoss(weight=g.constant(CLASS_W))
    np.testing.assert_array_equal(m.weight.data, CLASS_W)
    with pytest.raises(TypeError, match="^CrossEntropyLoss: weight must be known when the module is built"):
        nn.CrossEntropyLoss(weight=g.input("w", (C,)) * 2)


def test_a_class_weight_computed_outside_any_graph():
    """``lm.ones(5) * 0.5`` (torch's ``torch.ones(5) * 0.5``) is a host tensor: computed now, its values
    known. It was refused as "a tensor computed in a graph"."""
    m = nn.CrossEntropyLoss(weight=lm.arange(C) * 0.5 + 1.0)
    np.testing.assert_allclose(m.weight.data, np.arange(C) * 0.5 + 1.0)
    w = nn.NLLLoss(weight=lm.ones(C) * 2.0).weight
    np.testing.assert_array_equal(w.data, np.full(C, 2.0, np.float32))

"""``nn.AdaptiveLogSoftmaxWithLoss`` against torch's with the same weights: forward's (output, loss)
named tuple, log_prob and predict, gradients of the input and of every parameter, a compiled training
step, the unbatched form, the repr and state_dict names, and torch's argument and input checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity import check, rand

import luminal as lm
from luminal import nn, train

pytestmark = [pytest.mark.usefixtures("one_torch_thread"),  # (0-wide projections warn, as torch's do)
              pytest.mark.filterwarnings("ignore:.*zero-element tensors is a no-op")]


def _pair(*args, **kwargs):
    m = nn.AdaptiveLogSoftmaxWithLoss(*args, **kwargs)
    ref = torch.nn.AdaptiveLogSoftmaxWithLoss(*args, **kwargs)
    ref.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in m.state_dict().items()})
    return m, ref


def _targets(n, n_classes, seed):
    t = np.random.default_rng(seed).integers(0, n_classes, n).astype(np.int32)
    t[:3] = [0, n_classes - 1, 1]
    return t


CONFIGS = [((8, 10, [3, 6]), {"div_value": 2.0, "head_bias": True}), ((6, 12, [2]), {}),
           ((16, 30, [4, 10, 20]), {}), ((3, 5, [1, 2, 4]), {"div_value": 4.0})]  # (the last: 0-wide projections)


@pytest.mark.parametrize(("args", "kwargs"), CONFIGS)
def test_forward_values_and_input_grads(args, kwargs):
    m, ref = _pair(*args, **kwargs)
    x, t = rand((9, args[0]), seed=1), _targets(9, args[1], 2)

    def op(xx, tt):
        return m(xx, tt) if isinstance(xx, lm.GraphTensor) else tuple(ref(xx, tt.long()))

    check(op, [x, t])
    assert repr(m) == repr(ref)
    assert list(m.state_dict()) == list(ref.state_dict())


@pytest.mark.parametrize(("args", "kwargs"), CONFIGS)
def test_log_prob_and_predict(args, kwargs):
    m, ref = _pair(*args, **kwargs)
    check(lambda xx: m.log_prob(xx) if isinstance(xx, lm.GraphTensor) else ref.log_prob(xx),
          [rand((7, args[0]), seed=3, low=-4, high=4)])
    x = rand((64, args[0]), seed=4, low=-6, high=6)
    xg = lm.Graph().input("x", x.shape)
    lp, pred = lm.compile([m.log_prob(xg), m.predict(xg)])(x=x)
    want = ref.predict(torch.from_numpy(x)).numpy()
    np.testing.assert_array_equal(pred, want)
    assert pred.dtype == np.int32
    np.testing.assert_allclose(np.exp(lp).sum(1), 1, rtol=1e-5)


def test_named_tuple_unbatched_and_parameter_grads():
    m, ref = _pair(8, 10, [3, 6], div_value=2.0, head_bias=True)
    g = lm.Graph()
    x, t = g.input("x", (8,)), g.input("t", (), dtype=lm.int32)
    res = m(x, t)
    assert type(res).__name__ == "_ASMoutput" and res._fields == ("output", "loss")
    assert res.output.shape == () and res.loss.shape == ()
    params = [p for _, p in m.named_parameters()]
    got = lm.compile([res.output, res.loss, *train.grad(res.loss, params)])(x=rand((8,), seed=5), t=np.int32(7))
    tr = ref(torch.from_numpy(rand((8,), seed=5)), torch.tensor(7))
    tr.loss.backward()
    np.testing.assert_allclose(got[0], tr.output.item(), rtol=1e-5)
    np.testing.assert_allclose(got[1], tr.loss.item(), rtol=1e-5)
    for (k, p), gv in zip(ref.named_parameters(), got[2:]):  # (torch's None: a cluster the target is not in)
        want = np.zeros(p.shape) if p.grad is None else p.grad.numpy()
        np.testing.assert_allclose(gv, want, rtol=1e-4, atol=1e-6, err_msg=k)


def test_compiled_training_step_matches_torch():
    m, ref = _pair(6, 20, [5, 12], head_bias=True)
    g = lm.Graph()
    x, t = g.input("x", (10, 6)), g.input("t", (10,), dtype=lm.int32)
    step = train.compile_step(m(x, t).loss, train.Adam(m.parameters(), lr=0.01))
    topt = torch.optim.Adam(ref.parameters(), lr=0.01)
    for i in range(3):
        xs, ts = rand((10, 6), seed=10 + i), _targets(10, 20, i)
        loss = step(x=xs, t=ts)
        topt.zero_grad()
        tl = ref(torch.from_numpy(xs), torch.from_numpy(ts).long()).loss
        tl.backward()
        topt.step()
        np.testing.assert_allclose(loss, tl.item(), rtol=1e-5)
    for k, v in ref.state_dict().items():
        np.testing.assert_allclose(m.state_dict()[k], v.numpy(), rtol=1e-4, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("bad", [[], [0, 3], [3, 3], [5, 3], [3, 10], [2.5], [3, 9.0 + 1]])
def test_cutoffs_checked_as_torch(bad):
    with pytest.raises(ValueError):
        torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, bad)
    with pytest.raises(ValueError, match=r"^AdaptiveLogSoftmaxWithLoss: cutoffs should be a sequence"):
        nn.AdaptiveLogSoftmaxWithLoss(8, 10, bad)
    nn.AdaptiveLogSoftmaxWithLoss(8, 10, [9])  # (n_classes - 1 is allowed)


def test_input_and_target_errors():
    m = nn.AdaptiveLogSoftmaxWithLoss(4, 6, [2])
    g = lm.Graph()
    x, t = g.input("x", (5, 4)), g.input("t", (5,), dtype=lm.int32)
    with pytest.raises(ValueError, match=r"same size in the batch dimension, got \(5, 4\) and \(3,\)"):
        m(x, g.input("t3", (3,), dtype=lm.int32))
    with pytest.raises(ValueError, match=r"a 1D target expects a 2D input, got \(5, 4, 1\)"):
        m(g.input("x3", (5, 4, 1)), t)
    with pytest.raises(ValueError, match=r"a 0D target expects a 1D input, got \(5, 4\)"):
        m(x, g.input("t0", (), dtype=lm.int32))
    with pytest.raises(ValueError, match=r"0D or 1D target expected \(multi-target not supported\)"):
        m(x, g.input("t2", (5, 1), dtype=lm.int32))
    with pytest.raises(TypeError, match=r"target must hold int32 class indices, got float32"):
        m(x, g.input("tf", (5,)))
    with pytest.raises(ValueError, match=r"expected input of shape \(N, 4\), got \(5, 3\)"):
        m.log_prob(g.input("x5", (5, 3)))
    f = lm.compile(m(x, t).loss)
    for bad in (6, -1):  # (torch: a RuntimeError naming the range)
        with pytest.raises(IndexError, match=rf"^AdaptiveLogSoftmaxWithLoss: target values should be in \[0, 5\], "
                                             rf"got {bad}"):
            f(x=rand((5, 4)), t=np.array([0, 1, bad, 2, 3], np.int32))
    with pytest.raises(IndexError, match="got 9"):
        m(x, g.constant(np.array([0, 1, 9, 2, 3], np.int32)))

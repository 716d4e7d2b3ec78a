"""``F.rrelu`` / ``nn.RReLU`` against torch: eval mode (and the function's default ``training=False``)
is ``leaky_relu`` with the mean slope ``(lower + upper) / 2``, values and gradients; training mode draws
one slope per element in ``[lower, upper)`` (their statistics, fresh on every run), the gradient is the
slope the same run used, positive inputs pass unchanged; the module follows train()/eval(); errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from parity import check, rand

import luminal as lm
import luminal.nn.functional as F
from luminal import nn, train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _f(t):
    return TF if isinstance(t, torch.Tensor) else F


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64, lm.float16, lm.bfloat16])
@pytest.mark.parametrize("bounds", [(), (0.1, 0.3), (0.2, 0.2), (-0.5, 0.5)])
def test_eval_mode_against_torch(bounds, dtype, backend):
    x = rand((4, 6), dtype, low=-3, high=3)
    x.reshape(-1)[:2] = 0.0  # (the gradient at 0 is the slope, as leaky_relu's)
    check(lambda t: _f(t).rrelu(t, *bounds), [x], dtypes=[dtype], backend=backend)
    check(lambda t: _f(t).rrelu(t, *bounds, training=False), [x], dtypes=[dtype], backend=backend)


def test_module_eval_mode_against_torch(backend):
    x = rand((3, 5), low=-2, high=2)
    ours, theirs = nn.RReLU(0.05, 0.4).eval(), torch.nn.RReLU(0.05, 0.4).eval()
    check(lambda t: theirs(t) if isinstance(t, torch.Tensor) else ours(t), [x], backend=backend)
    assert repr(ours) == repr(theirs) == "RReLU(lower=0.05, upper=0.4)"
    assert repr(nn.RReLU()) == repr(torch.nn.RReLU())
    assert repr(nn.RReLU(0.1, 0.3, inplace=True)) == repr(torch.nn.RReLU(0.1, 0.3, inplace=True))


def _train_run(make, x, backend="cpu", runs=1):
    g = lm.Graph()
    g.rng = np.random.default_rng(0)
    t = g.input("x", x.shape)
    y = make(t)
    f = lm.compile([y, train.grad(y.sum(), t)], backend=backend)
    return [f(x=x) for _ in range(runs)]


@pytest.mark.parametrize("lower,upper", [(1 / 8, 1 / 3), (0.0, 1.0), (0.25, 0.25)])
def test_training_mode_slopes(lower, upper, backend):
    """Each negative element gets its own slope in [lower, upper), uniform (mean and variance of the
    uniform distribution, within 6 standard errors); the gradient is that slope; positive elements
    pass with gradient 1; every run draws afresh."""
    n = 40000
    x = np.where(np.arange(n) % 4 == 0, 1.5, -np.linspace(0.5, 2.0, n)).astype(np.float32)
    (y1, g1), (y2, _) = _train_run(lambda t: F.rrelu(t, lower, upper, training=True), x, backend, runs=2)
    pos, neg = x > 0, x < 0
    np.testing.assert_array_equal(y1[pos], x[pos])
    np.testing.assert_array_equal(g1[pos], 1.0)
    slope = y1[neg] / x[neg]
    assert slope.min() >= lower - 1e-6 and slope.max() <= upper + 1e-6
    np.testing.assert_allclose(g1[neg], slope, rtol=1e-6)  # the gradient is the slope used
    width = upper - lower
    if width:
        se = width / np.sqrt(12 * slope.size)
        assert abs(slope.mean() - (lower + upper) / 2) < 6 * se
        assert abs(slope.var() - width**2 / 12) < 6 * width**2 / np.sqrt(180 * slope.size)
        assert len(np.unique(slope)) > slope.size // 2  # one draw per element
        assert not np.array_equal(y1, y2)  # fresh draws on every run
    else:
        np.testing.assert_allclose(slope, lower, rtol=1e-6)


def test_training_mode_at_zero_and_float64():
    """At x = 0 the output is 0 and the gradient the drawn slope (torch: x <= 0 takes the slope)."""
    x = np.array([0.0, -1.0, 2.0, 0.0] * 500)
    g = lm.Graph()
    t = g.input("x", x.shape, dtype=lm.float64)
    y = F.rrelu(t, 0.1, 0.3, training=True)
    assert y.dtype is lm.float64
    out, grad = lm.compile([y, train.grad(y.sum(), t)], backend="cpu")(x=x)
    zero = x == 0
    np.testing.assert_array_equal(out[zero], 0.0)
    assert (grad[zero] >= 0.1).all() and (grad[zero] <= 0.3).all()


def test_module_follows_training_mode():
    m = nn.RReLU(0.1, 0.3)
    x = -np.ones(2000, np.float32)
    (y_train, _), = _train_run(m, x)
    assert len(np.unique(y_train)) > 100 and (y_train <= -0.1 + 1e-6).all() and (y_train >= -0.3 - 1e-6).all()
    m.eval()
    (y_eval, g_eval), = _train_run(m, x)
    np.testing.assert_allclose(y_eval, -0.2, rtol=1e-6)
    np.testing.assert_allclose(g_eval, 0.2, rtol=1e-6)


def test_errors():
    x = lm.Graph().input("x", (3,))
    with pytest.raises(ValueError, match="rrelu: lower bound should be less than or equal to the upper bound, "
                       "got lower=0.5, upper=0.1"):
        F.rrelu(x, 0.5, 0.1, training=True)
    with pytest.raises(ValueError, match="rrelu: lower bound should be less than or equal"):
        F.rrelu(x, 0.5, 0.1)  # (as torch: in eval mode too)
    with pytest.raises(ValueError, match="RReLU: lower bound should be less than or equal"):
        nn.RReLU(0.4, 0.2)
    with pytest.raises(TypeError, match="rrelu: input must be a GraphTensor"):
        F.rrelu(np.zeros(3))
    with pytest.raises(TypeError, match="rrelu: upper must be a"):
        F.rrelu(x, 0.1, "0.3")


@pytest.mark.parametrize("bounds", [(float("nan"), 0.3), (0.1, float("nan")), (0.1, float("inf"))])
def test_bounds_must_be_finite(bounds):
    """A NaN bound passed the order check (NaN > x is False) and made every slope NaN; torch refuses it."""
    x = lm.Graph().input("x", (3,))
    with pytest.raises(ValueError, match="rrelu: (lower|upper) bound must be finite"):
        F.rrelu(x, *bounds, training=True)
    with pytest.raises(ValueError, match="RReLU: (lower|upper) bound must be finite"):
        nn.RReLU(*bounds)

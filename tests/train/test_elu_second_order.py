"""Second derivatives of elu, celu and selu, at 0 above all: torch's first derivative at 0 is the
``x <= 0`` side's slope (``alpha``; celu's 1; selu's ``scale * alpha``), but its second derivative
there is 0 (its double backward masks ``x < 0``), where luminal's gave the negative side's
``alpha`` (``1 / alpha``, ``scale * alpha``). Also: the slope far out on the negative side came from
expm1's ``y + 1`` and was 1.7e-4 off at x = -30 (float64 too); celu's ``exp(x / alpha) - 1`` lost
-0.0's sign and cancelled near 0 (1.3% off at -1e-6 in float32). First and second derivatives against
torch's (``create_graph=True``), float32 and float64, alpha 1, other, 0 and negative.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import train
from luminal.nn import functional as F

# finite points: both zeros, both sides of the kink, far out (exp(-30) is where y + 1 cancelled)
X = [-30.0, -2.0, -0.5, -1e-6, -0.0, 0.0, 1e-6, 0.5, 2.0, 30.0]

FUNCS = {  # name: (luminal's, torch's)
    **{f"elu({a})": ((lambda x, a=a: F.elu(x, a)), (lambda x, a=a: torch.nn.functional.elu(x, a)))
       for a in (1.0, 2.0, 0.5, 0.0, -1.0, -0.5)},
    **{f"celu({a})": ((lambda x, a=a: F.celu(x, a)), (lambda x, a=a: torch.nn.functional.celu(x, a)))
       for a in (1.0, 2.0, 0.5, -1.0, -2.0)},
    "selu": (F.selu, torch.nn.functional.selu),
}


def _derivatives(f, xs, dtype):
    """luminal's ``f(x)``, ``f'(x)`` and ``f''(x)`` (each the gradient of the sum of the one before)."""
    g = lm.Graph()
    x = g.input("x", xs.shape, dtype=dtype)
    y = f(x)
    d1 = train.grad(y.sum(), x)
    d2 = train.grad(d1.sum(), x)
    return lm.compile([y, d1, d2], backend="cpu")(x=xs)


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64], ids=lambda d: d.name)
@pytest.mark.parametrize("name", list(FUNCS))
def test_value_and_two_derivatives_are_torchs(name, dtype):
    lf, tf = FUNCS[name]
    xs = np.array(X, dtype=dtype.np)
    got = _derivatives(lf, xs, dtype)
    t = torch.tensor(xs, requires_grad=True)
    y = tf(t)
    (d1,) = torch.autograd.grad(y.sum(), t, create_graph=True)
    (d2,) = torch.autograd.grad(d1.sum(), t)
    tol = dict(rtol=3e-6, atol=0) if dtype is lm.float32 else dict(rtol=1e-13, atol=0)
    for what, a, b in zip(("value", "first derivative", "second derivative"), got, (y, d1, d2)):
        np.testing.assert_allclose(a, b.detach().numpy(), **tol, err_msg=f"{name}: {what}")


SELU_ALPHA, SELU_SCALE = 1.6732632423543772, 1.0507009873554805


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64], ids=lambda d: d.name)
@pytest.mark.parametrize("name,slope_at_0", [("elu(2.0)", 2.0), ("elu(-0.5)", -0.5), ("elu(0.0)", 0.0),
                                             ("celu(2.0)", 1.0), ("celu(-1.0)", 1.0),
                                             ("selu", SELU_ALPHA * SELU_SCALE)])
def test_zero_is_on_the_negative_side_for_the_slope_and_a_kink_for_its_derivative(name, slope_at_0, dtype):
    """Written out: at +-0 the slope is the ``x <= 0`` side's and the second derivative is 0; at NaN
    all three are NaN (torch's kernels differ there: test_elementwise's ``_nan_gradient_at_nan``); at
    +-inf the slopes are the sides' limits."""
    xs = np.array([-0.0, 0.0, np.nan, np.inf, -np.inf], dtype=dtype.np)
    y, d1, d2 = _derivatives(FUNCS[name][0], xs, dtype)
    pos_slope = SELU_SCALE if name == "selu" else 1.0
    alpha = float(name[name.index("(") + 1:-1]) if "(" in name else 1.0
    # at -inf the negative side's slope: exp(-inf) = 0 for elu and selu, and celu with alpha > 0;
    # celu with alpha < 0 reads exp(+inf)
    neg_inf_slope = np.inf if name.startswith("celu") and alpha < 0 else 0.0
    tol = dict(rtol=1e-6 if dtype is lm.float32 else 1e-14, atol=0)
    np.testing.assert_array_equal(y[:2], [0.0, 0.0])
    assert np.isnan(y[2]) and y[3] == np.inf * pos_slope
    np.testing.assert_allclose(d1, [slope_at_0, slope_at_0, np.nan, pos_slope, neg_inf_slope], **tol)
    np.testing.assert_array_equal(d2[:4], [0.0, 0.0, np.nan, 0.0])


def test_elu_keeps_the_sign_of_a_negative_zero():
    """elu and celu of -0.0 are -0.0 (alpha > 0); celu's ``exp(x / alpha) - 1`` gave +0.0."""
    xs = np.array([-0.0, 0.0], np.float32)
    g = lm.Graph()
    x = g.input("x", xs.shape)
    got = lm.compile([F.elu(x), F.celu(x, 2.0), F.selu(x)], backend="cpu")(x=xs)
    for out in got:
        np.testing.assert_array_equal(np.signbit(out), [True, False])


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16], ids=lambda d: d.name)
def test_sixteen_bit_second_derivative_at_zero(dtype):
    """16-bit inputs compute in float32 and round once: the second derivative at 0 is 0 there too."""
    xs = np.array([-1.0, 0.0, 1.0], np.float32)
    g = lm.Graph()
    x = g.input("x", xs.shape)
    xl = x.to(dtype)
    d1 = train.grad(F.elu(xl, 2.0).float().sum(), xl)
    d2 = train.grad(d1.float().sum(), xl)
    got1, got2 = (np.asarray(a, np.float32) for a in lm.compile([d1.float(), d2.float()], backend="cpu")(x=xs))
    tol = dict(rtol=1e-2, atol=0)
    np.testing.assert_allclose(got1, [2 * np.exp(-1.0), 2.0, 1.0], **tol)
    np.testing.assert_allclose(got2, [2 * np.exp(-1.0), 0.0, 0.0], **tol)


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16], ids=lambda d: d.name)
def test_sixteen_bit_selu_rounds_once(dtype):
    """selu of a 16-bit input is computed in float32 and rounded once, as torch's kernel: it was elu
    rounded to 16 bits, then times the scale rounded again (14% of float16 values 1 ulp off torch). The
    float32 exp may differ from torch's in its last bit, so a rare value may still round the other way."""
    xs = np.linspace(-6, 6, 4001).astype(np.float32)
    g = lm.Graph()
    x = g.input("x", xs.shape)
    xl = x.to(dtype)
    y = F.selu(xl)
    d = train.grad(y.float().sum(), xl)
    got, got_d = (np.asarray(a, np.float32) for a in lm.compile([y.float(), d.float()], backend="cpu")(x=xs))
    tx = torch.from_numpy(xs).to(getattr(torch, dtype.name)).requires_grad_(True)
    ty = torch.selu(tx)
    ty.float().sum().backward()
    want, want_d = ty.detach().float().numpy(), tx.grad.float().numpy()
    for a, b in ((got, want), (got_d, want_d)):
        ulp = np.abs(np.spacing(b.astype(np.float16 if dtype is lm.float16 else np.float32)).astype(np.float32))
        if dtype is lm.bfloat16:
            ulp = np.abs(b) * 2.0 ** -7 + 1e-30
        off = np.abs(a - b) > 0
        assert np.all(np.abs(a - b) <= ulp * 1.01), "more than an ulp from torch"
        assert off.mean() < 0.01, f"{off.mean():.1%} of values an ulp from torch"

"""var/std/var_mean/std_mean of float32 and bfloat16 values whose squared deviations leave float32's
range while the result fits (the variance is taken in float64, float16's in float32), and their
gradients (torch's var_backward/std_backward, given as a rule): values and gradients against torch,
the gradient of the gradient too."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity import TORCH_DTYPE, check, rand

import luminal as lm
from luminal import train

pytestmark = pytest.mark.usefixtures("one_torch_thread")

F16, BF16, F32, F64 = lm.float16, lm.bfloat16, lm.float32, lm.float64


def _ns(t):
    return torch if isinstance(t, torch.Tensor) else lm


def _all(t):
    """every spelling: std, std(dim, correction=0), std_mean, var, var_mean."""
    ns = _ns(t)
    return (t.std(), t.std(dim=0, correction=0), *ns.std_mean(t), t.var(), *ns.var_mean(t, 0, keepdim=True))


CASES = [  # (id, values, dtype)
    ("f32_big", [3e20, 4e20, -1e20], F32),  # var 7e40 overflows (torch: inf too), std 2.6458e20 fits
    ("f32_tiny", [3e-25, 4e-25, 1e-25], F32),  # var 1e-50 underflows to 0 (torch too), std 1.5e-25 fits
    ("f32_mixed", [1e19, -3e19, 2e19, 5e18], F32),
    ("f16_spread", [-300.0, 300.0, 250.0, -250.0], F16),  # var ~1e5 > 65504, std 318.75
    ("bf16_big", [3e20, -4e20, 1e20], BF16),
    ("bf16_tiny", [3e-25, -4e-25, 1e-25], BF16),
]


@pytest.mark.parametrize("name,values,dtype", CASES, ids=[c[0] for c in CASES])
def test_std_fits_where_the_squares_do_not(name, values, dtype, backend):
    x = lm.core.dtype.to_storage(np.array(values), dtype)
    check(_all, [x], dtypes=[dtype], backend=backend)


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16], ids=lambda d: d.name)
def test_ordinary_values_and_dims(dtype, backend):
    x = rand((3, 5, 4), dtype, seed=3, low=-3, high=5)

    def op(t):
        return (t.var(1), t.std((0, 2), keepdim=True), t.var(dim=2, correction=2), t.std(-1, unbiased=False),
                *_ns(t).std_mean(t, (0, 1)))

    check(op, [x], dtypes=[dtype], backend=backend)
    check(lambda t: (t.var(0), t.std(1)), [x], dtypes=[dtype], pre=lambda t: t.permute(2, 0, 1), backend=backend)


def test_constant_rows_have_zero_std_gradient(backend):
    """std of equal values is 0 and its gradient 0 (torch's masked_fill), not NaN."""
    x = np.array([[2.0, 2.0, 2.0], [1.0, -1.0, 4.0]], np.float32)
    check(lambda t: (t.std(1), t.std()), [x], backend=backend)


def test_too_large_a_correction(backend):
    """N - correction <= 0: inf/NaN values and torch's gradient 2 (x - mean) / 0."""
    x = np.array([[1.0, 3.0], [2.0, 2.0]], np.float32)
    check(lambda t: t.var(1, correction=2), [x], backend=backend)
    check(lambda t: t.var(1, correction=3), [x], backend=backend)


def test_symbolic_dim(backend):
    x = rand((4, 6), F32, seed=4)
    check(lambda t: (t.var(1), t.std(0), t.std(1, correction=0)), [x], shapes=[("B", 6)], backend=backend)


@pytest.mark.parametrize("root", [False, True])
def test_gradient_of_the_gradient(root, backend):
    """The rule keeps the mean in (not detached), so a second derivative is torch's: var's Hessian
    is 2 (I - 1/N) / (N - correction), not 2 I / (N - correction)."""
    x = rand((3, 5), F32, seed=5)
    w = np.random.default_rng(6).uniform(0.5, 2.0, size=(3, 5)).astype(np.float32)
    g = lm.Graph()
    t = g.input("x", x.shape)
    y = t.std(1) if root else t.var(1)
    gx = train.grad((y * g.constant(np.arange(1.0, 4.0, dtype=np.float32))).sum(), t)
    hx = train.grad((gx * g.constant(w)).sum(), t)
    got = lm.compile([gx, hx], backend=backend)(x=x)
    tt = torch.from_numpy(x).requires_grad_(True)
    ty = tt.std(1) if root else tt.var(1)
    tg, = torch.autograd.grad((ty * torch.arange(1.0, 4.0)).sum(), tt, create_graph=True)
    th, = torch.autograd.grad((tg * torch.from_numpy(w)).sum(), tt)
    np.testing.assert_allclose(got[0], tg.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], th.numpy(), rtol=1e-4, atol=1e-5)


def test_layer_norm_shares_the_mean():
    """A norm's own ``x.mean`` and var's mean are one node: the forward is 3 kernels (mean, var,
    normalise), as with a float32 variance."""
    g = lm.Graph()
    x = g.input("x", (8, 32))
    y = (x - x.mean(1, keepdim=True)) * (x.var(1, keepdim=True, correction=0) + 1e-5).rsqrt()
    f = lm.compile([y], backend="cpu")
    assert "kernels: 3 " in str(f.report())
    X = rand((8, 32), F32, seed=7, low=-3, high=3)
    t = torch.from_numpy(X)
    want = torch.nn.functional.layer_norm(t, (32,), eps=1e-5).numpy()
    np.testing.assert_allclose(f(x=X)[0], want, rtol=1e-5, atol=1e-5)


def test_torch_dtypes_map():  # (the table the cases above rely on)
    assert TORCH_DTYPE[BF16] is torch.bfloat16

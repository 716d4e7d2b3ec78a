"""``lm.exp`` within an ulp, as torch's: float32 rounded once from a float64 ``exp2(x log2(e))``,
float64 by an exact reduction (``elementwise._exp_f64``). ``exp2(x * log2(e))`` in ``x``'s own dtype
was 64 ulps off in float32 near x = 88 (7 ulps below |x| = 10) and 439 ulps off in float64 near
x = 705: the product's rounding moves the exponent. And float32's logarithms within half an ulp, and
float64's power with its exponent carried in more than a double."""

import mpmath as mp
import numpy as np
import pytest

import luminal as lm
from luminal import train

pytestmark = pytest.mark.parametrize("backend", ["cpu", "reference"])


def _exp(x: np.ndarray, dtype, backend: str):
    g = lm.Graph()
    t = g.input("x", x.shape, dtype=dtype)
    y = t.exp()
    return lm.compile([y, train.grad(y.sum(), t)], backend=backend)(x=x)


def _ulps(got: np.ndarray, exact: list, np_dtype) -> np.ndarray:
    """|got - exact| in units of ``np_dtype``'s spacing at the exact value (mpmath numbers)."""
    spacing = [mp.mpf(float(np.spacing(np_dtype(float(e))))) for e in exact]
    return np.array([float(abs(mp.mpf(float(v)) - e) / s) for v, e, s in zip(got, exact, spacing)])


def test_float32_is_correctly_rounded(backend):
    """Within half an ulp (and a hair: the double rounding of a float64 result) over the whole range
    where the result is a normal float32, the ends included."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-87.3, 88.72, 3000), rng.uniform(-10, 10, 1000),
                        [88.7228, 88.72283, -87.33, 0.5, -0.5, 1e-7]]).astype(np.float32)
    got, grad = _exp(x, lm.float32, backend)
    exact = [mp.exp(mp.mpf(float(v))) for v in x]
    assert _ulps(got, exact, np.float32).max() <= 0.501
    np.testing.assert_array_equal(grad, got)  # the gradient is the result, as torch's


def test_float64_within_an_ulp(backend):
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(-708, 709.78, 1500), rng.uniform(-5, 5, 500), [709.78, -708.39, 1e-300]])
    with mp.workdps(40):
        exact = [mp.exp(mp.mpf(float(v))) for v in x]
        got, grad = _exp(x, lm.float64, backend)
        assert _ulps(got, exact, np.float64).max() <= 1.0
    np.testing.assert_array_equal(grad, got)


def test_limits_and_subnormals(backend):
    """inf and 0 past the range, NaN kept, exp(-0) = 1; float64 results below 2**-1022 rounded once
    (within one unit of the smallest subnormal), float32's too."""
    x = np.array([np.inf, -np.inf, np.nan, -0.0, 1e300, -1e300, 710.0, -746.0, -744.0, -720.5])
    got, _ = _exp(x, lm.float64, backend)
    np.testing.assert_array_equal(got[:8], [np.inf, 0.0, np.nan, 1.0, np.inf, 0.0, np.inf, 0.0])
    with mp.workdps(40):
        tiny = np.array([float(mp.exp(mp.mpf(v))) for v in x[8:]])  # (float() rounds to the subnormal)
    assert np.all(np.abs(got[8:] - tiny) <= 5e-324)
    x32 = np.array([89.0, -104.0, -100.0, -88.5], np.float32)
    got32, _ = _exp(x32, lm.float32, backend)
    assert got32[0] == np.inf and got32[1] == 0.0
    want = np.exp(x32[2:].astype(np.float64)).astype(np.float32)  # (float64's exp: rounded once to the subnormal)
    assert np.all(np.abs(got32[2:].astype(np.float64) - want) <= np.float32(2.0**-149))


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16], ids=["float16", "bfloat16"])
def test_half_types_are_correctly_rounded(dtype, backend):
    """The 16-bit types compute in float32 (``_opmath``): every finite input of a range, rounded once."""
    x = np.linspace(-16, 11, 2001).astype(np.float32)
    x = lm.core.dtype.to_storage(x, dtype)
    got, _ = _exp(x, dtype, backend)
    want = lm.core.dtype.to_storage(np.exp(np.asarray(x, np.float64)).astype(np.float32), dtype)
    rounded = np.asarray(want, np.float64)
    spacing = np.abs(rounded) * 2.0 ** -(10 if dtype is lm.float16 else 7)
    assert np.all(np.abs(np.asarray(got, np.float64) - rounded) <= spacing)


@pytest.mark.parametrize("name,exact,low,high", [
    ("log", mp.log, -80.0, 80.0), ("log10", mp.log10, -80.0, 80.0),
    ("log1p", lambda v: mp.log1p(v), -20.0, 20.0)], ids=["log", "log10", "log1p"])
def test_float32_logarithms_are_correctly_rounded(name, exact, low, high, backend):
    """float32 computes in float64 and rounds once (``_wide``): ``log2(x) * ln(2)`` in float32 was 1.2
    ulps off (log10 1.8, log1p 2.1). Inputs spread over the magnitudes (log1p's from -0.5 up, its
    tiny ones included)."""
    rng = np.random.default_rng(2)
    x = np.exp(rng.uniform(low, high, 3000))
    if name == "log1p":
        x = np.concatenate([x - 0.5, rng.uniform(-0.9, 0.9, 500), [1e-30, -1e-8, 3e-5]])
    x = x.astype(np.float32)
    g = lm.Graph()
    t = g.input("x", x.shape)
    got = lm.compile([getattr(t, name)()], backend=backend)(x=x)[0]
    want = [exact(mp.mpf(float(v))) for v in x]
    assert _ulps(got, want, np.float32).max() <= 0.501


def test_float64_power_carries_its_exponent_exactly(backend):
    """``x ** b`` in float64 within ``1 + |b| / 2`` ulps (``elementwise._pow_magnitude``; measured here
    within ``(1 + |b|) / 2``, the margin for exp2's own 0.65 ulp on another CPU):
    ``exp2(b * log2(x))`` was off by the product's rounding, ``|b log2(x)|`` ulps (90 at x ** 2.5
    near 1e13). Gradients as torch's: ``b x**(b-1)`` and ``x**b ln(x)``."""
    import torch

    rng = np.random.default_rng(3)
    x = np.concatenate([np.exp(rng.uniform(-250, 250, 1500)), np.exp(rng.uniform(-20, 20, 500))])
    b = np.concatenate([np.full(1500, 2.5), rng.uniform(-10, 10, 500)])
    g = lm.Graph()
    xt, bt = g.input("x", x.shape, dtype=lm.float64), g.input("b", b.shape, dtype=lm.float64)
    y = xt ** bt
    got, gx, gb = lm.compile([y, *train.grad(y.sum(), [xt, bt])], backend=backend)(x=x, b=b)
    with mp.workdps(50):
        exact = [mp.power(mp.mpf(float(u)), mp.mpf(float(v))) for u, v in zip(x, b)]
        ulps = _ulps(got, exact, np.float64)
    assert np.all(ulps <= 1 + np.abs(b) / 2), ulps.max()
    tx, tb = torch.tensor(x, requires_grad=True), torch.tensor(b, requires_grad=True)
    wx, wb = torch.autograd.grad((tx ** tb).sum(), [tx, tb])
    np.testing.assert_allclose(gx, wx.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gb, wb.numpy(), rtol=1e-12)

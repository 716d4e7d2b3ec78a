"""lgamma, digamma and polygamma (orders 0 and 1) against mpmath (exact to 30 digits) in float64 and
torch in float32: values, torch's values at the poles and infinities, gradients (lgamma's is digamma,
digamma's trigamma) and second derivatives, int inputs, and the errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from mpmath import mp
from parity import check

import luminal as lm
from luminal import train

pytestmark = pytest.mark.usefixtures("one_torch_thread")
mp.dps = 30

POINTS = np.array([1e-300, 1e-8, 0.001, 0.3, 0.5, 1.5, 2.5, 3.7, 7.25, 9.99, 10.0, 11.0, 25.0, 100.0, 170.5,
                   1e20, 1e300, -1e-8, -0.3, -2.5, -3.0000001, -7.9, -100.5])
EXACT = {"lgamma": lambda v: mp.log(abs(mp.gamma(v))), "digamma": lambda v: mp.psi(0, v),
         "trigamma": lambda v: mp.psi(1, v)}


def _run(fn, vals, dtype=lm.float64):
    g = lm.Graph()
    x = g.input("x", vals.shape, dtype=dtype)
    return lm.compile(fn(x), backend="cpu")(x=vals)


@pytest.mark.parametrize("name", sorted(EXACT))
def test_float64_values_against_mpmath(name):
    fn = {"lgamma": lm.lgamma, "digamma": lm.digamma, "trigamma": lambda x: lm.polygamma(1, x)}[name]
    pts = POINTS if name != "trigamma" else POINTS[np.abs(POINTS) < 1e150]  # (psi(1, 1e300) underflows mpmath's)
    got = _run(fn, pts)
    want = np.array([float(EXACT[name](mp.mpf(float(v)))) for v in pts])
    np.testing.assert_allclose(got, want, rtol=3e-14, atol=0)


def test_lgamma_near_its_zeros_and_at_them():
    pts = np.array([1.0, 2.0, 1.0 + 1e-6, 2.0 - 1e-6, 0.999, 0.9999, 2.001])
    got = _run(lm.lgamma, pts)
    want = np.array([float(EXACT["lgamma"](mp.mpf(float(v)))) for v in pts])
    assert got[0] == 0.0 and got[1] == 0.0
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-14)


def test_special_values():
    """The defined values (torch 2.13 gives the same; written out, so another torch build's special
    values cannot move the test): lgamma +inf at the poles and +-inf; digamma -inf at +0, +inf at -0
    (the one-sided limits), NaN at the other poles and -inf; trigamma +inf at 0, 0 at +inf."""
    inf, nan = math.inf, math.nan
    vals = np.array([0.0, -0.0, -1.0, -2.0, inf, -inf, nan], np.float64)
    got = _run(lambda x: (lm.lgamma(x), lm.digamma(x)), vals)
    np.testing.assert_array_equal(got[0], [inf, inf, inf, inf, inf, inf, nan])
    np.testing.assert_array_equal(got[1], [-inf, inf, nan, nan, inf, nan, nan])
    tri = _run(lambda x: lm.polygamma(1, x), np.array([0.0, inf, -inf, nan]))
    np.testing.assert_array_equal(tri, [inf, 0.0, nan, nan])
    assert _run(lambda x: lm.polygamma(1, x), np.array([-1.0]))[0] > 1e30  # a pole (torch: 6.6e32, rounding)


def test_float32_values_and_gradients_against_torch(backend):
    x = np.array([0.05, 0.5, 1.3, 2.0, 4.5, 30.0, -0.4, -2.5, -5.3], np.float32)
    check(lambda t: (t.lgamma(), t.digamma()), [x], backend=backend)
    check(lambda t: torch.polygamma(1, t) if isinstance(t, torch.Tensor) else lm.polygamma(1, t), [x],
          backend=backend, grad=False)
    check(lambda t: t.polygamma(0), [x], backend=backend)


def test_second_derivatives():
    x0 = np.array([0.3, 1.0, 2.5, 7.0, -1.5])
    xt = torch.tensor(x0, requires_grad=True)
    (gt,) = torch.autograd.grad(torch.lgamma(xt).sum(), xt, create_graph=True)
    (ht,) = torch.autograd.grad(gt.sum(), xt)
    g = lm.Graph()
    x = g.input("x", (5,), dtype=lm.float64)
    gx = train.grad(lm.lgamma(x).sum(), x)
    hx = train.grad(gx.sum(), x)
    got_g, got_h = lm.compile([gx, hx], backend="cpu")(x=x0)
    np.testing.assert_allclose(got_g, gt.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(got_h, ht.numpy(), rtol=1e-8)  # (torch's trigamma is good to ~5e-10)


def test_int_inputs_and_errors():
    check(lambda t: (t.lgamma(), t.digamma()), [np.array([1, 2, 5], np.int32)])
    g = lm.Graph()
    x = g.input("x", (2,))
    with pytest.raises(ValueError, match="polygamma: order n = 151 is past 150"):
        lm.polygamma(151, x)
    with pytest.raises(ValueError, match="polygamma: n must be an int >= 0"):
        lm.polygamma(-1, x)

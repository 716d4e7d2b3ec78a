"""torch.special.airy_ai (``luminal/frontend/ops/airy.py``): values against mpmath (the exact ones) and
torch where torch is accurate, the defined values at the edges written out, and the gradient Ai'(x)
(torch's airy_ai has none: its result does not require grad) against mpmath and a central difference.

Tolerances in float64 (measured maxima in brackets, ``eps`` = 2**-52; the dense sweeps are in
``test_special_airy_audit.py``):
- x >= 0: relative ``4 eps`` [1.6 eps], subnormal results (x in [103.9, 107.4]) to one subnormal step;
- x < 0: absolute ``5 eps`` of the envelope ``|x|**(-1/4) / sqrt(pi)`` [2.5 eps] to x = -1e10, ``20 eps``
  to -1e12 [11 eps]: the phase ``2/3 |x|**1.5`` is kept in two parts, exact to ``zeta * 2e-32`` rad.
  torch's float64 is off by 6e-6 of the envelope between -10 and -2.09 (Cephes' rational
  approximations), 1.5e-12 at -1000 and 0.13 at -1e12 (its phase in one float64), and relatively by
  1.4e-13 near x = 103 (``exp(-zeta)``'s rounding), 0 past 103.9;
- Ai' (the gradient): the same, with the envelope ``|x|**(1/4) / sqrt(pi)``.
"""

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

mp.dps = 40
inf, nan = math.inf, math.nan
EPS = 2.0**-52


def _run(fn, x, dtype=lm.float64, backend="cpu", grad=0):
    """``fn`` of a graph input holding ``x``; with ``grad`` also the first (and second) derivative."""
    g = lm.Graph()
    t = g.input("x", x.shape, dtype=dtype)
    outs = [fn(t)]
    for _ in range(grad):
        (d,) = train.grad(outs[-1].sum(), [t])
        outs.append(d)
    res = lm.compile(outs, backend=backend)(x=lm.core.dtype.to_storage(x, dtype))
    return res if grad else res[0] if isinstance(res, (list, tuple)) else res


def ai_error(x, got, deriv=False):
    """|got - Ai(x)| (Ai'(x) with ``deriv``) in units of ``eps``: relative for x >= 0, relative to the
    envelope ``|x|**(-+1/4) / sqrt(pi)`` for x < 0 (the larger of it and |Ai| near 0)."""
    want = np.array([float(mp.airyai(mp.mpf(float(v)), 1 if deriv else 0)) for v in x])
    env = np.abs(np.minimum(x, -1.0)) ** (0.25 if deriv else -0.25) / math.sqrt(math.pi)
    scale = np.where(x < 0, np.maximum(env, np.abs(want)), np.abs(want))
    scale = np.where(scale == 0, 1.0, scale)  # (past x = 107.4: 0 alike)
    return np.abs(np.asarray(got, np.float64) - want) / scale / EPS


X64 = np.concatenate([np.linspace(-12, 12, 97), [-1e3, -12345.678, -1e6 - 0.1, -1e9, -1e12, -2.1, -2.09,
                                                  -2.338107410459767, -9.999, -10.0, -10.001, 2.0, 10.0, 10.001,
                                                  50.0, 100.0, 103.8]])


def test_float64_against_mpmath(backend):
    got = _run(lm.special.airy_ai, X64, backend=backend)
    err = ai_error(X64, got)
    far = X64 < -1e10  # (the phase's double-double rounding, zeta * 2e-32 rad: 11 eps at -3e11)
    assert err[~far].max() < 5 and err[far].max() < 20


def test_gradient_is_the_derivative(backend):
    """The gradient is Ai'(x) (mpmath; accurate as Ai is), the second derivative ``x Ai(x)``; a central
    difference agrees."""
    x = X64[np.abs(X64) < 1e4]
    y, d1, d2 = _run(lm.special.airy_ai, x, backend=backend, grad=2)
    assert ai_error(x, d1, deriv=True).max() < 5
    np.testing.assert_allclose(d2, x * y, rtol=1e-15, atol=1e-300)
    h = 1e-6
    xs = np.linspace(-8, 8, 33)
    fd = (_run(lm.special.airy_ai, xs + h) - _run(lm.special.airy_ai, xs - h)) / (2 * h)
    np.testing.assert_allclose(_run(lm.special.airy_ai, xs, grad=1)[1], fd, rtol=1e-7, atol=1e-9)


def test_special_values():
    """Ai(0) = 3**(-2/3) / gamma(2/3) (also at -0.0), Ai(+-inf) = 0 (torch: NaN), NaN stays NaN; past
    x = 103.9 the values are subnormal (torch: 0), 0 from 107.4 on. Ai'(0) = -3**(-1/3) / gamma(1/3),
    Ai'(+inf) = 0, Ai'(-inf) NaN (it oscillates without bound)."""
    x = np.array([0.0, -0.0, inf, -inf, nan, 104.0, 105.0, 107.0, 107.5, 1e300])
    want = [0.3550280538878172, 0.3550280538878172, 0.0, 0.0, nan, 7.448752158292227e-309, 2.70062041745e-313,
            3.06e-322, 0.0, 0.0]  # (mpmath; the subnormal ones to their last place)
    got, d = _run(lm.special.airy_ai, x, grad=1)
    np.testing.assert_array_equal(got[[0, 1, 2, 3, 4, 8, 9]], np.array(want)[[0, 1, 2, 3, 4, 8, 9]])
    np.testing.assert_allclose(got[5:8], want[5:8], rtol=0, atol=5e-324)
    np.testing.assert_array_equal(d[[0, 1, 2, 9]], [-0.2588194037928068, -0.2588194037928068, 0.0, 0.0])
    assert np.isnan(d[3]) and np.isnan(d[4])


def test_huge_negative_is_bounded_by_the_envelope():
    """Past x = -1e19 the phase is lost even in two parts; the value stays inside the envelope."""
    x = np.array([-1e20, -1e100, -1e300])
    got = _run(lm.special.airy_ai, x)
    assert np.all(np.abs(got) <= np.abs(x) ** -0.25 / math.sqrt(math.pi))


@pytest.mark.parametrize("dtype", [lm.float32, lm.float16, lm.bfloat16], ids=lambda d: d.name)
def test_low_precision_within_an_ulp(dtype):
    """Inputs exact in ``dtype``; the float64 value rounded once: within an ulp of the exact one."""
    x = lm.core.dtype.to_storage(np.linspace(-30, 30, 121), dtype).astype(np.float64)
    got = _run(lm.special.airy_ai, x, dtype=dtype).astype(np.float64)
    want = np.array([float(mp.airyai(mp.mpf(v))) for v in x])
    wd = lm.core.dtype.to_storage(want, dtype).astype(np.float64)
    tiny = {lm.float32: 1.2e-38, lm.float16: 6.2e-5, lm.bfloat16: 1.2e-38}[dtype]  # (subnormal results)
    keep = np.abs(want) >= tiny
    ulp = np.abs(wd[keep]) * {lm.float32: 2.0**-23, lm.float16: 2.0**-10, lm.bfloat16: 2.0**-7}[dtype]
    assert (np.abs(got[keep] - want[keep]) / ulp).max() <= 1.0


def _airy_of(t):
    return lm.special.airy_ai(t) if isinstance(t, lm.GraphTensor) else torch.special.airy_ai(t)


def test_against_torch_and_int_inputs(backend):
    """torch's float32 values, and its float64 ones to its own accuracy (6e-6 of the envelope below
    -2.09, module docstring); int inputs give float32."""
    x = np.linspace(-9, 9, 73)
    check(_airy_of, [x.astype(np.float32)], backend=backend, grad=False)
    check(_airy_of, [x], backend=backend, grad=False, rtol=0, atol=6e-6 * 0.57)
    check(_airy_of, [x[x > -2.09]], backend=backend, grad=False, rtol=1e-13, atol=0)
    g = lm.Graph()
    t = g.input("x", (4,), dtype=lm.int32)
    y = lm.special.airy_ai(t)
    assert y.dtype is lm.float32
    np.testing.assert_allclose(lm.compile(y, backend=backend)(x=np.array([-2, 0, 1, 3], np.int32)),
                               [0.22740742820168558, 0.3550280538878172, 0.1352924163128814, 0.006591139357460719],
                               rtol=1e-7)

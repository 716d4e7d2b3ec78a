"""torch.special's incomplete gamma functions, Hurwitz's zeta, orthogonal polynomials and Bessel
functions (J, Y, I, K, scaled K, spherical j0): values over wide grids against mpmath (float64) and
torch (whose own float64 errors are named where they exceed luminal's); float32 and 16-bit within an ulp
of the exact value, as luminal computes in float64 and rounds once; the defined values at the edges
written out; gradients against torch where it has them, else against the analytic derivative (mpmath)
and a central difference.

Tolerances, in float64 (measured maxima in brackets; ``eps`` = 2**-52):
- gammainc, gammaincc: relative ``2e-14 (1 + |x - a|)`` [1.2e-14 (1 + |x - a|)]: ``x**a exp(-x)``
  has the condition ``|x - a|``, so no float64 evaluation does better where P or Q is tiny.
- bessel_j0/j1: relative ``2e-15`` below 5 [1.1e-15] (also at their first zeros); above 5, absolute
  ``2e-15`` times the envelope ``sqrt(2 / (pi x))`` [1.1e-15]: near the zeros cos(x - pi/4) cancels.
- bessel_y0/y1: absolute ``8e-15 max(1, |f|)`` below 5 (their zeros 0.894 and 2.197 included),
  envelope-relative as J above.
- zeta: relative ``2e-15 (1 + x |log q|)`` [3.3e-16 (1 + x |log q|)], the condition of ``q**-x``;
  for negative q and odd x, where the terms cancel, absolute near zeta(x, frac(-q))'s rounding.
- the orthogonal polynomials: ``2e-15 n max(1, |P|)`` [1.3e-15 n] against the polynomial, the
  recurrence's rounding growing linearly in the degree n.
- modified_bessel_k0/k1: relative ``1e-15 (2 + x)`` (exp(-x)'s condition x) [4.5e-14 at x = 500];
  the scaled ones relative ``1e-15`` [4.5e-16].
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

# The accuracy sweeps (dense grids against mpmath, ulp counts in every dtype) run in the full tier, as the
# audits do: the quick tier keeps the comparisons with torch, the special values and the gradients.
ACCURACY_SWEEP = pytest.mark.slow

mp.dps = 30
inf, nan = math.inf, math.nan
F64, F32 = lm.float64, lm.float32


def _run(fn, arrays, dtype=F64, backend="cpu", grad=False):
    """``fn`` of graph inputs holding ``arrays`` (one program); with ``grad`` also the gradient of the
    sum by each input."""
    g = lm.Graph()
    xs = [g.input(f"x{i}", a.shape, dtype=dtype) for i, a in enumerate(arrays)]
    y = fn(*xs)
    outs = [y, *train.grad(y.sum(), xs)] if grad else [y]
    feed = {f"x{i}": lm.core.dtype.to_storage(a, dtype) for i, a in enumerate(arrays)}
    res = lm.compile(outs, backend=backend)(**feed)
    return res if grad else res[0] if isinstance(res, (list, tuple)) else res


def _ulps(got, want, d):
    """|got - want| in units of the last place of ``want`` rounded to the dtype ``d``."""
    wd = lm.core.dtype.to_storage(np.asarray(want), d).astype(np.float64)
    spacing = {F32: lambda v: np.spacing(np.abs(v).astype(np.float32)).astype(np.float64),
               lm.float16: lambda v: np.spacing(np.abs(v).astype(np.float16)).astype(np.float64),
               lm.bfloat16: lambda v: 2.0 ** (np.floor(np.log2(np.maximum(np.abs(v), 2.0**-133))) - 7)}[d]
    return np.abs(np.asarray(got, np.float64) - want) / spacing(wd)


# gammainc / gammaincc -------------------------------------------------------------------------------
def _igamma_grid():
    """(a, x) over a from 1e-300 to 1e8, x from 1e-5 a to 20 a and around a (+-10 sqrt(a)), and the
    switches between the methods (x = 1.1, x = a, a = 20, |x - a| = 0.3 a, a = 10)."""
    rng = np.random.default_rng(1)
    avals = np.concatenate([[1e-300, 1e-10, 1e-3, 0.1, 0.5, 1, 1.5, 2, 5, 9.9, 10, 10.1, 19.9, 20, 20.1, 30, 50,
                             100, 199, 201, 1e3, 1e4, 1e6, 1e8], 10 ** rng.uniform(-3, 5, 20)])
    A, X = [], []
    for a in avals:
        xs = [a * r for r in (1e-5, 0.01, 0.3, 0.5, 0.69, 0.71, 0.9, 0.99, 1.0, 1.01, 1.1, 1.29, 1.31, 1.5, 2, 5, 20)]
        xs += [1e-5, 0.3, 0.5, 0.51, 1.0, 1.09, 1.1, 1.11, 3, 50, 700]
        xs += [a + k * math.sqrt(a) for k in (-10, -5, -1, 0.5, 1, 5, 10) if a + k * math.sqrt(a) > 0]
        A += [a] * len(xs)
        X += xs
    return np.array(A), np.array(X)


def _torch64(name, *arrays):
    return getattr(torch.special, name)(*(torch.tensor(np.asarray(a, np.float64)) for a in arrays)).numpy()


@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
def test_igamma_float64_against_torch(name, backend):
    """The whole grid (a <= 1e5) in one program, against torch's float64 (Cephes' igam.c) to 1e-6
    relative: torch's own error reaches 7e-10 around a = 20..30, x near a, and 1.2e-7 in gammaincc for
    a = 1e-10 (mpmath agrees with luminal there, test_igamma_float64_against_mpmath), 4e-6 at
    a = 1e6, x = 0.995 a (its series stops after 2000 terms: excluded here)."""
    A, X = _igamma_grid()
    keep = A <= 1e5
    A, X = A[keep], X[keep]
    got = _run(getattr(lm.special, name), [A, X], backend=backend)
    want = _torch64(name, A, X)
    small = np.abs(want) < 1e-290  # (torch and luminal: subnormal or 0 alike)
    np.testing.assert_allclose(got[~small], want[~small], rtol=1e-6, atol=0)
    assert np.all(np.abs(got[small]) < 1e-280)


IGAMMA_MP = [(a, a * r) for a in (1e-10, 1e-3, 0.5, 1.0, 2.5, 9.9, 10.1, 19.9, 20.1, 25.0, 50.0, 199.0, 1e3, 1e4)
             for r in (1e-5, 0.3, 0.69, 0.71, 0.99, 1.0, 1.02, 1.29, 1.31, 2.0, 5.0)]
IGAMMA_MP += [(a, x) for a in (1e-300, 1e-10, 1e-3, 0.3, 1.0, 1.5) for x in (1e-5, 0.3, 0.5, 0.51, 1.09, 1.11, 3.0)]
IGAMMA_MP += [(1e6, 995000.0), (1e6, 1e6), (1e5, 99500.0), (1e6, 1.3e6), (1e6, 6.9e5)]


def _igamma_mp(a, x):
    """(P, Q) in mpmath: the power series for P (x < a or x < 40; Q = 1 - P unless P is near 1), else
    Legendre's continued fraction for Q (Lentz's method), to 1e-32."""
    a, x = mp.mpf(a), mp.mpf(x)
    eps = mp.mpf(10) ** -32
    if x < a or x < 40:
        fac, s, c, n = mp.exp(a * mp.log(x) - x - mp.loggamma(a + 1)), mp.mpf(1), mp.mpf(1), 0
        while c > s * eps:
            n += 1
            c *= x / (a + n)
            s += c
        p = fac * s
        return p, 1 - p if p < 0.9 else mp.gammainc(a, x, mp.inf, regularized=True)
    tiny = mp.mpf(10) ** -300
    b, c, d, i = x + 1 - a, 1 / tiny, 1 / (x + 1 - a), 0
    h = d
    while True:
        i += 1
        an, b = -i * (i - a), b + 2
        d, c = 1 / (an * d + b), b + an / c
        h *= d * c
        if abs(d * c - 1) < eps:
            q = mp.exp(a * mp.log(x) - x - mp.loggamma(a)) * h
            return 1 - q, q


@ACCURACY_SWEEP
def test_igamma_float64_against_mpmath():
    A, X = (np.array(v) for v in zip(*IGAMMA_MP))
    want = np.array([[float(v) for v in _igamma_mp(a, x)] for a, x in IGAMMA_MP])
    for col, fn in enumerate((lm.special.gammainc, lm.special.gammaincc)):
        got, w = _run(fn, [A, X]), want[:, col]
        err = np.abs(got - w) / np.where(w == 0, 1.0, np.abs(w))  # (0 where both underflow)
        assert (err / (1 + np.abs(X - A))).max() < 2e-14, fn.__name__


@ACCURACY_SWEEP
@pytest.mark.parametrize("dtype", [F32, lm.float16, lm.bfloat16])
def test_igamma_low_precision_within_an_ulp(dtype):
    """Inputs exact in ``dtype``: luminal's result is the float64 value rounded once, so within an ulp
    (half an ulp, plus float64's error) of torch's float64 on the same inputs."""
    rng = np.random.default_rng(2)
    n = 2000 if dtype is F32 else 400
    hi = 30.0 if dtype is lm.float16 else 1e4
    A = lm.core.dtype.to_storage(10 ** rng.uniform(-2, math.log10(hi), n), dtype).astype(np.float64)
    X = lm.core.dtype.to_storage(A * 10 ** rng.uniform(-1, 0.5, n), dtype).astype(np.float64)
    for name in ("gammainc", "gammaincc"):
        want = _torch64(name, A, X)
        got = _run(getattr(lm.special, name), [A, X], dtype=dtype)
        tiny = np.abs(want) < {F32: 1e-37, lm.float16: 6e-5, lm.bfloat16: 1e-37}[dtype]  # (subnormal results)
        assert _ulps(got, want, dtype)[~tiny].max() <= 1.0, name


def _sp(t):
    return torch.special if isinstance(t, torch.Tensor) else lm.special


@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
def test_igamma_against_torch_float32_and_x_gradient(name, backend):
    """torch's own float32 values (moderate arguments, where its float32 kernel is accurate; numbers
    for either operand too), and the gradient by x, ``+-x**(a-1) exp(-x) / gamma(a)``, against torch's
    autograd (float64)."""
    a = np.array([0.3, 1.0, 2.5, 7.0, 25.0, 60.0], np.float32)
    x = np.array([0.2, 1.5, 2.0, 9.0, 24.0, 75.0], np.float32)
    check(lambda s, t: getattr(_sp(s), name)(s, t), [a, x], backend=backend, grad=False)
    check(lambda t: getattr(_sp(t), name)(2.5, t), [x], backend=backend, grad=False,
          torch_op=lambda t: getattr(torch.special, name)(torch.full_like(t, 2.5), t))
    check(lambda t: getattr(_sp(t), name)(t, 3.0), [a], backend=backend, grad=False,
          torch_op=lambda t: getattr(torch.special, name)(t, torch.full_like(t, 3.0)))
    xt = torch.tensor(x.astype(np.float64), requires_grad=True)
    (want,) = torch.autograd.grad(getattr(torch.special, name)(torch.tensor(a.astype(np.float64)), xt).sum(), xt)
    g = lm.Graph()
    xg = g.input("x", x.shape, dtype=F64)
    got = lm.compile(train.grad(getattr(lm.special, name)(g.constant(a.astype(np.float64)), xg).sum(), xg),
                     backend=backend)(x=x.astype(np.float64))
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-12, atol=0)


def test_igamma_special_values_and_gradients():
    """The limits written out: P(a, 0) = 0, P(0, x > 0) = 1, P(inf, x) = 0, P(a, inf) = 1, NaN for
    negative arguments, P(0, 0), P(inf, inf) and NaN; Q = 1 - P there. The gradient by x at x = 0 is the
    limit of x**(a-1) exp(-x) / gamma(a): inf for a < 1, 1 for a = 1 (torch: NaN), 0 for a > 1 (the
    gradient by a is refused: test_refused_gradients_raise)."""
    A = np.array([1.0, 0.0, inf, 1.0, -1.0, 1.0, 0.0, inf, nan, 2.0, 0.5, 1.0, 3.0])
    X = np.array([0.0, 1.0, 1.0, inf, 1.0, -1.0, 0.0, inf, 1.0, nan, 0.0, 0.0, 0.0])
    p = [0.0, 1.0, 0.0, 1.0, nan, nan, nan, nan, nan, nan, 0.0, 0.0, 0.0]
    q = [1.0, 0.0, 1.0, 0.0, nan, nan, nan, nan, nan, nan, 1.0, 1.0, 1.0]
    for name, want, sgn in (("gammainc", p, 1.0), ("gammaincc", q, -1.0)):
        got, gx = _run(lambda x: getattr(lm.special, name)(x.graph.constant(A), x), [X], grad=True)
        np.testing.assert_array_equal(got, want, err_msg=name)
        np.testing.assert_array_equal(gx[-3:], [sgn * inf, sgn * 1.0, sgn * 0.0], err_msg=name)


@pytest.mark.parametrize("name", ["gammainc", "gammaincc", "zeta"])
def test_refused_gradients_raise(name):
    """torch has no derivative of gammainc/gammaincc by a (input) nor of zeta by x (input) and raises
    NotImplementedError in backward; luminal raises it when the backward graph is built (train.grad,
    compile_step, and the second derivative through zeta's gradient by q), naming the op and the
    argument, where it gave NaN before. A gradient by the other argument alone builds as before."""
    fn = getattr(lm.special, name)
    arg = "x" if name == "zeta" else "a"
    g = lm.Graph()
    first, second = g.input("first", (3,), dtype=F64), g.input("second", (3,), dtype=F64)
    y = fn(first, second).sum()
    with pytest.raises(NotImplementedError, match=rf"{name}: the gradient by input \({arg}, the first argument\)"):
        train.grad(y, [first, second])
    with pytest.raises(NotImplementedError, match=name):
        train.grad(fn(first.exp(), second).sum(), [first])  # (through another op too)
    (d,) = train.grad(y, [second])  # (the other argument's: no error)
    assert d.shape == (3,)
    p = lm.nn.Parameter(np.array([1.5, 2.0, 3.0]))
    with pytest.raises(NotImplementedError, match=name):
        train.compile_step(fn(g.state(p), second).sum(), train.SGD([p], lr=0.1))
    t = torch.tensor([1.5, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    with pytest.raises(NotImplementedError, match="derivative for .* is not implemented"):
        getattr(torch.special, name)(t, torch.tensor([2.0, 1.0, 0.5], dtype=torch.float64)).sum().backward()
    if name == "zeta":  # d/dq zeta(x, q) = -x zeta(x + 1, q): its derivative by x is refused in turn
        (dq,) = train.grad(y, [second])
        with pytest.raises(NotImplementedError, match="zeta"):
            train.grad(dq.sum(), [first])




# Bessel functions -----------------------------------------------------------------------------------
BESSEL_X = np.concatenate([np.linspace(1e-6, 5, 301), np.linspace(5, 30, 301), 10 ** np.linspace(1.4, 15, 150),
                           [1e-300, 2.404825557695773, 3.8317059702075125, 0.8935769662791675, 2.197141326031017,
                            4.999999, 5.000001, 24.9999, 25.0001, 1e300]])
JY = {"bessel_j0": lambda v: mp.besselj(0, v), "bessel_j1": lambda v: mp.besselj(1, v),
      "bessel_y0": lambda v: mp.bessely(0, v), "bessel_y1": lambda v: mp.bessely(1, v)}
K = {"modified_bessel_k0": lambda v: mp.besselk(0, v), "modified_bessel_k1": lambda v: mp.besselk(1, v),
     "scaled_modified_bessel_k0": lambda v: mp.besselk(0, v) * mp.exp(v),
     "scaled_modified_bessel_k1": lambda v: mp.besselk(1, v) * mp.exp(v)}


def _envelope(x):
    return np.sqrt(2 / (np.pi * x))


@ACCURACY_SWEEP
@pytest.mark.parametrize("name", sorted(JY))
def test_jy_float64_against_mpmath(name):
    """See the module docstring for the tolerances: relative below 5 for J (at its first zero too),
    absolute below 5 for Y, relative to the envelope above."""
    x = BESSEL_X
    got = _run(getattr(lm.special, name), [x])
    want = np.array([float(JY[name](mp.mpf(v))) for v in x])
    y = name.startswith("bessel_y")
    scale = np.where(x > 5, _envelope(x), np.maximum(np.abs(want), 1.0) if y else np.abs(want))
    assert (np.abs(got - want) / scale).max() < (8e-15 if y else 2e-15)


@ACCURACY_SWEEP
@pytest.mark.parametrize("name", sorted(K))
def test_k_float64_against_mpmath(name):
    x = BESSEL_X[::2][BESSEL_X[::2] < (1e15 if name.startswith("scaled") else 700)]
    got = _run(getattr(lm.special, name), [x])
    want = np.array([float(K[name](mp.mpf(v))) for v in x])
    tol = 1e-15 if name.startswith("scaled") else 1e-15 * (2 + x)
    np.testing.assert_array_less(np.abs(got - want), tol * np.abs(want))


def test_spherical_j0_and_i_against_mpmath():
    x = np.concatenate([-BESSEL_X[:700], BESSEL_X[:700], [1e-8, 0.4999, 0.5, math.pi, 1e10]])
    err = np.abs(_run(lm.special.spherical_bessel_j0, [x]) - [float(mp.sinc(mp.mpf(v))) for v in x])
    assert (err / np.maximum(np.abs([float(mp.sinc(mp.mpf(v))) for v in x]), 1 / np.abs(x))).max() < 4e-16
    x = np.linspace(-700, 700, 401)
    for name, fn in (("modified_bessel_i0", lambda v: mp.besseli(0, v)),
                     ("modified_bessel_i1", lambda v: mp.besseli(1, v))):
        np.testing.assert_allclose(_run(getattr(lm.special, name), [x]), [float(fn(mp.mpf(v))) for v in x], rtol=1e-13)


ALL_BESSEL = sorted(JY) + sorted(K) + ["spherical_bessel_j0", "modified_bessel_i0", "modified_bessel_i1"]


MP_OF = {**JY, **K, "spherical_bessel_j0": lambda v: mp.sinc(v), "modified_bessel_i0": lambda v: mp.besseli(0, v),
         "modified_bessel_i1": lambda v: mp.besseli(1, v)}


@ACCURACY_SWEEP
@pytest.mark.parametrize("name", ALL_BESSEL)
def test_bessel_float32_within_an_ulp(name, backend):
    """float32 (where it neither overflows nor underflows): within an ulp of the exact value (mpmath),
    as luminal computes in float64 and rounds once."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-30, 30, 200), 10 ** rng.uniform(-6, 1.9, 200)]).astype(np.float32)
    x = x if name in ("bessel_j0", "bessel_j1", "spherical_bessel_j0") or "_i" in name else np.abs(x)
    got = _run(getattr(lm.special, name), [x], dtype=F32, backend=backend)
    want = np.array([float(MP_OF[name](mp.mpf(float(v)))) for v in x])
    assert _ulps(got, want, F32).max() <= 1.0


@pytest.mark.parametrize("name", ALL_BESSEL)
def test_bessel_against_torch(name):
    """torch's float64 values, to its own accuracy: its J and Y (Cephes' float-precision coefficients
    above 5) are off by up to 2.4e-6 of the envelope (luminal: 1e-15, test_jy_float64_against_mpmath)."""
    x = np.linspace(0.01, 60, 600)
    x = np.concatenate([-x, x]) if name in ("bessel_j0", "bessel_j1", "spherical_bessel_j0") or "_i" in name else x
    got, want = _run(getattr(lm.special, name), [x]), _torch64(name, x)
    scale = np.maximum(np.abs(want), _envelope(np.abs(x)) if name.startswith("bessel") else 0)
    assert (np.abs(got - want) / scale).max() < (5e-6 if name.startswith("bessel") else 1e-13)


def test_bessel_special_values():
    """0, +-inf, NaN, negative arguments, written out: J0 even (1 at 0), J1 odd (keeping -0.0), 0 at
    +-inf; Y -inf at 0, NaN below 0; K +inf at 0, NaN below 0, 0 at +inf; sin(x)/x 1 at 0, 0 at +-inf."""
    x = np.array([0.0, -0.0, inf, -inf, nan, -1.0])
    want = {"bessel_j0": [1, 1, 0, 0, nan, None], "bessel_j1": [0, -0.0, 0, -0.0, nan, None],
            "bessel_y0": [-inf, -inf, 0, nan, nan, nan], "bessel_y1": [-inf, -inf, 0, nan, nan, nan],
            "modified_bessel_k0": [inf, inf, 0, nan, nan, nan], "modified_bessel_k1": [inf, inf, 0, nan, nan, nan],
            "scaled_modified_bessel_k0": [inf, inf, 0, nan, nan, nan],
            "scaled_modified_bessel_k1": [inf, inf, 0, nan, nan, nan], "spherical_bessel_j0": [1, 1, 0, 0, nan, None],
            "modified_bessel_i0": [1, 1, inf, inf, nan, None], "modified_bessel_i1": [0, -0.0, inf, -inf, nan, None]}
    for name, w in want.items():
        got = _run(getattr(lm.special, name), [x])
        w = np.array([got[5] if v is None else v for v in w], np.float64)
        np.testing.assert_array_equal(got, w, err_msg=name)
        np.testing.assert_array_equal(np.signbit(got[:4]), np.signbit(w[:4]), err_msg=name)


DERIV = {  # torch has no derivative for these: the analytic one (mpmath)
    "bessel_j0": lambda v: -mp.besselj(1, v), "bessel_j1": lambda v: mp.besselj(0, v) - mp.besselj(1, v) / v,
    "bessel_y0": lambda v: -mp.bessely(1, v), "bessel_y1": lambda v: mp.bessely(0, v) - mp.bessely(1, v) / v,
    "modified_bessel_k0": lambda v: -mp.besselk(1, v),
    "modified_bessel_k1": lambda v: -mp.besselk(0, v) - mp.besselk(1, v) / v,
    "scaled_modified_bessel_k0": lambda v: mp.exp(v) * (mp.besselk(0, v) - mp.besselk(1, v)),
    "scaled_modified_bessel_k1": lambda v: mp.exp(v) * (mp.besselk(1, v) - mp.besselk(0, v) - mp.besselk(1, v) / v),
    "spherical_bessel_j0": lambda v: (v * mp.cos(v) - mp.sin(v)) / v**2,
    "modified_bessel_i0": lambda v: mp.besseli(1, v),
    "modified_bessel_i1": lambda v: mp.besseli(0, v) - mp.besseli(1, v) / v,
}


@pytest.mark.parametrize("name", sorted(DERIV))
def test_bessel_gradients(name, backend):
    """torch gives these no gradient; luminal's is the derivative (checked against mpmath and a central
    difference), and at 0 its limit (J1' = I1' = 1/2, J0' = j0' = 0)."""
    x = np.array([0.3, 0.9, 2.2, 4.9, 5.1, 7.0, 24.0, 26.0, 80.0])
    _, grad = _run(getattr(lm.special, name), [x], backend=backend, grad=True)
    np.testing.assert_allclose(grad, [float(DERIV[name](mp.mpf(v))) for v in x], rtol=1e-12, atol=1e-15)
    h = 1e-6
    fd = (_run(getattr(lm.special, name), [x + h]) - _run(getattr(lm.special, name), [x - h])) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-9)
    if name in ("bessel_j0", "bessel_j1", "spherical_bessel_j0", "modified_bessel_i0", "modified_bessel_i1"):
        _, g0 = _run(getattr(lm.special, name), [np.array([0.0])], grad=True)
        assert g0[0] == (0.5 if name.endswith("1") else 0.0), name


# zeta -------------------------------------------------------------------------------------------------
def _zeta_mp(x, q, terms=1500):
    """Direct summation of ``terms`` terms and Euler-Maclaurin's first three tail terms (mpmath's own
    zeta is off by 3e-10 at zeta(20, 100))."""
    x, q = mp.mpf(x), mp.mpf(q)
    s = mp.fsum((q + k) ** -x for k in range(terms))
    w = q + terms
    return s + w ** (1 - x) / (x - 1) + w ** -x / 2 + x * w ** (-x - 1) / 12


def _zeta_grid():
    pts = [(x, q) for x in (1.0001, 1.1, 1.5, 2.0, 2.5, 3.0, 7.0, 10.5, 20.0, 50.0, 300.0)
           for q in (1e-300, 1e-10, 0.001, 0.3, 0.5, 1.0, 1.5, 8.9, 9.0, 10.0, 100.0, 1e5, 1e10)]
    pts += [(x, q) for x in (2.0, 3.0, 4.0, 5.0, 10.0) for q in (-0.5, -0.25, -1.5, -2.25, -7.9, -100.5)]
    return (np.array(v) for v in zip(*pts))


@ACCURACY_SWEEP
def test_zeta_float64_against_mpmath(backend):
    X, Q = _zeta_grid()
    mp.dps = 25
    want = np.array([float(_zeta_mp(x, q)) for x, q in zip(X, Q)])
    mp.dps = 30
    got = _run(lm.special.zeta, [X, Q], backend=backend)
    over = np.isinf(want)  # (q**-x past float64's range: inf alike)
    np.testing.assert_array_equal(got[over], want[over])
    got, want, X, Q = got[~over], want[~over], X[~over], Q[~over]
    err = np.abs(got - want) / np.where(want == 0, 1.0, np.abs(want))
    assert (err / (1 + X * np.abs(np.log(np.abs(Q))))).max() < 2e-15


def test_zeta_low_precision_and_torch(backend):
    """float32: within an ulp of float64 (torch has no 16-bit zeta); torch's float32 values and its
    gradient by q, ``-x zeta(x + 1, q)``."""
    rng = np.random.default_rng(4)
    X = (1 + 10 ** rng.uniform(-2, 1.5, 300)).astype(np.float32)
    Q = (10 ** rng.uniform(-2, 3, 300)).astype(np.float32)
    want = _run(lm.special.zeta, [X.astype(np.float64), Q.astype(np.float64)])
    got = _run(lm.special.zeta, [X, Q], dtype=F32, backend=backend)
    fin = np.abs(want) < 3e38
    assert _ulps(got[fin], want[fin], F32).max() <= 1.0
    x = np.array([1.5, 2.0, 3.0, 4.5, 7.0], np.float32)
    q = np.array([0.5, 1.0, 2.5, -0.5, 30.0], np.float32)
    check(lambda s, t: _sp(s).zeta(s, t), [x, q], backend=backend, grad=False)
    qt = torch.tensor(q.astype(np.float64) + np.array([0, 0, 0, 1.0, 0]), requires_grad=True)
    (gt,) = torch.autograd.grad(torch.special.zeta(torch.tensor(x.astype(np.float64)), qt).sum(), qt)
    xc = x.astype(np.float64)
    _, gq = _run(lambda q: lm.special.zeta(q.graph.constant(xc), q), [qt.detach().numpy()],
                 backend=backend, grad=True)
    np.testing.assert_allclose(gq, gt.numpy(), rtol=1e-12)  # (by x: refused, test_refused_gradients_raise)


def test_zeta_special_values():
    """x = 1: inf; x < 1: NaN; non-integer x with q < 0: NaN; the poles q = 0, -1, ...: +inf for even x,
    for odd x +inf at +0, -inf at -0, NaN at the negative integers (two different one-sided limits);
    zeta(x, inf) = 0; zeta(inf, q) = inf for 0 < q < 1, 1 at q = 1, 0 above; NaN at NaN."""
    X = np.array([1.0, 0.5, 2.5, 2.0, 2.0, 3.0, 3.0, 3.0, 2.0, inf, inf, inf, nan, 2.0, -inf])
    Q = np.array([1.0, 1.0, -0.5, 0.0, -1.0, 0.0, -0.0, -1.0, inf, 0.5, 1.0, 2.0, 1.0, nan, 1.0])
    want = [inf, nan, nan, inf, inf, inf, -inf, nan, 0.0, inf, 1.0, 0.0, nan, nan, nan]
    np.testing.assert_array_equal(_run(lm.special.zeta, [X, Q]), want)
    assert float(_run(lm.special.zeta, [np.array([2.0]), np.array([-0.5])])[0]) == pytest.approx(4 + np.pi**2 / 2)


# orthogonal polynomials -------------------------------------------------------------------------------
POLYS = [f"{s}chebyshev_polynomial_{k}" for s in ("", "shifted_") for k in "tuvw"] + [
    "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]
DEGREES = [-2, -0.5, 0, 1, 2, 2.7, 3, 7, 10, 25]  # (torch truncates n toward zero; below 0 the value is 0)
POLY_X = np.concatenate([np.linspace(-1.5, 1.5, 241), [-1.0, 1.0, 0.0, 0.5, -0.5, 3.0, -3.0, 10.0, -10.0]])


MP_STEPS = {  # the defining three-term recurrences: (P_1(y), P_(k+1) from k, y, P_(k-1), P_k)
    "chebyshev_polynomial_t": (lambda y: y, lambda k, y, p, q: 2 * y * q - p),
    "chebyshev_polynomial_u": (lambda y: 2 * y, lambda k, y, p, q: 2 * y * q - p),
    "chebyshev_polynomial_v": (lambda y: 2 * y - 1, lambda k, y, p, q: 2 * y * q - p),
    "chebyshev_polynomial_w": (lambda y: 2 * y + 1, lambda k, y, p, q: 2 * y * q - p),
    "hermite_polynomial_h": (lambda y: 2 * y, lambda k, y, p, q: 2 * y * q - 2 * k * p),
    "hermite_polynomial_he": (lambda y: y, lambda k, y, p, q: y * q - k * p),
    "laguerre_polynomial_l": (lambda y: 1 - y, lambda k, y, p, q: ((2 * k + 1 - y) * q - k * p) / (k + 1)),
    "legendre_polynomial_p": (lambda y: y, lambda k, y, p, q: ((2 * k + 1) * y * q - k * p) / (k + 1)),
}


def _mp_poly(name, n, x):
    """The polynomial at 30 digits (exact to float64: the recurrence's own rounding is 1e-28), of 2x - 1
    for the shifted ones."""
    n, y = int(n), mp.mpf(x)
    if n < 0:
        return mp.mpf(0)
    if name.startswith("shifted_"):
        name, y = name[len("shifted_"):], 2 * y - 1
    first, step = MP_STEPS[name]
    p, q = mp.mpf(1), first(y)
    for k in range(1, n):
        p, q = q, step(k, y, p, q)
    return p if n == 0 else q


def test_mp_poly_reference_known_values():
    """The reference recurrences against closed forms: T_n(cos t) = cos(n t), U_n(cos t) =
    sin((n+1) t) / sin(t), P_2 = (3x**2 - 1)/2, H_3 = 8x**3 - 12x, He_3 = x**3 - 3x, L_2 = (x**2 - 4x + 2)/2,
    V_n(cos t) = cos((n + 1/2) t) / cos(t/2), W_n(cos t) = sin((n + 1/2) t) / sin(t/2)."""
    t, x = mp.mpf("0.7"), mp.mpf("0.3")
    c = mp.cos(t)
    assert abs(_mp_poly("chebyshev_polynomial_t", 9, c) - mp.cos(9 * t)) < 1e-25
    assert abs(_mp_poly("chebyshev_polynomial_u", 9, c) - mp.sin(10 * t) / mp.sin(t)) < 1e-25
    assert abs(_mp_poly("chebyshev_polynomial_v", 9, c) - mp.cos(9.5 * t) / mp.cos(t / 2)) < 1e-25
    assert abs(_mp_poly("chebyshev_polynomial_w", 9, c) - mp.sin(9.5 * t) / mp.sin(t / 2)) < 1e-25
    assert abs(_mp_poly("legendre_polynomial_p", 2, x) - (3 * x**2 - 1) / 2) < 1e-25
    assert abs(_mp_poly("hermite_polynomial_h", 3, x) - (8 * x**3 - 12 * x)) < 1e-25
    assert abs(_mp_poly("hermite_polynomial_he", 3, x) - (x**3 - 3 * x)) < 1e-25
    assert abs(_mp_poly("laguerre_polynomial_l", 2, x) - (x**2 - 4 * x + 2) / 2) < 1e-25


@pytest.mark.parametrize("name", POLYS)
def test_polynomials_against_mpmath_and_torch(name, backend):
    """Every degree in one program per dtype: float64 within ``2e-15 n max(1, |P|)`` of the exact
    polynomial [measured 1.3e-15 n] (the recurrence's rounding grows linearly in n) and within
    ``1e-13 max(1, |P|)`` of torch's (whose trigonometric form for |x| < 1 and n > 6 has its own n ulps);
    float32 within an ulp of float64 where |P| > 1e-6 (near its zeros float32's ulp of a tiny value)."""
    fn = getattr(lm.special, name)
    x = POLY_X
    for n in DEGREES:
        got = _run(lambda t, n=n: fn(t, n), [x], backend=backend)
        want = np.array([float(_mp_poly(name, n, v)) for v in x])
        scale = np.maximum(1.0, np.abs(want))
        assert (np.abs(got - want) / scale).max() <= 2e-15 * max(int(n), 1), (name, n)
        tw = getattr(torch.special, name)(torch.tensor(x), n).numpy()
        assert (np.abs(got - tw) / scale).max() <= 1e-13, (name, n)
        got32 = _run(lambda t, n=n: fn(t, n), [x.astype(np.float32)], dtype=F32, backend=backend)
        want32 = np.array([float(_mp_poly(name, n, float(v))) for v in x.astype(np.float32)])
        keep = (np.abs(want32) > 1e-6) & (np.abs(want32) < 3e38)
        assert not keep.any() or _ulps(got32[keep], want32[keep], F32).max() <= 1.0, (name, n)


@pytest.mark.parametrize("name", POLYS)
def test_polynomial_edges_and_gradient(name):
    """n < 0: 0 (torch's), also at NaN; n = 0: 1 everywhere; past float64's range the leading term's
    signed infinity (torch's recurrence: NaN); NaN stays NaN for n >= 1. The gradient is the
    polynomial's derivative (torch has none): against a central difference."""
    fn = getattr(lm.special, name)
    x = np.array([nan, inf, -inf, 1e200, -1e200])
    np.testing.assert_array_equal(_run(lambda t: fn(t, -1), [x]), 0.0)
    np.testing.assert_array_equal(_run(lambda t: fn(t, 0), [x]), 1.0)
    lead = -1.0 if name == "laguerre_polynomial_l" else 1.0
    for n in (3, 4):
        want = [nan] + [lead ** n * s ** n * inf for s in (1, -1, 1, -1)]
        np.testing.assert_array_equal(_run(lambda t, n=n: fn(t, n), [x]), want, err_msg=f"{name} {n}")
    x0 = np.array([-1.2, -0.7, -0.1, 0.3, 0.9, 1.4])
    _, grad = _run(lambda t: fn(t, 6), [x0], grad=True)
    h = 1e-6
    fd = (_run(lambda t: fn(t, 6), [x0 + h]) - _run(lambda t: fn(t, 6), [x0 - h])) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-6)


def test_polynomial_errors():
    x = lm.Graph().input("x", (3,))
    with pytest.raises(TypeError, match="chebyshev_polynomial_t: n must be a number: the recurrence is unrolled"):
        lm.special.chebyshev_polynomial_t(x, x)
    with pytest.raises(ValueError, match="hermite_polynomial_h: degree n = 1025 is past 1024"):
        lm.special.hermite_polynomial_h(x, 1025)
    with pytest.raises(ValueError, match="legendre_polynomial_p: n must be a finite number, got nan"):
        lm.special.legendre_polynomial_p(x, nan)
    with pytest.raises(TypeError, match="laguerre_polynomial_l: n must be a finite number, got '3'"):
        lm.special.laguerre_polynomial_l(x, "3")
    with pytest.raises(TypeError, match="shifted_chebyshev_polynomial_w: input must be a GraphTensor"):
        lm.special.shifted_chebyshev_polynomial_w(np.zeros(3), 2)

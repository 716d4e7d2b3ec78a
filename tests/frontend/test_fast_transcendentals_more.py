"""float32 activations and powers made cheaper without losing accuracy (after test_fast_transcendentals.py):
softplus and logsigmoid as ``max(z, 0) + log1p(e**-|z|)`` in float64 with one exp2 and no log2
(``activations._log1p_unit``), mish as ``x n / (n + 2)``, ``n = e (e + 2)``, with one exp2, and a
half-integral Python exponent (``x ** 2.5``) as products of ``sqrt(|x|)`` with no exp2 or log2. Each is
within half an ulp (and a hair) of mpmath on dense grids (the old softplus and logsigmoid were 1.35
ulps off, mish 2.9); special values as defined (C99's pow), gradients as torch's. The graphs are
checked for the transcendental primitives they compute: float64's log2 and exp2 cost several times
exp's own time on the CPU."""

import math

import mpmath as mp
import numpy as np
import pytest
import torch

import luminal as lm
from luminal import train
from tests.frontend.test_fast_transcendentals import _nodes, _run, within_half_an_ulp
from tests.parity import check

F = lm.nn.functional


def _softplus(v):
    return mp.log1p(mp.exp(v))


def _times3(v):
    """``3 v`` rounded to float32, as softplus's ``beta * x`` (its rounding is the definition's, torch's too)."""
    return mp.mpf(float(np.float32(3 * float(v))))


ACCURACY = [  # (id, op, exact function, grid)
    ("softplus", F.softplus, _softplus, (-110.0, 30.0)),
    ("softplus_near0", F.softplus, _softplus, (-2.0, 2.0)),
    ("softplus_beta", lambda t: F.softplus(t, beta=2.0, threshold=10.0),
     lambda v: v if 2 * v > 10 else _softplus(2 * v) / 2, (-55.0, 15.0)),
    ("softplus_beta3", lambda t: F.softplus(t, beta=3.0), lambda v: v if 3 * v > 20 else _softplus(_times3(v)) / 3,
     (-35.0, 8.0)),
    ("logsigmoid", F.logsigmoid, lambda v: -_softplus(-v), (-30.0, 110.0)),
    ("mish", F.mish, lambda v: v * mp.tanh(_softplus(v)), (-110.0, 30.0)),
    ("mish_near0", F.mish, lambda v: v * mp.tanh(_softplus(v)), (-3.0, 3.0)),
    ("pow2.5", lambda t: t.abs() ** 2.5, lambda v: abs(v) ** mp.mpf(2.5), (-3e15, 3e15)),
    ("pow7.5", lambda t: t.abs() ** 7.5, lambda v: abs(v) ** mp.mpf(7.5), (-1.2e5, 1.2e5)),
    ("pow-1.5", lambda t: t.abs() ** -1.5, lambda v: abs(v) ** mp.mpf(-1.5) if v else mp.inf, (-1e25, 1e25)),
    ("pow-0.5", lambda t: t.abs() ** -0.5, lambda v: abs(v) ** mp.mpf(-0.5) if v else mp.inf, (-1e30, 1e30)),
]


@pytest.mark.parametrize("op,exact,span", [c[1:] for c in ACCURACY], ids=[c[0] for c in ACCURACY])
def test_float32_within_half_an_ulp(op, exact, span):
    within_half_an_ulp(op, exact, span)


def test_pow_half_integer_special_values():
    """C99's pow at the special bases (numpy's float64 power follows it), the result rounded to float32:
    NaN for a finite negative base, (-0) ** b as 0 ** b, (-inf) ** b as inf ** b, 1 ** b = 1."""
    a = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, -2.5, 1.0, 1e-45, 3e38, 2.0, 0.3, 7.0, -1e-45])
    for b in (2.5, -2.5, 1.5, -0.5, 7.5, 63.5, -64.5):
        got = _run(lambda t: t**b, a)
        with np.errstate(all="ignore"):
            want = np.power(a.astype(np.float64), b).astype(np.float32)
        np.testing.assert_array_equal(got, want, err_msg=f"b = {b}")
        finite = ~np.isnan(want)
        assert list(np.signbit(got[finite])) == [False] * int(finite.sum()), f"b = {b}: a negative result"


def test_softplus_mish_logsigmoid_special_values():
    inf, nan = math.inf, math.nan
    x = np.float32([inf, -inf, nan, 0.0, -0.0, 20.0, 21.0, -103.0, -200.0])
    sp = _run(F.softplus, x)
    np.testing.assert_array_equal(sp[:5], np.float32([inf, 0.0, nan, math.log(2), math.log(2)]))
    assert sp[6] == np.float32(21.0) and sp[8] == 0.0
    assert sp[7] == np.float32(2.0**-149)  # (e**-103: 1.3 times the smallest subnormal)
    ls = _run(F.logsigmoid, -x)
    np.testing.assert_array_equal(ls, -sp)
    mi = _run(F.mish, x)
    np.testing.assert_array_equal(mi[[0, 3, 4, 6, 8]], np.float32([inf, 0.0, -0.0, 21.0, -0.0]))
    assert np.isnan(mi[1]) and np.isnan(mi[2])  # (-inf * tanh(0), as x * tanh(softplus(x)))
    assert list(np.signbit(mi[[3, 4, 8]])) == [False, True, True]


ACTIVATIONS = {"softplus": F.softplus, "softplus_beta": lambda t: F.softplus(t, beta=0.5, threshold=3.0),
               "logsigmoid": F.logsigmoid, "mish": F.mish}


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_gradients_match_torch(name):
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-25, 25, 300), [0.0, -0.0, 1e-6, -1e-6, 19.99, 20.01, -40.0, 6.0]])
    fn = ACTIVATIONS[name]
    tf = {"softplus": torch.nn.functional.softplus, "logsigmoid": torch.nn.functional.logsigmoid,
          "mish": torch.nn.functional.mish,
          "softplus_beta": lambda t: torch.nn.functional.softplus(t, beta=0.5, threshold=3.0)}[name]
    check(fn, [x.astype(np.float32)], torch_op=tf, backend="cpu")
    check(fn, [x.astype(np.float16)], torch_op=tf, backend="cpu")


@pytest.mark.parametrize("b", [2.5, -1.5, 0.5 - 3, 7.5])
def test_pow_half_integer_gradients_match_torch(b):
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(0.01, 20, 200), [1.0, 3e-3, 50.0]]).astype(np.float32)
    check(lambda t: t**b, [x], torch_op=lambda t: t**b, backend="cpu")
    check(lambda t: t**b, [x.astype(np.float16)], torch_op=lambda t: t**b, backend="cpu")
    # a zero base: 0 for b > 1 (torch's b * 0**(b-1)); kept 0 for b < 1 as _float_pow's (torch's +-inf)
    g = lm.Graph()
    t = g.input("x", (3,))
    (d,) = train.grad((t**b).sum(), [t])
    got = lm.compile(d, backend="cpu")(x=np.float32([0.0, -0.0, -2.0]))
    np.testing.assert_array_equal(got[:2], [0.0, 0.0])
    assert np.isnan(got[2])


def test_second_derivatives_match_torch():
    x = np.linspace(-6, 6, 121).astype(np.float32)
    ops = {"softplus": (F.softplus, torch.nn.functional.softplus), "mish": (F.mish, torch.nn.functional.mish),
           "logsigmoid": (F.logsigmoid, torch.nn.functional.logsigmoid),
           "pow2.5": (lambda t: t.abs() ** 2.5, lambda t: t.abs() ** 2.5)}
    for name, (fn, tf) in ops.items():
        g = lm.Graph()
        t = g.input("x", x.shape)
        (d1,) = train.grad(fn(t).sum(), [t])
        (d2,) = train.grad(d1.sum(), [t])
        got = lm.compile(d2, backend="cpu")(x=x)
        xt = torch.tensor(x, requires_grad=True)
        (g1,) = torch.autograd.grad(tf(xt).sum(), xt, create_graph=True)
        (g2,) = torch.autograd.grad(g1.sum(), xt)
        np.testing.assert_allclose(got, g2.numpy(), rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("name,fn,exp2,log2", [
    ("softplus", F.softplus, 1, 0), ("logsigmoid", F.logsigmoid, 1, 0), ("mish", F.mish, 1, 0),
    ("pow2.5", lambda t: t**2.5, 0, 0), ("pow-1.5", lambda t: t**-1.5, 0, 0)])
def test_transcendentals_computed(name, fn, exp2, log2):
    """The forward graphs' exp2 and log2 primitives (softplus took an exp2 and a log2, mish two exp2s
    and a log2, x ** 2.5 float64's exp2 and log2)."""
    g = lm.Graph()
    out = fn(g.input("x", (8,)))
    assert (_nodes(out, "Exp2"), _nodes(out, "Log2")) == (exp2, log2)


@pytest.mark.skipif(np.finfo(np.longdouble).nmant < 63, reason="needs an 80-bit long double reference")
def test_float64_exp2_error_as_horners():
    """The CPU target's float64 Exp2 sums its polynomial's tail by Estrin's scheme (codegen/llvm.py
    ``_estrin``, shorter chains) and its first terms in Horner's order, which keeps the largest error
    where Horner's alone had it (0.616 ulp on these points; Estrin's all the way: 0.670). Against exp2
    in x86's 80-bit long double (a reference 2**-11 ulp close)."""
    from tests.codegen.test_transcendentals import F64, run

    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-1, 1, 300000), rng.uniform(-1020, 1020, 300000),
                        rng.uniform(-0.5, 0.5, 200000) * 2.0 ** -rng.integers(0, 40, 200000)])
    got = run("Exp2", F64, x).astype(np.longdouble)
    want = np.exp2(x.astype(np.longdouble))
    spacing = np.spacing(want.astype(np.float64)).astype(np.longdouble)
    assert float(np.max(np.abs(got - want) / spacing)) <= 0.62


def _f32_ulps(got: np.ndarray, want: np.ndarray) -> float:
    """The largest |got - want| in float32 ulps at ``want`` (float64), over normal float32 magnitudes."""
    ok = np.isfinite(want) & (np.abs(want) >= 2.0**-126)
    spacing = np.spacing(np.abs(want[ok]).astype(np.float32)).astype(np.float64)
    return float(np.max(np.abs(got[ok].astype(np.float64) - want[ok]) / spacing))


def test_float32_inverse_trig_within_half_an_ulp():
    """float32 atan, asin, acos and atan2 take 8 terms of atan's series in float64 (fdlibm's 11 for a
    float64 result): within half an ulp (and a hair) of float64's numpy on random bit patterns and
    dense [-1, 1]."""
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    bits = bits[np.isfinite(bits)]
    tiny = rng.uniform(-1, 1, 50_000) * 2.0 ** -rng.integers(0, 60, 50_000)
    unit = np.concatenate([np.linspace(-1, 1, 100_001), tiny]).astype(np.float32)
    for op, x, ref in (("atan", bits, np.arctan), ("asin", unit, np.arcsin), ("acos", unit, np.arccos)):
        assert _f32_ulps(_run(lambda t: getattr(t, op)(), x), ref(x.astype(np.float64))) <= 0.501, op
    other = rng.permutation(bits)
    g = lm.Graph()
    y, x = g.input("y", bits.shape), g.input("x", bits.shape)
    got = np.asarray(lm.compile(lm.atan2(y, x), backend="cpu")(y=bits, x=other))
    assert _f32_ulps(got, np.arctan2(bits.astype(np.float64), other.astype(np.float64))) <= 0.501

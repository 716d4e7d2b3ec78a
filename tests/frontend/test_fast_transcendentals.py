"""float32 transcendentals made cheaper without losing accuracy: expm1, sinh and cosh take one
``exp2(x log2(e))`` in float64 (``elementwise._exp_narrow``) instead of float64's exact reduction and
a long series; log1p one log of ``1 + x`` for both of its sides. Their values stay within half an ulp
(and a hair: a float64 result rounded to float32) of mpmath's on dense grids, their special values and
gradients as torch's. The graphs are checked for the number of exp2/log2 primitives they compute:
each extra one cost several times exp's own time on the CPU."""

import math

import mpmath as mp
import numpy as np
import pytest
import torch

import luminal as lm
from luminal import train
from tests.parity import check

F32_MAX = float(np.finfo(np.float32).max)


def _grid(lo: float, hi: float, n: int = 20001) -> np.ndarray:
    """A linear grid over [lo, hi] and geometric ones towards 0 on each side (tiny magnitudes)."""
    parts = [np.linspace(lo, hi, n)]
    if hi > 0:
        parts.append(np.geomspace(1e-30, hi, 4000))
    if lo < 0:
        parts.append(-np.geomspace(1e-30, -lo, 4000))
    return np.unique(np.concatenate(parts).astype(np.float32))


def _run(fn, x: np.ndarray, dtype=lm.float32, backend: str = "cpu") -> np.ndarray:
    g = lm.Graph()
    t = g.input("x", x.shape, dtype=dtype)
    return np.asarray(lm.compile(fn(t), backend=backend)(x=x))


def _max_ulps(got: np.ndarray, exact: list) -> float:
    """The largest |got - exact| in float32 ulps at the exact value, over the exact values that are
    finite nonzero float32 magnitudes."""
    worst = 0.0
    for v, e in zip(got, exact):
        if e == 0 or not abs(e) < F32_MAX:
            continue
        spacing = float(np.spacing(np.float32(abs(float(e)))))
        worst = max(worst, float(abs(mp.mpf(float(v)) - e)) / spacing)
    return worst


def _nodes(t, op: str) -> int:
    seen, count, todo = set(), 0, [t.node]
    while todo:
        n = todo.pop()
        if n.id in seen:
            continue
        seen.add(n.id)
        count += n.op == op
        todo.extend(s for s, _ in n.srcs)
    return count


ACCURACY = [  # (op, exact function, grid)
    (lambda t: t.expm1(), mp.expm1, (-104.0, 89.0)),
    (lambda t: t.expm1(), mp.expm1, (-1.0, 1.0)),
    (lambda t: t.log1p(), mp.log1p, (-0.99999, 60.0)),
    (lambda t: t.log1p(), mp.log1p, (-0.6, 0.6)),
    (lambda t: t.sinh(), mp.sinh, (-89.4, 89.4)),
    (lambda t: t.sinh(), mp.sinh, (-1.0, 1.0)),
    (lambda t: t.cosh(), mp.cosh, (-89.4, 89.4)),
]


@pytest.mark.parametrize("op,exact,span", ACCURACY, ids=["expm1", "expm1_near0", "log1p", "log1p_near0",
                                                          "sinh", "sinh_near0", "cosh"])
def test_float32_within_half_an_ulp(op, exact, span):
    within_half_an_ulp(op, exact, span)


def within_half_an_ulp(op, exact, span) -> None:
    """``op`` on a dense float32 grid over ``span`` is within 0.501 ulp of ``exact`` (mpmath, 30 digits)."""
    x = _grid(*span)
    got = _run(op, x)
    with mp.workdps(30):
        want = [exact(mp.mpf(float(v))) for v in x]
        assert _max_ulps(got, want) <= 0.501


def test_special_values():
    """The defined values at the ends, the infinities, NaN and signed zeros (not torch's own outputs)."""
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 90.0, -104.0, 1e-30, -1e-30], np.float32)
    inf, nan = math.inf, math.nan
    expm1 = _run(lambda t: t.expm1(), x)
    np.testing.assert_array_equal(expm1, np.float32([inf, -1.0, nan, 0.0, -0.0, inf, -1.0, 1e-30, -1e-30]))
    assert np.signbit(expm1[4]) and not np.signbit(expm1[3])
    sinh = _run(lambda t: t.sinh(), x)
    np.testing.assert_array_equal(sinh, np.float32([inf, -inf, nan, 0.0, -0.0, inf, -inf, 1e-30, -1e-30]))
    assert np.signbit(sinh[4]) and not np.signbit(sinh[3])
    cosh = _run(lambda t: t.cosh(), x)
    np.testing.assert_array_equal(cosh, np.float32([inf, inf, nan, 1.0, 1.0, inf, inf, 1.0, 1.0]))
    y = np.array([np.inf, -1.0, -1.5, -np.inf, np.nan, 0.0, -0.0, 1e-30, -1e-30, F32_MAX], np.float32)
    log1p = _run(lambda t: t.log1p(), y)
    np.testing.assert_array_equal(log1p[:9], np.float32([inf, -inf, nan, nan, nan, 0.0, -0.0, 1e-30, -1e-30]))
    assert np.signbit(log1p[6]) and not np.signbit(log1p[5])
    assert log1p[9] == np.float32(math.log(F32_MAX))  # (log of the largest float32: 88.72284)


def test_float32_overflow_edges():
    """sinh and cosh stay finite up to float32's last finite result and overflow just past it; expm1
    likewise (float64's range holds the intermediate values)."""
    edge = np.float32(89.41598)  # sinh, cosh of it: 3.4027e38 < float32's max; of the next float: above
    x = np.array([edge, np.nextafter(edge, np.float32(100)), -edge], np.float32)
    for op, exact in ((lambda t: t.sinh(), mp.sinh), (lambda t: t.cosh(), mp.cosh)):
        got = _run(op, x)
        want = [exact(mp.mpf(float(v))) for v in x]
        for v, w in zip(got, want):
            assert v == np.float32(float(w)) or (abs(w) > F32_MAX * (1 + 2.0**-25) and np.isinf(v))
    e = np.float32(88.72283)  # expm1(88.72283) = 3.4028e38, the next float's above float32's max
    got = _run(lambda t: t.expm1(), np.array([e, np.nextafter(e, np.float32(100))], np.float32))
    assert np.isfinite(got[0]) and np.isinf(got[1])


@pytest.mark.parametrize("name", ["expm1", "log1p", "sinh", "cosh"])
def test_gradients_match_torch(name):
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-6, 6, 300), [0.0, -0.0, 1e-6, -1e-6, 2.0**-10, -(2.0**-10), 0.49, -0.51]])
    if name == "log1p":
        x = np.abs(x) * 3 - 0.9
    x = x.astype(np.float32)
    check(lambda t: getattr(t, name)(), [x], backend="cpu")
    check(lambda t: getattr(t, name)(), [x.astype(np.float16)], backend="cpu")


def test_second_derivatives_match_torch():
    x = np.linspace(-3, 3, 61).astype(np.float32)
    for name in ("expm1", "sinh", "cosh"):
        g = lm.Graph()
        t = g.input("x", x.shape)
        (d1,) = train.grad(getattr(t, name)().sum(), [t])
        (d2,) = train.grad(d1.sum(), [t])
        got = lm.compile(d2, backend="cpu")(x=x)
        xt = torch.tensor(x, requires_grad=True)
        (g1,) = torch.autograd.grad(getattr(xt, name)().sum(), xt, create_graph=True)
        (g2,) = torch.autograd.grad(g1.sum(), xt)
        np.testing.assert_allclose(got, g2.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,op,count", [("expm1", "Exp2", 1), ("sinh", "Exp2", 1), ("cosh", "Exp2", 1),
                                           ("log1p", "Log2", 1)])
def test_one_transcendental_each(name, op, count):
    """float32 expm1, sinh and cosh compute one exp2; log1p one log2 (each side had its own, and
    float64's exp two more)."""
    g = lm.Graph()
    t = g.input("x", (8,))
    assert _nodes(getattr(t, name)(), op) == count


# Sin of a float: inline in the CPU target (codegen/llvm.py ``_sin_f32``) ----------------------------------

def _sin_ulps(x: np.ndarray) -> float:
    """The largest error of the CPU target's float32 Sin over ``x`` (finite) in float32 ulps of float64's
    sin (within an ulp of float64: far below float32's)."""
    from tests.codegen.test_transcendentals import F32, run

    got = run("Sin", F32, x).astype(np.float64)
    want = np.sin(x.astype(np.float64))
    spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    return float(np.max(np.abs(got - want) / np.maximum(spacing, 2.0**-149)))


def test_sin_float32_within_half_an_ulp():
    """Dense grids near 0 and over a few turns, random bit patterns (every exponent: the reduction's
    table), and the float32 values nearest multiples of pi/2 up to 2**30, where the reduced argument is
    smallest."""
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, 400_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    k = np.arange(1, 2**15, dtype=np.float64)
    near = np.concatenate([k * (np.pi / 2), np.geomspace(1, 2**30, 20000).round() * (np.pi / 2)]).astype(np.float32)
    near = np.concatenate([near, np.nextafter(near, np.float32(np.inf)), np.nextafter(near, np.float32(0))])
    x = np.concatenate([np.linspace(-20, 20, 400_001), np.geomspace(1e-38, 1, 20000), bits[np.isfinite(bits)], near,
                        [F32_MAX, -F32_MAX, 2.0**-149, 1.0e-45]]).astype(np.float32)
    assert _sin_ulps(x) <= 0.501


def test_sin_float32_against_mpmath_at_large_arguments():
    """Huge arguments reduced exactly: mpmath's sine of the float32 value itself."""
    x = np.float32([F32_MAX, 1e38, 3.3e37, 2.0**100, 1e30, 123456789.0, 1e10, 8.0e8, 2.0**24 + 2, 1e5])
    from tests.codegen.test_transcendentals import F32, run

    got = run("Sin", F32, np.concatenate([x, -x]))
    with mp.workdps(60):
        want = [mp.sin(mp.mpf(float(v))) for v in np.concatenate([x, -x])]
    assert _max_ulps(got, want) <= 0.501


def test_sin_special_values_and_half_types():
    """NaN at +-inf and NaN, the sign of zero kept; float16 and bfloat16 (computed in float32, rounded)
    within an ulp of float64's sine rounded the same way, every bit pattern."""
    from tests.codegen.test_transcendentals import BF16, F16, F32, check, run, wide

    got = run("Sin", F32, np.float32([np.inf, -np.inf, np.nan, 0.0, -0.0, 2.0**-149, -(2.0**-149)]))
    assert np.isnan(got[:3]).all()
    np.testing.assert_array_equal(got[3:], np.float32([0.0, -0.0, 2.0**-149, -(2.0**-149)]))
    assert list(np.signbit(got[3:])) == [False, True, False, True]
    u = np.arange(2**16, dtype=np.uint32)
    for d in (F16, BF16):
        x = u.astype(np.uint16).view(np.float16) if d is F16 else (u << 16).view(np.float32)
        check(run("Sin", d, x), wide(np.sin, x, d), d)


def test_sin_vector_body_and_remainder_agree():
    from tests.codegen.test_transcendentals import F32, run

    x = np.random.default_rng(4).uniform(-1e4, 1e4, 1001).astype(np.float32)
    full = run("Sin", F32, x)
    for n in [*range(20), 31, 33, 127, 1001]:
        assert np.array_equal(run("Sin", F32, x[:n].copy()).view(np.uint32), full[:n].view(np.uint32)), n


def test_sin_float32_is_vectorised_without_calls():
    """No libm sinf per element (``llvm.sin.f32``, which LLVM scalarises: 12 times exp's time)."""
    import re

    from luminal.codegen import llvm
    from tests.codegen.test_transcendentals import F32, kernel

    text = llvm.optimised_ir([kernel("Sin", F32)], distinct=True)
    assert re.search(r"<\d+ x (float|double)>", text)
    called = set(re.findall(r"call [^\n]*@([\w.]+)\(", text))
    assert all(c.startswith("llvm.") and not c.startswith("llvm.sin") for c in called), called


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sin_cos_values_and_gradients_match_torch(name):
    x = np.concatenate([np.linspace(-30, 30, 601), [0.0, -0.0, 1e4, -3e5, 1.5707964]]).astype(np.float32)
    check(lambda t: getattr(t, name)(), [x], backend="cpu")
    check(lambda t: getattr(t, name)(), [np.linspace(-8, 8, 161).astype(np.float16)], backend="cpu")


# tan of float32: an exact reduction in the graph, no libm sine ---------------------------------------------

def _tan_ulps(x: np.ndarray) -> float:
    got = _run(lambda t: t.tan(), x).astype(np.float64)
    want = np.tan(x.astype(np.float64))  # (within an ulp of float64: far below float32's)
    w32 = np.abs(want).astype(np.float32)
    ok = np.isfinite(w32) & (w32 > 0)
    return float(np.max(np.abs(got - want)[ok] / np.spacing(w32[ok]).astype(np.float64)))


def test_tan_float32_within_half_an_ulp():
    """Dense grids, random bit patterns (every exponent, up to float32's largest) and the floats on
    either side of the odd multiples of pi/2 (the poles) up to 2**40."""
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2**32, 300_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    k = np.arange(1, 2**14, dtype=np.float64)
    poles = np.concatenate([(2 * k - 1) * (np.pi / 2), np.geomspace(1, 2**40, 20000).round() * np.pi / 2])
    poles = poles.astype(np.float32)
    x = np.concatenate([np.linspace(-30, 30, 300_001), np.geomspace(1e-38, 1, 10000), bits[np.isfinite(bits)],
                        poles, np.nextafter(poles, np.float32(np.inf)), np.nextafter(poles, np.float32(0)),
                        [F32_MAX, -F32_MAX, 2.0**20, 2.0**20 + 0.125]]).astype(np.float32)
    assert _tan_ulps(x) <= 0.501


def test_tan_special_values_and_shapes():
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-30, -1e-30], np.float32)
    got = _run(lambda t: t.tan(), x)
    assert np.isnan(got[:3]).all()
    np.testing.assert_array_equal(got[3:], np.float32([0.0, -0.0, 1e-30, -1e-30]))
    assert list(np.signbit(got[3:])) == [False, True, False, True]
    assert _run(lambda t: t.tan(), np.float32(0.5)).shape == ()
    cube = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_allclose(_run(lambda t: t.tan(), cube), np.tan(cube.astype(np.float64)), rtol=1e-6)
    assert _run(lambda t: t.tan(), np.zeros((0, 3), np.float32)).shape == (0, 3)


def test_tan_gradients_match_torch():
    x = np.concatenate([np.linspace(-1.5, 1.5, 301), [0.0, -0.0, 10.0, -1e4]]).astype(np.float32)
    check(lambda t: t.tan(), [x], backend="cpu")
    check(lambda t: t.tan(), [np.linspace(-1.4, 1.4, 141).astype(np.float16)], backend="cpu")


def test_tan_float32_calls_no_libm_sine():
    """float32 tan's kernels are vectorised arithmetic: four float64 libm sines per element (each a
    scalar call) took 80 times exp's time."""
    import re

    from luminal.codegen import llvm

    g = lm.Graph()
    t = g.input("x", (64, 64))
    f = lm.compile(t.tan(), backend="cpu")
    f(x=np.ones((64, 64), np.float32))
    (binding,) = f.runner.program._bindings.values()
    text = llvm.optimised_ir([k for k, _, _ in binding.schedule.generated], distinct=True)
    called = set(re.findall(r"call [^\n]*@([\w.]+)\(", text))
    assert not any("sin" in c for c in called), called

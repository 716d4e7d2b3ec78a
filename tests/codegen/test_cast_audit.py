"""Casts (``Tensor.to``) on every backend against torch 2.13's ``.to(dtype)``, bit for bit: rounding to
nearest even (ties, double rounding of float64 through float32 as torch does), subnormal results,
overflow to inf, int32 -> float rounding, float -> int32 truncation, bool casts; at sizes that run LLVM's
vector loops and their remainders; casts fused between elementwise ops, into reductions and of
broadcast/strided views, with gradients; the cast methods; result dtypes of mixed ops.

Values at special points (inf, NaN, -0.0, overflow) are written out, not taken from torch. Float ->
int32 where the result does not fit (NaN, inf, 3e9) is undefined in C and torch (INT_MIN on x86,
saturating on ARM and CUDA): luminal gives the same on every backend, NaN 0 and a saturated value
(``numpy_ops.float_to_int32``); it gave INT_MIN, the x86 result, on the cpu backend and numpy's
platform result on the reference one, while a CUDA device saturates."""

from __future__ import annotations

import itertools
import operator

import numpy as np
import pytest
import torch
from parity import TORCH_DTYPE, check, from_torch, rand, to_torch

import luminal as lm
from luminal import train

F16, BF16, F32, F64, I32, B = lm.float16, lm.bfloat16, lm.float32, lm.float64, lm.int32, lm.bool
FLOATS = (F16, BF16, F32, F64)
SIZES = (1, 7, 8, 9, 33, 1000)  # scalar, below/at/above one vector, several vectors plus a remainder
INF, NAN = float("inf"), float("nan")
F32_MAX = float(np.finfo(np.float32).max)
F32_HALF_ULP = 2.0 ** 103  # half an ulp at float32's top binade: past max + this, float64 rounds to inf
INT_MAX, INT_MIN = 2**31 - 1, -(2**31)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _run(fn, x, src, backend):
    """``fn`` of an input of ``src`` holding ``x``, compiled for ``backend``: (its dtype, its array)."""
    g = lm.Graph()
    out = fn(g.input("x", x.shape, dtype=src))
    return out.dtype, np.asarray(lm.compile(out, backend=backend)(x=x))


def _tdt(t, d):
    return TORCH_DTYPE[d] if isinstance(t, torch.Tensor) else d


def _sized(values, n, dtype):
    """``values`` repeated to ``n`` elements, in ``dtype``'s storage (past its range: inf)."""
    with np.errstate(over="ignore"):
        return lm.core.dtype.to_storage(np.resize(np.asarray(values, np.float64), n), dtype)


def _same_values(got, want, where):
    """The same values, bit for bit (the sign of zero counts), NaN where NaN with its sign."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, where
    if got.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=where)
        return
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=where)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=where)
    np.testing.assert_array_equal(got[~nan], want[~nan], err_msg=where)


# finite values rounded: bit for bit as torch's --------------------------------------------------------

FINITE = [0.0, 1.0, -2.5, 1 + 2**-24, 1 + 3 * 2**-24, 1 + 2**-24 + 2**-50, 1 + 2**-11 + 2**-40, 1 + 2**-8 + 2**-40,
          1 + 2**-8, 1 + 3 * 2**-8, -1 - 2**-11, 65504.0, 65519.99, 2**-24, 2**-25, 2**-25 + 2**-40, 3 * 2**-26,
          2**-14 * (1 - 2**-11), 6e-8, 3e-8, 1e-39, -1e-39, 9.2e-41, 1e-45, 7.006e-46, 2**-149 * 1.5, 2**-149 * 2.5,
          3.39e38, F32_MAX, np.nextafter(F32_MAX + F32_HALF_ULP, 0), 123456.789, -0.1, 1e-5, 3.14159]
CONVERSIONS = [(F64, F32), (F64, F16), (F64, BF16), (F32, F16), (F32, BF16), (F32, F64), (F16, F32), (F16, F64),
               (BF16, F32), (BF16, F64), (F16, BF16), (BF16, F16)]


@pytest.mark.parametrize("src,dst", CONVERSIONS, ids=lambda d: d.name)
def test_float_to_float_as_torch(src, dst, backend):
    """Rounding to nearest even (ties included; float64 -> 16 bits rounds through float32, as torch's
    does: ``1 + 2**-11 + 2**-40`` is 1.0 in float16), subnormal results, the largest finite values;
    widening is exact."""
    for n in SIZES:
        x = _sized(FINITE, n, src)
        want = from_torch(to_torch(x, src).to(TORCH_DTYPE[dst]))
        d, got = _run(lambda t: t.to(dst), x, src, backend)
        assert d is dst
        _same_values(got, want, f"{src.name} -> {dst.name}, n={n}")


@pytest.mark.parametrize("dst", [F32, F64, F16, BF16], ids=lambda d: d.name)
def test_int_to_float_as_torch(dst, backend):
    """Large ints round to nearest even (16777217 -> 16777216, 16777219 -> 16777220); past float16's
    range they overflow (those are written out in test_special_values)."""
    ints = [0, 1, -1, 16777217, -16777217, 16777219, INT_MAX, INT_MIN, 65504, 65519, 2**24 + 3, 123456789, -7]
    ints = [v for v in ints if dst is not F16 or abs(v) < 65520]
    for n in SIZES:
        x = np.resize(np.array(ints, np.int32), n)
        want = from_torch(to_torch(x, I32).to(TORCH_DTYPE[dst]))
        _same_values(_run(lambda t: t.to(dst), x, I32, backend)[1], want, f"int32 -> {dst.name}, n={n}")


@pytest.mark.parametrize("src", FLOATS, ids=lambda d: d.name)
def test_float_to_int_truncates_as_torch(src, backend):
    values = [0.0, -0.0, -0.7, 0.7, -1.5, 1.5, 2.5, -2.5, 100.9, -65504.0, 1e9 + 0.5, 2147483520.0, -2147483648.0,
              2147483647.9, -2147483648.9]
    for n in SIZES:
        x = _sized(values, n, src)
        x = x[np.abs(x.astype(np.float64)) < 2**31]  # (those rounded past the range: test_out_of_range...)
        want = from_torch(to_torch(x, src).to(torch.int32))
        _same_values(_run(lambda t: t.to(I32), x, src, backend)[1], want, f"{src.name} -> int32, n={n}")


# special points: the values written out --------------------------------------------------------------

SPECIAL = {  # (src, dst): [(input, result)]
    (F64, F32): [(INF, INF), (-INF, -INF), (NAN, NAN), (-NAN, -NAN), (-0.0, -0.0), (1e300, INF), (-1e300, -INF),
                 (F32_MAX + F32_HALF_ULP, INF),  # a tie at the top: to even, which is 2**128, inf
                 (-(F32_MAX + F32_HALF_ULP), -INF), (F32_MAX + F32_HALF_ULP - 2.0**80, F32_MAX),
                 (2.0**-150, 0.0), (-(2.0**-150), -0.0), (2.0**-150 + 2.0**-200, 2.0**-149), (5e-324, 0.0)],
    (F32, F16): [(INF, INF), (NAN, NAN), (-NAN, -NAN), (-0.0, -0.0), (65520.0, INF), (-65520.0, -INF),
                 (65519.0, 65504.0), (1e5, INF), (2.0**-25, 0.0), (-(2.0**-25), -0.0), (3 * 2.0**-26, 2.0**-24)],
    (F64, F16): [(1e300, INF), (-1e300, -INF), (65520.0, INF), (NAN, NAN), (-0.0, -0.0), (1e-300, 0.0)],
    (F32, BF16): [(INF, INF), (NAN, NAN), (-NAN, -NAN), (-0.0, -0.0), (F32_MAX, INF), (-F32_MAX, -INF),
                  (1 + 2.0**-8, 1.0), (1 + 3 * 2.0**-8, 1 + 2.0**-6)],
    (F64, BF16): [(1e300, INF), (NAN, NAN), (-0.0, -0.0), (3.4e38, INF), (1e-300, 0.0)],
    (F16, F32): [(INF, INF), (-INF, -INF), (NAN, NAN), (-0.0, -0.0), (2.0**-24, 2.0**-24)],
    (BF16, F64): [(INF, INF), (NAN, NAN), (-0.0, -0.0), (9.183549615799121e-41, 9.183549615799121e-41)],
    (I32, F16): [(65504, 65504.0), (65519, 65504.0), (65520, INF), (70000, INF), (-70000, -INF), (INT_MAX, INF)],
    (I32, BF16): [(INT_MAX, 2.0**31), (INT_MIN, -(2.0**31)), (16777217, 16777216.0)],
    (I32, F32): [(16777217, 16777216.0), (16777219, 16777220.0), (INT_MAX, 2.0**31)],
}


@pytest.mark.parametrize("src,dst", list(SPECIAL), ids=lambda d: d.name)
def test_special_values(src, dst, backend):
    """Overflow to inf (a value just under the threshold to the largest finite one), NaN stays NaN
    with its sign, -0.0 stays -0.0, results below the smallest subnormal round to a signed zero."""
    table = SPECIAL[src, dst]
    for n in SIZES:
        x = np.resize(np.array([v for v, _ in table], src.np if src is not BF16 else np.float32), n)
        want = np.resize(np.array([r for _, r in table], dst.np), n)
        _same_values(_run(lambda t: t.to(dst), x, src, backend)[1], want, f"{src.name} -> {dst.name}, n={n}")


OUT_OF_RANGE = [(NAN, 0), (-NAN, 0), (INF, INT_MAX), (-INF, INT_MIN), (3e9, INT_MAX), (-3e9, INT_MIN),
                (2.0**31, INT_MAX), (-(2.0**31), INT_MIN), (65280.0, 65280), (-1.5, -1)]


@pytest.mark.parametrize("src", FLOATS, ids=lambda d: d.name)
def test_out_of_range_float_to_int_is_the_same_on_every_backend(src, backend):
    """NaN is 0, beyond the range saturates (float16 has no 3e9: its inf then), at every size (the
    vector loop and the scalar remainder), from an input and folded from a constant."""
    table = [(v, r) for v, r in OUT_OF_RANGE if src is not F16 or abs(v) <= 65504 or v != v or abs(v) == INF]
    for n in SIZES:
        x = _sized([v for v, _ in table], n, src)
        want = np.resize(np.array([r for _, r in table], np.int32), n)
        _same_values(_run(lambda t: t.to(I32), x, src, backend)[1], want, f"{src.name} -> int32, n={n}")
    consts = lambda t: lm.stack([t.graph.constant(v, dtype=src).to(I32) for v, _ in table]) + t[:1].to(I32) * 0
    _same_values(_run(consts, _sized([1.0], 1, src), src, backend)[1], np.array([r for _, r in table], np.int32),
                 f"{src.name} constants -> int32")


def test_a_gpu_kernel_folds_an_out_of_range_constant_as_the_device_converts():
    """The CUDA renderer folds a cast of a constant to a literal: 3e9 wrapped to -1294967296 there,
    while the device's own conversion (and every other backend) saturates."""
    from luminal.backends.cuda.render import render
    from luminal.codegen import ir

    values = [3e9, -3e9, NAN, INF, -INF, 2.5, -2.5]
    i = ir.block(0) * 32 + ir.thread(0)
    body = tuple(ir.Store("o", i + ir.const(k), ir.cast(ir.const(v, F32), I32)) for k, v in enumerate(values))
    src = render(ir.Kernel("fold", (ir.Buf("o", I32, "w"),), (), (ir.const(1),), body, block=(32,)))
    stored = [line.split(" = ", 1)[1] for line in src.splitlines() if "g_o[" in line]
    assert stored == ["2147483647;", "(-2147483647 - 1);", "0;", "2147483647;", "(-2147483647 - 1);", "2;", "(-2);"]


@pytest.mark.parametrize("src", [F64, F32, F16, BF16, I32], ids=lambda d: d.name)
def test_bool_casts_and_back(src, backend):
    """NaN, inf and 0.5 are True, -0.0 False; True comes back as 1."""
    values = [0.0, -0.0, 0.5, -3.0, 7.0, NAN, INF, -INF, 1e-40 if src is not F16 else 6e-8] if src.is_float \
        else [0, 0, 1, -3, 7, INT_MIN]
    want = np.array([v != 0 for v in values])
    for n in SIZES:
        x = _sized(values, n, src) if src.is_float else np.resize(np.array(values, np.int32), n)
        w = np.resize(want, n)
        _same_values(_run(lambda t: t.to(B), x, src, backend)[1], w, f"{src.name} -> bool, n={n}")
        _same_values(_run(lambda t: t.to(B).to(src), x, src, backend)[1], w.astype(x.dtype), f"and back, n={n}")


# casts inside kernels, with gradients --------------------------------------------------------------

@pytest.mark.parametrize("src,dst", [(a, b) for a in FLOATS for b in FLOATS if a is not b], ids=lambda d: d.name)
def test_casts_fused_with_gradients(src, dst, backend):
    """A cast between two elementwise ops, feeding a reduction, of a broadcast and of a strided view;
    the gradient reaches the input in its own dtype (torch casts it back)."""
    for n in (7, 33):
        x = rand((n,), src, seed=n, low=-300, high=300)
        check(lambda t: (t * 3 + 1).to(_tdt(t, dst)) * 0.5 - 2, [x], dtypes=[src], backend=backend)
        check(lambda t: (t * 0.01).to(_tdt(t, dst)).sum(), [x], dtypes=[src], backend=backend, rtol=2e-2, atol=2e-2)
    x = rand((5, 9), src, seed=3, low=-100, high=100)
    check(lambda t: t.T[::2, 1:].to(_tdt(t, dst)) * 2, [x], dtypes=[src], backend=backend)
    check(lambda t: t[:, None, :].expand(5, 3, 9).to(_tdt(t, dst)) + t[:1].to(_tdt(t, dst)), [x], dtypes=[src],
          backend=backend)
    g = lm.Graph()
    t = g.input("x", (3,), dtype=src)
    assert train.grad((t.to(dst).float() * 2).sum(), t).dtype is src


@pytest.mark.parametrize("src", [F32, F64, BF16, I32], ids=lambda d: d.name)
def test_casts_around_matmul_and_reductions(src, backend):
    a, w = rand((9, 17), src, seed=1, low=-4, high=4), rand((17, 33), F32, seed=2)
    check(lambda a, w: a.to(_tdt(a, F32)) @ w, [a, w], dtypes=[src, F32], backend=backend)
    check(lambda a: a.to(_tdt(a, F16)).amax(1), [a], dtypes=[src], backend=backend)
    check(lambda a: a.to(_tdt(a, I32)).sum(1), [a], dtypes=[src], backend=backend)
    check(lambda a: a.to(_tdt(a, B)).to(a.dtype) * a, [a], dtypes=[src], backend=backend)


# the methods and their dtypes -------------------------------------------------------------------------

def test_cast_methods_give_torchs_dtypes():
    """``.long()`` and Python's ``int`` give int32 (README: luminal's one integer type, where torch's is
    int64); Python's ``float`` is float64, as torch's and numpy's (luminal's was float32)."""
    g = lm.Graph()
    x, t = g.input("x", (2,)), torch.zeros(2)
    for name in ("half", "bfloat16", "double", "float", "int", "long", "bool"):
        want = getattr(t, name)().dtype
        assert TORCH_DTYPE[getattr(x, name)().dtype] == (torch.int32 if want == torch.int64 else want), name
    assert (t.to(float).dtype, t.to(int).dtype, t.to(bool).dtype) == (torch.float64, torch.int64, torch.bool)
    for d, want in ((float, F64), (int, I32), (bool, B), ("half", F16), ("double", F64), ("long", I32),
                    (np.float16, F16), (np.dtype("float64"), F64), (F32, F32)):
        assert x.to(d).dtype is want and x.type(d).dtype is want and x.to("cpu", d).dtype is want, d
    assert lm.zeros(2, dtype=float).dtype is F64
    assert x.to(x.half()).dtype is F16 and x.type_as(x.bool()).dtype is B


@pytest.mark.parametrize("bad", [torch.int64, torch.uint8, "int64", np.int64, np.int16])
def test_missing_integer_types_say_int32_is_the_one(bad):
    """torch.int64 was answered 'use luminal's own (lm.int64)', which does not exist."""
    g = lm.Graph()
    with pytest.raises(TypeError, match=r"luminal's one integer type is int32: x\.long\(\) and x\.int\(\) give int32")\
            as e:
        g.input("x", (2,)).to(bad)
    assert "lm.int64" not in str(e.value) and "lm.uint8" not in str(e.value)
    with pytest.raises(TypeError, match=r"torch\.complex64 is a torch dtype luminal does not have; use one of"):
        g.input("y", (2,)).to(torch.complex64)


DTYPES = (B, I32, F16, BF16, F32, F64)
OPS = {"add": operator.add, "mul": operator.mul, "truediv": operator.truediv, "lt": operator.lt,
       "floordiv": operator.floordiv}


def test_result_dtypes_of_mixed_ops_as_torchs():
    """Every pair of dtypes, as 1-d and 0-d tensors in every combination, and every dtype with Python
    scalars on either side: lm.result_type and the ops' result dtypes are torch's (int64 as int32)."""
    g = lm.Graph()
    k = itertools.count()

    def pair(d, nd):
        shape = (2,) * nd
        return g.input(f"x{next(k)}", shape, dtype=d), torch.ones(shape, dtype=TORCH_DTYPE[d])

    def same(mine, theirs, what):
        assert TORCH_DTYPE[mine] == (torch.int32 if theirs == torch.int64 else theirs), what

    for a, b in itertools.product(DTYPES, DTYPES):
        for na, nb in itertools.product((0, 1), (0, 1)):
            (x, tx), (y, ty) = pair(a, na), pair(b, nb)
            same(lm.result_type(x, y), torch.result_type(tx, ty), (a, b, na, nb))
            for name, op in OPS.items():
                if name == "floordiv" and B in (a, b):
                    continue  # (torch refuses bool floor division)
                same(op(x, y).dtype, op(tx, ty).dtype, (name, a, b, na, nb))
    for a, nd, s in itertools.product(DTYPES, (0, 1), (True, 3, -2, 2.5, 0.0, INF)):
        x, tx = pair(a, nd)
        same(lm.result_type(x, s), torch.result_type(tx, s), (a, nd, s))
        for name, op in OPS.items():
            if name == "floordiv" and (a is B or isinstance(s, bool)):
                continue
            same(op(x, s).dtype, op(tx, s).dtype, (name, a, nd, s))
            same(op(s, x).dtype, op(s, tx).dtype, (name, s, a, nd))

"""Exp2 and Log2 in the LLVM CPU target (``luminal/codegen/llvm.py``, ``_INLINE``): inline arithmetic
(range reduction, a polynomial, exponent bits) that the loop vectoriser widens, instead of libm calls.

Checked against numpy computing in a wider type, rounded: float32 in float64, float64 in x86's 80-bit
long double (where numpy has one): within 1 ulp over dense ranges and random bit patterns, the
subnormal results and inputs included; the half types exhaustively (every bit pattern) within 1 ulp;
the special values exactly; the vectorised body and the scalar remainder bit for bit alike at every
length; and no call left in the optimised code but LLVM's own intrinsics."""

from __future__ import annotations

import re

import numpy as np
import pytest

from luminal.codegen import ir, llvm
from luminal.core import dtype as dt

F16, BF16, F32, F64 = dt.float16, dt.bfloat16, dt.float32, dt.float64
N = ir.param("n")
IT = ir.item(0)
LONG = np.finfo(np.longdouble).nmant >= 63  # an 80-bit (or wider) long double: a float64 reference


def kernel(op: str, d) -> ir.Kernel:
    """``y[i] = op(x[i])`` over ``n`` items."""
    body = (ir.Store("y", IT, ir.alu(op, ir.load("x", d, IT))),)
    return ir.Kernel(f"t_{op}_{d.name}", (ir.Buf("x", d), ir.Buf("y", d, "w")), ("n",), (N,), body)


def run(op: str, d, x: np.ndarray, n: int | None = None) -> np.ndarray:
    """The kernel over the first ``n`` items of ``x`` (all by default); the output has 4 guard
    elements past ``n`` (NaN-free sentinels) that must stay untouched."""
    n = x.size if n is None else n
    y = np.full(n + 4, 7.0, x.dtype)
    k = kernel(op, d)
    llvm.compile_kernels([k]).run(k.name, [x, y], [n], 0, n)
    assert (y[n:] == 7.0).all(), "a store past n"
    return y[:n]


def ulps(a, b, d) -> np.ndarray:
    """Distance in units in the last place of ``d`` between finite values ``a`` and ``b``."""
    if d is BF16:
        a, b = (np.asarray(v, np.float32).view(np.int32) >> 16 for v in (a, b))
        bits = 16
    else:
        it = {F16: np.int16, F32: np.int32, F64: np.int64}[d]
        a, b = np.asarray(a).view(it), np.asarray(b).view(it)
        bits = d.bits
    a, b = a.astype(np.int64), b.astype(np.int64)
    mask = np.int64(2 ** (bits - 1) - 1)
    a = np.where(a < 0, -(a & mask), a)  # sign-magnitude bit patterns onto a line
    b = np.where(b < 0, -(b & mask), b)
    return np.abs(a - b)


def check(got, want, d, most: int = 1) -> None:
    """NaN where ``want`` is, infinities and zeros equal, every finite value within ``most`` ulps."""
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    fin = np.isfinite(want)
    assert np.array_equal(got[~fin & ~nan], want[~fin & ~nan])
    err = ulps(got[fin], want[fin], d)
    worst = int(err.argmax()) if err.size else 0
    assert err.size == 0 or err.max() <= most, (got[fin][worst], want[fin][worst], err.max())


def bits32(rng, size) -> np.ndarray:
    return rng.integers(0, 2**32, size, dtype=np.uint64).astype(np.uint32).view(np.float32)


def bits64(rng, size) -> np.ndarray:
    return rng.integers(0, 2**64, size, dtype=np.uint64).view(np.float64)


def wide(fn, x: np.ndarray, d) -> np.ndarray:
    """``fn`` computed in a wider type and rounded to ``d`` (float32: via float64; float64: via long
    double; the half types: via float64 and float32, as the generated code rounds)."""
    with np.errstate(all="ignore"):
        if d is F64:
            return fn(x.astype(np.longdouble)).astype(np.float64)
        r = fn(x.astype(np.float64)).astype(np.float32)
        return dt.to_storage(r, d) if d in (F16, BF16) else r


# float32 ----------------------------------------------------------------------------------------------

def test_exp2_f32_dense():
    """Every 97th float32 step over [-160, 130] (3M values: overflow at 128, subnormal results below
    -126, zero below -150), the neighbourhoods of the edges, and random bit patterns."""
    rng = np.random.default_rng(0)
    edges = np.concatenate([np.float32(e) + np.arange(-300, 300, dtype=np.float32) * np.spacing(np.float32(e))
                            for e in (-150.0, -149.0, -126.0, 128.0, 1.0, -1.0, 0.5)])
    tiny = rng.integers(0, 0x30000000, 300_000, dtype=np.uint32).view(np.float32)  # 0 to 5e-10, subnormals too
    tiny = np.concatenate([tiny, -tiny])
    x = np.concatenate([np.linspace(-160, 130, 3_000_001, dtype=np.float32), edges, tiny, bits32(rng, 1_000_000)])
    check(run("Exp2", F32, x), wide(np.exp2, x, F32), F32)


def test_log2_f32_dense():
    """Random bit patterns (every sign, exponent, subnormals), [1/2, 2] densely, around 1 and the powers
    of two."""
    rng = np.random.default_rng(1)
    near = np.concatenate([np.float32(e) + np.arange(-300, 300, dtype=np.float32) * np.spacing(np.float32(e))
                           for e in (1.0, 2.0, 0.5, 2.0**-126, 2.0**127, np.sqrt(2), np.sqrt(0.5))])
    sub = rng.integers(1, 2**23, 500_000, dtype=np.uint32).view(np.float32)  # positive subnormals
    x = np.concatenate([bits32(rng, 3_000_000), np.linspace(0.5, 2, 2_000_001, dtype=np.float32), near, sub])
    check(run("Log2", F32, x), wide(np.log2, x, F32), F32)


# float64 ----------------------------------------------------------------------------------------------

@pytest.mark.skipif(not LONG, reason="no long double wider than float64 for a reference")
def test_exp2_f64_dense():
    rng = np.random.default_rng(2)
    edges = np.concatenate([e + np.arange(-100, 100) * np.spacing(e)
                            for e in (-1075.0, -1074.0, -1022.0, 1024.0, 1.0, -1.0)])
    x = np.concatenate([np.linspace(-1100, 1100, 1_000_001), rng.uniform(-1, 1, 1_000_000),
                        rng.uniform(-1080, -1020, 200_000), edges, bits64(rng, 500_000)])
    check(run("Exp2", F64, x), wide(np.exp2, x, F64), F64)


@pytest.mark.skipif(not LONG, reason="no long double wider than float64 for a reference")
def test_log2_f64_dense():
    rng = np.random.default_rng(3)
    near = np.concatenate([e + np.arange(-100, 100) * np.spacing(e) for e in (1.0, 2.0, 0.5, np.sqrt(2), 2.0**-1022)])
    sub = rng.integers(1, 2**52, 200_000, dtype=np.uint64).view(np.float64)
    x = np.concatenate([bits64(rng, 1_000_000), rng.uniform(0, 3, 1_000_000), 1 + rng.uniform(-1e-4, 1e-4, 300_000),
                        near, sub])
    check(run("Log2", F64, x), wide(np.log2, x, F64), F64)


# the half types, exhaustively -------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["Exp2", "Log2"])
@pytest.mark.parametrize("d", [F16, BF16], ids=lambda d: d.name)
def test_half_exhaustive(op, d):
    """Every float16 / bfloat16 bit pattern, computed in float32 and rounded: within an ulp of the
    float64 value rounded the same way."""
    u = np.arange(2**16, dtype=np.uint32)
    x = u.astype(np.uint16).view(np.float16) if d is F16 else (u << 16).view(np.float32)
    fn = np.exp2 if op == "Exp2" else np.log2
    check(run(op, d, x), wide(fn, x, d), d)


# special values ---------------------------------------------------------------------------------------

INF, NAN = float("inf"), float("nan")
EXP2_SPECIAL = [(0.0, 1.0), (-0.0, 1.0), (INF, INF), (-INF, 0.0), (NAN, NAN), (1.0, 2.0), (-1.0, 0.5),
                (10.0, 1024.0), (0.5, np.sqrt(2))]
LOG2_SPECIAL = [(0.0, -INF), (-0.0, -INF), (-1.0, NAN), (-INF, NAN), (INF, INF), (NAN, NAN), (1.0, 0.0),
                (2.0, 1.0), (0.5, -1.0), (1024.0, 10.0)]


@pytest.mark.parametrize("d", [F16, BF16, F32, F64], ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["Exp2", "Log2"])
def test_special_values(op, d):
    """Exactly numpy's: infinities, zeros of both signs, NaN, exact powers of two, log2(1) = +0; for
    float32/float64 also overflow, the smallest subnormal results and inputs, and the zero below."""
    table = list(EXP2_SPECIAL if op == "Exp2" else LOG2_SPECIAL)
    if d in (F32, F64):
        big = 128.0 if d is F32 else 1024.0
        low = -149.0 if d is F32 else -1074.0
        tiny = 2.0 ** low
        if op == "Exp2":
            table += [(big, INF), (big - 0.5, 2.0 ** (big - 0.5)), (low, tiny), (low - 0.5, tiny),
                      (low - 1.0, 0.0), (low - 1.5, 0.0), (-1e30, 0.0), (1e30, INF), (-126.5, 2.0 ** -126.5)]
        else:
            table += [(tiny, low), (-tiny, NAN), (2.0 ** (low + 20), low + 20), (float(np.finfo(d.np).max), big)]
    x = np.array([a for a, _ in table], np.float64)
    want = np.array([b for _, b in table], np.float64)
    store = np.float32 if d is BF16 else d.np
    with np.errstate(all="ignore"):
        x, want = dt.to_storage(x.astype(store), d), dt.to_storage(want.astype(store), d)
    got = run(op, d, x)
    for xi, g, w in zip(x, got, want):
        assert (np.isnan(g) and np.isnan(w)) or (g == w and np.signbit(g) == np.signbit(w)), (op, d.name, xi, g, w)


# lengths: the vector body and the scalar remainder ----------------------------------------------------

@pytest.mark.parametrize("d", [F32, F64, F16], ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["Exp2", "Log2"])
def test_lengths(op, d):
    """Every length from 0 to 67 and a few odd large ones: each element bit for bit what the full run
    gives it (the vectorised loop and its scalar remainder compute alike), nothing stored past n."""
    rng = np.random.default_rng(4)
    x = rng.uniform(-140, 120, 1001) if op == "Exp2" else np.exp2(rng.uniform(-140, 120, 1001))
    x = x.astype(d.np)
    full = run(op, d, x)
    for n in [*range(68), 127, 129, 255, 257, 1001]:
        part = run(op, d, x[:n].copy())
        assert part.shape == (n,)
        assert np.array_equal(part.view(np.uint8), full[:n].view(np.uint8)), n


# code shape -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("d", [F32, F64], ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["Exp2", "Log2"])
def test_vectorised_without_calls(op, d):
    """The optimised loop works on vectors and calls nothing but LLVM intrinsics (no libm exp2/log2,
    which would keep it scalar)."""
    text = llvm.optimised_ir([kernel(op, d)], distinct=True)
    assert re.search(r"<\d+ x (float|double)>", text)
    called = set(re.findall(r"call [^\n]*@([\w.]+)\(", text))
    assert all(c.startswith("llvm.") for c in called), called
    assert not any(c.startswith(("llvm.exp", "llvm.log")) for c in called), called


def test_cache_key_has_the_codegen_version(monkeypatch):
    """Objects cached by an older code generator are not reused: the key includes its version."""
    key = llvm.cache_key("; some module")
    monkeypatch.setattr(llvm, "CODEGEN_VERSION", llvm.CODEGEN_VERSION + 1)
    assert llvm.cache_key("; some module") != key

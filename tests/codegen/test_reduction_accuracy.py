"""float32 reductions on the code-generating backends stay within 1e-6 (relative) of the exact result
however many terms they add (``codegen.lower.accumulator``: float32 sums accumulate in float64).

Every reduction kind a model uses, on ``cpu`` and ``cuda-emulated``, against the value numpy computes
in float64 from the same float32 inputs: sum (on each GPU lowering: a thread per output, a block per
row, a row split over blocks), mean, var and std, norms (vector norm, RMSNorm, LayerNorm's
statistics), softmax's denominator, the mean-reduced losses, and products with a long k. Inputs are
values like 0.1 whose float32 sums round at every step, in the same direction: a float32 accumulator
drifted past 1e-6 at these sizes (the mean of 2e7 copies of 0.1 on ``cpu``: 6e-3 off)."""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm
import luminal.nn.functional as F

GENERATED = ("cpu", "cuda-emulated")
RTOL = 1e-6
N = 2 ** 22  # terms in one long reduction: a float32 accumulator was 1e-5 off here


def _pattern(n: int, base: float = 0.1, step: float = 0.01, period: int = 7) -> np.ndarray:
    """``base + step * (i % period)`` in float32: positive terms whose float32 sums round every step."""
    return (base + step * (np.arange(n) % period)).astype(np.float32)


def _run(op, backend: str, **arrays):
    """``op`` over graph inputs shaped (and typed) as ``arrays``, compiled for ``backend``, run on them."""
    g = lm.Graph()
    ins = {k: g.input(k, a.shape, dtype=lm.int32 if a.dtype == np.int32 else lm.float32) for k, a in arrays.items()}
    out = op(**ins)
    f = lm.compile(list(out) if isinstance(out, tuple) else out, backend=backend)
    return f(**arrays)


def _check(got, exact, what: str) -> None:
    got = np.asarray(got, np.float64)
    exact = np.asarray(exact, np.float64)
    assert got.shape == exact.shape, f"{what}: shape {got.shape}, expected {exact.shape}"
    rel = float(np.max(np.abs(got - exact) / np.abs(exact)))
    assert rel <= RTOL, f"{what}: relative error {rel:.2e} > {RTOL:.0e}"


# the GPU lowering a shape gets (``codegen/lowering/reduce.py``'s options on the CUDA target): (shape,
# reduced axis, the terms' value); the values are ones whose float32 running sums drift most over the
# terms each thread adds
PATHS = {
    "split": ((N,), 0, None),  # one long row: 32 blocks share it, their partials finished by a warp
    "row": ((80, 2 ** 16), 1, 0.43),  # 80 long rows: a block per row, 512 terms per thread
    "thread": ((2 ** 14, 256), 1, 0.33),  # many short rows: a thread per row (the cpu's rows: too short to drift)
}


@pytest.mark.parametrize("backend,path", [("cpu", "split"), ("cpu", "row"), *(("cuda-emulated", p) for p in PATHS)])
def test_sum(backend, path, capsys):
    shape, axis, value = PATHS[path]
    x = _pattern(int(np.prod(shape))) if value is None else np.full(shape, value, np.float32)
    x = x.reshape(shape)
    _check(_run(lambda x: x.sum(axis), backend, x=x), x.astype(np.float64).sum(axis), f"sum {shape} axis {axis}")
    if backend == "cuda-emulated":  # the shape exercises the lowering it is named after
        g = lm.Graph()
        f = lm.compile(g.input("x", shape).sum(axis), backend=backend)
        f.report(code=True)
        assert f"reduce_{path}_" in capsys.readouterr().out


@pytest.mark.parametrize("backend", GENERATED)
def test_mean(backend):
    x = np.full(N, 0.1, np.float32)
    _check(_run(lambda x: x.mean(), backend, x=x), np.float64(x[0]), "mean of 0.1s")


@pytest.mark.parametrize("n", [20_000_000, 50_000_000])
def test_mean_of_many_tenths_on_cpu(n):
    """The issue's cases: the mean of 2e7 and 5e7 copies of 0.1f (a broadcast: no memory)."""
    x = np.full(1, 0.1, np.float32)
    _check(_run(lambda x: x.expand((n,)).mean(), "cpu", x=x), np.float64(x[0]), f"mean of {n} copies of 0.1")


def test_sum_of_2_to_the_31_ones_on_cpu():
    """A (1,) input broadcast to 2**31 ones: a float32 running sum stops at 2**24 per accumulator."""
    n = 2 ** 31
    got = _run(lambda x: x.expand((n,)).sum(), "cpu", x=np.ones(1, np.float32))
    _check(got, np.float64(n), "sum of 2**31 ones")


@pytest.mark.parametrize("backend", GENERATED)
def test_var_and_std(backend):
    x = _pattern(N, base=0.1, step=0.2, period=2)  # 0.1, 0.3, ...: var 0.01
    exact = x.astype(np.float64)
    var, std = _run(lambda x: (x.var(correction=0), x.std()), backend, x=x)
    _check(var, exact.var(), "var")
    _check(std, exact.std(ddof=1), "std")


@pytest.mark.parametrize("backend", GENERATED)
def test_norms(backend):
    """The L2 norm; RMSNorm and LayerNorm over one long row (their statistics are means over it)."""
    x = _pattern(N, base=0.1, step=0.2, period=2)
    e = x.astype(np.float64)
    norm, rms, layer = _run(lambda x: (lm.vector_norm(x), F.rms_norm(x, (N,), eps=1e-6),
                                       F.layer_norm(x, (N,), eps=1e-6)), backend, x=x)
    _check(norm, np.sqrt(np.sum(e * e)), "vector_norm")
    _check(rms, e / np.sqrt(np.mean(e * e) + 1e-6), "rms_norm")
    _check(layer, (e - e.mean()) / np.sqrt(e.var() + 1e-6), "layer_norm")


@pytest.mark.parametrize("low", [0.0, -1.0], ids=["equal", "two-valued"])
@pytest.mark.parametrize("backend", GENERATED)
def test_softmax_denominator(backend, low):
    """Softmax over one long row: of equal values, 1/n each; of 0 and -1 alternating, whose
    exponentials (1 and e**-1) round in the denominator's sum."""
    x = np.zeros(N, np.float32)
    x[::2] = low
    exp = np.exp(x.astype(np.float64))
    _check(_run(lambda x: x.softmax(0), backend, x=x), exp / exp.sum(), "softmax")


@pytest.mark.parametrize("backend", GENERATED)
def test_mse_loss(backend):
    x = _pattern(N)
    target = np.zeros(N, np.float32)
    got = _run(lambda x, t: F.mse_loss(x, t, reduction="mean"), backend, x=x, t=target)
    _check(got, np.mean(x.astype(np.float64) ** 2), "mse_loss")


@pytest.mark.parametrize("backend", GENERATED)
def test_cross_entropy(backend):
    """2**20 rows of 4 classes: each row's logsumexp, then their mean over every row."""
    rows = 2 ** 20
    logits = np.tile(np.float32([0.0, 0.5, 1.0, 1.5]), (rows, 1))
    target = (np.arange(rows) % 4).astype(np.int32)
    got = _run(lambda x, t: F.cross_entropy(x, t, reduction="mean"), backend, x=logits, t=target)
    e = logits.astype(np.float64)
    loss = np.log(np.exp(e).sum(1)) - e[np.arange(rows), target]
    _check(got, loss.mean(), "cross_entropy")


@pytest.mark.parametrize("m,k", [(16, 2 ** 14), (1, 2 ** 16)], ids=["tiled", "gemv"])
def test_matmul_with_a_long_k_on_gpu(m, k):
    """A product's k is a sum like any other: the tiled kernel and the GEMV (a block per output) keep
    its error within the bound. (The cpu backend's products are BLAS calls: BLAS's own accuracy.)"""
    a = np.full((m, k), 0.57, np.float32)
    b = np.tile(np.float32([1, 2, 4, 0.5]), (k, 4))  # products exact: the sum's rounding alone
    got = _run(lambda a, b: a @ b, "cuda-emulated", a=a, b=b)
    _check(got, a.astype(np.float64) @ b.astype(np.float64), "matmul")


@pytest.mark.gpu
@pytest.mark.parametrize("case", [*PATHS, 20_000_000, 50_000_000], ids=str)
def test_sum_on_the_device(case):
    """The same kernels through NVRTC on a GPU (skipped without one): their float64 accumulators,
    shuffles and partials as the device computes them (a sum has no product for FMA contraction to
    fuse, so ``LUMINAL_CUDA_FMAD`` does not change it). The old
    float32 kernels were 4.2e-5 off on an H200 for 2e7 copies of 0.1."""
    from luminal.backends.cuda import driver
    from luminal.backends.cuda.program import DeviceProgram

    ok, why = driver.device_status()
    if not ok:
        pytest.skip(why)
    shape, axis, value = PATHS[case] if case in PATHS else ((case,), 0, 0.1)
    x = (_pattern(int(np.prod(shape))) if value is None else np.full(shape, value, np.float32)).reshape(shape)
    g = lm.Graph()
    f = lm.compile(g.input("x", shape).sum(axis), backend="cuda-emulated")
    f.runner.program = DeviceProgram(f.runner.program.kg, f.runner.program.plan)
    _check(f(x=x), x.astype(np.float64).sum(axis), f"sum {shape} axis {axis} on the device")

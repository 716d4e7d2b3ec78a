"""Every schedule the one lowering offers (``codegen/lowering``'s ``options``) computes the reference's
values, on both targets: the CPU's generated code and the CUDA kernels on the emulator. Each program
is compiled once per rotation of every kernel's option list, so the option built is the default, then
each alternative in turn; the test then checks that every option a kernel was offered was built and
run at least once (a new option cannot hide behind the cost model)."""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm
import luminal.backends.cuda  # noqa: F401  (registers cuda-emulated)
from luminal.codegen import lowering
from luminal.codegen.lowering import work

RNG = np.random.default_rng(5)


def _r(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def reductions(g):
    x, h = g.input("x", (5, 37)), g.input("h", (3, 1, 41), dtype=lm.float16)
    return [x.sum(1), x.softmax(-1), x.max(0)[0], (x * x).mean(-1, keepdim=True), h.sum(-1), h.float().max(-1)[0]], \
        {"x": _r(5, 37), "h": _r(3, 1, 41, dtype=np.float16)}


def long_rows(g):
    x = g.input("x", (2, 17001))
    return [x.sum(-1), x.max(-1)[0]], {"x": _r(2, 17001) / 16}


def products(g):
    a, b = g.input("a", (7, 19)), g.input("b", (19, 5))
    c, d = g.input("c", (3, 5, 17)), g.input("d", (3, 17, 6))
    v = g.input("v", (1, 23))
    w = g.input("w", (23, 7))
    p, q = g.input("p", (5, 33), dtype=lm.float16), g.input("q", (33, 9), dtype=lm.float16)
    e, long = g.input("e", (21, 4)), g.input("l", (40, 3))
    big_a, big_b = g.input("ba", (70, 130)), g.input("bb", (130, 66))  # several 64x64 tiles, ragged edges
    padded = [a.pad((0, 2)) @ e, a.pad((0, 21)) @ long]  # masked operands: sums of products on every target
    # decode-shaped products over weights stored (out, in), rows 16-byte aligned (CUDA's ``wide``): 30
    # of each row of 40 (two past the last group of 4), 36 from the fifth element on, float16 (44 of
    # 48: four past the last group of 8) and bfloat16
    u, wp = g.input("u", (1, 36)), g.input("wp", (11, 40))
    u16, w16 = g.input("u16", (1, 44), dtype=lm.float16), g.input("w16", (9, 48), dtype=lm.float16)
    ub, wb = g.input("ub", (1, 32), dtype=lm.bfloat16), g.input("wb", (5, 32), dtype=lm.bfloat16)
    rows = [u[:, :30] @ wp[:, :30].T, (u @ wp[:, 4:].T).relu(), u16 @ w16[:, :44].T, ub @ wb.T]
    # 16-bit products whose operands 16-byte copies can stage (CUDA's ``pipelined``): ragged 64x64 tiles
    # and a k of 1.5 steps; an operand contiguous along k, one along m or n, one with a batch
    h, hk = g.input("h", (70, 48), dtype=lm.float16), g.input("hk", (48, 72), dtype=lm.float16)
    hb, hw = g.input("hb", (2, 40, 24), dtype=lm.bfloat16), g.input("hw", (56, 24), dtype=lm.bfloat16)
    staged = [h @ hk, (hk.T @ h.T).relu(), hb @ hw.T]
    return [a @ b, (c @ d).relu() + 1.0, v @ w, p @ q, *padded, big_a @ big_b, *rows, *staged], \
        {"a": _r(7, 19), "b": _r(19, 5), "c": _r(3, 5, 17), "d": _r(3, 17, 6), "v": _r(1, 23), "w": _r(23, 7),
         "p": _r(5, 33, dtype=np.float16), "q": _r(33, 9, dtype=np.float16), "e": _r(21, 4),
         "l": _r(40, 3), "ba": _r(70, 130), "bb": _r(130, 66), "u": _r(1, 36), "wp": _r(11, 40),
         "u16": _r(1, 44, dtype=np.float16), "w16": _r(9, 48, dtype=np.float16), "ub": _r(1, 32), "wb": _r(5, 32),
         "h": _r(70, 48, dtype=np.float16), "hk": _r(48, 72, dtype=np.float16), "hb": _r(2, 40, 24),
         "hw": _r(56, 24)}


def indexing(g):
    x = g.input("x", (6, 9))
    i = g.input("i", (6, 4), dtype=lm.int32)
    s, h = g.input("s", (6, 4)), g.input("h", (6, 9), dtype=lm.float16)
    few = g.input("f", (2, 4), dtype=lm.int32)  # an index with fewer lines than the output
    rows, src = g.input("r", (5, 9), dtype=lm.int32), g.input("t", (5, 9))  # every line, across memory
    return [lm.gather(x, 1, i), lm.scatter_add(x, 1, i, s), lm.scatter_add(h, 1, i, s.half()),
            lm.scatter_add(x, 0, few, s[:2]), lm.scatter_add(x, 0, rows, src),
            lm.scatter_add(h, 0, rows, src.half())], \
        {"x": _r(6, 9), "i": np.int32([[0, 3, 3, 8]] * 6), "s": _r(6, 4), "h": _r(6, 9, dtype=np.float16),
         "f": np.int32([[5, 0, 5, 2], [1, 1, 4, 0]]), "r": RNG.integers(0, 6, (5, 9)).astype(np.int32),
         "t": _r(5, 9)}


PROGRAMS = [reductions, long_rows, products, indexing]
BACKENDS = {"cpu": "cpu", "cuda": "cuda-emulated"}


@pytest.mark.parametrize("target", BACKENDS)
def test_every_option_of_every_kernel_computes_the_reference(target, monkeypatch):
    offered, built = set(), set()
    real_options, real_lower = lowering.options, lowering.lower
    shift = [0]

    def rotated(k, t, memory):
        opts = real_options(k, t, memory)
        for o in opts:
            offered.add((k.kind, o))
        n = shift[0] % len(opts)
        return opts[n:] + opts[:n]

    def recording(k, t, memory, name, option=None):
        kernels = real_lower(k, t, memory, name, option)
        built.add((k.kind, option or rotated(k, t, memory)[0]))
        return kernels

    monkeypatch.setattr(lowering, "options", rotated)
    monkeypatch.setattr(lowering, "lower", recording)
    monkeypatch.setenv("LUMINAL_CACHE", "0")
    for program in PROGRAMS:
        g = lm.Graph()
        outs, inputs = program(g)
        want = lm.compile(outs, backend="reference")(**inputs)
        for n in range(5):  # (a 16-bit product on CUDA offers five: library, pipelined, mma, tiled, blocked)
            shift[0] = n
            got = lm.compile(outs, backend=BACKENDS[target])(**inputs)
            for o, (a, b) in enumerate(zip(got, want)):
                a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
                tol = 2e-2 if program is products or outs[o].dtype in work.HALF else 1e-5
                np.testing.assert_allclose(a, b, rtol=tol, atol=tol,
                                           err_msg=f"{program.__name__} output {o}, rotation {n} on {target}")
    built.discard(("matmul", "library"))  # the backend's BLAS call: its epilogue is built, not the product
    missing = {o for o in offered if o != ("matmul", "library")} - built
    assert not missing, f"options offered but never built on {target}: {sorted(missing)}"
    assert len(offered) >= (4 if target == "cpu" else 10), sorted(offered)


def _kernels(outs):
    f = lm.compile(outs, backend="cuda-emulated")
    return [s.kernel for s in f.runner.program.steps]


def test_the_cost_models_defaults_on_cuda():
    """The default of each shape class, as ``reduce.options`` and ``matmul.options`` document them: long
    or unknown rows a block per row, short rows a thread per output, few very long rows split over
    blocks; a batch-1 product a GEMV, 16-bit products tensor cores, others shared-memory tiles."""
    from luminal.backends.cuda.launches import DeviceMemory
    from luminal.codegen.target import CUDA

    g = lm.Graph()
    cases = {"row": g.input("a", ("B", 300)).sum(-1), "thread": g.input("b", (5000, 8)).sum(-1),
             "split": g.input("c", (2, 40000)).sum(-1), "gemv": g.input("v", (1, 40)) @ g.input("w", (40, 9)),
             "mma": g.input("h", (9, 40), dtype=lm.float16) @ g.input("k", (40, 9), dtype=lm.float16),
             "tiled": g.input("p", (9, 40)) @ g.input("q", (40, 9))}
    for want, out in cases.items():
        (k,) = _kernels([out])
        options = lowering.options(k, CUDA, DeviceMemory())
        assert options[0] == want and len(set(options)) == len(options) > 1, (want, options)


def test_a_schedule_the_kernel_does_not_have_is_a_clear_error():
    from luminal.backends.cuda.launches import lower_kernel

    g = lm.Graph()
    (k,) = _kernels([g.input("x", (4, 6)).sum(-1)])
    with pytest.raises(ValueError, match=r"cuda: a reduce kernel has no schedule 'mma' here \(options: "):
        lower_kernel(k, "mma")

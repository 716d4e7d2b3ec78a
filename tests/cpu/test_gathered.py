"""Gathered products (``backends/cpu/gathered.py``, ``gathered_gemm.py``): a product that reads an
expanding copy (a convolution's im2col matrix) reads the copy's source instead, and the copy is not
made. The kernel against float64 numpy over sub-axes of every kind; convolutions, forward and both
gradients, against the reference interpreter, gathered and (``gemm="blas"``) not; the driver against
the Python path; threads sharing a product; and the memory plan keeping the source alive."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided
from parity import rand

import luminal as lm
from luminal import train
from luminal.backends.cpu import gathered, gathered_gemm, tune
from luminal.backends.cpu.compiled import Binding
from luminal.backends.cpu.parallel import Split
from luminal.backends.cpu.plan import plan
from luminal.backends.cpu.steps import Kernel, Library
from luminal.codegen import llvm
from luminal.compiler import memory
from luminal.compiler.memory import lifetimes
from luminal.core.kernel_graph import copy_source, expand_calls


def _kernel(dtype, m, kd, ak, bk, nd, bn, cols, source_size, seed=0, parts=1, batch=(1, 0)):
    """``C = A @ B`` by the gathered GEMM: A random ``(m, prod(kd))`` read through strides ``ak`` (in a
    buffer with gaps), B gathered from a random source of ``source_size`` elements through the k
    sub-axes ``kd`` (strides ``bk``) and n sub-axes ``nd`` (strides ``bn``); ``parts`` calls over the
    items; ``batch``: (products, B's stride between them), each with its own A and C. Returns (C, the
    float64 product), batched."""
    rng = np.random.default_rng(seed)
    pad = lambda xs, fill: [fill] * (gathered_gemm.AXES - len(xs)) + list(xs)  # noqa: E731
    kd, ak, bk, nd, bn = pad(kd, 1), pad(ak, 0), pad(bk, 0), pad(nd, 1), pad(bn, 0)
    k, n = int(np.prod(kd)), int(np.prod(nd))
    sam = sum((s - 1) * a for s, a in zip(kd, ak)) + 4  # rows apart, with a gap
    nb, bsb = batch
    a_store = rng.standard_normal(max(1, nb * m * sam)).astype(dtype)
    src = rng.standard_normal(source_size).astype(dtype)
    c = np.full((nb, m, n), np.nan, dtype)
    item = np.dtype(dtype).itemsize
    a = as_strided(a_store, (nb, m, *kd), [m * sam * item, sam * item] + [s * item for s in ak])
    b = as_strided(src, (nb, *kd, *nd), [bsb * item] + [s * item for s in bk + bn])
    want = a.reshape(nb, m, k).astype(np.float64) @ b.reshape(nb, k, n).astype(np.float64)
    values = {"m": m, "n": n, "k": k, "a_off": 0, "sam": sam, "b_off": 0, "c_off": 0, "ldc": n, "cols": cols,
              "batches": nb, "asb": m * sam, "bsb": bsb, "csb": m * n}
    for i in range(gathered_gemm.AXES):
        values.update({f"kd{i}": kd[i], f"ak{i}": ak[i], f"bk{i}": bk[i], f"nd{i}": nd[i], f"bn{i}": bn[i]})
    params = (ctypes.c_int64 * len(gathered_gemm.PARAMS))(*[values[p] for p in gathered_gemm.PARAMS])
    ptrs = (ctypes.c_void_p * 3)(a_store.ctypes.data, src.ctypes.data, c.ctypes.data)
    generated = gathered_gemm.module(np.dtype(dtype).name)
    text, name = generated.text, generated.name
    f = llvm.compile_text(text, [name], vectorised=True).function(name)
    items = nb * -(-n // cols)
    bounds = [items * t // parts for t in range(parts + 1)]
    for lo, hi in zip(bounds, bounds[1:]):
        f(ctypes.addressof(ptrs), ctypes.addressof(params), lo, hi)
    return c, want


CASES = {  # name: (m, kd, ak, bk, nd, bn, source size[, (batch, B's batch stride)])
    # a convolution's forward product: k = (channel, row, column) of the window, n = (image, row, column)
    "conv_forward": (13, (3, 5, 5), (25, 5, 1), (324, 18, 1), (2, 14, 14), (972, 18, 1), 2000),
    # its weight gradient: k and n swap roles (runs of 5 columns)
    "conv_weight_grad": (9, (2, 14, 14), (200, 14, 1), (972, 18, 1), (3, 5, 5), (324, 18, 1), 2000),
    "one_row": (1, (40,), (1,), (3,), (77,), (1,), 400),
    "columns_not_contiguous": (7, (6,), (1,), (50,), (9, 5), (11, 2), 400),  # every column its own run
    "empty_k": (5, (0,), (1,), (1,), (40,), (1,), 50),
    "long_k": (12, (3, 130), (130, 1), (200, 1), (70,), (1,), 800),
    # one product per image (its columns not one run in the result with the other images')
    "batch_of_images": (6, (3, 3, 3), (9, 3, 1), (100, 10, 1), (8, 8), (10, 1), 1000, (3, 300)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(CASES))
def test_the_kernel_against_numpy(name, dtype):
    m, kd, ak, bk, nd, bn, size, *batch = CASES[name]
    nr, nc = gathered_gemm.columns(dtype)
    for cols, parts in ((nc, 1), (nr, 3)):  # whole panels; panels of one sub-panel, called in three ranges
        c, want = _kernel(dtype, m, kd, ak, bk, nd, bn, cols, size, parts=parts, batch=tuple(batch[0]) if batch
                          else (1, 0))
        k = max(1, int(np.prod(kd)))
        tol = 8 * np.finfo(dtype).eps * np.sqrt(k) * max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(c, want, rtol=0, atol=tol)


def _conv_step(stride=1, padding=1, dilation=1, channels=(3, 5), kernel=(3, 2), image=(9, 7)):
    """A convolution's forward result and its gradients with respect to the input and the weight (so
    the im2col matrix is read by the forward and the weight-gradient products)."""
    g = lm.Graph()
    cin, cout = channels
    x, w = g.input("x", ("B", cin, *image)), g.input("w", (cout, cin, *kernel))
    y = lm.nn.functional.conv2d(x, w, stride=stride, padding=padding, dilation=dilation)
    loss = (y * y).sum()
    return [y, *train.grad(loss, [x, w])], (cin, cout, kernel, image)


def _gathered_steps(b) -> list:
    """The calls of a gathered product's kernel: the gathered GEMM, or the direct convolution (the
    forward product's, ``direct_conv.py``): kernel steps of a hand-written module's kernel."""
    flat = [s for st in b.schedule.steps for s in ([y for p in st.parts for y in p] if isinstance(st, Split) else [st])]
    return [s for s in flat if isinstance(s, Kernel) and isinstance(s.kernel, Library)]


CONVS = [  # (keywords, whether the products gather)
    ({}, True),
    ({"dilation": 2, "padding": 0}, True),  # from the caller's input itself (no padding)
    ({"channels": (1, 8), "kernel": (5, 5), "padding": 2}, True),
    ({"stride": 2, "padding": 2, "kernel": (5, 5), "image": (12, 10)}, True),
    ({"stride": 2, "padding": 2}, False),  # the im2col matrix hardly larger than the padded image: made
]


@pytest.mark.parametrize("conv,gathers", CONVS, ids=lambda c: str(c))
@pytest.mark.parametrize("batch", [1, 3])
def test_convolutions_gather_and_skip_the_copy(conv, gathers, batch, monkeypatch):
    """The forward and weight-gradient products gather from the padded image and the im2col copy is not
    made (where it would be more than twice the image); the results are the reference's, and the same
    as a binding laid out with BLAS's GEMMs over the copy (gemm="blas"); the driver and the Python path
    agree. (Products of any number of rows gather here: the cost model's least, ``MIN_ROWS``, is
    lowered so that small odd shapes take the path.)"""
    monkeypatch.setattr(gathered, "MIN_ROWS", 1)
    outs, (cin, cout, kernel, image) = _conv_step(**conv)
    arrays = {"x": rand((batch, cin, *image), seed=1), "w": rand((cout, cin, *kernel), seed=2)}
    want = lm.compile(outs, backend="reference")(**arrays)
    prog = lm.compile(outs, backend="cpu").runner.program
    env = {"B": batch}
    kernels = expand_calls(prog.kg.kernels)
    copies_made = {}
    for choices in (tune.Choices(gemm="blas"), tune.DEFAULT):
        b = Binding(plan(prog.kg, kernels, prog.plan, dict(env), choices))
        found, skipped = b.schedule.gathered
        copies_made[choices.gemm] = sum(kern.name.startswith("ew") for kern, _, _ in b.schedule.generated)
        if choices.gemm == "blas" or not gathers:
            assert not found and not _gathered_steps(b)
        else:
            # the forward and weight-gradient products from the image, and for a stride-1 convolution
            # the data gradient's (a convolution of the output's gradient: nn/layers/conv.py) from it
            products = 2 if conv.get("stride", 1) != 1 else 3
            assert len(found) == products and len(skipped) == products - 1 and len(_gathered_steps(b)) >= products
            assert copies_made["auto"] == copies_made["blas"] - len(skipped)  # the im2col copies, not made
        via_driver = [np.array(a, copy=True) for a in b.run(arrays)]
        via_python = b.run_steps(arrays)
        for got in (via_driver, via_python):
            for a, w in zip(got, want, strict=True):
                np.testing.assert_allclose(a, w, rtol=2e-4, atol=2e-4 * max(1.0, float(np.abs(w).max())))


def test_threads_share_a_long_product(monkeypatch):
    """A product whose estimated time is over ``plan.SPLIT_NS`` is cut over the threads by its panels of
    columns (the forward product, a direct convolution, by its blocks of columns); the parts together
    give the reference's result."""
    monkeypatch.setenv("LUMINAL_NUM_THREADS", "2")
    outs, (cin, cout, kernel, image) = _conv_step(channels=(16, 32), kernel=(5, 5), image=(14, 14), padding=2)
    arrays = {"x": rand((6, cin, *image), seed=1), "w": rand((cout, cin, *kernel), seed=2)}
    prog = lm.compile(outs, backend="cpu").runner.program
    b = Binding(plan(prog.kg, expand_calls(prog.kg.kernels), prog.plan, {"B": 6}, tune.DEFAULT))
    splits = [st for st in b.schedule.steps if isinstance(st, Split) and len(st.parts) == 2
              and all(len(p) == 1 and isinstance(p[0], Kernel) and isinstance(p[0].kernel, Library) for p in st.parts)]
    assert len(splits) == 3, "the forward, weight-gradient and data-gradient products, each cut in two"
    for st in splits:
        (first,), (second,) = st.parts
        assert first.start == 0 and first.stop == second.start < second.stop
    want = lm.compile(outs, backend="reference")(**arrays)
    for a, w in zip(b.run(arrays), want, strict=True):
        np.testing.assert_allclose(a, w, rtol=2e-4, atol=2e-4 * max(1.0, float(np.abs(w).max())))


@pytest.mark.parametrize("cout,gathers", [(8, False), (32, True)])
def test_the_cost_model_gathers_products_of_enough_rows(cout, gathers):
    """As a GEMM (no direct convolution: ``Choices(direct=False)``) a product gathers with
    ``MIN_ROWS`` rows or more (output channels, here); with fewer the copy is made (packing from the
    image costs more than it saves)."""
    outs, (cin, _, kernel, image) = _conv_step(channels=(4, cout), kernel=(5, 5), image=(10, 10), padding=2)
    prog = lm.compile(outs, backend="cpu").runner.program
    b = Binding(plan(prog.kg, expand_calls(prog.kg.kernels), prog.plan, {"B": 2}, tune.Choices(direct=False)))
    assert bool(b.schedule.gathered[0]) == gathers and gathered.MIN_ROWS == 32
    arrays = {"x": rand((2, cin, *image), seed=1), "w": rand((cout, cin, *kernel), seed=2)}
    want = lm.compile(outs, backend="reference")(**arrays)
    for a, w in zip(b.run(arrays), want, strict=True):
        np.testing.assert_allclose(a, w, rtol=2e-4, atol=2e-4 * max(1.0, float(np.abs(w).max())))


def test_the_memory_plan_keeps_an_expanding_copys_source_alive():
    """The padded image (the im2col copy's source) lives as long as the copy (to the weight gradient),
    and one kernel longer (where a fold writes the sum over images)."""
    outs, _ = _conv_step()
    kg = lm.compile(outs, backend="cpu").runner.program.kg
    life = lifetimes(kg)
    copies = [k for k in kg.kernels if copy_source(k) is not None and copy_source(k)[0].id in life]
    expanding = [k for k in copies if memory.expanding(k)]
    assert len(expanding) == 2, "the im2col copies of the image and of the output's gradient"
    for k in expanding:
        src, out = copy_source(k)[0], k.outputs[0][0]
        assert life[src.id][1] == life[out.id][1] + 1 and life[out.id][1] > kg.kernels.index(k)


class _Buf:
    def __init__(self, i):
        self.id = i


class _Memory:
    def __init__(self, slots):
        self.slots = slots
        self.slot_of = {b.id: s for s, bufs in enumerate(slots) for b in bufs}


def test_a_source_whose_storage_is_reused_is_not_read_late():
    """Checked against the memory plan, not assumed: a buffer sharing the source's storage, written
    between the copy and its last reader, keeps the copy (a plan made before the lifetime rule)."""
    y, z = _Buf(1), _Buf(2)
    memory = _Memory([[y, z]])
    assert not gathered._kept(memory, {1: [0], 2: [5]}, y, copy_at=3, last=7)
    assert gathered._kept(memory, {1: [0], 2: [9]}, y, copy_at=3, last=7)
    assert gathered._kept(memory, {1: [0], 2: [2]}, y, copy_at=3, last=7)
    assert not gathered._kept(memory, {1: [0], 2: [2, 6, 9]}, y, copy_at=3, last=7)  # (a body's scratch: each call)
    assert not gathered._kept(_Memory([[z]]), {}, y, copy_at=3, last=7)  # no storage of its own: refused


def _gathered_binding(outs, env=None):
    prog = lm.compile(outs, backend="cpu").runner.program
    return Binding(plan(prog.kg, expand_calls(prog.kg.kernels), prog.plan, dict(env or {}), tune.DEFAULT))


def _check(outs, arrays, b):
    want = lm.compile(outs, backend="reference")(**arrays)
    for got in (b.run(arrays), b.run_steps(arrays)):
        for a, w in zip(got, want, strict=True):
            np.testing.assert_allclose(a, w, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(w).max())))


def test_a_product_broadcast_along_an_output_axis_keeps_its_copy():
    """An axis of the product along which neither operand moves (an output broadcast) is no gathered
    product's: planning refuses it (it used to fail on it) and the copy is made."""
    g = lm.Graph()
    y, a = g.input("y", (2, 10)), g.input("a", (8, 6))
    x = y.reshape(2, 1, 10).expand(2, 6, 10).contiguous().reshape(120)
    out = (a.reshape(1, 8, 6).expand(4, 8, 6) @ x[0:60].reshape(6, 10).reshape(1, 6, 10).expand(4, 6, 10)).sum(0)
    b = _gathered_binding([out])
    assert not b.schedule.gathered[1]
    _check([out], {"y": rand((2, 10), seed=1), "a": rand((8, 6), seed=2)}, b)


def test_a_window_sliding_over_the_copy_is_not_gathered():
    """Two axes of a product that walk one axis of the copy's domain (a window sliding over the flat
    copy) carry from one into the next, which no strides of the source express: the copy is made."""
    g = lm.Graph()
    y, a = g.input("y", (2, 5)), g.input("a", (32, 4))
    x = y[:, :4].expand(3, 2, 4).contiguous().reshape(24)
    out = a @ x[0:7].unfold(0, 4, 1).T
    b = _gathered_binding([out])
    assert not b.schedule.gathered[1]
    _check([out], {"y": rand((2, 5), seed=1), "a": rand((32, 4), seed=2)}, b)


def test_a_product_of_two_copies_gathers_from_one():
    """A product reading two expanding copies gathers from one of them and reads the other, made."""
    g = lm.Graph()
    u, v = g.input("u", (2, 32)), g.input("v", (2, 32))
    x1 = u.reshape(2, 32, 1).expand(2, 32, 6).contiguous().reshape(384)
    x2 = v.reshape(2, 1, 32).expand(2, 6, 32).contiguous().reshape(384)
    out = x1[0:192].reshape(32, 6) @ x2[0:192].reshape(6, 32)
    b = _gathered_binding([out])
    found, skipped = b.schedule.gathered
    assert len(found) == 1 and len(skipped) == 1
    _check([out], {"u": rand((2, 32), seed=1), "v": rand((2, 32), seed=2)}, b)

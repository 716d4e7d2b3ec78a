"""Direct convolutions (``backends/cpu/direct_conv.py``): a convolution's forward product with the
output pixels broadcast from the image and the output channels as vectors. The kernel against
float64 numpy over channel counts that fill part of a vector or several passes, rows that take
blocks of several widths, images one after another and calls over part of the items; which shapes it
takes; convolutions through the planner against the reference, direct and not; the search's step."""

from __future__ import annotations

import ctypes
import importlib.util
from pathlib import Path

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided
from parity import rand

import luminal as lm
from luminal import train
from luminal.backends.cpu import direct_conv, gathered_gemm, tune
from luminal.backends.cpu.compiled import Binding, CpuProgram
from luminal.backends.cpu.parallel import Split
from luminal.backends.cpu.plan import plan
from luminal.backends.cpu.steps import Library
from luminal.codegen import llvm
from luminal.core.kernel_graph import expand_calls


def _direct(dtype, m, cin, kernel, image, images, parts=1, seed=0):
    """Forward products of ``images`` images (channels ``cin``, padded size ``image``) with ``m``
    filters of ``kernel``, stride 1, by the direct kernel through the gathered GEMM's parameters: C
    channel-major (``c[m, image, pixel]``), A read through strides with a gap between its rows, the
    source and C at offsets. Returns (C, the float64 product)."""
    rng = np.random.default_rng(seed)
    kh, kw = kernel
    hp, wp = image
    oh, ow = hp - kh + 1, wp - kw + 1
    k, n = cin * kh * kw, oh * ow
    sam = k + 3
    a_store = rng.standard_normal(2 + m * sam).astype(dtype)
    src = rng.standard_normal(5 + images * cin * hp * wp).astype(dtype)
    c = np.full(7 + m * images * n, np.nan, dtype)
    item = np.dtype(dtype).itemsize
    a = as_strided(a_store[2:], (m, cin, kh, kw), [sam * item, kh * kw * item, kw * item, item])
    x = src[5:].reshape(images, cin, hp, wp)
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (kh, kw), axis=(2, 3))
    want = np.einsum("nchwyx,ocyx->onhw", windows, a.astype(np.float64)).reshape(m, images, n)
    values = {"m": m, "n": n, "k": k, "a_off": 2, "sam": sam, "b_off": 5, "c_off": 7, "ldc": images * n, "cols": 0,
              "batches": images, "asb": 0, "bsb": cin * hp * wp, "csb": n,
              "kd0": cin, "kd1": kh, "kd2": kw, "ak0": kh * kw, "ak1": kw, "ak2": 1,
              "bk0": hp * wp, "bk1": wp, "bk2": 1,
              "nd0": 1, "nd1": oh, "nd2": ow, "bn0": 0, "bn1": wp, "bn2": 1}
    r, nv = direct_conv.shape(m, k, ow, dtype)
    params = (ctypes.c_int64 * len(gathered_gemm.PARAMS))(*[values[p] for p in gathered_gemm.PARAMS])
    ptrs = (ctypes.c_void_p * 3)(a_store.ctypes.data, src.ctypes.data, c.ctypes.data)
    generated = direct_conv.module(np.dtype(dtype).name, r, nv)
    text, name = generated.text, generated.name
    f = llvm.compile_text(text, [name], vectorised=True).function(name)
    items = images * (n // r)
    bounds = [items * t // parts for t in range(parts + 1)]
    for lo, hi in zip(bounds, bounds[1:]):
        f(ctypes.addressof(ptrs), ctypes.addressof(params), lo, hi)
    assert np.isnan(c[:7]).all(), "wrote before C"
    return c[7:].reshape(m, images, n), want


CASES = {  # name: (m, cin, kernel, padded image, images)
    "mnist_conv2": (32, 16, (5, 5), (18, 18), 2),
    "part_of_a_vector": (13, 3, (3, 3), (9, 16), 3),  # 13 channels, rows of 14
    "three_vectors": (40, 2, (3, 3), (14, 14), 2),  # rows of 12
    "several_passes": (70, 2, (3, 3), (9, 9), 2),  # rows of 7
    "one_channel_wide_rows": (5, 1, (5, 5), (32, 32), 1),  # rows of 28
    "one_by_one": (24, 7, (1, 1), (6, 8), 3),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(CASES))
def test_the_kernel_against_numpy(name, dtype):
    m, cin, kernel, image, images = CASES[name]
    for parts in (1, 3):
        c, want = _direct(dtype, m, cin, kernel, image, images, parts=parts)
        k = cin * kernel[0] * kernel[1]
        tol = 8 * np.finfo(dtype).eps * np.sqrt(k) * max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(c, want, rtol=0, atol=tol)


def _window(dtype, m, cin, kernel, image, images, batched, parts=1, seed=0, sub=None):
    """Weight gradients of ``images`` images (channels ``cin``, padded size ``image``, stride 1) from
    an output gradient of ``m`` channels, by the window kernel through the gathered GEMM's parameters:
    one product over every image's pixels, or (``batched``) one per image into a C of its own (as a
    product whose batch the planner keeps). A is channel-major with a gap between its rows, the
    source and C at offsets. Returns (C, the float64 product)."""
    rng = np.random.default_rng(seed)
    kh, kw = kernel
    hp, wp = image
    oh, ow = hp - kh + 1, wp - kw + 1
    pixels = oh * ow
    sam = images * pixels + 3
    a_store = rng.standard_normal(2 + m * sam).astype(dtype)
    src = rng.standard_normal(5 + images * cin * hp * wp).astype(dtype)
    nb = images if batched else 1
    c = np.full(7 + nb * m * cin * kh * kw, np.nan, dtype)
    dy = a_store[2:2 + m * sam].reshape(m, sam)[:, :images * pixels].reshape(m, images, oh, ow)
    x = src[5:].reshape(images, cin, hp, wp)
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (kh, kw), axis=(2, 3))
    per_image = np.einsum("onhw,nchwyx->nocyx", dy.astype(np.float64), windows).reshape(images, m, cin * kh * kw)
    want = per_image if batched else per_image.sum(0, keepdims=True)
    values = {"m": m, "n": cin * kh * kw, "a_off": 2, "sam": sam, "b_off": 5, "c_off": 7, "ldc": cin * kh * kw,
              "cols": 0, "nd0": cin, "nd1": kh, "nd2": kw, "bn0": hp * wp, "bn1": wp, "bn2": 1}
    if batched:  # k: an image's pixels; one product per image
        values.update(k=pixels, batches=images, asb=pixels, bsb=cin * hp * wp, csb=m * cin * kh * kw,
                      kd0=1, kd1=oh, kd2=ow, ak0=0, ak1=ow, ak2=1, bk0=0, bk1=wp, bk2=1)
    else:  # k: every image's pixels
        values.update(k=images * pixels, batches=1, asb=0, bsb=0, csb=0,
                      kd0=images, kd1=oh, kd2=ow, ak0=pixels, ak1=ow, ak2=1, bk0=cin * hp * wp, bk1=wp, bk2=1)
    found = direct_conv.window_shape(m, kh, kw, dtype)
    if found is None:
        pytest.skip(f"{kh}x{kw} taps' accumulators do not fit this host's vector registers")
    sub, nv = found if sub is None else (sub, found[1])
    generated = direct_conv.window_module(np.dtype(dtype).name, kh, kw, nv, sub)
    text, name = generated.text, generated.name
    f = llvm.compile_text(text, [name], vectorised=True).function(name)
    params = (ctypes.c_int64 * len(gathered_gemm.PARAMS))(*[values[p] for p in gathered_gemm.PARAMS])
    ptrs = (ctypes.c_void_p * 3)(a_store.ctypes.data, src.ctypes.data, c.ctypes.data)
    items = nb * -(-m // (nv * gathered_gemm.generated_gemm._shape(dtype).w)) * cin * (kh // sub)
    bounds = [items * t // parts for t in range(parts + 1)]
    for lo, hi in zip(bounds, bounds[1:]):
        f(ctypes.addressof(ptrs), ctypes.addressof(params), lo, hi)
    assert np.isnan(c[:7]).all(), "wrote before C"
    return c[7:].reshape(nb, m, cin * kh * kw), want


WINDOW_CASES = {  # name: (m, cin, kernel, padded image, images)
    "mnist_conv2": (32, 16, (5, 5), (18, 18), 2),
    "three_by_three_part_of_a_vector": (13, 3, (3, 3), (9, 16), 3),
    "several_passes": (40, 2, (3, 3), (10, 10), 2),
    "pixels_past_one_block": (16, 2, (5, 5), (18, 18), 12),  # 2352 pixels: blocks of k added into C
    "rectangular": (24, 3, (2, 5), (8, 11), 2),
}


@pytest.mark.parametrize("batched", [False, True], ids=["one-product", "a-product-per-image"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(WINDOW_CASES))
def test_the_window_kernel_against_numpy(name, dtype, batched):
    m, cin, kernel, image, images = WINDOW_CASES[name]
    subs = [None] + [d for d in range(1, kernel[0]) if kernel[0] % d == 0]  # (the host's choice, then rows apart)
    for parts, sub in [(1, None), (3, None)] + [(3, d) for d in subs[1:]]:
        c, want = _window(dtype, m, cin, kernel, image, images, batched, parts=parts, sub=sub)
        k = images * (image[0] - kernel[0] + 1) * (image[1] - kernel[1] + 1)
        tol = 8 * np.finfo(dtype).eps * np.sqrt(k) * max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(c, want, rtol=0, atol=tol)


def test_the_shapes_it_takes():
    """Blocks of R columns dividing the output row, at least 4, within the vector registers with one
    to spare (the loop spills its accumulators without it); A^T within the stack's bound; None
    otherwise."""
    registers = 32 if 512 in llvm.vector_widths() else 16
    r, nv = direct_conv.shape(32, 400, 14, np.float32)
    assert 14 % r == 0 and r >= 4 and r * nv + nv + 2 <= registers
    assert direct_conv.shape(32, 400, 31, np.float32) is None  # a prime row wider than any block
    assert direct_conv.shape(32, 400, 3, np.float32) is None  # rows narrower than 4
    assert direct_conv.shape(32, direct_conv.PACK_BYTES, 14, np.float32) is None  # A^T past the stack's bound
    sub, nv = direct_conv.window_shape(32, 3, 3, np.float32)  # windows: a vector per tap and pass, within the registers
    assert sub == 3 and 9 * nv + nv + 2 <= registers
    # 25 taps: AVX-512's 32 registers hold a whole 5x5 window, AVX2's 16 one row of it for 2 vectors
    assert direct_conv.window_shape(32, 5, 5, np.float32) == ((5, 1) if registers == 32 else (1, 2))
    assert direct_conv.window_shape(8, 1, 3, np.float32) is None  # 3 taps of one vector: too few accumulators
    assert direct_conv.window_shape(16, 7, 7, np.float32) is None  # 7 taps a row: too few; 49: past the registers


def _conv_step(cin, cout, kernel, image, padding, stride=1):
    g = lm.Graph()
    x, w = g.input("x", ("B", cin, *image)), g.input("w", (cout, cin, *kernel))
    y = lm.nn.functional.conv2d(x, w, stride=stride, padding=padding)
    return [y, *train.grad((y * y).sum(), [x, w])]


@pytest.mark.parametrize("stride,direct", [(1, 3), (2, 1)])
def test_a_convolutions_products_run_direct(stride, direct):
    """A stride-1 convolution's three products run direct by default: the forward one and the data
    gradient (a convolution of the output's gradient with 4 output channels: ``nn/layers/conv.py``)
    by blocks of an output row, the weight gradient by windows of taps. A stride-2 convolution's
    forward columns are not unit-stride in the image (its weight gradient's taps are). Forward and
    gradients are the reference's, direct or not (``Choices(direct=False)``: gathered GEMMs, and the
    data gradient's 4 rows read its copy)."""
    outs = _conv_step(4, 32, (5, 5), (10, 12), 2, stride)
    arrays = {"x": rand((2, 4, 10, 12), seed=1), "w": rand((32, 4, 5, 5), seed=2)}
    want = lm.compile(outs, backend="reference")(**arrays)
    prog = lm.compile(outs, backend="cpu").runner.program
    for choices, count, products in ((tune.DEFAULT, direct, 2 + (stride == 1)), (tune.Choices(direct=False), 0, 2)):
        b = Binding(plan(prog.kg, expand_calls(prog.kg.kernels), prog.plan, {"B": 2}, choices))
        assert len(b.schedule.gathered[0]) == products and b.schedule.direct == count
        for got in ([np.array(a, copy=True) for a in b.run(arrays)], b.run_steps(arrays)):
            for a, w in zip(got, want, strict=True):
                np.testing.assert_allclose(a, w, rtol=2e-4, atol=2e-4 * max(1.0, float(np.abs(w).max())))


def test_search_can_keep_the_gathered_gemm():
    """``direct`` is a search step where the default runs a direct convolution, and only there."""
    outs = _conv_step(4, 32, (5, 5), (10, 12), 2)
    prog = lm.compile(outs, backend="cpu").runner.program
    kernels = expand_calls(prog.kg.kernels)
    b = Binding(plan(prog.kg, kernels, prog.plan, {"B": 2}, tune.DEFAULT))
    assert ("direct", False) in tune._steps(b)
    plain = Binding(plan(prog.kg, kernels, prog.plan, {"B": 2}, tune.Choices(direct=False)))
    assert tune._signature(plain) != tune._signature(b)
    g = lm.Graph()
    a, c = g.input("a", (64, 48)), g.input("c", (48, 40))
    prog = lm.compile([a @ c], backend="cpu").runner.program
    b = Binding(plan(prog.kg, expand_calls(prog.kg.kernels), prog.plan, {}, tune.DEFAULT))
    assert ("direct", False) not in tune._steps(b)  # (no convolution)


def test_the_cnn_train_step_runs_its_convolutions_direct_and_keeps_its_losses():
    """The MNIST CNN's step (batch 128) runs five products direct by default (both convolutions'
    forward products and weight gradients, the second's data gradient; with 16 vector registers the
    weight gradients by rows of their 5x5 windows), and three steps give the losses of the same step
    without (``Choices(direct=False)``: gathered GEMMs and copies)."""
    spec = importlib.util.spec_from_file_location("mnist_train", Path(__file__).parents[2] / "examples/mnist/train.py")
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    rng = np.random.default_rng(0)
    arrays = {"x": rng.random((128, 784), dtype=np.float32), "y": rng.integers(0, 10, 128).astype(np.int32)}
    losses = {}
    for direct in (True, False):
        lm.manual_seed(0)
        model = ex.MODELS["cnn"]()
        g = lm.Graph()
        x, y = g.input("x", ("B", 784)), g.input("y", ("B",), dtype=lm.int32)
        step = train.compile_step(train.cross_entropy(model(x), y), train.AdamW(model.parameters(), lr=1e-3),
                                  backend="cpu")
        step(**arrays)
        prog = step._update.runner.program
        (key, first), = prog._bindings.items()
        prog._bindings[key] = Binding(plan(prog.kg, expand_calls(prog.kg.kernels), prog.plan, first.schedule.env,
                                           tune.Choices(direct=direct)))
        prog._recent = (None, None)
        assert prog._bindings[key].schedule.direct == (5 if direct else 0)
        losses[direct] = [step(**arrays) for _ in range(3)]
    np.testing.assert_allclose(losses[True], losses[False], rtol=1e-5)


def test_hand_written_kernels_compile_in_the_batch_of_the_bindings_kernels(monkeypatch):
    """The direct convolutions' modules (hand-written, as the gathered GEMM's) are compiled with the binding's
    generated kernels (``plan._link``: ``llvm.compile_kernels``' ``also``), not one after another at
    their first use; every step then calls a compiled function."""
    texts = []
    real = llvm.compile_kernels

    def spy(kernels, *args, also=(), **kwargs):
        texts.extend(text for text, _ in also)
        return real(kernels, *args, also=also, **kwargs)

    monkeypatch.setattr(llvm, "compile_kernels", spy)
    outs = _conv_step(4, 32, (5, 5), (10, 12), 2)
    prog = lm.compile(outs, backend="cpu").runner.program
    b = Binding(plan(prog.kg, expand_calls(prog.kg.kernels), prog.plan, {"B": 2}, tune.DEFAULT))
    r, nv = direct_conv.shape(32, 100, 12, np.float32)
    assert direct_conv.module("float32", r, nv) in texts  # (the forward product)
    sub, nv = direct_conv.window_shape(32, 5, 5, np.float32)  # (the weight gradient)
    assert direct_conv.window_module("float32", 5, 5, nv, sub) in texts
    flat = [x for s in b.schedule.steps for x in ([y for p in s.parts for y in p] if isinstance(s, Split) else [s])]
    assert not any(isinstance(getattr(x, "function", None), Library) for x in flat)


def test_search_over_a_convolution_keeps_the_gathered_gemm_when_it_is_faster(monkeypatch, tmp_path):
    """A search over a convolution's layouts describes its hand-written kernels' steps by their
    module (``tune._describe``: it used to fail on a gathered product's step), keeps the gathered
    GEMMs where timing favours them, and the next program of the graph finds the choice cached."""
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LUMINAL_CACHE", "compile,llvm")
    monkeypatch.setattr(tune, "STEPS", (("direct", False),))
    kept = tune.Choices(direct=False)
    times = {tune.DEFAULT: [3.0, 3.0], kept: [1.0, 1.0]}

    def fake(b, arrays, limit_s=None, budget_s=None):
        b.run(arrays)
        return times[b.choices].pop(0)

    monkeypatch.setattr(tune, "measure", fake)
    outs = _conv_step(4, 32, (5, 5), (10, 12), 2)
    arrays = {"x": rand((2, 4, 10, 12), seed=1), "w": rand((32, 4, 5, 5), seed=2)}
    f = lm.compile(outs, backend="cpu")
    records = []
    for _ in range(2):
        prog = CpuProgram(f.runner.program.kg, f.runner.program.plan, search=2)
        got, _ = prog(arrays, {"B": 2})
        (record,) = prog.searches.values()
        records.append(record)
    assert records[0].chosen == kept and not records[0].cached
    assert records[1].cached and records[1].chosen == kept and prog.binding({"B": 2}).schedule.direct == 0
    want = lm.compile(outs, backend="reference")(**arrays)
    for a, w in zip(got, want, strict=True):
        np.testing.assert_allclose(a, w, rtol=2e-4, atol=2e-4 * max(1.0, float(np.abs(w).max())))


@pytest.mark.parametrize("xd,wd", [(lm.float32, lm.float16), (lm.float16, lm.float32)])
def test_a_convolutions_gradients_keep_their_operands_dtypes(xd, wd):
    """The custom gradient of a stride-1 convolution (``nn/layers/conv.py``) gives each operand's
    gradient in that operand's dtype, as the casts of a mixed-dtype product would (it stands in for
    them), and the values of the reference."""
    g = lm.Graph()
    x, w = g.input("x", (1, 2, 6, 6), dtype=xd), g.input("w", (16, 2, 3, 3), dtype=wd)
    y = lm.nn.functional.conv2d(x, w, padding=1)
    dx, dw = train.grad(y.sum(), [x, w])
    assert (dx.dtype, dw.dtype) == (xd, wd)
    arrays = {"x": rand((1, 2, 6, 6), seed=1).astype(xd.np), "w": rand((16, 2, 3, 3), seed=2).astype(wd.np)}
    got = lm.compile([dx, dw], backend="cpu")(**arrays)
    want = lm.compile([dx, dw], backend="reference")(**arrays)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a.astype(np.float32), b.astype(np.float32), rtol=2e-2, atol=2e-2)

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
from luminal.backends.cpu.compiled import Binding
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
    f = direct_conv.function(np.dtype(dtype).name, r, nv)
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


def test_the_shapes_it_takes():
    """Blocks of R columns dividing the output row, at least 4, within the vector registers; A^T
    within the stack's bound; None otherwise."""
    registers = 32 if 512 in llvm.vector_widths() else 16
    r, nv = direct_conv.shape(32, 400, 14, np.float32)
    assert 14 % r == 0 and r >= 4 and r * nv + nv + 1 <= registers
    assert direct_conv.shape(32, 400, 31, np.float32) is None  # a prime row wider than any block
    assert direct_conv.shape(32, 400, 3, np.float32) is None  # rows narrower than 4
    assert direct_conv.shape(32, direct_conv.PACK_BYTES, 14, np.float32) is None  # A^T past the stack's bound


def _conv_step(cin, cout, kernel, image, padding, stride=1):
    g = lm.Graph()
    x, w = g.input("x", ("B", cin, *image)), g.input("w", (cout, cin, *kernel))
    y = lm.nn.functional.conv2d(x, w, stride=stride, padding=padding)
    return [y, *train.grad((y * y).sum(), [x, w])]


@pytest.mark.parametrize("stride,direct", [(1, 2), (2, 0)])
def test_a_convolution_runs_its_forward_product_direct(stride, direct):
    """A stride-1 convolution's forward product runs direct by default, and so does its data gradient
    (a convolution of the output's gradient with 4 output channels: ``nn/layers/conv.py``); its weight
    gradient (a batch of products with an A each) as the gathered GEMM. A stride-2 convolution's
    columns are not unit-stride in the image. Forward and gradients are the reference's, direct or
    not (``Choices(direct=False)``: the data gradient's 4 rows then read its copy)."""
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
    outs = _conv_step(4, 32, (5, 5), (10, 12), 2, stride=2)
    prog = lm.compile(outs, backend="cpu").runner.program
    b = Binding(plan(prog.kg, expand_calls(prog.kg.kernels), prog.plan, {"B": 2}, tune.DEFAULT))
    assert ("direct", False) not in tune._steps(b)


def test_the_cnn_train_step_runs_its_convolutions_direct_and_keeps_its_losses():
    """The MNIST CNN's step (batch 128) runs three products direct by default (both convolutions'
    forward products and the second's data gradient), and three steps give the losses of the same
    step without (``Choices(direct=False)``: gathered GEMMs and the data gradient's copy)."""
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
        assert prog._bindings[key].schedule.direct == (3 if direct else 0)
        losses[direct] = [step(**arrays) for _ in range(3)]
    np.testing.assert_allclose(losses[True], losses[False], rtol=1e-5)


def test_hand_written_kernels_compile_in_the_batch_of_the_bindings_kernels(monkeypatch):
    """The direct convolution's and the gathered GEMM's modules are compiled with the binding's
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
    assert direct_conv.module_text("float32", r, nv)[0] in texts
    assert gathered_gemm.module_text("float32")[0] in texts
    flat = [x for s in b.schedule.steps for x in ([y for p in s.parts for y in p] if isinstance(s, Split) else [s])]
    assert not any(isinstance(getattr(x, "function", None), Library) for x in flat)

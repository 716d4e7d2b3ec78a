"""Max pooling's kernels: windows that tile the input cost one pass over it each way (``nn/layers/
pool.py``: an elementwise chain over the window's positions forward, ``_tiled_gradient`` backward),
where a reduction per window axis took two forward and five backward."""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm
from luminal import nn
from luminal.codegen import llvm
from luminal.core.symbolic import prod
from luminal.train.autograd import grad


def _kernels(make, shape):
    g = lm.Graph()
    x = g.input("x", shape)
    y = make()(x)
    w = g.input("w", tuple(y.shape))
    loss = (y * w).sum()
    f = lm.compile([y, grad(loss, x)], backend="cpu")
    return f, f.runner.program.kg.kernels


def test_a_tiled_max_pool_is_one_kernel_forward_and_one_backward():
    shape = (4, 3, 8, 12)
    f, kernels = _kernels(lambda: nn.MaxPool2d(2), shape)
    assert [k.kind for k in kernels].count("reduce") == 0
    over_input = [k for k in kernels if prod(k.domain) == prod(shape)]
    assert len(over_input) == 1 and over_input[0].kind == "elementwise"  # the gradient
    over_output = [k for k in kernels if prod(k.domain) == prod(shape) // 4]
    assert len(over_output) == 1  # the maximum (and the chosen position, an output of the same kernel)

    rng = np.random.default_rng(0)
    x = rng.integers(-1, 2, shape).astype(np.float32)  # ties
    w = rng.standard_normal((4, 3, 4, 6)).astype(np.float32)
    y, dx = f(x=x, w=w)
    windows = x.reshape(4, 3, 4, 2, 6, 2).transpose(0, 1, 2, 4, 3, 5).reshape(4, 3, 4, 6, 4)
    np.testing.assert_array_equal(y, windows.max(-1))
    first = windows.argmax(-1)  # numpy's argmax is the first maximum too
    expect = np.zeros_like(windows)
    np.put_along_axis(expect, first[..., None], w[..., None], -1)
    expect = expect.reshape(4, 3, 4, 6, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(shape)
    np.testing.assert_array_equal(dx, expect)


def test_a_large_window_stays_a_reduction():
    """Past ``pool.MAX_TAPS`` positions a window is reduced an axis at a time (a bounded graph)."""
    _, kernels = _kernels(lambda: nn.MaxPool2d(8), (1, 2, 16, 16))
    assert [k.kind for k in kernels].count("reduce") >= 2


@pytest.mark.skipif(512 not in llvm.vector_widths() or not llvm._init()["cpu"].startswith("znver"),
                    reason="LLVM's x86 cost model chooses gathers or interleaved loads per CPU: measured on AMD "
                           "Zen 4 (AVX-512)")
def test_a_tiled_max_pool_loads_its_windows_as_whole_vectors():
    """A 2x2 pool over rows of 28 (14 outputs in 16 lanes, a masked vector body): its four window
    positions are two strided groups, loaded as vectors split by shuffles
    (``llvm.LLVM_OPTIONS``), not gathered element by element."""
    g = lm.Graph()
    x = g.input("x", (2, 3, 28, 28))
    f = lm.compile([nn.MaxPool2d(2)(x)], backend="cpu")
    f(x=np.zeros((2, 3, 28, 28), np.float32))
    (binding,) = f.runner.program._bindings.values()
    ir_text = llvm.optimised_ir([k for k, _, _ in binding.schedule.generated], distinct=True)
    assert "shufflevector" in ir_text and "masked.gather" not in ir_text

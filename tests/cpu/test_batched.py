"""A product and the elementwise kernel reading its result, an image at a time (``backends/cpu/batched.py``):
a strided convolution's data gradient (the columns' gradient, then the col2im sum of its windows; a
stride-1 convolution's is a convolution of its own: ``nn/layers/conv.py``) fused and unfused against
the reference, on one and two threads, with the product's result never touched in memory; the cases
that stay kernel by kernel."""

from __future__ import annotations

import numpy as np
import pytest
from parity import rand

import luminal as lm
from luminal import train
from luminal.backends.cpu import batched, tune
from luminal.backends.cpu.compiled import Binding
from luminal.backends.cpu.parallel import Split
from luminal.backends.cpu.plan import plan
from luminal.backends.cpu.steps import Gemm
from luminal.core.kernel_graph import expand_calls


def _data_gradient(cin=3, cout=6, kernel=(3, 3), image=(9, 8), padding=1, stride=1):
    g = lm.Graph()
    x, w = g.input("x", ("B", cin, *image)), g.input("w", (cout, cin, *kernel))
    y = lm.nn.functional.conv2d(x, w, padding=padding, stride=stride)
    (dx,) = train.grad((y * y).sum(), [x])
    return [dx], (cin, cout, kernel, image)


def _binding(prog, env, choices) -> Binding:
    return Binding(plan(prog.kg, expand_calls(prog.kg.kernels), prog.plan, dict(env), choices))


def _gemms(schedule) -> list:
    """The schedule's GEMM steps, a Split's parts included."""
    flat = [s for st in schedule.steps for s in ([y for p in st.parts for y in p] if isinstance(st, Split) else [st])]
    return [s for s in flat if isinstance(s, Gemm)]


@pytest.mark.parametrize("block", [1, 1 << 30], ids=["an-image-a-block", "images-a-block"])
@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("conv", [dict(stride=2, image=(12, 9)),
                                  dict(kernel=(5, 5), padding=2, stride=2, image=(13, 10)),
                                  dict(kernel=(3, 2), stride=(2, 1), image=(11, 9))],
                         ids=["3x3-stride2", "5x5-stride2", "3x2-stride2x1"])
def test_a_data_gradient_runs_an_image_at_a_time(monkeypatch, conv, threads, block):
    monkeypatch.setenv("LUMINAL_NUM_THREADS", threads)
    monkeypatch.setattr(batched, "MIN_BYTES", 0)
    monkeypatch.setattr(batched, "MIN_ENTRY_BYTES", 0)
    monkeypatch.setattr(batched, "BLOCK_BYTES", block)
    outs, (cin, cout, kernel, image) = _data_gradient(**conv)
    env = {"B": 5}
    arrays = {"x": rand((5, cin, *image), seed=1), "w": rand((cout, cin, *kernel), seed=2)}
    want = lm.compile(outs, backend="reference")(**arrays)
    prog = lm.compile(outs, backend="cpu").runner.program
    fused, plain = _binding(prog, env, tune.DEFAULT), _binding(prog, env, tune.Choices(blocks=False))
    assert fused.schedule.blocked == ("batched",) and plain.schedule.blocked == ()
    for _ in range(2):
        for b in (fused, plain):
            for got, w in zip(b.run(arrays), want, strict=True):
                np.testing.assert_allclose(got, w, rtol=2e-4, atol=2e-4 * max(1.0, float(np.abs(w).max())))
    np.testing.assert_allclose(fused.run_steps(arrays)[0], want[0], rtol=2e-4, atol=2e-4 * float(np.abs(want[0]).max()))
    # the columns' gradient is made an image at a time into a scratch, never whole
    whole = [g.out.size for g in _gemms(plain.schedule)]
    per_image = [g.out.size for g in _gemms(fused.schedule)]
    columns = max(whole)
    assert columns % 5 == 0 and columns not in per_image and per_image.count(columns // 5) == 5
    if threads == "2" and block == 1:  # (the images shared by the threads)
        assert any(isinstance(s, Split) and len(s.parts) == 2 for s in fused.schedule.steps)


def test_small_products_and_reads_across_images_stay_kernel_by_kernel(monkeypatch):
    """The cost model leaves a small product's result in memory; a reader taking another image's
    entry (a sum over the batch axis) is no per-image reader."""
    outs, (cin, cout, kernel, image) = _data_gradient()
    prog = lm.compile(outs, backend="cpu").runner.program
    assert _binding(prog, {"B": 2}, tune.DEFAULT).schedule.blocked == ()  # (under MIN_BYTES)
    monkeypatch.setattr(batched, "MIN_BYTES", 0)
    monkeypatch.setattr(batched, "MIN_ENTRY_BYTES", 0)
    g = lm.Graph()
    a, b = g.input("a", (4, 16, 24)), g.input("b", (4, 24, 20))
    p = a @ b
    crossed = p + p.flip(0)  # entry b reads entry 3 - b
    prog = lm.compile([crossed], backend="cpu").runner.program
    binding = _binding(prog, {}, tune.DEFAULT)
    assert binding.schedule.blocked == ()
    arrays = {"a": rand((4, 16, 24), seed=3), "b": rand((4, 24, 20), seed=4)}
    np.testing.assert_allclose(binding.run(arrays)[0], lm.compile([crossed], backend="reference")(**arrays)[0],
                               rtol=1e-5, atol=1e-5)

"""A loop target's innermost grid axis cut where the kernel reads it in steps (``codegen/lowering/split.py``):
the cut kernel computes what the kernel did (compiled and run against numpy), kernels without such reads are
left alone, and the CPU backend cuts the max-pool gradient's kernel (its values against torch's)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import train
from luminal.backends.cpu import compiled
from luminal.backends.cpu.steps import Kernel as KernelStep
from luminal.codegen import ir, llvm
from luminal.codegen.lowering.split import MAX_STEP, split_innermost
from luminal.core import dtype as dt

F32 = dt.float32
I0, I1 = ir.item(0), ir.item(1)


def _strided(rows: int, n: int, step: int) -> ir.Kernel:
    """``y[i, j] = x[i, j // step] * t[j % step]`` over a (rows, n) grid."""
    per_row = -(-n // step)
    value = ir.alu("Mul", ir.load("x", F32, I0 * per_row + I1 // step), ir.load("t", F32, I1 % step))
    bufs = (ir.Buf("x", F32), ir.Buf("t", F32), ir.Buf("y", F32, "w"))
    return ir.check(ir.Kernel("strided", bufs, (), (ir.const(rows), ir.const(n)), (ir.Store("y", I0 * n + I1, value),)))


def _run(k: ir.Kernel, rows: int, n: int, step: int):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(rows * -(-n // step)).astype(np.float32)
    t = rng.standard_normal(step).astype(np.float32)
    y = np.zeros(rows * n, np.float32)
    llvm.compile_kernels([k], distinct=True).run(k.name, [x, t, y], (), 0, rows)
    j = np.arange(n)
    want = (x.reshape(rows, -1)[:, j // step] * t[j % step]).reshape(-1)
    return y, want


@pytest.mark.parametrize("step", [2, 3, 4])
def test_a_stepped_read_cuts_the_axis_and_computes_the_same(step):
    rows, n = 5, 12
    k = _strided(rows, n, step)
    cut = split_innermost(k)
    assert [g.arg for g in cut.grid] == [rows, n // step, step]
    y, want = _run(cut, rows, n, step)
    np.testing.assert_array_equal(y, want)  # (one correctly rounded product per element)
    np.testing.assert_array_equal(_run(k, rows, n, step)[0], want)


def test_kernels_it_leaves_alone():
    plain = ir.check(ir.Kernel("plain", (ir.Buf("x", F32), ir.Buf("y", F32, "w")), (),
                               (ir.const(3), ir.const(8)),
                               (ir.Store("y", I0 * 8 + I1, ir.load("x", F32, I0 * 8 + I1)),)))
    assert split_innermost(plain) is plain  # no step in its reads
    assert split_innermost(_strided(3, 10, 3)) is not None
    assert [g.arg for g in split_innermost(_strided(3, 10, 3)).grid] == [3, 10]  # 3 does not divide 10
    wide = _strided(2, 4 * MAX_STEP, 2 * MAX_STEP)
    assert [g.arg for g in split_innermost(wide).grid] == [2, 4 * MAX_STEP]  # too many copies of the body
    one_axis = ir.check(ir.Kernel("flat", (ir.Buf("x", F32), ir.Buf("y", F32, "w")), (), (ir.const(8),),
                                  (ir.Store("y", I0, ir.load("x", F32, I0 // 2)),)))
    assert split_innermost(one_axis) is one_axis  # axis 0 is the callers' (item ranges), never cut
    symbolic = ir.check(ir.Kernel("sym", (ir.Buf("x", F32), ir.Buf("y", F32, "w")), ("n",),
                                  (ir.const(2), ir.param("n")), (ir.Store("y", I1, ir.load("x", F32, I1 // 2)),)))
    assert split_innermost(symbolic) is symbolic  # an innermost dim of unknown size


def test_the_max_pool_gradient_kernel_is_cut(monkeypatch):
    """The CPU backend's kernel for max_pool2d's gradient reads the pooled gradient at ``(h // 2, w // 2)``:
    its grid ends in a cut axis of 2, and the gradient equals torch's."""
    made = []
    init = compiled.Binding.__init__

    def record(self, schedule):
        init(self, schedule)
        made.append(schedule)

    monkeypatch.setattr(compiled.Binding, "__init__", record)
    rng = np.random.default_rng(1)
    xv = rng.standard_normal((2, 3, 8, 12)).astype(np.float32)
    wv = rng.standard_normal((2, 3, 4, 6)).astype(np.float32)
    g = lm.Graph()
    x, w = g.input("x", xv.shape), g.input("w", wv.shape)
    loss = (lm.nn.functional.max_pool2d(x.relu(), 2) * w).sum()
    got = lm.compile(train.grad(loss, x), backend="cpu")(x=xv, w=wv)
    tx = torch.from_numpy(xv).requires_grad_()
    (torch.nn.functional.max_pool2d(tx.relu(), 2) * torch.from_numpy(wv)).sum().backward()
    np.testing.assert_allclose(np.asarray(got), tx.grad.numpy(), rtol=0, atol=1e-6)
    grids = [[g.arg for g in s.kernel.grid] for sch in made for s in sch.steps
             if isinstance(s, KernelStep) and isinstance(s.kernel, ir.Kernel)]
    assert any(grid[-1] == 2 and len(grid) >= 3 for grid in grids), grids

"""The ``pipelined`` schedule of 16-bit products (``codegen/lowering/matmul.py``): tensor cores fed
through shared memory by ``cp.async`` copies two stages deep, fragments read by ``ldmatrix``. On the
emulator against the reference over ragged tiles, several k steps and both stagings of each operand;
compiled by NVRTC for sm_90 within the register budget; on a GPU (marked ``gpu``) against the
emulator."""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm
from luminal.backends.cuda import nvrtc, render
from luminal.backends.cuda.program import DeviceProgram
from luminal.codegen import lowering
from luminal.codegen.lowering import matmul

RNG = np.random.default_rng(11)


def _products(g):
    """fp16 with k along the rows of A and down the columns of B (both staged as rows of k and as rows
    of x), a bfloat16 batch against shared weights stored (out, in): ragged 64x64 tiles, k over
    several steps of 32, with a ragged last step."""
    a, b = g.input("a", (130, 200), dtype=lm.float16), g.input("b", (200, 72), dtype=lm.float16)
    x, w = g.input("x", (3, 40, 24), dtype=lm.bfloat16), g.input("w", (88, 24), dtype=lm.bfloat16)
    outs = [a @ b, (b.T @ a.T) * 2.0, x @ w.T]
    inputs = {"a": (RNG.standard_normal((130, 200)) / 4).astype(np.float16),
              "b": (RNG.standard_normal((200, 72)) / 4).astype(np.float16),
              "x": RNG.standard_normal((3, 40, 24)).astype(np.float32),
              "w": RNG.standard_normal((88, 24)).astype(np.float32)}
    return outs, inputs


@pytest.fixture
def pipelined_first(monkeypatch):
    """Products take the pipelined schedule (the library call is left out of the options)."""
    real = lowering.options

    def options(k, target, memory):
        opts = real(k, target, memory)
        if "pipelined" in opts:
            opts = ("pipelined",) + tuple(o for o in opts if o not in ("pipelined", "library"))
        return opts

    monkeypatch.setattr(lowering, "options", options)


def _compiled():
    g = lm.Graph()
    outs, inputs = _products(g)
    return lm.compile(outs, backend="cuda-emulated"), outs, inputs


def _pipelined(f) -> list:
    """The program's kernels of the pipelined schedule."""
    return [x.kernel for s in f.runner.program.steps for x in s.launches
            if getattr(x.kernel, "notes", {}).get("schedule") == "pipelined"]


def test_pipelined_products_compute_the_reference(pipelined_first):
    f, outs, inputs = _compiled()
    got = f(**inputs)
    want = lm.compile(outs, backend="reference")(**inputs)
    for o, (x, y) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_allclose(np.asarray(x, np.float64), np.asarray(y, np.float64), rtol=2e-2, atol=2e-2,
                                   err_msg=f"output {o}")
    assert len(_pipelined(f)) == 3


def test_staging_follows_the_contiguous_axis_and_refuses_unaligned_operands():
    """Each operand is staged along its unit stride (k: rows of m or n; else rows of k), and a stride
    that is no multiple of 8 elements (16 bytes) leaves the schedule out."""
    from luminal.backends.cuda.launches import DeviceMemory
    from luminal.codegen.target import CUDA

    g = lm.Graph()
    a, b = g.input("a", (64, 48), dtype=lm.float16), g.input("b", (48, 72), dtype=lm.float16)
    odd = g.input("o", (48, 36), dtype=lm.float16)  # rows of 36 elements: 72 bytes
    kinds = {}
    for name, out in (("ab", a @ b), ("bTaT", b.T @ a.T), ("odd", a @ odd)):
        f = lm.compile([out], backend="cuda-emulated")
        (k,) = [k for k in f.runner.program.kg.kernels if k.kind == "matmul"]
        memory = DeviceMemory()
        axes = matmul.matmul_axes(k)
        _, m_ax, n_ax, k_ax = axes
        sa, sb = matmul.roles(k, axes)
        kinds[name] = (matmul.staging(k, memory, sa, m_ax, k_ax), matmul.staging(k, memory, sb, n_ax, k_ax),
                       "pipelined" in lowering.options(k, CUDA, memory))
    assert kinds == {"ab": ("k", "x", True), "bTaT": ("x", "k", True), "odd": ("k", None, False)}


def test_pipelined_kernels_compile_for_sm90(pipelined_first):
    """Every pipelined kernel compiles with NVRTC to an sm_90 cubin without spills."""
    f, _, inputs = _compiled()
    f(**inputs)
    kernels = _pipelined(f)
    assert len(kernels) == 3
    for k in kernels:
        source = render.render(k)
        assert "cp.async.cg.shared.global" in source and "ldmatrix.sync.aligned.m8n8.x4" in source
        cubin = nvrtc.compile_cubin(source, render.kernel_symbol(k), "sm_90")
        registers, spills = nvrtc.entry_resources(cubin.log)[render.kernel_symbol(k)]
        assert cubin.data[:4] == b"\x7fELF" and 0 < registers <= 255 and spills == 0, (k.name, registers, spills)


@pytest.mark.gpu
@pytest.mark.usefixtures("cuda_device")
def test_gpu_pipelined_products_match_the_emulator(pipelined_first):
    """On a device: the same program, its kernels launched through the driver, within the tensor
    cores' accumulation-order tolerance of the emulator."""
    emulated, _, inputs = _compiled()
    device, _, _ = _compiled()
    device.runner.program = DeviceProgram(device.runner.program.kg, device.runner.program.plan)
    for w, x in zip(emulated(**inputs), device(**inputs), strict=True):
        np.testing.assert_allclose(np.asarray(x, np.float64), np.asarray(w, np.float64), rtol=2e-3, atol=2e-3)

"""One index simplifier for every target (``codegen/simplify.py``): the CPU emitter and the CUDA
renderer render the simplified kernel, the emulator runs the kernel as lowered. Here every GPU kernel
of the example programs runs on the emulator both ways, on the same buffers: the simplified kernel
must write exactly the same bytes."""

import numpy as np
import pytest
from programs import BUILDERS, compiled

from luminal.codegen import emulator, ir
from luminal.codegen.simplify import simplify_index
from luminal.core import dtype as dt


@pytest.mark.parametrize("builder", BUILDERS, ids=lambda b: b.__name__)
def test_simplified_gpu_kernels_write_the_same_bytes(builder, monkeypatch):
    real, ran = emulator.run, []

    def both(kernel, buffers, params=None):
        simplified = simplify_index(kernel)
        copies = {n: b.copy() for n, b in buffers.items()}
        real(simplified, copies, params)
        real(kernel, buffers, params)
        for n, b in buffers.items():
            assert np.array_equal(b.view(np.uint8), copies[n].view(np.uint8)), f"{kernel.name}: buffer {n} differs"
        ran.append(kernel.name)

    monkeypatch.setattr(emulator, "run", both)
    f, inputs = compiled(builder)
    f(**inputs)
    assert ran, "no kernel ran on the emulator"


def test_index_math_dividing_by_zero_is_left_as_written():
    """A division by a constant 0 (a zero-size dim's index math, in code no item reaches) is no
    row-major split to put back together: the simplifier keeps it as written (it used to raise
    ZeroDivisionError on ``i // 0 + 1``, in a kernel of the CUDA lowering)."""
    i = ir.V("item", ir.INDEX, (), 0)
    index = ir.add(ir.div(i, ir.const(0)), ir.const(1))
    k = ir.Kernel("k", (ir.Buf("o", dt.int32),), (), (ir.const(4),), (ir.Store("o", index, ir.const(1, dt.int32)),))
    (store,) = simplify_index(k).body
    assert ir.show_value(store.index) == ir.show_value(index)

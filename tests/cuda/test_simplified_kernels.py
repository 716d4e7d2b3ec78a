"""One index simplifier for every target (``codegen/simplify.py``): the CPU emitter and the CUDA
renderer render the simplified kernel, the emulator runs the kernel as lowered. Here every GPU kernel
of the example programs runs on the emulator both ways, on the same buffers: the simplified kernel
must write exactly the same bytes."""

import numpy as np
import pytest
from programs import BUILDERS, compiled

from luminal.backends.cuda import emulator
from luminal.codegen.simplify import simplify_index


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

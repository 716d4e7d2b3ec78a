"""Every distinct GPU kernel the test session generated compiles with NVRTC to an sm_90 cubin
within the spill budget.

``tests/conftest.py`` moves this test to the end of the session, so it sees the kernels of every
``cuda-emulated`` test that ran before it (``program.generated_kernels()``); run alone, it first
lowers the shared example programs, so it never checks nothing."""

from programs import BUILDERS, compiled, train_step

from luminal.backends.cuda import nvrtc, render
from luminal.backends.cuda.program import generated_kernels

SPILL_BUDGET = 0  # bytes of local-memory spill stores + loads per kernel (ptxas -v)
REGISTER_BUDGET = 255  # what a thread can address at all on sm_90


def test_every_generated_kernel_compiles_to_a_cubin():
    for builder in BUILDERS:
        compiled(builder)
    train_step()
    kernels = generated_kernels()
    assert len(kernels) >= 20
    over = []
    for k in kernels:
        cubin = nvrtc.compile_cubin(render.render(k), render.kernel_symbol(k), arch="sm_90")
        assert cubin.data[:4] == b"\x7fELF", k.name
        if cubin.spills > SPILL_BUDGET or cubin.registers > REGISTER_BUDGET:
            over.append(f"{k.name}: {cubin.registers} registers, {cubin.spills} spill bytes")
    assert not over, "kernels over the budget:\n" + "\n".join(over)

"""Every distinct GPU kernel the test session generated compiles with NVRTC to an sm_90 cubin
within the spill budget (in batches of ``BATCH`` kernels per program, each kernel's registers and
spills read from ptxas's report).

``tests/conftest.py`` moves this test to the end of the session, so it sees the kernels of every
``cuda-emulated`` test that ran before it (``program.generated_kernels()``), and under pytest-xdist
those the other workers lowered too (``tests/session_kernels.py``: it waits for their last tests);
run alone, it first lowers the shared example programs, so it never checks nothing."""

import os
from concurrent.futures import ThreadPoolExecutor

import pytest
import session_kernels
from programs import BUILDERS, compiled, train_step

from luminal.backends.cuda import nvrtc, render
from luminal.backends.cuda.program import generated_kernels

SPILL_BUDGET = 64  # bytes of local-memory spill stores + loads per kernel (ptxas -v): 4 of the ~9000 kernels
# of a full session spill 28-32 bytes (deep elementwise regions at 48 registers); none more
REGISTER_BUDGET = 255  # what a thread can address at all on sm_90
BATCH = 128  # kernels per NVRTC program (its cost is mostly per program)


@pytest.mark.slow  # the full tier: it checks the kernels of the cuda-emulated parity tests, which run there
def test_every_generated_kernel_compiles_to_a_cubin():
    for builder in BUILDERS:
        compiled(builder)
    train_step()
    kernels = {}  # name -> (C symbol, source): each distinct kernel once, whichever process lowered it

    def batches(rendered) -> list:
        new = []
        for name, symbol, source, error in rendered:
            assert error is None, f"{name}: {error}"
            if name not in kernels:
                kernels[name] = (symbol, source)
                new.append(name)
        return [new[i:i + BATCH] for i in range(0, len(new), BATCH)]

    def build(batch):  # NVRTC runs outside the GIL: the machine's cores compile side by side
        source = render.combine(kernels[n][1] for n in batch)
        return batch, nvrtc.compile_cubin(source, f"{len(batch)} kernels from {batch[0]}", arch="sm_90")

    over = []
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        # this process's kernels compile while the other xdist workers (if any) finish their last tests
        jobs = [pool.submit(build, b) for b in batches(session_kernels.rendered(generated_kernels()))]
        jobs += [pool.submit(build, b) for b in batches(session_kernels.other_workers())]
        assert len(kernels) >= 20
        for job in jobs:
            batch, cubin = job.result()
            assert cubin.data[:4] == b"\x7fELF", batch[0]
            resources = nvrtc.entry_resources(cubin.log)
            for n in batch:
                registers, spills = resources[kernels[n][0]]
                assert registers > 0, n
                if spills > SPILL_BUDGET or registers > REGISTER_BUDGET:
                    over.append(f"{n}: {registers} registers, {spills} spill bytes")
    assert not over, "kernels over the budget:\n" + "\n".join(over)

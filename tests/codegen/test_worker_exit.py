"""The LLVM worker processes (``codegen/llvm_workers.py``) are released cleanly at interpreter exit:
under ``python -X dev -W error::ResourceWarning`` an unclosed pipe to a worker (its stdout was never
closed) was reported at exit, and a worker dropped after a failure was killed but never waited for
nor its pipes closed. Each case runs in a fresh interpreter, which must exit with a clean stderr."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

_COMPILE = """
import numpy as np
import luminal as lm
from luminal.backends import cpu
from luminal.codegen import llvm_workers

cpu.PRESTART_NODES = 3  # (a small program starts the workers too: ``Cpu.expect_code``)
g = lm.Graph()
x = g.input("x", (4,))
out = lm.compile([(x * 3 + 1).exp()])(x=np.ones(4, np.float32))
assert llvm_workers.running() == 1, llvm_workers.running()
"""

_DROP = _COMPILE + """
import os, signal
from luminal.codegen import ir, llvm
from luminal.core import dtype as dt

def kernel(k):
    x = ir.load("x", dt.float32, ir.item(0))
    return ir.Kernel(f"k{k}", (ir.Buf("x", dt.float32), ir.Buf("y", dt.float32, "w")), (), (ir.const(8),),
                     (ir.Store("y", ir.item(0), ir.alu("Add", x, ir.const(float(k), dt.float32))),))

(w,) = llvm_workers._workers
os.kill(w.proc.pid, signal.SIGKILL)  # (a crashed worker: the batch drops it and compiles its texts here)
w.proc.wait()
batch = llvm_workers.Batch(llvm.compile_text_to_object)
for k in range(4):
    batch.submit(llvm._named_by_content(kernel(k), False, None)[1])
assert all(batch.results()) and not llvm_workers._workers
"""


def _run(code: str, tmp_path) -> subprocess.CompletedProcess:
    env = {**os.environ, "LUMINAL_COMPILE_WORKERS": "2", "LUMINAL_CACHE": "0", "LUMINAL_CACHE_DIR": str(tmp_path),
           "PYTHONWARNINGS": "error::ResourceWarning"}
    return subprocess.run([sys.executable, "-X", "dev", "-W", "error::ResourceWarning", "-c", textwrap.dedent(code)],
                          env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("code", [_COMPILE, _DROP], ids=["compiled", "worker-dropped"])
def test_workers_exit_without_resource_warnings(code, tmp_path):
    res = _run(code, tmp_path)
    assert res.returncode == 0 and res.stderr == "", res.stderr

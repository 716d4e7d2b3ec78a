"""Single-pass rows on the CPU (``codegen/lowering/rows.py``): softmax, log-softmax, LayerNorm and
RMSNorm as one generated kernel, a work item per row (the threads share the rows), each phase a loop
over the row; the reference's values for rows of every length, 16-bit inputs and many rows cut over
threads. (A symbolic batch and a backward pass: ``tests/codegen/test_row_runs.py``.)"""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm
from luminal.backends.cpu.parallel import Split
from luminal.nn import functional as F
from luminal.train import grad

NORMS = {
    "softmax": lambda x: x.softmax(-1),
    "log_softmax": lambda x: x.log_softmax(-1),
    "layer_norm": lambda x: F.layer_norm(x, (x.shape[-1],), eps=1e-5),
    "rms_norm": lambda x: F.rms_norm(x, (x.shape[-1],), eps=1e-6),
}


def _kernels(f) -> list:
    """The names of the generated kernels a compiled function's binding calls (a kernel cut over the
    threads, which a binding timed at its first call may be: once)."""
    binding = next(reversed(f.runner.program._bindings.values()))
    steps = [s.parts[0][0] if isinstance(s, Split) else s for s in binding.schedule.steps]
    return [s.kernel.name for s in steps if getattr(s, "kernel", None) is not None]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(6, 37), (3, 1000), (2, 3, 130), (2048, 64)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("norm", list(NORMS))
def test_norms_are_one_kernel_and_match_the_reference(norm, shape, dtype):
    g = lm.Graph()
    x = g.input("x", shape, dtype=getattr(lm, dtype))
    y = NORMS[norm](x)
    a = np.random.default_rng(1).standard_normal(shape).astype(np.float16 if dtype == "float16" else np.float32)
    f, ref = lm.compile(y, backend="cpu"), lm.compile(y, backend="reference")  # (bfloat16: float32 arrays)
    got, want = f(x=a), ref(x=a)
    tol = 2e-6 if dtype == "float32" else 2e-2
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=tol, atol=tol)
    assert any(name.startswith("rows") for name in _kernels(f)), _kernels(f)


def test_a_run_whose_buffers_share_storage_stays_kernel_by_kernel():
    """nanmean and its gradient: the memory plan gives the gradient the storage of the sum, which only
    the mean read. One kernel would store both there (and its buffers are promised not to alias, so
    the order of those stores is LLVM's): the run must stay kernel by kernel, and the values right."""
    x0 = np.random.default_rng(0).standard_normal((4, 3, 5)).astype(np.float32)
    x0.reshape(-1)[::3] = np.nan
    g = lm.Graph()
    x = g.input("x", x0.shape)
    y = x.nanmean()
    (dx,) = grad(y, [x])
    f, ref = lm.compile([y, dx], backend="cpu"), lm.compile([y, dx], backend="reference")
    for got, want in zip(f(x=x0), ref(x=x0)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _exp2_count(kernel) -> int:
    """Exp2 operations in a kernel's body (a value shared by several statements counted once each)."""
    from luminal.codegen import ir

    def values(stmts):
        for s in stmts:
            if isinstance(s, ir.Loop):
                yield from values(s.body)
            elif isinstance(s, ir.If):
                yield from values(s.body)
            elif isinstance(s, (ir.Assign, ir.Store)):
                yield s.value

    def count(v):
        return (v.op == "Exp2") + sum(count(a) for a in v.args)

    return sum(count(v) for v in values(kernel.body))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_softmax_computes_each_exponential_once(dtype):
    """The sum phase stores ``exp(x - max)`` into the output and the last phase reads it back and
    divides (the stored value is the one computed, in the output's dtype). Values as the reference's."""
    g = lm.Graph()
    x = g.input("x", (5, 77), dtype=getattr(lm, dtype))
    y = x.softmax(-1)
    a = np.random.default_rng(2).standard_normal((5, 77)).astype(getattr(np, dtype))
    f = lm.compile(y, backend="cpu")
    want = lm.compile(y, backend="reference")(x=a)
    tol = {"float32": 2e-6, "float64": 1e-12}[dtype]
    np.testing.assert_allclose(np.asarray(f(x=a), np.float64), np.asarray(want, np.float64), rtol=tol, atol=tol)
    binding = next(reversed(f.runner.program._bindings.values()))
    counts = [_exp2_count(s.kernel) for s in binding.schedule.steps if getattr(s, "kernel", None) is not None
              and s.kernel.name.startswith("rows")]
    # (float64's exp is two Exp2, exp(r) and 2**n, and long enough to be stored by a kernel of its own
    # rather than recomputed in the two phases that read it: ``_exp_f64``, ``kernels.RECOMPUTE_LIMIT``)
    assert counts == [1] if dtype == "float32" else sum(counts) == 2, counts

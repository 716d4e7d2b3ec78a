"""The cpu backend generates and compiles a program's code once, not once per block or per binding:
kernels are generic in the symbolic dims (``DimValue`` sizes become kernel parameters) and memoised
per program by template and placements (``lowering._generate``), so the trips of a rolled stack and
every new batch size reuse the kernels and LLVM objects of the first. Counted with ``llvm.STATS``
after ``llvm.forget()`` and with the disk cache off (``LUMINAL_CACHE=0``), so that no object comes
from an earlier test or session. Also: engines are freed with the last program using them (memory
stays flat over many bindings), and ``shapes=`` / ``prepare`` lay a binding out before its first call."""

from __future__ import annotations

import gc
import os
import weakref

import numpy as np
import pytest

import luminal as lm
from luminal import nn, train
from luminal.codegen import llvm


@pytest.fixture
def counting(monkeypatch):
    """Objects counted from here on are this test's: no disk cache, empty in-process caches, and the
    process-wide one-time code (the call driver) compiled already by a warm-up program."""
    monkeypatch.setenv("LUMINAL_CACHE", "0")
    g = lm.Graph()
    x = g.input("x", ("B", 4))
    lm.compile([(x * 2).exp()], backend="cpu")(x=np.ones((2, 4), np.float32))
    llvm.forget()


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _close(got, want, rtol=1e-5, atol=1e-6):
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


class _Residual(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x):
        return x + self.fc2(self.fc1(self.ln(x)).gelu())


def _stack(depth: int, d: int = 16) -> list:
    """Loss and every parameter's gradient of ``depth`` residual blocks over an input ("B", d)."""
    lm.manual_seed(depth)
    g = lm.Graph()
    y = g.input("x", ("B", d))
    blocks = [_Residual(d) for _ in range(depth)]
    for b in blocks:
        y = b(y)
    loss = (y * y).mean()
    return [loss, *train.grad(loss, [p for b in blocks for p in b.parameters()])]


def _mlp(seed: int = 0) -> list:
    """A 2-layer MLP's softmax over an input ("B", 8), and its mean over the batch: the batch is a
    loop's bound there, not only the outer grid axis that calls cut (whose extent never was in the
    code), so code specialised to one batch size would differ for the next."""
    lm.manual_seed(seed)
    g = lm.Graph()
    l1, l2 = nn.Linear(8, 16), nn.Linear(16, 4)
    p = l2(l1(g.input("x", ("B", 8))).relu()).softmax(-1)
    return [p, p.mean(0)]


def test_objects_compiled_do_not_grow_with_depth(counting):
    """A rolled stack compiles the objects of one block, whatever its depth (at a333460 every block
    of the stack was code of its own: objects grew with depth, 514 at depth 32)."""
    x = _rand(8, 16)
    seen = {}
    for depth in (2, 6):
        llvm.forget()
        outs = _stack(depth)
        before = llvm.STATS["compiled"]
        f = lm.compile(outs, backend="cpu")
        got = f(x=x)
        r = f.report(show=False)
        seen[depth] = (llvm.STATS["compiled"] - before, f.runner.program.codegen["kernels"])
        # the stack is rolled (else the blocks would be kernels of their own, not trips of one)
        assert r.loops and max(lp["trips"] for lp in r.loops) >= depth - 1, r.loops
        assert r.codegen["compiled"] == seen[depth][0] > 0
        _close(got, lm.compile(outs, backend="reference")(x=x), rtol=1e-4, atol=1e-5)
    assert seen[6][0] <= seen[2][0], seen  # LLVM objects
    assert seen[6][1] <= seen[2][1], seen  # kernels generated


def test_new_batch_sizes_compile_nothing(counting):
    """After the first binding, 49 other batch sizes generate no kernel and compile no object, with
    the reference's values (at a333460 each new batch size compiled its kernels again)."""
    outs = _mlp()
    f = lm.compile(outs, backend="cpu")
    ref = lm.compile(outs, backend="reference")
    x = _rand(2, 8)
    _close(f(x=x), ref(x=x))
    p = f.runner.program
    before, kernels = llvm.STATS["compiled"], p.codegen["kernels"]
    assert kernels > 0 and p.codegen["compiled"] > 0
    for n in range(3, 52):
        x = _rand(n, 8, seed=n)
        _close(f(x=x), ref(x=x))
    assert llvm.STATS["compiled"] == before
    assert p.codegen["kernels"] == kernels and p.codegen["bindings"] == 50
    assert p.codegen["reused"] >= 49 * kernels
    for n in (1, 0):  # (a size-1 dim may lay out otherwise: only its values are checked here)
        x = _rand(n, 8, seed=100 + n)
        _close(f(x=x), ref(x=x))


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads the resident set size from /proc")
def test_engines_and_memory_are_freed_with_the_program(counting):
    """300 bindings share one engine while the program lives, and deleting the program frees it:
    resident memory returns near where it was (at a333460 each binding linked an engine of its own,
    all kept in an unbounded in-process cache)."""

    def run(n: int, seed: int):
        f = lm.compile(_mlp(seed), backend="cpu")
        most = 0
        for b in range(2, 2 + n):
            f(x=np.ones((b, 8), np.float32))
            most = max(most, len(llvm._modules))
        return f, most

    # warm-up: one-time imports, caches and allocator pools are not what this test measures
    f, _ = run(20, 0)
    del f
    gc.collect()
    rss0, modules0 = _rss(), len(llvm._modules)

    f, most = run(300, 1)
    assert f.runner.program.codegen["bindings"] == 300
    assert most <= modules0 + 2, (most, modules0)  # one engine for every binding, not 300
    program = weakref.ref(f.runner.program)
    del f
    gc.collect()
    assert program() is None
    assert len(llvm._modules) <= modules0 + 1, (len(llvm._modules), modules0)
    grown = _rss() - rss0
    assert grown < 40 << 20, f"resident memory grew {grown / 2**20:.1f} MiB"


def test_shapes_lay_the_program_out_before_the_first_call(counting):
    """``compile(shapes=)``: the code is generated at compile (the report counts it), and the first
    call with those shapes lays out nothing and compiles nothing."""
    outs = _mlp()
    f = lm.compile(outs, backend="cpu", shapes={"x": (16, 8)})
    p = f.runner.program
    assert p.codegen["bindings"] == 1 and p.codegen["compiled"] > 0
    r = f.report(show=False)
    assert r.codegen == p.codegen and r.times["code generation"] == p.codegen["seconds"]
    assert any(line.startswith("  code generation: 1 binding") for line in str(r).splitlines()), str(r)
    before = llvm.STATS["compiled"]
    x = _rand(16, 8)
    _close(f(x=x), lm.compile(outs, backend="reference")(x=x))
    assert p.codegen["bindings"] == 1 and llvm.STATS["compiled"] == before
    f.prepare(x=np.zeros((5, 8), np.float32))  # an array stands for its shape
    assert p.codegen["bindings"] == 2

    # before any binding the report says so
    assert "code generation: none yet" in str(lm.compile(outs, backend="cpu").report(show=False))
    # nothing to generate for the reference interpreter, but the same checks
    ref = lm.compile(outs, backend="reference", shapes={"x": (3, 8)})
    _close(ref(x=x[:3]), f(x=x[:3]))

    with pytest.raises(ValueError, match="'y'"):
        f.prepare(y=(16, 8))
    with pytest.raises(ValueError, match="'z'"):
        lm.compile(outs, backend="cpu", shapes={"z": (16, 8)})
    for bad in ((16, 9), (16,), (16, 8, 1), (16, -1), (16.0, 8), "16x8"):
        with pytest.raises(ValueError, match="'x'"):
            f.prepare(x=bad)


def _classifier():
    """A small MNIST-like classifier's loss (inputs x (B, 16) float32 and y (B,) int32) and AdamW."""
    lm.manual_seed(0)
    g = lm.Graph()
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10))
    loss = train.cross_entropy(model(g.input("x", ("B", 16))), g.input("y", ("B",), dtype=lm.int32))
    return loss, train.AdamW(model.parameters(), lr=1e-2)


def test_compile_step_with_shapes(counting):
    """``compile_step(shapes=)`` lays the step out at compile without running it: the first steps
    compile nothing and train as a step compiled without it does (whose first loss is the reference
    backend's; later ones are compared with the cpu step's only: AdamW's first update is lr times the
    sign of each gradient, which a last-bit difference in a gradient near zero could flip)."""
    step = train.compile_step(*_classifier(), backend="cpu", shapes={"x": (8, 16), "y": (8,)})
    plain = train.compile_step(*_classifier(), backend="cpu")
    ref = train.compile_step(*_classifier(), backend="reference")
    p = step._update.runner.program
    assert p.codegen["bindings"] == 1 and p.codegen["compiled"] > 0
    assert plain._update.runner.program.codegen["bindings"] == 0
    assert "code generation: 1 binding" in str(step.report(show=False))
    before = llvm.STATS["compiled"]
    rng = np.random.default_rng(0)
    batches = [(_rand(8, 16, seed=n), rng.integers(0, 10, 8).astype(np.int32)) for n in range(3)]
    losses = [float(step(x=x, y=y)) for x, y in batches]
    assert p.codegen["bindings"] == 1 and llvm.STATS["compiled"] == before
    np.testing.assert_allclose(losses, [float(plain(x=x, y=y)) for x, y in batches], rtol=1e-6)
    x, y = batches[0]
    np.testing.assert_allclose(losses[0], float(ref(x=x, y=y)), rtol=1e-5)

    step.prepare(x=(4, 16), y=(4,))
    assert p.codegen["bindings"] == 2
    with pytest.raises(ValueError, match="'z'"):
        step.prepare(x=(4, 16), y=(4,), z=(4,))
    with pytest.raises(ValueError, match="'y'"):
        step.prepare(x=(4, 16), y=(5,))
    with pytest.raises(ValueError, match="'x'"):
        train.compile_step(*_classifier(), backend="cpu", shapes={"x": (8, 15), "y": (8,)})


def test_bindings_share_the_generated_kernels(counting):
    """A second batch size lays out the very kernels the first generated (the program's memo), each
    reading the batch dim as a parameter rather than a constant of the first binding."""
    f = lm.compile(_mlp(), backend="cpu")
    f(x=_rand(3, 8))
    f(x=_rand(5, 8))
    p = f.runner.program
    first, second = p._bindings.values()
    made, again = first.schedule.generated, second.schedule.generated
    assert len(made) == len(again) > 0
    assert all(a[0] is b[0] for a, b in zip(made, again))
    assert any("B" in kern.params for kern, _, _ in made)
    assert p.codegen["reused"] >= len(made) and p.codegen["kernels"] == len({id(k) for k, _, _ in made})


def _ops(g):
    x, y = g.input("x", ("B", "S")), g.input("y", ("S",))
    return [x.softmax(-1), x.sum(-1), x.amax(0), (x + y).cumsum(-1), x[:, 1:] * 2, x[:, ::2] + 1,
            x.pad((1, 2), value=3.0), lm.cat([x, x * 3], 1), x.flip(1), x.T @ x, x.mean(0) - y]


def test_generic_kernels_give_the_references_values_for_every_binding(counting):
    """Reductions over a symbolic axis, slices, strides, pads, concatenations and flips of it, and a
    product over the batch: code generated for one binding runs for the others with their values,
    and bindings of dims >= 2 after the first generate nothing new."""
    g = lm.Graph()
    outs = _ops(g)
    f = lm.compile(outs, backend="cpu")
    ref = lm.compile(outs, backend="reference")
    p = f.runner.program
    kernels = None
    for n, (b, s) in enumerate([(2, 5), (3, 7), (2, 2), (5, 16), (4, 33), (1, 5), (2, 1), (1, 1), (3, 0)]):
        x, y = _rand(b, s, seed=n), _rand(s, seed=50 + n)
        _close(f(x=x, y=y), ref(x=x, y=y), rtol=1e-5, atol=1e-5)
        if kernels is None:
            kernels = p.codegen["kernels"]
        elif b >= 2 and s >= 2:
            assert p.codegen["kernels"] == kernels, (b, s)


def test_attention_with_new_batch_and_sequence_compiles_nothing(counting):
    """Multi-head attention stores its head split permuted (a GEMM layout): the strides of that
    storage are expressions of B and S too, so new (B, S) bindings compile nothing (they baked each
    binding's sizes before: one new object per call)."""
    lm.manual_seed(0)
    attn = nn.MultiheadAttention(8, 2, batch_first=True)
    g = lm.Graph()
    x = g.input("x", ("B", "S", 8))
    y = attn(x, x, x, need_weights=False)[0]
    f, ref = lm.compile(y, backend="cpu"), lm.compile(y, backend="reference")
    f(x=_rand(2, 5, 8))
    assert any(b.schedule.perms for b in f.runner.program._bindings.values()), "the case should store a buffer permuted"
    before = llvm.STATS["compiled"]
    for b, s in ((3, 5), (4, 5), (2, 6), (2, 7), (5, 3)):
        a = _rand(b, s, 8, seed=b * 10 + s)
        _close(f(x=a), ref(x=a), rtol=1e-4, atol=1e-5)
    assert llvm.STATS["compiled"] == before


def test_the_first_program_of_a_process_is_freed():
    """egglog, imported lazily by the first compile, keeps the frame that defines its classes; the
    import runs on a thread of its own so that frame has none of the compile's above it (it kept the
    first program, graph and weights alive for the life of the process)."""
    import subprocess
    import sys

    code = ("import gc, weakref, numpy as np, luminal as lm\n"
            "def first():\n"
            "    g = lm.Graph(); f = lm.compile([g.input('x', (4, 4)) * 2], backend='cpu')\n"
            "    f(x=np.ones((4, 4), np.float32)); return weakref.ref(f)\n"
            "r = first(); gc.collect(); print('alive' if r() is not None else 'freed')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "LUMINAL_CACHE": "0"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "freed"

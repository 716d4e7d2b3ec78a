"""Fused attention on the CPU (``backends/cpu/attention.py``): the scores product, the softmax's row
kernels and the product with v run a block of query rows at a time, the scores and probabilities in
a per-thread scratch. Each case is run fused (blocks small enough that a head takes several, one and
two threads) and unfused, against float64 numpy and the reference interpreter; the fused schedule
must touch no storage as large as the score matrix; search may pick the unfused layout."""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm
from luminal.backends.cpu import attention, tune
from luminal.backends.cpu.compiled import Binding, CpuProgram
from luminal.backends.cpu.parallel import Split
from luminal.backends.cpu.plan import plan
from luminal.backends.cpu.steps import Gemm, Kernel
from luminal.core.kernel_graph import expand_calls
from luminal.nn import functional as F


def _sdpa(b, h, lq, lk, d, dtype=lm.float32, causal=False, mask=None, dv=None):
    g = lm.Graph()
    q = g.input("q", (b, h, lq, d), dtype=dtype)
    k = g.input("k", (b, h, lk, d), dtype=dtype)
    v = g.input("v", (b, h, lk, dv or d), dtype=dtype)
    m = None if mask is None else g.input("m", (lq, lk), dtype=mask)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal)


def _arrays(b, h, lq, lk, d, dtype=np.float32, mask=None, dv=None, seed=0):
    rng = np.random.default_rng(seed)
    out = {"q": rng.standard_normal((b, h, lq, d)).astype(dtype), "k": rng.standard_normal((b, h, lk, d)).astype(dtype),
           "v": rng.standard_normal((b, h, lk, dv or d)).astype(dtype)}
    if mask is lm.bool_:
        out["m"] = rng.random((lq, lk)) < 0.8
        out["m"][:, 0] = True  # (no row wholly masked)
    elif mask is not None:
        out["m"] = rng.standard_normal((lq, lk)).astype(dtype)
    return out


def _numpy(a: dict, causal: bool) -> np.ndarray:
    q, k, v = (a[n].astype(np.float64) for n in "qkv")
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    if "m" in a:
        s = np.where(a["m"], s, -np.inf) if a["m"].dtype == bool else s + a["m"]
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def _binding(prog, choices) -> Binding:
    return Binding(plan(prog.kg, expand_calls(prog.kg.kernels), prog.plan, {}, choices))


def _storages_touched(schedule) -> set:
    """The spaces of the schedule's own storages that some step reads or writes."""
    spaces: set = set()

    def walk(steps):
        for st in steps:
            if isinstance(st, Split):
                for part in st.parts:
                    walk(part)
            elif isinstance(st, Kernel):
                spaces.update(s for s, _ in st.buffers if type(s) is int)
            else:
                spaces.update(x.space for x in getattr(st, "args", ()) if type(getattr(x, "space", None)) is int)

    walk(schedule.steps)
    return spaces


CASES = [  # (b, h, lq, lk, d, causal, mask, dv)
    (2, 3, 40, 40, 8, False, None, None),
    (1, 4, 37, 53, 5, False, None, 7),  # cross attention, odd sizes, v wider than q
    (2, 2, 48, 48, 16, True, None, None),  # causal: the softmax as two runs of row kernels
    (1, 3, 33, 33, 8, False, lm.float32, None),  # an additive mask
    (2, 2, 24, 40, 8, False, lm.bool_, None),  # a boolean mask
]


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:5])) + ("-causal" if c[5] else "") +
                         (f"-mask{c[6].name}" if c[6] else ""))
def test_fused_attention_computes_the_reference(monkeypatch, case, threads):
    b, h, lq, lk, d, causal, mask, dv = case
    monkeypatch.setenv("LUMINAL_NUM_THREADS", threads)
    monkeypatch.setattr(attention, "MIN_BYTES", 0)
    monkeypatch.setattr(attention, "BLOCK_BYTES", 3 * 8 * lk * 4)  # (a few rows a block: several per head)
    out = _sdpa(b, h, lq, lk, d, causal=causal, mask=mask, dv=dv)
    a = _arrays(b, h, lq, lk, d, mask=mask, dv=dv)
    want = _numpy(a, causal)
    prog = lm.compile([out], backend="cpu").runner.program
    ref = lm.compile([out], backend="reference")(**a)[0]
    np.testing.assert_allclose(ref, want, rtol=1e-4, atol=1e-5)
    fused, plain = _binding(prog, tune.DEFAULT), _binding(prog, tune.Choices(blocks=False))
    assert fused.schedule.blocked == ("attention",) and plain.schedule.blocked == ()
    for _ in range(2):  # (a second run over the same storage: nothing left from the first)
        got = fused.run(a)[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got, plain.run(a)[0], rtol=1e-5, atol=1e-6)
    # no storage as large as the score matrix is read or written
    scores = b * h * lq * lk * 4
    big = {i for i, s in enumerate(fused.schedule.storages) if s.nbytes >= scores}
    assert big and not big & _storages_touched(fused.schedule)
    assert big & _storages_touched(plain.schedule)
    blocks = [s for s in fused.schedule.steps if isinstance(s, Split)] if threads == "2" else []
    assert threads == "1" or blocks  # two threads share the blocks


def test_float64_and_the_compiled_call(monkeypatch):
    """float64 operands fuse too, and the program's own call (the driver) gives the numbers."""
    monkeypatch.setattr(attention, "MIN_BYTES", 0)
    out = _sdpa(2, 2, 64, 64, 8, dtype=lm.float64)
    a = _arrays(2, 2, 64, 64, 8, dtype=np.float64)
    f = lm.compile([out], backend="cpu")
    np.testing.assert_allclose(f(**a)[0], _numpy(a, False), rtol=1e-10, atol=1e-12)
    assert f.runner.program.binding({}).schedule.blocked == ("attention",)


def test_the_cost_model_leaves_small_score_matrices_unfused():
    """Below MIN_BYTES of scores the blocks' extra calls cost more than the traffic they save."""
    small = lm.compile([_sdpa(1, 2, 16, 16, 8)], backend="cpu").runner.program
    assert _binding(small, tune.DEFAULT).schedule.blocked == ()
    rows = attention.MIN_BYTES // (4 * 256) + 1
    large = lm.compile([_sdpa(1, 1, rows, 256, 8)], backend="cpu").runner.program
    assert _binding(large, tune.DEFAULT).schedule.blocked == ("attention",)


def test_scores_read_elsewhere_are_not_fused(monkeypatch):
    """A graph that also returns the probabilities (as a training step keeps them for the backward
    pass) runs kernel by kernel: P must be in memory."""
    monkeypatch.setattr(attention, "MIN_BYTES", 0)
    g = lm.Graph()
    q, k, v = (g.input(n, (2, 2, 32, 8)) for n in "qkv")
    p = (q @ k.transpose(-1, -2)).softmax(-1)
    prog = lm.compile([p @ v, p], backend="cpu").runner.program
    b = _binding(prog, tune.DEFAULT)
    assert b.schedule.blocked == ()
    a = _arrays(2, 2, 32, 32, 8)
    want = lm.compile([p @ v, p], backend="reference")(**a)
    for x, w in zip(b.run(a), want):
        np.testing.assert_allclose(x, w, rtol=1e-5, atol=1e-6)


def test_probabilities_read_by_the_second_products_epilogue_stay_in_memory():
    """``P @ v + P[..., :d]``: the add is the second product's epilogue, run after the blocks, so P must
    be in memory: not fused (at the default thresholds: a 4 MB score matrix). Found by review: fused,
    the epilogue read a P that was never written."""
    g = lm.Graph()
    q, k, v = (g.input(n, (8, 8, 128, 16)) for n in "qkv")
    p = (q @ k.transpose(-1, -2)).softmax(-1)
    out = p @ v + p[:, :, :, :16]
    a = _arrays(8, 8, 128, 128, 16)
    prog = lm.compile([out], backend="cpu").runner.program
    b = _binding(prog, tune.DEFAULT)
    assert b.schedule.blocked == ()
    np.testing.assert_allclose(b.run(a)[0], lm.compile([out], backend="reference")(**a)[0], rtol=1e-5, atol=1e-5)


def test_a_block_runs_its_gemms_over_its_rows(monkeypatch):
    """One thread, blocks of 4 rows of a 10-row head: blocks of 4, 4 and 2 rows per head, each a
    product into the scratch, the row kernel over the block's rows, a product out of it."""
    monkeypatch.setenv("LUMINAL_NUM_THREADS", "1")
    monkeypatch.setattr(attention, "MIN_BYTES", 0)
    monkeypatch.setattr(attention, "BLOCK_BYTES", 2 * 4 * 12 * 4)
    prog = lm.compile([_sdpa(1, 2, 10, 12, 4)], backend="cpu").runner.program
    steps = _binding(prog, tune.DEFAULT).schedule.steps
    rows = [(s.start, s.stop) for s in steps if isinstance(s, Kernel) and s.kernel.name.startswith("attn")]
    assert rows == [(0, 4), (4, 8), (8, 10), (10, 14), (14, 18), (18, 20)]
    gemms = [s.out.shape for s in steps if isinstance(s, Gemm)]
    assert gemms == [(4, 12), (4, 4), (4, 12), (4, 4), (2, 12), (2, 4)] * 2


def test_search_times_the_unfused_layout_and_may_keep_it(monkeypatch, tmp_path):
    """With a fused attention the search offers ``blocks=False``; when timing favours it, it is
    kept, runs the call, and the next program of the same binding takes it from the cache."""
    monkeypatch.setattr(attention, "MIN_BYTES", 0)
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LUMINAL_CACHE", "compile,llvm")
    monkeypatch.setattr(tune, "STEPS", (("blocks", False),))
    unfused = tune.Choices(blocks=False)
    seen = []

    def fake(b, arrays, limit_s=None, budget_s=None):
        b.run(arrays)
        seen.append(b.choices)
        return 1.0 if b.choices == unfused else 2.0

    monkeypatch.setattr(tune, "measure", fake)
    out = _sdpa(1, 2, 32, 32, 8)
    a = _arrays(1, 2, 32, 32, 8)
    compiled = lm.compile([out], backend="cpu").runner.program
    prog = CpuProgram(compiled.kg, compiled.plan, search=2)
    got, _ = prog(a, {})
    assert seen == [tune.DEFAULT, unfused, tune.DEFAULT, unfused]
    assert prog.binding({}).choices == unfused and prog.binding({}).schedule.blocked == ()
    np.testing.assert_allclose(got[0], _numpy(a, False), rtol=1e-4, atol=1e-5)
    seen.clear()
    again = CpuProgram(compiled.kg, compiled.plan, search=2)
    again(a, {})
    assert seen == [] and again.binding({}).choices == unfused


def test_a_rolled_encoder_fuses_each_layers_attention(monkeypatch):
    """A stack of encoder layers is one rolled body called per layer: its attention buffers are the
    body's scratch, written by every call; each call's attention is fused, and the stack computes the
    reference's values."""
    monkeypatch.setattr(attention, "MIN_BYTES", 0)
    lm.manual_seed(0)
    layer = lm.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
    model = lm.nn.TransformerEncoder(layer, 3)
    model.eval()
    g = lm.Graph()
    x = g.input("x", (2, 24, 16))
    out = model(x)
    xa = np.random.default_rng(1).standard_normal((2, 24, 16)).astype(np.float32)
    f = lm.compile([out], backend="cpu")
    got = f(x=xa)[0]
    np.testing.assert_allclose(got, lm.compile([out], backend="reference")(x=xa)[0], rtol=1e-4, atol=1e-5)
    prog = f.runner.program
    assert len(list(prog.kg.bodies())) == 1  # (the case is rolled)
    (b,) = prog._bindings.values()
    assert b.schedule.blocked == ("attention",) * 3

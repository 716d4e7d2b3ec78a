"""The compiled CPU backend's generated code (``lowering.py``, ``compiled.py``: kernels of the IR
compiled by ``codegen/llvm.py``): what runs as generated code and what as numpy/BLAS, one module per
binding, threads, caller arrays re-pointed on rebind, state updates written in place. The patterns
that the numpy backend had special calls for (the frontend's compositions of comparisons, selects
against zero, broadcasts along short axes, sums of padded loads) are one generated kernel each here,
with the reference interpreter's values (bit for bit: NaN, infinities and signed zeros included)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from kg_helpers import KG, E, L, S, View, prim, rand_array, ref

import luminal as lm
from luminal import nn, train
from luminal.backends.cpu import compiled
from luminal.backends.cpu.parallel import Split
from luminal.codegen import llvm


def generated(f) -> bool:
    """Whether call function ``f`` is a generated kernel (or a Split of generated kernels)."""
    if isinstance(f, Split):
        return all(isinstance(g, ctypes._CFuncPtr) for part in f.parts for g, _ in part)
    return isinstance(f, ctypes._CFuncPtr)


def _calls(prog):
    return next(iter(prog._bindings.values())).schedule.steps

SPECIAL = [0.0, -0.0, 1.5, -1.5, np.inf, -np.inf, np.nan, 3.0]


def _compiled_pair(build, arrays):
    """``build(g) -> [tensors]`` compiled for the cpu backend and for the reference; returns both
    results and the cpu program's calls."""
    out = []
    for backend in ("cpu", "reference"):
        g = lm.Graph()
        f = lm.compile(build(g), backend=backend)
        res = f(**arrays)
        out.append(res if isinstance(res, tuple) else (res,))
        if backend == "cpu":
            calls = next(iter(f.runner.program._bindings.values())).schedule.steps
    return out[0], out[1], calls


def _grid(dtype):
    """Every pair of special values, as two (8, 8) arrays."""
    v = lm.core.dtype.to_storage(np.array(SPECIAL), dtype)
    return np.ascontiguousarray(np.repeat(v[:, None], 8, 1)), np.ascontiguousarray(np.repeat(v[None, :], 8, 0))


COMPARISONS = {"eq": (lambda a, b: a.eq(b), np.equal), "ne": (lambda a, b: a.ne(b), np.not_equal),
               "le": (lambda a, b: a.le(b), np.less_equal), "ge": (lambda a, b: a.ge(b), np.less_equal),
               "isnan": (lambda a, b: a.isnan(), np.isnan)}


@pytest.mark.parametrize("name", COMPARISONS)
@pytest.mark.parametrize("d", [lm.float32, lm.float16, lm.bfloat16, lm.float64], ids=lambda d: d.name)
def test_comparisons_with_the_references_values(name, d):
    op, ufunc = COMPARISONS[name]
    a, b = _grid(d)

    def build(g):
        return [op(g.input("a", (8, 8), d), g.input("b", (8, 8), d))]

    got, want, calls = _compiled_pair(build, {"a": a, "b": b})
    np.testing.assert_array_equal(got[0], want[0])
    assert len(calls) == 1 and generated(calls[0][0])


@pytest.mark.parametrize("d", [lm.int32, lm.bool], ids=lambda d: d.name)
def test_integer_and_bool_equality(d):
    a, b = rand_array((6, 5), d, 1, -2, 2), rand_array((6, 5), d, 2, -2, 2)
    got, want, calls = _compiled_pair(lambda g: [g.input("a", (6, 5), d).eq(g.input("b", (6, 5), d))],
                                      {"a": a, "b": b})
    np.testing.assert_array_equal(got[0], want[0])
    assert len(calls) == 1 and generated(calls[0][0])


def test_comparison_with_a_number_and_relu_with_its_gradient():
    """``x == 0`` (whose isnan of the number the compiler folds), a ReLU and its gradient: the
    reference's values bit for bit, all in generated code."""
    from luminal import train

    x = np.array(SPECIAL * 2, np.float32)

    def build(g):
        t = g.input("x", (16,))
        y = t.relu()
        return [t.eq(0.0), y, train.grad((y * y).sum(), t)]

    got, want, calls = _compiled_pair(build, {"x": x})
    for gv, wv in zip(got, want):
        np.testing.assert_array_equal(gv, wv)
        assert np.array_equal(np.signbit(gv), np.signbit(wv)) if gv.dtype.kind == "f" else True
    assert all(generated(f) for f, _ in calls)


@pytest.mark.parametrize("zero_side", [1, 2])
@pytest.mark.parametrize("d", [lm.float32, lm.float16, lm.int32, lm.bool], ids=lambda d: d.name)
def test_select_against_zero(zero_side, d):
    shape = (5, 6)
    c, x = rand_array(shape, lm.bool, 1), rand_array(shape, d, 2)
    zero = S(False if d is lm.bool else 0, d)
    args = (L(1, d), zero) if zero_side == 2 else (zero, L(1, d))
    kg = KG()
    cb, xb = kg.input("c", shape, lm.bool), kg.input("x", shape, d)
    out = kg.buf(shape, d)
    kg.kernel("elementwise", shape, [(cb, View.contiguous(shape)), (xb, View.contiguous(shape))],
              [(out, E("Where", L(0, lm.bool), *args))])
    kg.output(out)
    prog = kg.program()
    (got,), _ = prog({"c": c, "x": x}, {})
    want = np.where(c, x, 0) if zero_side == 2 else np.where(c, 0, x)
    np.testing.assert_array_equal(got, want.astype(got.dtype))


def test_select_against_negative_zero_keeps_its_sign():
    """A select of -0.0 gives -0.0."""
    shape = (4,)
    f = lm.float32
    kg = KG()
    cb, xb = kg.input("c", shape, lm.bool), kg.input("x", shape)
    out = kg.buf(shape)
    kg.kernel("elementwise", shape, [(cb, View.contiguous(shape)), (xb, View.contiguous(shape))],
              [(out, E("Where", L(0, lm.bool), S(-0.0, f), L(1, f)))])
    kg.output(out)
    c = np.array([True, False, True, False])
    (got,), _ = kg.program()({"c": c, "x": np.ones(4, np.float32)}, {})
    assert np.array_equal(np.signbit(got), c)


def test_broadcast_along_a_short_inner_axis():
    """A pooling gradient's ``x == max`` with the max broadcast along a 2-wide innermost axis."""
    f = lm.float32
    kg = KG()
    x, m = kg.input("x", (3, 4, 2)), kg.input("m", (3, 4))
    out, out2 = kg.buf((3, 4, 2), lm.bool), kg.buf((3, 4, 2))
    mv = View((3, 4, 2), (4, 1, 0))
    xv = View.contiguous((3, 4, 2))
    kg.kernel("elementwise", (3, 4, 2), [(x, xv), (m, mv)],
              [(out, E("LessThan", L(0, f), L(1, f))), (out2, E("Mul", L(0, f), L(1, f)))])
    kg.output(out)
    kg.output(out2)
    prog = kg.program()
    a, b = rand_array((3, 4, 2), f, 1), rand_array((3, 4), f, 2)
    lt, mul = prog({"x": a, "m": b}, {})[0]
    np.testing.assert_array_equal(lt, a < b[..., None])
    np.testing.assert_array_equal(mul, a * b[..., None])
    assert len(_calls(prog)) == 1


def test_product_with_a_reciprocal_rounds_twice():
    """``x * recip(y)`` is the primitives' two roundings, as the reference computes it (not ``x / y``)."""
    f = lm.float32
    kg = KG()
    x, y = kg.input("x", (5,)), kg.input("y", (5,))
    out = kg.buf((5,))
    v = View.contiguous((5,))
    kg.kernel("elementwise", (5,), [(x, v), (y, v)], [(out, E("Mul", L(0, f), E("Recip", L(1, f))))])
    kg.output(out)
    prog = kg.program()
    a, b = rand_array((5,), f, 1), rand_array((5,), f, 2, 0.5, 3.0)
    (got,), _ = prog({"x": a, "y": b}, {})
    np.testing.assert_array_equal(got, a * np.reciprocal(b))


def _col2im(windows_h, windows_w, size=6, k=3):
    """The gradient of 2-d overlapping windows: the sum of ``k*k`` shifted, zero-padded (B, size,
    size) boxes of g (B, k, k, size, size), as a tree of Adds (one chain per window row), as the
    compiler emits it."""
    f = lm.float32
    n = size + k - 1
    kg = KG()
    g = kg.input("g", (2, k, k, size, size))
    out = kg.buf((2, n, n))
    inputs, terms = [], []
    for i in range(k):
        row = None
        for j in range(k):
            base = View((2, size, size), (k * k * size * size, size, 1), (i * k + j) * size * size)
            v = base.pad_dim(1, i, k - 1 - i, 0.0).pad_dim(2, j, k - 1 - j, 0.0)
            inputs.append((g, v))
            t = E("Copy", L(len(inputs) - 1, f))
            row = t if row is None else E("Add", row, t)
        terms.append(row)
    total = terms[0]
    for t in terms[1:]:
        total = E("Add", total, t)
    kg.kernel("elementwise", (2, n, n), inputs, [(out, total)])
    kg.output(out)
    return kg, inputs


def test_sum_of_padded_loads():
    """col2im: nine zero-padded loads summed per output element, in one generated kernel."""
    kg, inputs = _col2im(3, 3)
    prog = kg.program()
    a = rand_array((2, 3, 3, 6, 6), lm.float32, 1)
    (got,), _ = prog({"g": a}, {})
    want = np.zeros((2, 8, 8), np.float32)
    for i in range(3):
        for j in range(3):
            want[:, i:i + 6, j:j + 6] += a[:, i, j]

    def build(gr):
        t = gr.input("g", a.shape)
        total = None
        for _, v in inputs:
            p = gr.tensor(t.node, v)
            total = p if total is None else prim("Add", total, p)
        return [total]

    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got, ref(build, {"g": a})[0], rtol=1e-6, atol=1e-6)  # summed in another order
    assert len(_calls(prog)) == 1


# what runs where, modules, threads, caller arrays -------------------------------------------------------

def _binding(f):
    return next(reversed(f.runner.program._bindings.values()))


def _mlp_step():
    g = lm.Graph()
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3))
    x, y = g.input("x", (8, 12)), g.input("y", (8,), lm.int32)
    loss = nn.functional.cross_entropy(model(x), y)
    return train.compile_step(loss, train.AdamW(model.parameters(), lr=1e-2), backend="cpu")


def test_what_runs_where_in_a_training_step():
    """GEMMs are BLAS (``np.matmul``); everything else is generated code (gathers and scatters too,
    each followed by the check of its index error cell): no numpy elementwise ufunc, reduction or
    fancy indexing is left."""
    rng = np.random.default_rng(0)
    step = _mlp_step()
    x, y = rng.normal(size=(8, 12)).astype(np.float32), rng.integers(0, 3, 8).astype(np.int32)
    losses = [float(step(x=x, y=y)) for _ in range(5)]
    assert losses[-1] < losses[0]
    funcs = [f for b in _bindings_of(step) for f, _ in b.schedule.steps]
    kinds = {("generated" if generated(f) else getattr(f, "__name__", type(f).__name__)) for f in funcs}
    assert "generated" in kinds and "matmul" in kinds
    assert kinds <= {"generated", "matmul", "copyto", "check_index", "Split"}, kinds


def _bindings_of(step):
    """Every Binding of every cpu program reachable from a compiled step."""
    out, seen, stack = [], set(), [step]
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, (np.ndarray, str, bytes, int, float)):
            continue
        seen.add(id(o))
        if isinstance(o, compiled.Binding):
            out.append(o)
            continue
        if isinstance(o, compiled.CpuProgram):
            stack.extend(o._bindings.values())
            continue
        if isinstance(o, dict):
            stack.extend(o.values())
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
        elif hasattr(o, "__dict__") and type(o).__module__.startswith("luminal"):
            stack.extend(vars(o).values())
    return out


def test_one_module_per_binding(monkeypatch):
    """All of a binding's generated kernels are compiled as one LLVM module; a new binding of the
    symbolic dims compiles its own (specialised to its sizes)."""
    calls = []
    real = llvm.compile_kernels
    monkeypatch.setattr(compiled.llvm, "compile_kernels", lambda ks, **kw: (calls.append(len(ks)), real(ks, **kw))[1])
    g = lm.Graph()
    x = g.input("x", ("B", 5))
    y = (x.exp() * 2).sum(1) + x.amax(1)
    z = (x - x.mean(0)).relu()
    f = lm.compile([y, z], backend="cpu")
    for b in (3, 4, 3):
        a = np.random.default_rng(b).normal(size=(b, 5)).astype(np.float32)
        got = f(x=a)
        np.testing.assert_allclose(got[0], np.exp(a).sum(1) * 2 + a.max(1), rtol=1e-5)
        np.testing.assert_allclose(got[1], np.maximum(a - a.mean(0), 0), rtol=1e-5, atol=1e-6)
    assert len(calls) == 2 and all(n >= 2 for n in calls)


def test_large_kernels_are_cut_over_threads(monkeypatch):
    monkeypatch.setenv("LUMINAL_NUM_THREADS", "3")
    g = lm.Graph()
    big, small = g.input("big", (2000, 1000)), g.input("small", (4, 5))
    f = lm.compile([(big * 3 + 1).sqrt(), small * 3, big.sum(1)], backend="cpu")
    rng = np.random.default_rng(1)
    a, b = rng.uniform(0, 2, (2000, 1000)).astype(np.float32), rng.normal(size=(4, 5)).astype(np.float32)
    for _ in range(2):
        r1, r2, r3 = f(big=a, small=b)
        np.testing.assert_array_equal(r1, np.sqrt(a * np.float32(3) + np.float32(1)))
        np.testing.assert_array_equal(r2, b * np.float32(3))
        np.testing.assert_allclose(r3, a.sum(1), rtol=1e-5)
    splits = [fn for fn, _ in _binding(f).schedule.steps if isinstance(fn, Split)]
    assert splits and all(generated(s) for s in splits) and len(splits[0].parts) == 3
    assert any(generated(fn) and not isinstance(fn, Split) for fn, _ in _binding(f).schedule.steps)  # the small one


@pytest.mark.parametrize("faster", ["blas", "own"])
def test_a_program_with_little_to_cut_times_the_thread_choice(monkeypatch, faster):
    """Kernels worth cutting that add up to less than ``OWN_THREADS_NS`` leave the thread choice to the
    machine (``Schedule.undecided``): the default layout runs them on one thread with the GEMMs on
    BLAS's own threads (no split anywhere, BLAS not pinned to one thread), and the first call times it
    against our threads (a fake timer here) and keeps the faster, with the same results."""
    from luminal.backends.cpu import tune

    monkeypatch.setenv("LUMINAL_NUM_THREADS", "2")
    monkeypatch.setattr(tune, "measure", lambda b, arrays, limit_s=None, budget_s=None: (b.run(arrays), 1e-3 if
                        (b.choices.threads == "own") == (faster == "own") else 2e-3)[1])  # (under the limit)
    g = lm.Graph()
    x, w = g.input("x", (300, 1000)), g.input("w", (1000, 64))
    f = lm.compile([(x * 3 + 1).sqrt(), x @ w], backend="cpu")
    rng = np.random.default_rng(2)
    a, b = rng.uniform(0, 2, (300, 1000)).astype(np.float32), rng.normal(size=(1000, 64)).astype(np.float32)
    r1, r2 = f(x=a, w=b)
    np.testing.assert_array_equal(r1, np.sqrt(a * np.float32(3) + np.float32(1)))
    np.testing.assert_allclose(r2, a @ b, rtol=1e-4, atol=1e-3)
    binding = _binding(f)
    (record,) = f.runner.program.searches.values()
    # (ours first: OpenBLAS's workers spin for a while after a threaded GEMM: tune.threads)
    assert [c.threads for c, _ in record.timed] == ["own", "auto"] and record.timed[1][0] == tune.DEFAULT
    if faster == "blas":
        assert binding.schedule.undecided and binding.choices == tune.DEFAULT
        assert not any(isinstance(fn, Split) for fn, _ in binding.schedule.steps) and not binding._threaded
    else:
        assert binding.choices == tune.Choices(threads="own") and binding._threaded
    r1, r2 = f(x=a, w=b)
    np.testing.assert_array_equal(r1, np.sqrt(a * np.float32(3) + np.float32(1)))
    np.testing.assert_allclose(r2, a @ b, rtol=1e-4, atol=1e-3)


def test_caller_arrays_are_re_pointed_when_they_change():
    """A new array object, one mutated in place and a non-contiguous one (converted): every call reads
    the array it is given."""
    g = lm.Graph()
    x = g.input("x", (3, 4))
    f = lm.compile(x * 2 + 1, backend="cpu")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(f(x=a), a * 2 + 1)
    a[0, 0] = 100
    np.testing.assert_array_equal(f(x=a), a * 2 + 1)
    b = a + 5
    np.testing.assert_array_equal(f(x=b), b * 2 + 1)
    c = np.arange(12, dtype=np.float32).reshape(4, 3).T
    np.testing.assert_array_equal(f(x=c), c * 2 + 1)
    np.testing.assert_array_equal(f(x=a), a * 2 + 1)


def test_state_written_in_place_is_stored_after_every_read():
    """One kernel writes ``q``'s new value (into ``q``'s own array) before, in output order, another
    output that reads ``q``: the store into ``q`` comes after every read, so that output sees the old
    values."""
    f = lm.float32
    kg = KG()
    q = kg.input("$q", (2, 3), kind="state")
    new, out = kg.buf((2, 3)), kg.buf((2, 3))
    v = View.contiguous((2, 3))
    kg.kernel("elementwise", (2, 3), [(q, v)],
              [(new, E("Add", L(0, f), S(1.0, f))), (out, E("Mul", L(0, f), S(2.0, f)))])
    kg.output(out)
    kg.update("$q", new)
    prog = kg.program()
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    for _ in range(3):
        old = data.copy()
        (got,), (upd,) = prog({"$q": data}, {})
        np.testing.assert_array_equal(got, old * 2)
        assert upd is None  # written in place: no value to copy (the caller's copy is skipped)
        np.testing.assert_array_equal(data, old + 1)


def test_warm_compile_reads_the_disk_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    llvm.forget()
    a = np.linspace(-2, 2, 20, dtype=np.float32).reshape(4, 5)

    def run():
        g = lm.Graph()
        x = g.input("x", (4, 5))
        f = lm.compile([x.sigmoid().sum(1)], backend="cpu")
        return f(x=a), _binding(f).schedule.module

    cold, m1 = run()
    llvm.forget()
    warm, m2 = run()
    assert not m1.from_cache and m2.from_cache
    np.testing.assert_array_equal(cold, warm)


@pytest.mark.parametrize("search", [0, 3])
def test_a_binding_laid_out_ahead_is_timed_at_its_first_call(monkeypatch, search):
    """``prepare`` has no arrays to time on: it lays out the model's layout (an undecided binding's, or
    a search's default) and the first call times the alternatives on its arrays, then keeps the faster;
    the calls after run it without timing anything."""
    from luminal.backends.cpu import tune

    monkeypatch.setenv("LUMINAL_NUM_THREADS", "2")
    timed = []
    monkeypatch.setattr(tune, "measure", lambda b, arrays, limit_s=None, budget_s=None: (
        b.run(arrays), timed.append(b.choices), 1e-3 if b.choices.threads == "own" else 2e-3)[2])
    g = lm.Graph()
    x = g.input("x", (300, 1000))
    program = lm.compile((x * 3 + 1).sqrt(), backend="cpu").runner.program
    prog = compiled.CpuProgram(program.kg, program.plan, search=search)
    prog.prepare({})
    (b,) = prog._bindings.values()
    assert b.schedule.undecided and not timed and not prog.searches
    a = np.random.default_rng(3).uniform(0, 2, (300, 1000)).astype(np.float32)
    for _ in range(3):
        (got,), _ = prog({"x": a}, {})
        np.testing.assert_array_equal(got, np.sqrt(a * np.float32(3) + np.float32(1)))
        (record,) = prog.searches.values()
        (b,) = prog._bindings.values()
        assert record.chosen.threads == "own" == b.choices.threads and b._threaded
        assert len(timed) == len(record.timed) + (2 if search else 0)  # (a search's rematch: both again)


def test_an_undecided_thread_choice_is_timed_in_every_process_and_not_by_the_compilers_timer(monkeypatch, tmp_path):
    """The thread choice of an undecided binding is not cached on disk (a few runs settle it, and other
    work during them could get it wrong for good): a second program of the same graph, as a new
    process would make it, times it again. The compiler's timing of candidate programs (``Cpu.time``,
    ``search=N``) lays each out as the model does, timing nothing of its own."""
    from luminal.backends.cpu import Cpu, tune

    monkeypatch.setenv("LUMINAL_NUM_THREADS", "2")
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LUMINAL_CACHE", "compile,llvm")
    timed = []
    monkeypatch.setattr(tune, "measure",
                        lambda b, arrays, limit_s=None, budget_s=None: (b.run(arrays), timed.append(b.choices),
                                                                        1e-3)[2])
    g = lm.Graph()
    x = g.input("x", (300, 1000))
    program = lm.compile((x * 3 + 1).sqrt(), backend="cpu").runner.program
    a = np.random.default_rng(3).uniform(0, 2, (300, 1000)).astype(np.float32)
    for _ in range(2):
        timed.clear()
        prog = compiled.CpuProgram(program.kg, program.plan)
        prog({"x": a}, {})
        (record,) = prog.searches.values()
        assert not record.cached and len(timed) == 2
    assert not (tmp_path / "compile" / "search").exists()
    timed.clear()
    Cpu().time(program.kg, program.plan)
    assert not timed

"""``search=N`` on the CPU backend's own alternatives (``backends/cpu/tune.py``): the default choices lay
a binding out as the cost models do, every alternative computes the reference's results, the search
keeps the fastest candidate it timed (with a fake timer: no timing in tests), states written in place
take one update per call, and the report lists what was timed."""

from __future__ import annotations

import numpy as np
import pytest
from parity import rand

import luminal as lm
from luminal import nn, train
from luminal.backends.cpu import Cpu, _Run, tune
from luminal.backends.cpu.compiled import Binding, CpuProgram
from luminal.backends.cpu.parallel import thread_count
from luminal.backends.cpu.plan import plan
from luminal.codegen import llvm
from luminal.core import disk_cache
from luminal.core.kernel_graph import expand_calls
from luminal.frontend.seed import manual_seed

ENV = {"B": 6}


def _conv_like():
    """A convolution-shaped product (stored permuted by the GEMM layouts) with a generated epilogue,
    and a softmax over it (reductions, whose float order vector width and threads change)."""
    g = lm.Graph()
    x, w = g.input("x", ("B", 3, 20)), g.input("w", (6, 3))
    y = (w @ (x * 2)).relu() + 1
    outs = [y, y.softmax(-1)]
    arrays = {"x": rand((ENV["B"], 3, 20), seed=1), "w": rand((6, 3), seed=2)}
    return outs, arrays


def _binding(prog: CpuProgram, choices) -> Binding:
    return Binding(plan(prog.kg, expand_calls(prog.kg.kernels), prog.plan, dict(ENV), choices))


def test_default_choices_lay_out_as_the_cost_models(monkeypatch):
    """search=0 and 1 time nothing; their binding has the default choices, whose generated module is
    the one built without any vector width (the same LLVM text and cache key as before the option)."""
    monkeypatch.setattr(tune, "measure",
                        lambda b, a, limit_s=None, budget_s=None: pytest.fail("timed without a search"))
    outs, arrays = _conv_like()
    f = lm.compile(outs, backend="cpu")
    kg, plan = f.runner.program.kg, f.runner.program.plan
    for prog in (f.runner.program, CpuProgram(kg, plan, search=1)):
        prog(arrays, ENV)
        (b,) = prog._bindings.values()
        assert b.choices == tune.DEFAULT == tune.Choices("auto", 1.0, None, True) and not prog.searches
    kernels = list({id(k): k for k, _, _ in b.schedule.generated}.values())  # (a kernel the program calls twice: once)
    assert kernels and b.schedule.perms  # the case has generated code and a permuted GEMM layout to choose about
    assert b.schedule.module.key == llvm.compile_kernels(kernels, distinct=True).key
    assert '"prefer-vector-width"' not in str(llvm.build_module(kernels, True))
    assert '"prefer-vector-width"="512"' in str(llvm.build_module(kernels, True, 512))


ALTERNATIVES = [tune.DEFAULT, tune.Choices(threads="own", split_scale=1e-6), tune.Choices(threads="blas"),
                tune.Choices(vector_width=512), tune.Choices(vector_width=128), tune.Choices(split_scale=4.0),
                tune.Choices(gemm_layouts=False),
                tune.Choices(threads="own", split_scale=1e-6, vector_width=512, gemm_layouts=False)]


@pytest.mark.parametrize("choices", ALTERNATIVES, ids=str)
def test_every_alternative_computes_the_reference(choices):
    """Each choice lays the binding out its own way (threads cut even tiny kernels at a split scale of
    1e-6; no permuted temps without GEMM layouts) and gets the reference's results, within float
    tolerances (vector width and threads reorder sums), over two runs of the same buffers."""
    outs, arrays = _conv_like()
    prog = lm.compile(outs, backend="cpu").runner.program
    want = lm.compile(outs, backend="reference")(**arrays)
    b = _binding(prog, choices)
    if choices.threads == "own" and thread_count() > 1:
        assert b._threaded
    if not choices.gemm_layouts:
        assert b.schedule.perms == {} and b.schedule.acc_orders == {}
    for _ in range(2):
        got = b.run(arrays)
        for a, w in zip(got, want, strict=True):
            np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-6)


def _fake_times(monkeypatch, times: dict):
    """Make :func:`tune.measure` return ``times[choices]`` (after a real run; a list: its values in
    turn); every x86 vector width on offer."""
    seen = []

    def fake(b, arrays, limit_s=None, budget_s=None):
        b.run(arrays)
        seen.append(b.choices)
        t = times[b.choices]
        return t.pop(0) if isinstance(t, list) else t

    monkeypatch.setattr(tune, "measure", fake)
    monkeypatch.setattr(llvm, "vector_widths", lambda: (128, 256, 512))
    return seen


@pytest.mark.parametrize("n,kept", [(2, tune.Choices(vector_width=512)), (3, tune.Choices(vector_width=512)),
                                    (4, tune.Choices(vector_width=128))])
def test_search_keeps_the_fastest_candidate(monkeypatch, n, kept):
    """Up to ``n`` candidates are timed, the default first, each next one changing one choice of the
    fastest so far; the fastest wins a rematch against the default, is kept and runs the call."""
    monkeypatch.setattr(tune, "STEPS", (("vector_width", 512), ("gemm_layouts", False), ("vector_width", 128)))
    times = {tune.DEFAULT: 3.0, tune.Choices(vector_width=512): 2.0,
             tune.Choices(vector_width=512, gemm_layouts=False): 2.5, tune.Choices(vector_width=128): 1.0}
    seen = _fake_times(monkeypatch, times)
    outs, arrays = _conv_like()
    f = lm.compile(outs, backend="cpu")
    prog = CpuProgram(f.runner.program.kg, f.runner.program.plan, search=n)
    got, _ = prog(arrays, ENV)
    assert seen == [*list(times)[:n], tune.DEFAULT, kept]
    (record,) = prog.searches.values()
    assert record.chosen == kept == prog.binding(ENV).choices
    assert record.timed == [(c, times[c]) for c in seen[:n]] and record.rematch == (3.0, times[kept])
    want = lm.compile(outs, backend="reference")(**arrays)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)


def test_a_win_lost_in_the_rematch_keeps_the_default(monkeypatch):
    """A candidate faster than the default once (the default's runs slowed by other work) but not in
    the rematch is not kept."""
    monkeypatch.setattr(tune, "STEPS", (("vector_width", 512),))
    _fake_times(monkeypatch, {tune.DEFAULT: [9.0, 1.0], tune.Choices(vector_width=512): [2.0, 2.0]})
    outs, arrays = _conv_like()
    f = lm.compile(outs, backend="cpu")
    prog = CpuProgram(f.runner.program.kg, f.runner.program.plan, search=2)
    prog(arrays, ENV)
    (record,) = prog.searches.values()
    assert record.rematch == (1.0, 2.0) and record.chosen == tune.DEFAULT == prog.binding(ENV).choices
    assert "rematch against the default" in prog.describe()


def test_train_step_under_search_updates_states_once_per_call(monkeypatch):
    """An AdamW step searched over several layouts (the last one timed kept: not the default) writes
    its parameters and moments in place; the timed runs write copies, so each call applies exactly one
    update: losses and weights match a step compiled without the search."""
    real = tune.measure
    count = iter(range(100, 0, -1))
    copies = []

    def later_is_faster(b, arrays, limit_s=None, budget_s=None):
        copies.extend(arrays[n] is not a for n, a in real_arrays.items() if n in b.schedule.written)
        real(b, arrays)
        return next(count)

    real_arrays: dict = {}
    original_search = tune.search

    def spy(make, arrays, n, env, *rest):
        real_arrays.update(arrays)
        return original_search(make, arrays, n, env, *rest)

    monkeypatch.setattr(tune, "measure", later_is_faster)
    monkeypatch.setattr(tune, "search", spy)
    monkeypatch.setattr(llvm, "vector_widths", lambda: (128, 256, 512))

    def run(search: int):
        manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
        g = lm.Graph()
        x, y = g.input("x", ("B", 6)), g.input("y", ("B",), dtype=lm.int32)
        opt = train.AdamW(model.parameters(), lr=1e-2)
        with monkeypatch.context() as m:
            m.setattr(Cpu, "program", lambda self, kg, plan, search=0, n=search: _Run(kg, plan, n))
            step = train.compile_step(train.cross_entropy(model(x), y), opt, backend="cpu")
        rng = np.random.default_rng(0)
        losses = [step(x=rng.standard_normal((5, 6)).astype(np.float32), y=rng.integers(0, 3, 5).astype(np.int32))
                  for _ in range(3)]
        return losses, model.state_dict(), step

    want, want_sd, _ = run(0)
    got, got_sd, step = run(4)
    (record,) = step._update.runner.program.searches.values()
    assert len(record.timed) >= 2 and record.chosen == record.timed[-1][0] != tune.DEFAULT
    assert copies and all(copies)  # every state written in place was a copy in the timed runs
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for k in want_sd:
        np.testing.assert_allclose(got_sd[k], want_sd[k], rtol=1e-5, atol=1e-6)


def test_report_shows_the_candidates(capsys):
    """``report(code=True)`` lists each binding's candidates with their times and the one kept."""
    outs, arrays = _conv_like()
    f = lm.compile(outs, backend="cpu", search=3)
    f(**arrays)
    f(x=rand((4, 3, 20), seed=3), w=arrays["w"])
    f.report(code=True)
    text = capsys.readouterr().out
    assert "cpu search, binding (B=6)" in text and "cpu search, binding (B=4)" in text
    assert text.count("<- kept") == 2 and "default" in text


def test_backends_without_alternatives_take_search():
    """The protocol's ``search`` reaches every kernel-level backend (``cuda-emulated`` times its kernels'
    schedules on the simulated device: ``tests/cuda/test_schedule_search.py``)."""
    outs, arrays = _conv_like()
    got = lm.compile(outs, backend="cuda-emulated", search=2)(**arrays)
    want = lm.compile(outs, backend="reference")(**arrays)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)


def test_a_search_is_cached_and_the_next_process_times_nothing(monkeypatch, tmp_path):
    """The kept choices are written to the disk cache (kind ``compile``) under the default layout's
    program, binding and machine; a new program of the same graph lays them out at once, timing
    nothing; a damaged or foreign entry is a miss (it is parsed against the fields and the values a
    search tries, never evaluated)."""
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LUMINAL_CACHE", "compile,llvm")
    monkeypatch.setattr(tune, "STEPS", (("vector_width", 512), ("gemm_layouts", False)))
    kept = tune.Choices(gemm_layouts=False)
    times = {tune.DEFAULT: 3.0, tune.Choices(vector_width=512): 4.0, kept: 1.0}
    seen = _fake_times(monkeypatch, times)
    outs, arrays = _conv_like()
    f = lm.compile(outs, backend="cpu")

    def searched():
        prog = CpuProgram(f.runner.program.kg, f.runner.program.plan, search=3)
        got, _ = prog(arrays, ENV)
        (record,) = prog.searches.values()
        return prog, record, got

    prog, record, _ = searched()
    assert record.chosen == kept and not record.cached and len(seen) == 5  # 3 timed, then the rematch
    seen.clear()
    prog, record, got = searched()
    assert record.cached and record.chosen == kept == prog.binding(ENV).choices and not seen
    assert "found in the cache" in prog.describe()
    want = lm.compile(outs, backend="reference")(**arrays)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)
    (entry,) = (tmp_path / "compile" / "search").iterdir()
    for payload in (b"threads='own';__import__('os')", b"vector_width=999;threads='auto';split_scale=1.0;"
                    b"gemm_layouts=True;specialise=False"):
        entry.write_bytes(disk_cache.header(f"search/{entry.name}", payload) + payload)
        seen.clear()
        _, record, _ = searched()
        assert not record.cached and len(seen) == 5, payload  # timed again, and the entry rewritten


def test_a_search_of_fewer_layouts_is_not_the_answer_of_a_longer_one(monkeypatch, tmp_path):
    """The cache entry names how many layouts the search timed: a search of 2 (what an undecided thread
    choice times at search=0) found no winner among the layouts a search of 3 would try, so the longer
    search times them rather than take the shorter one's answer."""
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LUMINAL_CACHE", "compile,llvm")
    monkeypatch.setattr(tune, "STEPS", (("vector_width", 512), ("gemm_layouts", False)))
    kept = tune.Choices(gemm_layouts=False)
    seen = _fake_times(monkeypatch, {tune.DEFAULT: 3.0, tune.Choices(vector_width=512): 4.0, kept: 1.0})
    outs, arrays = _conv_like()
    f = lm.compile(outs, backend="cpu")
    for n, chosen, cached in ((2, tune.DEFAULT, False), (3, kept, False), (2, tune.DEFAULT, True), (3, kept, True)):
        seen.clear()
        prog = CpuProgram(f.runner.program.kg, f.runner.program.plan, search=n)
        prog(arrays, ENV)
        (record,) = prog.searches.values()
        assert record.chosen == chosen and record.cached == cached == (not seen), n
    assert len(list((tmp_path / "compile" / "search").iterdir())) == 2


def test_a_thread_choice_whose_runs_are_long_keeps_blas_threads_untimed(monkeypatch, tmp_path):
    """``tune.threads``: when the runs on our threads take longer than the limit (the warm-up and one more:
    the first pays page faults), BLAS's threads are kept without timing them (the gain would be a
    small part of such a run); nothing is cached, whatever the outcome."""
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LUMINAL_CACHE", "compile,llvm")
    monkeypatch.setattr(tune.time, "perf_counter", iter(range(0, 10_000, 1)).__next__)  # every run takes 1 s
    outs, arrays = _conv_like()
    f = lm.compile(outs, backend="cpu")
    made = []

    def make(c):
        made.append(c)
        return _binding(f.runner.program, c)

    default = _binding(f.runner.program, tune.DEFAULT)
    b, record = tune.threads(make, arrays, ENV, default, limit_s=0.5)
    assert made == [tune.Choices(threads="own")] and b is default and record.chosen == tune.DEFAULT
    assert record.timed == [(tune.Choices(threads="own"), 1.0)] and record.rematch is None
    b, record = tune.threads(make, arrays, ENV, default, limit_s=5.0)  # (each run 1 s: both timed)
    assert [c for c, _ in record.timed] == [tune.Choices(threads="own"), tune.DEFAULT] and not record.cached
    assert not (tmp_path / "compile" / "search").exists()


def test_a_layout_on_our_threads_is_timed_once_blas_threads_have_stopped_spinning(monkeypatch):
    """OpenBLAS's workers spin for a while after a GEMM on its threads: a search times a layout that runs
    on our threads (BLAS on one) ``BLAS_SPIN_S`` after one that left BLAS its threads, the rematch
    too; ``tune.threads`` times ours first and waits for nothing."""
    monkeypatch.setenv("LUMINAL_NUM_THREADS", "2")
    monkeypatch.setattr(tune, "STEPS", (("threads", "own"),))
    own = tune.Choices(threads="own")
    order = []
    # (not ``time.sleep``: a thread starting meanwhile, the native team's, sleeps while it waits too)
    monkeypatch.setattr(tune, "_let_blas_threads_sleep", lambda: order.append(("sleep", tune.BLAS_SPIN_S)))
    seconds = {tune.DEFAULT: 2e-3, own: 1e-3}

    def fake(b, arrays, limit_s=None, budget_s=None):
        b.run(arrays)
        order.append(b.choices)
        return seconds[b.choices]

    monkeypatch.setattr(tune, "measure", fake)
    g = lm.Graph()
    x = g.input("x", (300, 1000))  # (a kernel worth cutting: our threads lay it out apart)
    program = lm.compile((x * 3 + 1).sqrt(), backend="cpu").runner.program
    arrays = {"x": np.ones((300, 1000), np.float32)}
    prog = CpuProgram(program.kg, program.plan, search=2)
    prog(arrays, {})
    wait = ("sleep", tune.BLAS_SPIN_S)
    assert order == [tune.DEFAULT, wait, own, tune.DEFAULT, wait, own]
    order.clear()
    prog = CpuProgram(program.kg, program.plan)
    prog(arrays, {})
    assert order == [own, tune.DEFAULT]

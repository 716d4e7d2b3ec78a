"""Guard mode (``LUMINAL_CPU_GUARD``, ``luminal/backends/cpu/guard.py``): every storage of a binding and
every caller array between guard bytes, checked after each step; an out-of-bounds write raises."""
import ctypes
import dataclasses

import numpy as np
import pytest

import luminal as lm
from luminal import nn
from luminal.backends.cpu import guard
from luminal.backends.cpu.compiled import Binding
from luminal.backends.cpu.parallel import Split
from luminal.backends.cpu.steps import Kernel, Storage


@pytest.fixture
def guarded(monkeypatch):
    monkeypatch.setattr(guard, "BYTES", 64)


def _binding(f):
    return f.runner.program._recent[1]


@pytest.mark.parametrize("value, want", [(None, 0), ("", 0), ("0", 0), ("off", 0), ("1", 64), ("yes", 64),
                                         ("64", 64), ("100", 128), ("4096", 4096), ("-3", 0)])
def test_the_variable_gives_the_guard_size(value, want):
    assert guard.bytes_from(value) == want


@pytest.mark.parametrize("kw", [{}, {"dtype": np.float32, "fill": -1.5},
                                {"data": np.arange(5, dtype=np.int32)}], ids=["zeros", "fill", "data"])
def test_a_write_just_past_or_before_a_guarded_storage_is_seen(kw):
    nbytes = 20 if "data" in kw or "fill" in kw else 13
    g = guard.storage(Storage(nbytes, **kw), 64, "test storage")
    assert g.array.ctypes.data % 8 == 0 and g.array.nbytes == nbytes
    if "data" in kw:
        np.testing.assert_array_equal(g.array, kw["data"])
    elif "fill" in kw:
        np.testing.assert_array_equal(g.array, np.full(5, -1.5, np.float32))
    else:
        assert not g.array.any()
    g.array[...] = 7  # the whole storage written: the guards stay
    assert g.intact()
    ctypes.memset(g.array.ctypes.data + nbytes, 0, 1)  # one byte past the end
    assert not g.intact()
    assert f"bytes [{nbytes}, {nbytes + 1}) (past its end" in g.damage()
    g.restore()
    assert g.intact()
    ctypes.memset(g.array.ctypes.data - 8, 0, 4)  # before the start
    assert not g.intact() and "bytes [-8, -4) (before its start" in g.damage()


def _overrun(f, items: int, writes=None):
    """``f``'s binding made again with its first generated kernel (that writes space ``writes``, if
    given) run over ``items`` more items than it has: it writes past its output."""
    b = _binding(f)
    sch = b.schedule
    at = next(i for i, s in enumerate(sch.steps) if isinstance(s, Kernel)
              and (writes is None or writes in guard.writes(s)[0]))
    k = sch.steps[at]
    steps = list(sch.steps)
    steps[at] = k.with_range(k.start, k.stop + items)
    return Binding(dataclasses.replace(sch, steps=steps)), k


def test_a_kernel_writing_past_its_output_raises_naming_the_storage_and_kernel(guarded):
    g = lm.Graph()
    x = g.input("x", (40,))
    f = lm.compile((x * 2.0 + 1.0).exp2(), backend="cpu")
    arrays = {"x": np.ones(40, np.float32)}
    np.testing.assert_allclose(f(**arrays), np.full(40, 8.0))  # the guarded program runs as it should
    bad, k = _overrun(f, 8)
    for run in (bad.run, bad.run_steps):
        with pytest.raises(guard.GuardError, match=r"past its end") as e:
            run(dict(arrays))
        msg = str(e.value)
        assert f"after step 0: kernel {k.kernel.name}" in msg
        assert "slot" in msg and f"written by step 0: kernel {k.kernel.name}" in msg


def test_a_kernel_writing_into_an_input_or_a_constant_raises(guarded):
    """In bounds but into memory no step writes (a kernel whose store went to the wrong buffer): the
    caller's input arrays and the program's constants are compared after the run."""
    g = lm.Graph()
    x = g.input("x", (40,))
    f = lm.compile(x * g.constant(np.arange(40, dtype=np.float32)) + 1.0, backend="cpu")
    arrays = {"x": np.ones(40, np.float32)}
    np.testing.assert_allclose(f(**arrays), np.arange(40) + 1.0)
    sch = _binding(f).schedule
    at = next(i for i, s in enumerate(sch.steps) if isinstance(s, Kernel))
    k = sch.steps[at]
    out = [j for j, b in enumerate(k.kernel.buffers) if "w" in b.access]
    const = next(i for i, s in enumerate(sch.storages) if s.data is not None)
    for target, said in ((("x", 0), "caller array 'x'"), ((const, 0), f"storage {const}: b")):
        buffers = tuple(target if j in out else b for j, b in enumerate(k.buffers))
        steps = list(sch.steps)
        steps[at] = Kernel(k.function, buffers, k.params, k.start, k.stop, k.kernel)
        with pytest.raises(guard.GuardError, match="read only") as e:
            Binding(dataclasses.replace(sch, steps=steps)).run(dict(arrays))
        assert said in str(e.value)
    np.testing.assert_array_equal(arrays["x"], 1.0)  # (the caller's array is not the one written)


def test_without_the_guard_a_binding_allocates_and_runs_as_before(monkeypatch):
    monkeypatch.setattr(guard, "BYTES", 0)
    g = lm.Graph()
    x = g.input("x", (40,))
    f = lm.compile(x * 2.0, backend="cpu")
    np.testing.assert_allclose(f(x=np.ones(40, np.float32)), 2.0)
    b = _binding(f)
    assert "run" not in vars(b) and "_execute" not in vars(b) and not hasattr(b, "_guards")


def test_a_state_written_in_place_is_guarded_and_copied_back(guarded):
    """A state written in place lives in the caller's array: guard mode runs on a guarded copy of it,
    and copies the new values back into the caller's array."""
    g = lm.Graph()
    s = nn.Buffer(np.zeros(40, np.float32))
    x = g.input("x", (40,))
    g.assign(s, g.state(s) + x)
    f = lm.compile(x.sum(), backend="cpu")
    for _ in range(2):
        f(x=np.ones(40, np.float32))
    np.testing.assert_allclose(s.data, 2.0)
    b = _binding(f)
    assert b.schedule.written == {"$state"}
    bad, k = _overrun(f, 4, writes="$state")
    arrays = {"x": np.ones(40, np.float32), "$state": np.zeros(40, np.float32)}
    with pytest.raises(guard.GuardError, match=r"caller array '\$state' \(40,\) float32: bytes \[16"):
        bad.run(arrays)


@pytest.mark.parametrize("shape", [(300, 300), (1000, 100), (20, 100, 100)])
def test_normal_programs_pass_under_the_guard(guarded, shape):
    """Split reductions, norms, a matmul and a gather: every storage's guards intact."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    g = lm.Graph()
    a = g.input("x", shape)
    flat = a.reshape((shape[0], -1))
    w = g.input("w", (flat.shape[1], 8))
    idx = g.input("i", (5,), dtype=lm.int32)
    outs = [a.sum(), (a * a).mean(), flat.softmax(-1), flat.sum(0), flat @ w, flat.index_select(0, idx)]
    f = lm.compile(outs, backend="cpu")
    wv = rng.standard_normal((flat.shape[1], 8)).astype(np.float32)
    iv = np.array([0, 3, 1, 2, 4], np.int32)
    got = f(x=x, w=wv, i=iv)
    ref = lm.compile(outs, backend="reference")(x=x, w=wv, i=iv)
    for a_, b_ in zip(got, ref):
        np.testing.assert_allclose(a_, b_, rtol=2e-4, atol=1e-3)
    b = _binding(f)
    assert b._guards and all(x.intact() for x in b._guards.values())
    b.run_steps({"x": x, "w": wv, "i": iv})  # the Python path, checked per step
    assert any(isinstance(s, (Kernel, Split)) for s in b.schedule.steps)


def test_the_strict_form_gives_every_temp_its_own_guarded_storage(guarded, monkeypatch):
    """A write past a buffer smaller than its slot lands in the slot's slack: under STRICT each temp
    is a storage of its own, its guard right at its end."""
    monkeypatch.setattr(guard, "STRICT", True)
    g = lm.Graph()
    x = g.input("x", (40,))
    f = lm.compile((x * 2.0).exp2()[:10], backend="cpu")
    np.testing.assert_allclose(f(x=np.ones(40, np.float32)), 4.0)
    storages = _binding(f).schedule.storages
    assert storages and not any("of the memory plan" in s.what for s in storages)
    bad, k = _overrun(f, 1)
    with pytest.raises(guard.GuardError, match=r"\(slot \d+\), \d+ bytes: bytes \[\d+, \d+\) \(past its end"):
        bad.run({"x": np.ones(40, np.float32)})

"""``search=N`` on the CUDA backends (``backends/cuda/schedules.py``): each kernel's schedules timed
on the device after a binding's first call, the fastest kept and cached per (kernel code,
architecture). On the simulated device: the real timing path (copies of written buffers, events),
and, with the timer replaced, a non-default schedule winning and the cache reused without timing."""

import numpy as np
import pytest

import luminal as lm
from luminal.backends.cuda import schedules
from luminal.core import disk_cache
from luminal.frontend.state import State


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LUMINAL_CACHE", "cuda")


def _program(search: int):
    """Long rows summed (a block per row by default), a softmax of other rows (one single-pass launch:
    nothing to time), a product, and a State bumped by the row sums: what a timed kernel must not
    change."""
    s = State(np.zeros(3, np.float32), name="s")
    g = lm.Graph()
    x, y, w = g.input("x", (3, 300)), g.input("y", (3, 20)), g.input("w", (300, 5))
    t = g.state(s)
    sums = x.sum(-1)
    g.assign(s, t + sums)
    f = lm.compile([sums, y.softmax(-1), x @ w], backend="cuda-emulated", search=search)
    rng = np.random.default_rng(0)
    inputs = {"x": rng.standard_normal((3, 300)), "y": rng.standard_normal((3, 20)), "w": rng.standard_normal((300, 5))}
    return s, f, {k: v.astype(np.float32) for k, v in inputs.items()}


def _expect(inputs):
    x, y, w = (inputs[n].astype(np.float64) for n in ("x", "y", "w"))
    e = np.exp(y - y.max(-1, keepdims=True))
    return [x.sum(-1), e / e.sum(-1, keepdims=True), x @ w]


def _check(got, inputs):
    for a, b in zip(got, _expect(inputs)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def _choices(f) -> dict:
    return {s.kernel.kind + str(i): s.launches[0].choice for i, s in enumerate(f.runner.program.steps)
            if s.launches}  # (a single-pass run's later kernels launch nothing)


def test_timing_on_the_device_changes_no_result_and_no_state():
    s, f, inputs = _program(search=3)
    before = _choices(f)
    for k in range(1, 4):  # the first call, then the search over every kernel with options, then two more
        _check(f(**inputs), inputs)
        np.testing.assert_allclose(s.data, k * inputs["x"].astype(np.float64).sum(-1), rtol=1e-5)
    assert f.runner.program.searched
    assert len(before) >= 3 and all(v for v in before.values())


def test_a_faster_schedule_wins_and_its_cached_choice_is_reused(monkeypatch):
    timed = []

    def favour_thread(program, binding, step, launches):
        timed.append((step.kernel.kind, launches[0].choice))
        return 1e-3 if launches[0].choice == "thread" else 2e-3

    monkeypatch.setattr(schedules, "time_launches", favour_thread)
    _, f, inputs = _program(search=3)
    default = _choices(f)
    assert "row" in default.values()  # rows of 300: a block per row, by the cost model
    _check(f(**inputs), inputs)
    won = _choices(f)
    assert timed and all(v == "thread" for k, v in won.items() if default[k] in ("row", "split"))
    assert won != default
    _check(f(**inputs), inputs)  # the new launches, laid out again

    timed.clear()
    _, again, _ = _program(search=1)  # search=1 times nothing: the cached winners are taken at once
    assert _choices(again) == won and not timed
    _check(again(**inputs), inputs)
    _, plain, _ = _program(search=0)  # search=0: the cost model's schedules, whatever is cached
    assert _choices(plain) == default


def test_a_damaged_cache_entry_is_a_miss(monkeypatch, tmp_path):
    monkeypatch.setattr(schedules, "time_launches",
                        lambda p, b, s, launches: 0.5 if launches[0].choice == "thread" else 1.0)
    _, f, inputs = _program(search=2)
    f(**inputs)
    entries = list((tmp_path / "cache" / "cuda" / "schedules").iterdir())
    assert entries
    _, plain, _ = _program(search=0)
    for damage in ("digest", "option"):
        for e in entries:
            if damage == "digest":  # the payload changed under its header: a miss
                head, _, _ = e.read_bytes().partition(b"\n")
                e.write_bytes(head + b"\ntiled")
            else:  # a well-formed entry naming no option of the kernel: a miss too
                e.write_bytes(disk_cache.header(f"schedules/{e.name}", b"rm -rf /") + b"rm -rf /")
        _, again, _ = _program(search=1)
        assert _choices(again) == _choices(plain), damage

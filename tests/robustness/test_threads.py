"""One compiled function (or train step) called from several threads gives exactly the results of the
same calls made one after another: a program's buffers, the states it reads and writes back, and the
graph's generator are shared between calls, so calls must not interleave."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import luminal as lm
from luminal import nn, train

THREADS, CALLS = 4, 40


def _hammer(fn, args_for, n_threads=THREADS, calls=CALLS):
    """Run ``fn(**args_for(t, i))`` for i < calls in each of n_threads threads, started together;
    return {(t, i): result}."""
    out, errors = {}, []
    start = threading.Barrier(n_threads)

    def work(t):
        try:
            start.wait()
            for i in range(calls):
                out[(t, i)] = fn(**args_for(t, i))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    return out


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_a_compiled_function_from_many_threads(backend):
    g = lm.Graph()
    x = g.input("x", ("B", 64))
    w = g.constant(np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32))
    f = lm.compile([(x @ w).tanh().sum(-1)], backend=backend)
    inputs = [np.full((16, 64), v, np.float32) for v in (1.0, -1.0, 0.5)]
    want = [f(x=a) for a in inputs]
    got = _hammer(f, lambda t, i: {"x": inputs[(t + i) % 3]})
    for (t, i), r in got.items():
        np.testing.assert_array_equal(r, want[(t + i) % 3])


@pytest.mark.parametrize("accumulate", [1, 2])
def test_a_train_step_from_many_threads_serialises_its_updates(accumulate):
    """Every step is applied whole: N threads x M steps of AdamW (whose update depends on the step
    count) on a linear model land on the same parameters and optimizer state as N*M steps in one
    thread (all batches are equal, so the order is not observable), and every loss seen is one of the
    single-threaded run's losses; with gradient accumulation too."""
    def make():
        lm.manual_seed(0)
        model = nn.Linear(8, 1)
        g = lm.Graph()
        x, y = g.input("x", ("B", 8)), g.input("y", ("B", 1))
        loss = ((model(x) - y) ** 2).mean()
        opt = train.AdamW(model.parameters(), lr=0.01)
        return model, train.compile_step(loss, opt, backend="cpu", accumulate=accumulate)

    rng = np.random.default_rng(1)
    xb, yb = rng.standard_normal((16, 8)).astype(np.float32), rng.standard_normal((16, 1)).astype(np.float32)
    model, step = make()
    serial = [float(step(x=xb, y=yb)) for _ in range(THREADS * 10)]
    want = {k: v.copy() for k, v in model.state_dict().items()}

    model, step = make()
    got = _hammer(step, lambda t, i: {"x": xb, "y": yb}, calls=10)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, want[k])
    assert sorted(float(v) for v in got.values()) == sorted(serial)
    assert step.optimizer.steps == THREADS * 10 // accumulate

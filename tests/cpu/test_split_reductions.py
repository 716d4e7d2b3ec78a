"""A long row with few outputs (a sum to a scalar: a loss, a norm) on the CPU: the first reduced axis
cut into equal chunks whose partials the threads share, then added in order
(``codegen/lowering/reduce.py``'s ``split_loops``). The values as the reference's, NaN and -0.0 kept,
and a row no chunking divides evenly stays one work item per output."""

import os
import subprocess
import sys

import numpy as np
import pytest

import luminal as lm

N = 1 << 16


def _schedules(f) -> dict:
    return {k.name: k.notes.get("schedule") for k, _, _ in f.runner.program._recent[1].schedule.generated}


def _run(outs, **inputs):
    f = lm.compile(outs, backend="cpu")
    got = f(**inputs)
    want = lm.compile(outs, backend="reference")(**inputs)
    return f, got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)


def test_sums_and_maxes_to_scalars_are_split_and_exact_enough():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(4 * N).astype(np.float32)
    y = rng.standard_normal((3, N, 2)).astype(np.float32)
    g = lm.Graph()
    a, b = g.input("x", (4 * N,)), g.input("y", (3, N, 2))
    f, got, want = _run([a.sum(), a.max(), (a * a).mean(), b.sum((1, 2)), b.exp().sum((1, 2)).log()], x=x, y=y)
    assert "split" in _schedules(f).values(), _schedules(f)
    exact = [x.astype(np.float64).sum(), x.max(), (x.astype(np.float64) ** 2).mean(),
             y.astype(np.float64).sum((1, 2)), np.log(np.exp(y.astype(np.float64)).sum((1, 2)))]
    for g_, w, e in zip(got, want, exact):
        np.testing.assert_allclose(g_, e, rtol=1e-6, atol=1e-4)
        np.testing.assert_allclose(g_, w, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("special", ["nan", "negzero"])
def test_special_values_survive_the_split(special):
    x = np.full(N, -0.0, np.float32)
    if special == "nan":
        x[N - 3] = np.nan
    g = lm.Graph()
    a = g.input("x", (N,))
    f, (s, m), _ = _run([a.sum(), a.max()], x=x)
    assert "split" in _schedules(f).values()
    if special == "nan":
        assert np.isnan(s) and np.isnan(m)
    else:  # a sum starts at +0.0 (numpy's and torch's: the sum of -0.0s is +0.0); the max of -0.0s is -0.0
        assert s == 0 and not np.signbit(s) and m == 0 and np.signbit(m)


def test_a_row_no_chunking_divides_stays_one_item_per_output():
    n = 65537  # prime
    x = np.ones(n, np.float32)
    g = lm.Graph()
    a = g.input("x", (n,))
    f, (s,), _ = _run([a.sum()], x=x)
    assert s == n and "split" not in _schedules(f).values()


def test_float16_rows_accumulate_in_float32_through_the_partials():
    x = np.full(N, 0.1, np.float16)  # a float16 running sum stops growing near 256
    g = lm.Graph()
    a = g.input("x", (N,), dtype=lm.float16)
    f, (s,), (w,) = _run([a.sum()], x=x)
    assert "split" in _schedules(f).values()
    np.testing.assert_allclose(np.float64(s), np.float64(w), rtol=1e-3)
    np.testing.assert_allclose(np.float64(s), N * float(np.float16(0.1)), rtol=1e-3)


@pytest.mark.parametrize("shape", [(280, 280), (300, 300), (1000, 100), (20, 100, 100)])
def test_the_partials_scratch_holds_every_part_of_a_merged_row(shape):
    """A sum over several contiguous axes is one merged row to the kernel, but its parts were counted
    on the first axis alone when the runtime sized the partials' scratch: (300, 300) took 16 parts of
    the merged 90000 and had room for 15 (300's), so the kernel wrote past its scratch (heap
    corruption: "free(): invalid size" at exit; a (1000, 100) mean loss too)."""
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    g = lm.Graph()
    a = g.input("x", shape)
    f, got, want = _run([a.sum(), (a * a).mean()], x=x)
    sch = f.runner.program._recent[1].schedule
    split = [k for k, _, _ in sch.generated if k.notes.get("schedule") == "split" and k.grid]
    assert split, _schedules(f)
    room = max(s.nbytes for s in sch.storages) // 8  # (float64 partials of a float32 sum)
    for k in split:
        assert all(v.op == "const" for v in k.grid), k.grid
        assert int(np.prod([v.arg for v in k.grid])) <= room, (k.name, k.grid, room)
    for g_, w in zip(got, want):
        np.testing.assert_allclose(g_, w, rtol=1e-5)


def test_a_merged_split_sum_leaves_the_heap_whole(tmp_path):
    """The same in a process of its own under glibc's heap checks: it aborted at exit before."""
    script = (
        "import numpy as np, luminal as lm\n"
        "for n in (280, 300):\n"
        "    g = lm.Graph(); a = g.input('x', (n, n))\n"
        "    s = (a.half() * a.half()).float().sum()\n"
        "    print(float(lm.compile(s, backend='cpu')(x=np.ones((n, n), np.float32))))\n"
    )
    env = {**os.environ, "MALLOC_CHECK_": "3", "MALLOC_PERTURB_": "165", "LUMINAL_NUM_THREADS": "1",
           "LUMINAL_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["78400.0", "90000.0"]

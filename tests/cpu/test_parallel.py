"""The compiled CPU backend's own threads (``luminal/cpu/parallel.py``, ``luminal/cpu/blas.py``, and
generated kernels cut along their first grid axis in ``plan.py``).

Why: a run of row-wise calls is cut into row ranges that threads run at once, so a wrong cut (an
array cut along the wrong axis, two arrays over the same memory cut with different row strides, a
broadcast read of rows another thread writes) gives wrong numbers only sometimes. The default
thresholds split only long runs of big calls and big kernels, which the small programs of the other
tests never make; here the ``forced`` fixture splits every run and every generated kernel it can
into three (an odd count, so the ranges are uneven) and the program audit's whole-program cases and
a convolutional training step run again against the reference interpreter.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

# the program audit's whole-program cases, collected again here under the ``forced`` fixture
from test_program_audit import (  # noqa: F401
    test_caller_arrays_new_mutated_converted_and_strided,
    test_in_place_update_fuzz,
    test_matmul_operands_and_readers_against_reference_and_torch,
    test_more_bindings_than_kept_coming_back,
    test_outputs_and_updates_that_alias,
)

import luminal as lm
from luminal import nn, train
from luminal.backends.cpu import blas, parallel, plan
from luminal.backends.cpu.parallel import Split, split_rows
from luminal.backends.cpu.steps import Copy, Gemm, Round
from luminal.core import numpy_ops as ops

THREADS = 3


def _fuzz_module():
    """The equivalence fuzz's program builder and checker (tests/compile/test_fuzz.py), loaded under
    another name so that its own tests are not collected twice."""
    path = Path(__file__).parents[1] / "compile" / "test_fuzz.py"
    spec = importlib.util.spec_from_file_location("fuzz_programs", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


FUZZ = _fuzz_module()


@pytest.fixture(autouse=True)
def forced(monkeypatch):
    """Every run and every generated kernel worth splitting, into ``THREADS`` parts."""
    monkeypatch.setattr(parallel, "MIN_RUN_NS", 0)
    monkeypatch.setattr(parallel, "MIN_CALL_NS", 0)
    monkeypatch.setattr(plan, "SPLIT_NS", 0)
    monkeypatch.setattr(plan, "OWN_THREADS_NS", 0)
    monkeypatch.setenv("LUMINAL_NUM_THREADS", str(THREADS))


def _run(calls):
    for f, args in calls:
        f(*args)


def _splits(calls):
    return [f for f, _ in calls if isinstance(f, Split)]


def _same_as_serial(make, exact=True):
    """``make()`` -> (calls, result arrays): split and serial runs of fresh copies agree, bit for bit
    where the arithmetic per element is the same by construction (``exact``). A GEMM cut into row or
    column blocks is not: BLAS picks its kernel (and so the order of each dot product's additions) by
    the block's shape and the CPU, so the last bit may differ there; it is compared to float64's
    rounding of a few operations."""
    calls, outs = make()
    _run(calls)
    want = [o.copy() for o in outs]
    calls, outs = make()
    split = split_rows(calls, THREADS)
    assert _splits(split), "nothing was split"
    _run(split)
    for w, o in zip(want, outs):
        if exact:
            np.testing.assert_array_equal(o, w)
        else:
            np.testing.assert_allclose(o, w, rtol=1e-12, atol=1e-12)
    return split


def test_a_run_of_copies_splits_into_uneven_row_ranges():
    def make():
        rng = np.random.default_rng(0)
        a = rng.standard_normal((7, 5)).astype(np.float32)
        t, out = np.empty((7, 5), np.float32), np.empty((7, 5), np.float32)
        return [Copy(t, a), Round(t), Copy(out, t)], [out]

    split = _same_as_serial(make)
    (s,) = _splits(split)
    assert [part[0][1][0].shape[0] for part in s.parts] == [2, 2, 3]


def test_matmuls_cut_by_batch_rows_and_columns():
    def make():
        rng = np.random.default_rng(1)
        w, x = rng.standard_normal((1, 4, 3)), rng.standard_normal((6, 3, 5))
        a, b = rng.standard_normal((6, 3)), rng.standard_normal((3, 4))
        u, v = rng.standard_normal((1, 1, 3)), rng.standard_normal((3, 6))
        o1, o2, o3 = np.empty((6, 4, 5)), np.empty((6, 4)), np.empty((1, 1, 6))
        return [Gemm(w, x, o1), Gemm(a, b, o2), Gemm(u, v, o3)], [o1, o2, o3]

    split = _same_as_serial(make, exact=False)
    assert len(_splits(split)) == 1
    part = _splits(split)[0].parts[0]
    assert part[0][1][0].shape == (1, 4, 3) and part[0][1][1].shape == (2, 3, 5)  # the batch of x
    assert part[1][1][0].shape == (2, 3) and part[1][1][1].shape == (3, 4)  # rows of a
    assert part[2][1][1].shape == (3, 2)  # a plain GEMM with leading 1s: columns of the right operand


def test_a_matmul_with_a_vector_operand_is_not_cut():
    a, v = np.ones((4, 4, 3)), np.ones(3)
    calls = [Gemm(a, v, np.empty((4, 4)))]  # out rows are a's batch, not a's rows
    assert split_rows(calls, THREADS) == calls


def test_rows_written_then_read_transposed_are_not_cut_together():
    def make():
        x = np.arange(36.0).reshape(6, 6)
        t, out = np.empty((6, 6)), np.empty((6, 6))
        return [Copy(t, x), Copy(out, t.T)], [out]

    split = _same_as_serial(make)
    assert len(_splits(split)) == 2  # one split per call: thread 0 would read rows thread 1 writes


def test_a_broadcast_read_of_written_memory_ends_the_run():
    def make():
        x = np.arange(12.0).reshape(6, 2)
        t, out = np.empty((6, 2)), np.empty((6, 2))
        return [Copy(t, x), Copy(out, t[:1])], [out]

    split = _same_as_serial(make)
    assert [len(s.parts[0]) for s in _splits(split)] == [1, 1]


def test_overlapping_rows_of_one_output_are_never_cut():
    x = np.zeros(10)
    rows = np.lib.stride_tricks.as_strided(x, (6, 5), (8, 8))  # row i overlaps row i + 1
    calls = [Copy(rows, 1.0)]
    assert split_rows(calls, THREADS) == calls


def test_calls_that_are_not_row_wise_stay_as_they_are():
    x, idx, out = np.arange(12.0).reshape(6, 2), np.zeros((6, 1), np.int32), np.empty((6, 1))
    calls = [(ops.gather, (x, idx, 1, out)), Copy(np.empty((6, 2)), x)]
    split = split_rows(calls, THREADS)
    assert split[0] == calls[0] and isinstance(split[1][0], Split)


def test_small_runs_stay_serial_by_default(monkeypatch):
    monkeypatch.undo()
    calls = [Copy(np.empty((64, 64)), np.ones((64, 64)))]
    assert split_rows(calls, 2) == calls
    assert split_rows(calls, 1) == calls


def test_an_error_in_a_worker_part_is_raised_and_the_team_still_works():
    def boom(x):
        if x.shape[0] and x[0] >= 2:
            raise RuntimeError("boom in a worker")

    split = Split([[(boom, (np.array([0]),))], [(boom, (np.array([5]),))], [(boom, (np.array([1]),))]])
    with pytest.raises(RuntimeError, match="boom in a worker"):
        split()
    out = np.zeros(3)
    Split([[Copy(out[i:i + 1], float(i + 1))] for i in range(3)])()
    np.testing.assert_array_equal(out, [1, 2, 3])


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_bad_thread_count_is_refused(monkeypatch, value):
    monkeypatch.setenv("LUMINAL_NUM_THREADS", value)
    with pytest.raises(ValueError, match="LUMINAL_NUM_THREADS must be a positive integer"):
        parallel.thread_count()


def test_blas_runs_single_threaded_inside_and_gets_its_count_back():
    before = blas.threads()
    if before is None:
        pytest.skip("numpy's BLAS is not a bundled OpenBLAS: nothing to drive")
    with blas.single_threaded():
        with blas.single_threaded():
            assert blas._lib()[0]() == 1
            assert blas.threads() == before  # the caller's count, not the run's
        assert blas._lib()[0]() == 1
    assert blas._lib()[0]() == before


@pytest.mark.parametrize("grad", [False, True], ids=["values", "gradients"])
@pytest.mark.parametrize("seed", range(20))
def test_fuzz_programs_on_three_threads_match_the_reference(seed, grad):
    FUZZ.check(FUZZ.build(seed, 12 if not grad else 10, grad), seed, grad)


class _ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        return self.fc(self.pool(self.conv(x).relu()).flatten(1))


def _train(backend, steps=3):
    lm.manual_seed(0)
    model = _ConvNet()
    g = lm.Graph()
    x, y = g.input("x", ("B", 2, 8, 8)), g.input("y", ("B",), dtype=lm.int32)
    loss = train.cross_entropy(model(x), y)
    step = train.compile_step(loss, train.AdamW(model.parameters(), lr=1e-2), backend=backend)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(steps):
        xb = rng.standard_normal((7, 2, 8, 8)).astype(np.float32)
        losses.append(float(step(x=xb, y=rng.integers(0, 3, 7).astype(np.int32))))
    return losses, {k: np.array(v) for k, v in model.state_dict().items()}, step


def test_conv_training_step_on_three_threads_matches_the_reference():
    want_losses, want, _ = _train("reference")
    got_losses, got, step = _train("cpu")
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-5, atol=1e-6)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5, err_msg=k)
    binding = next(iter(step._update.runner.program._bindings.values()))
    splits = _splits(binding.schedule.steps)
    assert splits and all(len(s.parts) == THREADS for s in splits)


def test_a_matmul_into_a_permuted_output_is_cut_along_its_rows_in_memory():
    """A batched product stored (M, batch, N) in memory: its batch rows interleave, so the cut goes
    along M (the output axis of the largest stride), the left operand's rows with it."""
    def make():
        rng = np.random.default_rng(2)
        a, w = rng.standard_normal((4, 6, 5)), rng.standard_normal((5, 3))
        out = np.empty((6, 4, 3)).transpose(1, 0, 2)  # logical (4, 6, 3), stored (6, 4, 3)
        return [Gemm(a, np.broadcast_to(w, (4, 5, 3)), out)], [out]

    split = _same_as_serial(make, exact=False)
    (s,) = _splits(split)
    assert [p[0][1][2].shape for p in s.parts] == [(4, 2, 3)] * 3


def test_a_short_wide_matmul_is_cut_by_columns_in_a_run_of_its_own():
    """A (16, K) @ (K, 4096) product cut by its 16 rows would have every thread pack the whole wide
    operand: it is cut along the columns instead, alone (the column blocks interleave in memory, so no
    other call may share its run), and the calls around it keep their own runs."""
    def make():
        rng = np.random.default_rng(3)
        a, b = rng.standard_normal((16, 8)), rng.standard_normal((8, 4096))
        x, t = rng.standard_normal((16, 4096)), np.empty((16, 4096))
        out = np.empty((16, 4096))
        return [Copy(t, x), Gemm(a, b, out)], [t, out]

    split = _same_as_serial(make, exact=False)
    copy, mm = _splits(split)
    assert [p[0][1][0].shape for p in copy.parts] == [(5, 4096), (5, 4096), (6, 4096)]  # rows
    assert [p[0][1][1].shape for p in mm.parts] == [(8, 1365), (8, 1365), (8, 1366)]  # columns of b
    assert [p[0][1][0].shape for p in mm.parts] == [(16, 8)] * 3  # a read whole


def test_a_short_matmul_is_cut_when_our_threads_run_anyway(monkeypatch):
    """With generated kernels cut over our threads, BLAS runs on one thread: a matmul too short for a
    run of its own by ``MIN_RUN_NS`` is still cut once it takes ``MIN_CALL_NS``, or it would use one core."""
    monkeypatch.setattr(parallel, "MIN_RUN_NS", 10**12)
    monkeypatch.setattr(parallel, "MIN_CALL_NS", 1000)
    a, b, out = np.ones((64, 64, 64)), np.ones((64, 64, 64)), np.empty((64, 64, 64))
    calls = [Gemm(a, b, out)]
    assert split_rows(calls, THREADS) == calls  # BLAS keeps its threads
    assert len(_splits(split_rows(calls, THREADS, matmuls=True))) == 1


def test_the_kernel_cost_model_prices_transcendentals_by_dtype():
    """``plan._cost_ns`` prices float64's transcendentals above float32's (float64 Sin is a libm call
    per element, float32's an inline polynomial): a float64 sine over as many elements is estimated at
    several times the float32 one, an exp at more than it, and the float32 sine is not priced as a call."""
    def cost(op, dtype):
        g = lm.Graph()
        x = g.input("x", (1000,), dtype=dtype)
        f = lm.compile(op(x), backend="cpu")
        f(x=np.ones(1000, dtype.np))
        binding = next(iter(f.runner.program._bindings.values()))
        (kern,) = {id(k): k for k, _, _ in binding.schedule.generated}.values()
        return plan._cost_ns(kern, {})

    sin32, sin64 = cost(lambda x: x.sin(), lm.float32), cost(lambda x: x.sin(), lm.float64)
    exp32, exp64 = cost(lambda x: x.exp(), lm.float32), cost(lambda x: x.exp(), lm.float64)
    assert sin64 > 3 * sin32 and exp64 > 2 * exp32 and sin32 < 5 * 1000

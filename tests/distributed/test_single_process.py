"""``luminal.distributed`` in a process alone (no ``mpiexec``): world size 1 without importing MPI, the
argument checks of the collectives, the bucket layout, and a data-parallel step that is the plain step."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from mpi_run import ROOT

import luminal as lm
from luminal import distributed as dist
from luminal import nn, train
from luminal.distributed import mpi
from luminal.distributed.buckets import ALIGN, Buckets

LAUNCHER_FREE = {k: v for k, v in os.environ.items() if k not in mpi.LAUNCHER_VARS}


@pytest.fixture(autouse=True)
def alone(monkeypatch):
    """These tests run as a process alone even when pytest itself was started under a launcher."""
    for var in mpi.LAUNCHER_VARS:
        monkeypatch.delenv(var, raising=False)
    if mpi._comm is not None:
        pytest.skip("MPI is already initialised in this process")


def _python(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**env, "PYTHONPATH": str(ROOT)})


def test_a_process_alone_is_rank_0_of_1_and_never_imports_mpi():
    code = ("import sys, numpy as np, luminal, luminal.train, luminal.distributed as d\n"
            "a = np.arange(3.0); d.all_reduce(a); d.all_reduce(a, 'mean'); d.broadcast(a); d.barrier()\n"
            "print(d.rank(), d.world_size(), a.tolist(), 'mpi4py' in sys.modules)")
    proc = _python(code, LAUNCHER_FREE)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[0] == "0 1 [0.0, 1.0, 2.0] False"


def test_under_a_launcher_without_mpi4py_the_error_says_what_to_install():
    code = ("import sys; sys.modules['mpi4py'] = None\n"  # an import of it fails, as if not installed
            "import luminal.distributed as d\n"
            "try:\n    d.rank()\nexcept ImportError as e:\n    print(e)")
    proc = _python(code, {**LAUNCHER_FREE, "PMI_SIZE": "2"})
    assert "started by an MPI launcher (PMI_SIZE=2), but mpi4py cannot be imported" in proc.stdout, proc
    assert "pip install 'luminal[distributed]'" in proc.stdout


def test_collective_argument_errors():
    with pytest.raises(ValueError, match="op must be 'sum' or 'mean'"):
        dist.all_reduce(np.zeros(2), op="max")
    with pytest.raises(TypeError, match="needs a float array"):
        dist.all_reduce(np.zeros(2, np.int32), op="mean")
    with pytest.raises(ValueError, match="C-contiguous and writeable"):
        dist.all_reduce(np.zeros((4, 4))[:, 1])
    with pytest.raises(TypeError, match="expected a numpy array"):
        dist.all_reduce([1.0, 2.0])
    with pytest.raises(TypeError, match="all_reduce: cannot sum a bool array"):
        dist.all_reduce(np.zeros(2, bool))
    assert dist.broadcast(np.array([True, False])).tolist() == [True, False]  # (a bool array is sent as bytes)
    with pytest.raises(TypeError, match="broadcast: cannot send a object array"):
        dist.broadcast(np.zeros(2, object))
    with pytest.raises(ValueError, match=r"root must be a rank in \[0, 1\)"):
        dist.broadcast(np.zeros(2), root=1)


def test_shard_alone_is_the_whole_batch():
    x, y = np.arange(10).reshape(5, 2), np.arange(5)
    xs, ys = dist.shard(x, y)
    assert xs is not None and np.array_equal(xs, x) and np.array_equal(ys, y)
    with pytest.raises(ValueError, match="first dims differ"):
        dist.shard(x, y[:4])


def test_timeout_setting_is_checked(monkeypatch):
    monkeypatch.setenv("LUMINAL_DIST_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="LUMINAL_DIST_TIMEOUT='soon' must be a positive number"):
        mpi.timeout()
    monkeypatch.setenv("LUMINAL_DIST_TIMEOUT", "2.5")
    assert mpi.timeout() == 2.5


def test_buckets_are_views_into_few_aligned_buffers():
    specs = [((3, 5), np.float32), ((7,), np.float64), ((2, 2), np.float32), ((100,), np.float32)]
    b = Buckets(specs, cap=256)
    assert [a.shape for a in b.arrays] == [(3, 5), (7,), (2, 2), (100,)]
    assert [a.dtype for a in b.arrays] == [np.float32, np.float64, np.float32, np.float32]
    # one bucket per dtype; each view starts on a 64-byte boundary; the 400 B array would take the first
    # float32 bucket past 256 B, so it opens one of its own
    assert [f.nbytes for f in b.flats] == [128, 64, 448]
    for a in b.arrays:
        base = next(f for f in b.flats if np.shares_memory(a, f))
        assert (a.__array_interface__["data"][0] - base.__array_interface__["data"][0]) % ALIGN == 0
        a[...] = 1
    assert sum(float(f.sum()) for f in b.flats) == sum(a.size for a in b.arrays)  # written in place


def _run(data_parallel: bool, sizes=(5, 5, 4, 4), **options):
    lm.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    g = lm.Graph()
    x, y = g.input("x", ("B", 6)), g.input("y", ("B",), dtype=lm.int32)
    step = train.compile_step(train.cross_entropy(model(x), y), train.AdamW(model.parameters(), lr=1e-2),
                              data_parallel=data_parallel, **options)
    rng = np.random.default_rng(3)
    losses = [step(x=rng.standard_normal((n, 6)).astype(np.float32), y=rng.integers(0, 3, n).astype(np.int32))
              for n in sizes]
    return losses, model.state_dict(), step


@pytest.mark.parametrize("options", [{}, {"clip_grad_norm": 0.1, "check_finite": True}, {"accumulate": 2},
                                     {"accumulate": 2, "sizes": (6, 1, 4, 2)}])
def test_data_parallel_alone_is_the_plain_step(options):
    """Micro-batches of other sizes too: the update applies the mean of the ``accumulate`` calls' mean
    gradients, as the plain step does (not the mean over all their samples)."""
    losses, params, _ = _run(False, **options)
    dp_losses, dp_params, _ = _run(True, **options)
    np.testing.assert_allclose(dp_losses, losses, rtol=1e-6)
    for k in params:
        np.testing.assert_allclose(dp_params[k], params[k], rtol=1e-5, atol=1e-7)


def test_a_registered_mean_denominator_must_be_a_scalar_of_the_graph():
    lm.manual_seed(0)
    model = nn.Linear(6, 3)
    g = lm.Graph()
    x, y = g.input("x", ("B", 6)), g.input("y", ("B",), dtype=lm.int32)
    loss = train.cross_entropy(model(x), y)
    g.mean_counts[loss.node.id] = (y != -100).float()  # (not summed: one count per target)
    with pytest.raises(ValueError, match="graph.mean_counts must map the loss to a 0-d tensor of its graph"):
        train.compile_step(loss, train.SGD(model.parameters(), lr=0.1), data_parallel=True)
    g.mean_counts[loss.node.id] = (y != -100).float().sum()
    step = train.compile_step(loss, train.SGD(model.parameters(), lr=0.1), data_parallel=True)
    with pytest.raises(dist.RankFailedError, match=r"missing input\(s\) \['y'\]; this call needs \['x', 'y'\]"):
        step(x=np.zeros((2, 6), np.float32))  # (named by the step's program, not the count's)
    assert step.calls == 0
    step(x=np.zeros((2, 6), np.float32), y=np.array([1, -100], np.int32))
    assert step._dp.weight.data == 1.0  # a process alone holds the whole denominator


def test_the_mean_denominator_program_leaves_the_graph_updates_to_the_step():
    """cross_entropy registers its mean's denominator; the small program computing it before each call
    must not apply the graph's own updates too (BatchNorm counted every batch twice)."""
    counts = []
    for data_parallel in (False, True):
        lm.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Tanh(), nn.Linear(8, 3))
        g = lm.Graph()
        x, y = g.input("x", ("B", 6)), g.input("y", ("B",), dtype=lm.int32)
        loss = train.cross_entropy(model(x), y)
        assert loss.node.id in g.mean_counts
        step = train.compile_step(loss, train.SGD(model.parameters(), lr=0.1), data_parallel=data_parallel)
        rng = np.random.default_rng(0)
        for _ in range(3):
            step(x=rng.standard_normal((4, 6)).astype(np.float32), y=rng.integers(0, 3, 4).astype(np.int32))
        counts.append({k: np.array(v, copy=True) for k, v in model.state_dict().items()})
    assert int(counts[1]["1.num_batches_tracked"]) == 3
    for k in counts[0]:
        np.testing.assert_allclose(counts[1][k], counts[0][k], rtol=1e-5, atol=1e-7, err_msg=k)


def test_an_empty_share_is_an_error_of_every_rank():
    _, _, step = _run(True)
    with pytest.raises(dist.RankFailedError, match="rank 0 raised ValueError: its batch is empty"):
        step(x=np.zeros((0, 6), np.float32), y=np.zeros(0, np.int32))


def test_a_failure_reported_without_a_message_is_a_protocol_error():
    """A rank that fails always says how; a failure flag without a message means the ranks' exchanges
    were read out of step: a DistributedError says so, not a RankFailedError 'rank 1 raised .'."""
    _, _, step = _run(True)
    with pytest.raises(dist.DistributedError, match="reported a failure without a message") as e:
        step._dp._raise_failed("train step call 5", np.array([1.0]), None)
    assert not isinstance(e.value, dist.RankFailedError)


def test_a_refused_batch_is_no_call_of_the_step_as_in_the_plain_path():
    """``step.calls`` counts the calls that ran the program: a batch a rank refused (an empty share, a label
    out of range) is not one, in data parallel as in the plain path."""
    counts = []
    for data_parallel in (False, True):
        _, _, step = _run(data_parallel)
        with pytest.raises((IndexError, dist.RankFailedError)):
            step(x=np.zeros((2, 6), np.float32), y=np.array([0, 99], np.int32))
        counts.append(step.calls)
    assert counts == [4, 4]


def test_overflowing_accumulated_gradients_are_skipped_without_a_numpy_warning():
    """float16 gradients that overflow to +inf in one micro-step and -inf in the next add up to NaN on the
    host (data parallel accumulates there): the scaler skips that step, and numpy must not warn about it
    (the plain step adds them in its program, silently)."""
    lm.manual_seed(0)
    lin = nn.Linear(4, 1)
    g = lm.Graph()
    x = g.input("x", ("B", 4))
    sc = train.GradScaler(init_scale=2.0**16)
    step = train.compile_step(lin(x).mean(), train.SGD(lin.parameters(), lr=1e-2), compute_dtype=lm.float16,
                              scaler=sc, accumulate=2, data_parallel=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for sign in (1, -1):
            step(x=np.full((3, 4), 60000.0 * sign, np.float32))
    assert step.last_step_skipped and sc.skipped == 1


def test_data_parallel_state_is_saved_between_updates_only():
    _, _, step = _run(True, accumulate=3)  # four calls: one update, then one micro-step
    assert step.micro_step == 1
    with pytest.raises(ValueError, match="saved between optimizer updates"):
        step.state_dict()
    with pytest.raises(TypeError, match="data_parallel must be True or False"):
        _run("yes")


def test_the_update_is_one_kernel_per_parameter_reading_the_summed_gradients():
    """A rank's share of the global batch weights its loss (a scalar at the seed of the backward pass),
    so the update reads the summed buckets as they are: no pass to scale them, and AdamW's moments
    and value for a parameter are one kernel (its scalar divisions stay scalars)."""
    _, params, step = _run(True)
    kernels = step._update.runner.program.kg.kernels
    tensor_sized = [k for k in kernels if any(np.prod(b.shape, dtype=np.int64) > 1 for b, _ in k.outputs)]
    assert len(tensor_sized) == len(params), [(k.kind, [b.shape for b, _ in k.outputs]) for k in kernels]
    assert all(len(k.outputs) == 3 for k in tensor_sized)  # exp_avg, exp_avg_sq and the parameter
    assert step._dp.weight.data == 1.0  # a process alone holds the whole batch

"""``compile_step(..., data_parallel=True)`` on 2 ranks under ``mpiexec``: the same parameters as one
process with the whole batches, agreed failures, checkpoints, no hang, and the MNIST example.

The cases run in one launch (``dp_worker.py``, about 15 s on 2 cores); each test reads its case. Skipped
with the reason when mpi4py or mpiexec is missing (``pip install -e ".[distributed]"``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from mpi_run import HERE, ROOT, requires_mpi, results, run_mpi

pytestmark = [requires_mpi, pytest.mark.slow]  # the full tier: MPI jobs of several processes

EQUIVALENT = ["sgd", "adamw", "lamb", "clip", "clip_value", "frozen", "uneven", "accumulate", "accumulate_uneven",
              "float16", "ignore_index", "ignore_index_whole_share"]


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    out = tmp_path_factory.mktemp("dp")
    proc = run_mpi([str(HERE / "dp_worker.py"), str(out)], timeout=300)
    assert proc.returncode == 0, f"the worker failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return results(out)


def both(cases, name):
    """The case's result on rank 0 and rank 1."""
    missing = [r for r in (0, 1) if (name, r) not in cases]
    assert not missing, f"case {name!r}: no result from rank(s) {missing}"
    return cases[(name, 0)], cases[(name, 1)]


@pytest.mark.parametrize("name", EQUIVALENT)
def test_two_ranks_with_half_batches_equal_one_process(cases, name):
    """SGD, AdamW, LAMB, clipping by global norm and by value, a frozen parameter, uneven shares (batches
    of 5 and 3), gradient accumulation (of micro-batches of one size, and of 8 then 2: the mean of the
    calls' means, as the plain step), float16 compute, and cross_entropy with ignored targets (padding)
    whose count is registered as the loss's mean denominator (rank 0's share counting 1 target of 4, or
    none; weighted by samples, the parameters were 0.48 away): the parameters after the steps are those of
    one process with the whole batches, identical on both ranks, and every call returned the loss of
    the whole batch (the global mean, weighted by each rank's share of its denominator)."""
    for r in both(cases, name):
        assert r["param_diff"] <= r["tol"], r
        assert r["loss_diff"] <= 10 * r["tol"], r
        assert r["spread"] == 0.0, r
        if "norm_diff" in r:
            assert r["norm_diff"] <= 1e-5, r


def test_non_finite_loss_on_one_rank_skips_the_step_on_every_rank(cases):
    for r in both(cases, "nonfinite"):
        assert r["error"] is not None and r["error"].startswith("NonFiniteLossError"), r
        assert "call 2" in r["error"] and "rank(s) [1]" in r["error"], r
        assert r["param_diff"] <= r["tol"] and r["spread"] == 0.0, r  # as one process that skipped the batch
        assert r["calls"] == 3, r  # the program ran: a call, as in the plain path


def test_a_rank_raising_in_the_step_stops_every_rank_with_its_error(cases):
    for r in both(cases, "raising"):
        assert r["error"] is not None and r["error"].startswith("RankFailedError"), r
        assert "rank 1 raised IndexError" in r["error"] and "class 99" in r["error"], r
        assert r["param_diff"] <= r["tol"] and r["spread"] == 0.0, r
        assert r["calls"] == 2, r  # a refused batch is no call of the step, as in the plain path


@pytest.mark.parametrize("name, words", [
    ("mismatch_model", "the loss's graph has another structure"),
    ("mismatch_lr", "group 0: lr=0.01' on rank 0, 'group 0: lr=0.02' on rank 1"),
    ("mismatch_dims", "x (4, 4, 12), y (4,); rank 1: x (4, 5, 12)"),
    ("mismatch_order", "the optimizer must list the parameters in the same order on every rank"),
    ("mismatch_scaler", "growth_interval=1, enabled=True)' on rank 0, 'scaler=GradScaler(growth_factor=2.0, "
                        "backoff_factor=0.5, growth_interval=3"),
])
def test_mismatched_programs_are_refused_at_the_first_call(cases, name, words):
    for r in both(cases, name):
        assert r["error"] is not None and r["error"].startswith("ProgramMismatchError"), r
        assert words in r["error"], r


def test_checkpoint_from_rank_0_resumes_every_rank(cases):
    """Rank 0 saves after two steps; both ranks load the file into models of other weights and go on:
    identical state on both after the load, and the parameters of four uninterrupted steps."""
    for r in both(cases, "checkpoint"):
        assert r["loaded_spread"] == 0.0 and r["spread"] == 0.0, r
        assert r["param_diff"] <= r["tol"], r


def test_a_scaler_resumed_on_rank_0_alone_resumes_every_rank(cases):
    """The GradScaler's counters (growth_tracker, skipped) travel with rank 0's parameters at the first
    call: the scale grows at the same call on both ranks, as in the run that was not interrupted."""
    r0, r1 = both(cases, "scaler_resume")
    assert r0["history"] == r1["history"], (r0, r1)
    for r in (r0, r1):
        assert r["history"][-1] == r["want"], r
        assert r["param_diff"] == 0.0 and r["spread"] == 0.0, r


def test_exchanges_out_of_step_are_an_error_of_every_rank(cases):
    """Rank 0 calls a step for the second time while rank 1 calls another step for the first: their
    exchanges (a batch's, the first call's check) carry their kind and call number, so both ranks raise
    a DistributedError saying so (not an MPI error, nor one's row read as the other's)."""
    for r in both(cases, "out_of_step"):
        assert r["error"] is not None and r["error"].startswith("DistributedError"), r
        assert "the ranks' exchanges are out of step (rank 0 in call 2's batch exchange; rank 1 in call 1's " \
               "program check)" in r["error"], r
        assert r["calls"] == [1, 0], r  # the refused calls are no calls of either step


def test_dropout_masks_differ_between_ranks_and_are_reproducible(cases):
    """One seed on every rank drew the same masks on both (rank 1's rows masked as rank 0's, which one
    process never does). Each rank's masks now come from the shared generator and its rank: they differ
    between the ranks, a run from the same seed repeats them, and a run resumed from a checkpoint (loaded
    on every rank, or on rank 0 alone) draws those of the run that was not interrupted."""
    r0, r1 = both(cases, "dropout")
    assert all(a != b for a, b in zip(r0["a"], r1["a"])), (r0["a"], r1["a"])
    for r in (r0, r1):
        assert all(0.3 < m.count("1") / len(m) < 0.7 for m in r["a"]), r  # (dropout p=0.5 kept about half)
        assert r["b"] == r["a"], r
        assert r["c"] == r["a"][2:] and r["d"] == r["a"][2:], r


def test_batchnorm_statistics_stay_identical_on_every_rank(cases):
    for r in both(cases, "batchnorm"):
        assert r["spread"] == 0.0, r


def test_a_failed_call_leaves_the_batchnorm_statistics_as_they_were(cases):
    """Rank 1 raises at call 2: rank 0's program ran and wrote its running statistics and batch count
    before the status exchange told it; they are put back, so every rank holds those of a run that skipped
    the batch ("nothing was updated" covers the graph's own updates)."""
    for r in both(cases, "batchnorm_failure"):
        assert r["error"] is not None and "rank 1 raised IndexError" in r["error"], r
        assert set(r["diffs"]) >= {"1.running_mean", "1.running_var", "1.num_batches_tracked"}, r
        assert all(d == 0.0 for d in r["diffs"].values()), r
        assert r["spread"] == 0.0, r


def test_a_shuffle_without_a_seed_is_the_same_on_every_rank(cases):
    """A DataLoader (two epochs of one, and another's first) and batches(), shuffled without a seed: rank
    0's fresh entropy on every rank, so the sharded global batches cover each example once per epoch."""
    for r in both(cases, "loader"):
        assert len(r["seen"]) == 4 and all(s == [1] * 20 for s in r["seen"]), r


def test_collectives(cases):
    r0, r1 = both(cases, "collectives")
    for r in (r0, r1):
        assert r["size"] == 2
        assert r["sum"] == [3.0] * 3 and r["int_sum"] == [0, 3, 6, 9] and r["mean"] == [0.5, 0.5]
        assert r["bcast"] == [1.0, 1.0]
    assert (r0["shard"], r1["shard"]) == ([0, 1], [2, 3, 4]) and r1["shard_y"] == [20, 30, 40]


@pytest.fixture(scope="module")
def coll_cases(tmp_path_factory):
    out = tmp_path_factory.mktemp("coll")
    proc = run_mpi([str(HERE / "coll_worker.py"), str(out)], timeout=120)
    assert proc.returncode == 0, f"the worker failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return results(out)


@pytest.mark.parametrize("name, words", [
    ("shape", "rank 0: all_reduce(op='sum') of an array of shape (3,) and dtype float32; rank 1: all_reduce(op='sum') "
              "of an array of shape (4,) and dtype float32"),
    ("shape_big", "shape (3,) and dtype float32; rank 1: all_reduce(op='sum') of an array of shape (1000,)"),
    ("dtype", "shape (4,) and dtype float32; rank 1: all_reduce(op='sum') of an array of shape (4,) and dtype float64"),
    ("int_vs_float", "dtype int32; rank 1: all_reduce(op='sum') of an array of shape (4,) and dtype float32"),
    ("op", "rank 0: all_reduce(op='sum') of an array of shape (2,) and dtype float64; rank 1: all_reduce(op='mean')"),
    ("bcast_shape", "rank 0: broadcast(root=0) of an array of shape (3,) and dtype float32; rank 1: broadcast(root=0) "
                    "of an array of shape (5,)"),
    ("bcast_root", "rank 0: broadcast(root=0) of an array of shape (2,) and dtype float64; rank 1: broadcast(root=1)"),
    ("barrier_vs_all_reduce", "rank 0: barrier(); rank 1: all_reduce(op='sum')"),
])
def test_collectives_of_other_shapes_dtypes_or_calls_raise_on_every_rank(coll_cases, name, words):
    """MPI trusts the ranks to pass the same count and type: these returned garbage silently (an
    all_reduce of 3 floats against 4, float32 against float64) or failed inside mpi4py. Each rank must
    raise the same DistributedError, naming every rank's call."""
    for r in (coll_cases[(name, 0)], coll_cases[(name, 1)]):
        assert r["error"] is not None and r["error"].startswith("DistributedError"), r
        assert "the ranks made different collective calls" in r["error"] and words in r["error"], r


def test_after_refused_collectives_the_ranks_are_in_step_and_bool_arrays_broadcast(coll_cases):
    for rank in (0, 1):
        assert coll_cases[("in_step", rank)] == {"case": "in_step", "rank": rank, "error": None, "value": [3.0, 3.0]}
        assert coll_cases[("bcast_bool", rank)]["value"] == [True, False, True]


def test_uncaught_exception_on_one_rank_ends_the_job():
    """Rank 1 raises between steps while rank 0 waits in the next one: the job ends at once (the abort
    hook), with rank 1's traceback, not at the collective's deadline."""
    proc = run_mpi([str(HERE / "dp_abort_worker.py"), "raise"], timeout=60, env={"LUMINAL_DIST_TIMEOUT": "50"})
    assert proc.returncode != 0
    assert "RuntimeError: rank 1 gives up between steps" in proc.stderr
    assert "rank 1 of 2: uncaught RuntimeError; aborting all ranks" in proc.stderr
    assert "rank 0 was not stopped" not in proc.stdout


def test_a_rank_leaving_quietly_ends_the_job_at_the_deadline():
    """Rank 1 exits with status 0 between steps: rank 0's wait in the next step's first exchange (the batch's) ends at
    LUMINAL_DIST_TIMEOUT with a message naming it."""
    proc = run_mpi([str(HERE / "dp_abort_worker.py"), "exit"], timeout=60, env={"LUMINAL_DIST_TIMEOUT": "3"})
    assert proc.returncode != 0
    assert "rank 0 of 2: waited 3 s in train step call 2's batch exchange" in proc.stderr, proc.stderr
    assert "rank 0 was not stopped" not in proc.stdout


@pytest.mark.parametrize("mode, waited", [("all_reduce", "all_reduce(op='mean') of an array of shape (3,)"),
                                          ("barrier", "barrier")])
def test_a_step_exchange_is_never_matched_with_a_user_collective(mode, waited):
    """Rank 0 calls the step once more than rank 1, which goes on to an all_reduce (or a barrier). On one
    communicator, MPI matched rank 0's batch exchange with rank 1's collective: garbage values, or a
    failure that no rank raised. The step's exchanges have a communicator of their own: each rank waits
    in its own collective until the deadline, which names it."""
    proc = run_mpi([str(HERE / "dp_abort_worker.py"), mode], timeout=60, env={"LUMINAL_DIST_TIMEOUT": "3"})
    assert proc.returncode != 0
    assert "rank 0 of 2: waited 3 s in train step call 2's batch exchange" in proc.stderr, proc.stderr
    assert f"rank 1 of 2: waited 3 s in {waited}" in proc.stderr, proc.stderr
    assert "metric" not in proc.stdout and "was not stopped" not in proc.stdout, proc.stdout


def _epoch_lines(text: str) -> list[str]:
    return re.findall(r"epoch \d+: train loss [0-9.]+, held-out accuracy [0-9.]+%", text)


def test_mnist_example_on_two_ranks_prints_the_single_process_losses():
    """A global batch of 47 splits 23 + 24: the shares differ in size at every step."""
    flags = ["--epochs", "2", "--limit", "2000", "--batch-size", "47"]
    example = str(ROOT / "examples" / "mnist" / "train.py")
    single = subprocess.run([sys.executable, example, *flags], capture_output=True, text=True, timeout=120,
                            cwd=ROOT, env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "LUMINAL_NUM_THREADS": "1"})
    assert single.returncode == 0, single.stderr[-3000:]
    proc = run_mpi([example, *flags, "--data-parallel"], timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    want = _epoch_lines(single.stdout)
    assert len(want) == 2
    assert _epoch_lines(proc.stdout) == want  # printed by rank 0 alone: once each
    assert "2 ranks" in proc.stdout and proc.stdout.count("data: ") == 1


@pytest.mark.slow
def test_llama_finetune_on_two_ranks_prints_the_single_process_losses(tmp_path):
    """Batches of 5 windows split 2 + 3; clipping by the global norm and the cosine schedule run as in
    one process."""
    pytest.importorskip("tokenizers")
    sys.path.insert(0, str(ROOT / "examples" / "llama"))
    import make_random

    src = make_random.make_random(tmp_path / "src", layers=2, hidden=32, heads=2, kv_heads=1, intermediate=48,
                                  vocab=320, max_positions=64)
    data = tmp_path / "data.txt"
    data.write_text("the quick brown fox jumps over the lazy dog. " * 20)
    script = str(ROOT / "examples" / "llama" / "finetune.py")
    flags = [str(src), "--data", str(data), "--steps", "6", "--batch-size", "5", "--seq-len", "8", "--lr", "1e-2"]
    single = subprocess.run([sys.executable, script, *flags, "--checkpoint", str(tmp_path / "one.safetensors")],
                            capture_output=True, text=True, timeout=180, cwd=ROOT,
                            env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "LUMINAL_NUM_THREADS": "1"})
    assert single.returncode == 0, single.stderr[-3000:]
    proc = run_mpi([script, *flags, "--data-parallel", "--checkpoint", str(tmp_path / "two.safetensors")],
                   timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    want = re.findall(r"loss: first \d+ steps [0-9.]+ -> last \d+ steps [0-9.]+", single.stdout)
    assert len(want) == 1 and re.findall(r"loss: first .*", proc.stdout) == want

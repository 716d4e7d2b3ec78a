"""``compile_step(..., data_parallel=True)``: one train step over many ranks, split at the gradients.

Each rank runs the same step on its own share of a global batch. The step is two compiled programs
with MPI between them:

1. **batch exchange**: every rank reports its sample count ``n_r``, its loss's mean denominator ``d_r``
   (``n_r`` unless registered: below) and a digest of its batch's dims, so that all ranks know the
   global ``D = sum_r d_r`` (and agree that the batches fit) before anything runs;
2. **gradients**: forward and backward of the rank's loss weighted by ``d_r / D`` (one scalar at the
   seed of the backward pass, so the weighting costs nothing per gradient); each gradient is written
   into its view of a flat bucket (``distributed/buckets.py``); the graph's own updates (BatchNorm
   statistics) are applied here, and put back as they were when a rank fails;
3. **status exchange**: every rank reports whether it failed and its loss; then the buckets are summed
   over the ranks in place, a few large messages. The sum is ``sum_r d_r g_r / D``: the gradient of the
   whole global batch's mean loss, whatever each rank's share;
4. **update**: scaler, clipping (the global norm: every rank reads the same sums), ``check_finite`` and
   the optimizer's update read the summed buckets, as in a single process. Every rank computes the
   same update from the same sums, so parameters stay equal.

This is the seam gradient accumulation already has (a program that produces gradients, then one that
applies them); a rank adds up its micro-steps' gradients locally (each already the rank's part of
its call's global mean) and exchanges once, at the update, which applies the mean of the
``accumulate`` calls' global mean gradients: the plain step's ``accumulate`` (and torch's habit of
``loss / accumulate`` per micro-batch), however the micro-batches' sizes differ. The loss a call
returns is the global mean (weighted as the gradients are); extra ``outputs`` are this rank's.

**The mean's denominator.** The sample count of a call is the leading dim of its first input whose
leading dim is symbolic (the batch dim). A loss that is a mean over samples is weighted by it, and the
sum reproduces one process's gradient. A loss that is a mean over something else (``cross_entropy``
with ``ignore_index``: over the targets it counts) must be weighted by its own denominator, or a rank
whose share counts fewer targets weighs as much as the others. ``graph.mean_counts`` maps the node id
of such a loss tensor to a 0-d tensor of the same graph, the count its mean divides by, computed from
the batch alone (no parameters, no random draws): ``cross_entropy`` and ``nll_loss``
(``reduction="mean"``) register theirs, the kept targets' summed class weight. It qualifies when the
loss given to ``compile_step`` is that tensor itself (not a sum or a multiple of it: ``ce + 0.1 * reg``
or ``ce / 2`` is weighted by samples); a small program of its own (the graph's own updates kept as
read) then computes ``d_r`` before the step. A rank whose share counts nothing (``d_r = 0``: every
target ignored) contributes no gradient; a global batch that counts nothing has a NaN loss, as in one
process.

**Agreement, not hope.** At the first call the ranks compare a description of their programs (graph
structure, parameters and the order the optimizer lists them in, optimizer, options, the GradScaler's
settings) and then take rank 0's parameters, optimizer state and counters (the scaler's too: a
checkpoint loaded on rank 0 alone resumes every rank); at every call they compare their batches' dims
beyond the first. A rank that raises, or whose loss is not finite under ``check_finite``, makes every
rank raise the same error at the same call (no rank is left waiting), with nothing updated (the
graph's own updates put back too); a refused call is no call of the step (``step.calls``), as in the
plain path. Every exchange row carries what it is (the first call's check, a batch, a status) and the
call's number: ranks whose exchanges are out of step (one called the step more often than another,
or another step) raise a :class:`~luminal.distributed.DistributedError` saying so. The exchanges run
on a communicator of their own (``mpi.internal()``), so they are never matched with the user's
collectives.

**Dropout.** At the first call every rank takes rank 0's random generator (the graph's, which a
checkpoint saves) with its parameters. Each call then draws one number from it, alike on every rank,
and a rank draws its masks from a generator seeded with that number and its rank: the masks differ
from rank to rank (one process's differ from row to row too), a run from the same seed repeats them,
and a run resumed from a checkpoint (loaded on every rank or on rank 0 alone) continues them exactly.
A process alone draws from the graph's generator itself, as the plain step does.
"""

from __future__ import annotations

import hashlib
import json
import math
import re

import numpy as np

from luminal import distributed
from luminal.compiler import compile as compile_graph
from luminal.core.walk import postorder
from luminal.distributed import collectives, mpi
from luminal.distributed.buckets import Buckets
from luminal.distributed.errors import DistributedError, ProgramMismatchError, RankFailedError
from luminal.frontend.state import State, scalar_state, zeros_state

# every exchange row: what it is, the call's number, whether this rank failed, then up to three values
KIND, CALL, FAILED, A, B, C = range(6)
SAMPLES, DIGEST, DENOM = A, B, C  # a batch row's values (before the program runs)
LOSS = A  # a status row's (after it)
SIZE = A  # the first call's row: the length of the rank's description
START, BATCH, STATUS = 1.0, 2.0, 3.0
_KINDS = {START: "program check", BATCH: "batch exchange", STATUS: "status exchange"}


class DataParallel:
    """The data-parallel part of a :class:`~luminal.train.step.TrainStep`: the gradient buffers and
    program, the exchange and the first call's agreement. ``reduced`` are the tensors the update
    program reads as gradients."""

    def __init__(self, step, used, grads, outputs, graph_updates, backend: str, weight: State):
        graph = step.graph
        self.size, self.rank = distributed.world_size(), distributed.rank()
        self.buckets = Buckets([(p.shape, p.data.dtype) for _, p in used])
        self.grads = []
        for (_, p), view in zip(used, self.buckets.arrays):
            st = State(np.zeros((), p.data.dtype), p.dtype, f"{p.name or 'param'}.grad")
            st._replace(view)  # the compiled program writes into the bucket; MPI sums it there
            self.grads.append(st)
        self.weight = weight  # d_r / D: the loss's weight, which the gradients carry (``loss_weight``)
        writes = dict(zip(self.grads, grads))
        self.program = compile_graph(outputs, backend=backend, updates={**graph_updates, **writes})
        self.reduced = [graph.state(st) for st in self.grads]
        self.acc = [zeros_state(p.shape, p.dtype, f"{p.name or 'param'}.grad_acc")
                    for _, p in used] if step.accumulate > 1 else []
        # the graph's own float updates (BatchNorm's running statistics) are each rank's until averaged
        self.stats = [st for st in graph.updates if st.data.dtype.kind == "f"]
        self.stat_buckets = Buckets([(st.shape, st.data.dtype) for st in self.stats]) if self.stats else None
        # every State the gradients program writes but the gradients (running statistics, their batch count):
        # put back when a rank fails, for a failed call updates nothing
        self._own_updates = list({**graph.updates, **graph_updates})
        self.started = False
        self._roots = [t.node for t in outputs] + [t.node for t in {**graph.updates, **graph_updates}.values()]
        self._used = used
        # each parameter's place among them in the graph (the order the model reads them in): the buckets
        # follow the optimizer's order, so ranks listing parameters of one name and shape in other orders
        # would sum one's gradient into another's; the first call's check compares these places
        ids = [graph.state_node(p).id for _, p in used]
        self._positions = [sorted(ids).index(i) for i in ids]
        self._sample_input = _sample_input(graph)
        self._ran = False  # whether this call's program ran on every rank (then it counts in step.calls)
        self._denominator = _denominator_program(graph, step._args["loss"], backend)

    @staticmethod
    def loss_weight(loss) -> State:
        """The runtime scalar a rank's loss is multiplied by before it is differentiated: ``d_r / D``,
        the rank's share of the global batch's mean denominator, set at every call. The backward pass
        carries it from its seed into every gradient, so the ranks' gradients add up to the global
        batch's mean gradient with no pass over the gradients (as the loss scale of ``GradScaler`` is
        carried). Like a loss scale of ``d_r / D`` (about 1/N on N ranks), it shrinks a float16 backward
        pass's values: at many ranks, float16 compute wants a ``GradScaler``, whose dynamic scale makes
        up for it."""
        return scalar_state(1.0, "dp.loss_weight", loss.dtype)

    # the exchanges -----------------------------------------------------------------------------------
    def _exchange(self, kind: float, call: int, failed: bool, values, what: str) -> np.ndarray:
        """Every rank's row ``[kind, call, failed, *values]`` as a (world size, 6) table; raises on every
        rank when the ranks are not all in the same exchange of the same call."""
        row = np.zeros(6, np.float64)
        row[KIND], row[CALL], row[FAILED] = kind, call, failed
        row[A:A + len(values)] = values
        table = collectives.gather_rows(row, what)
        if len(set(table[:, KIND])) > 1 or len(set(table[:, CALL])) > 1:
            where = "; ".join(f"rank {r} in call {int(c)}'s {_KINDS.get(k, f'exchange of kind {k:g}')}"
                              for r, (k, c) in enumerate(table[:, [KIND, CALL]]))
            raise DistributedError(
                f"train step call {call}: the ranks' exchanges are out of step ({where}): every rank must call "
                f"the data-parallel step the same number of times, in the same order with the other steps and "
                f"collectives (a data set sharded by hand into shares of other lengths gives one rank a batch "
                f"more; dist.shard splits every global batch over all ranks). Nothing was updated (this is "
                f"rank {self.rank})")
        return table

    # the first call -------------------------------------------------------------------------------
    def start(self, step) -> None:
        """Check that every rank runs the same program, then give every rank rank 0's parameters,
        optimizer state, counters (the step's, the optimizer's and the GradScaler's) and random generator."""
        mine = {"description": describe(step, self._used, self._roots, self._positions),
                "rng": step.graph.rng.bit_generator.state}
        data = json.dumps(mine).encode()
        what = "the first call's program check"
        table = self._exchange(START, step.calls, False, [len(data)], what)
        theirs = [json.loads(b) for b in collectives.gather_bytes(data, what, sizes=table[:, SIZE])]
        for r, other in enumerate(theirs):
            diff = _first_difference(theirs[0]["description"], other["description"], r)
            if diff is not None:
                raise ProgramMismatchError(
                    f"compile_step(data_parallel=True): rank {r} does not run rank 0's program ({diff}); every rank "
                    f"must build the same model, loss, optimizer and compile_step options (this is rank {self.rank})")
        if self.size > 1:
            arrays = [s.data for s in _persistent(step, self)]
            scaler = step.scaler
            counters = np.array([step.optimizer.steps, step.micro_step,
                                 scaler.growth_tracker if scaler is not None else 0,
                                 scaler.skipped if scaler is not None else 0], np.float64)
            reqs = [collectives.start_broadcast(a) for a in arrays] + [collectives.start_broadcast(counters)]
            mpi.wait(reqs, "the first call's broadcast of rank 0's parameters and optimizer state")
            step.optimizer.steps, step.micro_step = int(counters[0]), int(counters[1])
            if scaler is not None:
                scaler.growth_tracker, scaler.skipped = int(counters[2]), int(counters[3])
                scaler._set(float(scaler._scale.data))  # (its inverse, from the scale rank 0 gave)
            step.graph.rng.bit_generator.state = theirs[0]["rng"]
        self.started = True

    # every call ---------------------------------------------------------------------------------
    def __call__(self, step, batch: dict):
        self._ran = False
        try:
            return self._call(step, batch)
        except BaseException:
            if not self._ran:  # a refused call (a rank raised, batches that differ) is no call of the step,
                step.calls -= 1  # as in the plain path; one whose loss is not finite ran, and counts
            raise

    def _call(self, step, batch: dict):
        if not self.started:
            self.start(step)
        final = step.micro_step + 1 == step.accumulate
        call = f"train step call {step.calls}"
        n = self._count(batch)
        error: BaseException | None = None
        denom = float(n)
        if n == 0:
            error = ValueError("its batch is empty (every rank needs at least one sample: shard global batches of "
                               "at least world_size samples)")
        elif self._denominator is not None and all(k in batch for k in self._denominator.input_names):
            try:  # (a missing input, or any other the count does not read, is for the step's program to name)
                reads = {k: batch[k] for k in self._denominator.input_names}
                denom = _checked_denominator(self._denominator(**reads)[0])
            except Exception as e:  # reported to every rank below, then raised everywhere
                error = e
        table = self._exchange(BATCH, step.calls, error is not None, [n, _batch_digest(batch), denom],
                               f"{call}'s batch exchange")
        self._raise_failed(call, table[:, FAILED], error)
        self._check_batches(call, table[:, DIGEST], batch)
        counts, denoms = table[:, SAMPLES], table[:, DENOM]
        total, whole = float(counts.sum()), float(denoms.sum())
        self.weight.set(denom / whole if whole > 0 else n / total)
        res: tuple | None = None
        saved = [(st, np.array(st.data, copy=True)) for st in self._own_updates]
        rng = step.graph.rng
        rng_saved = rng.bit_generator.state
        try:
            res = self._run(step, batch)
        except Exception as e:  # reported to every rank below, then raised everywhere
            error = e
        loss_r = float(res[0]) if res is not None else math.nan
        try:
            status = self._exchange(STATUS, step.calls, error is not None, [loss_r], f"{call}'s status exchange")
            self._raise_failed(call, status[:, FAILED], error)
        except BaseException:  # a rank failed: the others' programs ran, and wrote their statistics
            for st, value in saved:
                st.set(value)
            rng.bit_generator.state = rng_saved  # (the next call draws the masks this one would have)
            raise
        self._ran = True
        if denom == 0 and whole > 0:  # a share that counts no target: no gradient (its own mean is 0/0)
            for g in self.grads:
                g.data.fill(0)
        if self.stat_buckets is not None and self.size > 1:
            self._average_stats(self.stat_buckets, n / total, f"{call}'s running statistics")
        counted = denoms > 0
        loss = float(np.dot(denoms[counted], status[counted, LOSS]) / whole) if whole > 0 else math.nan
        if step.check_finite and not math.isfinite(loss):
            bad = [r for r in range(self.size) if counted[r] and not math.isfinite(status[r, LOSS])]
            note = f"; non-finite on rank(s) {bad}" if bad else "; the global batch counts no target"
            raise step._non_finite(loss, None, final, note=note, all_ranks=True)
        extra = tuple(res[1:]) if res is not None else ()  # (no rank failed: every rank has res)
        # (float16 gradients that overflowed, inf in one call and -inf in the next: the scaler skips that step)
        with np.errstate(over="ignore", invalid="ignore"):
            if not final:  # this rank's part of each call's global mean, added up
                for a, g in zip(self.acc, self.grads):
                    a.data += g.data
                step.micro_step += 1
                return loss, extra
            if self.acc:  # the mean of the update's calls' global mean gradients (the plain step's accumulate)
                inv = 1.0 / step.accumulate
                for a, g in zip(self.acc, self.grads):
                    g.data += a.data
                    g.data *= inv
        self.buckets.sum_over_ranks(f"{call}'s gradient sum")
        step._refresh_scalars()
        out = step._update()
        out = out if isinstance(out, tuple) else (out,)
        norm = float(out[1]) if step._has_norm else None
        found_inf = step.scaling and not bool(out[-1])
        if step.check_finite and norm is not None and not math.isfinite(norm) and not step.scaling:
            raise step._non_finite(loss, norm, final, all_ranks=True)  # the same sums: every rank sees it
        if step.scaler is not None:
            step.scaler.update(found_inf)
            step.last_step_skipped = found_inf
        if not found_inf:
            step.optimizer.count_update(step._trained)
        if step._has_norm:
            step.last_grad_norm = norm
        for a in self.acc:
            a.data.fill(0)
        step.micro_step = 0
        return loss, extra

    def _run(self, step, batch: dict):
        """The gradients program on this rank's batch. On several ranks, its random draws (dropout) come
        from a generator of this call and this rank, seeded with one draw from the graph's generator (the
        same draw on every rank), which then moves on alike on all."""
        rng = step.graph.rng
        if self.size == 1 or not step.graph.random:
            return self.program(**batch)
        key = int(rng.integers(2**63))
        shared = rng.bit_generator.state
        rng.bit_generator.state = np.random.default_rng([key, self.rank]).bit_generator.state
        try:
            return self.program(**batch)
        finally:
            rng.bit_generator.state = shared

    def _average_stats(self, buckets: Buckets, weight: float, what: str) -> None:
        """Running statistics become the sample-weighted mean of the ranks', the same on every rank again:
        a running mean then follows the whole batch's mean, a running variance the mean of the ranks'
        variances (torch's DistributedDataParallel keeps rank 0's instead). The normalisation itself
        uses each rank's own batch statistics, so a BatchNorm model does not reproduce one process."""
        for st, view in zip(self.stats, buckets.arrays):
            np.multiply(st.data, weight, out=view, casting="unsafe")
        buckets.sum_over_ranks(what)
        for st, view in zip(self.stats, buckets.arrays):
            np.copyto(st.data, view)

    def _count(self, batch: dict) -> int:
        """The call's sample count: the leading dim of its batch input."""
        name = self._sample_input
        if name is None or name not in batch:
            return 1
        shape = np.shape(batch[name])
        return int(shape[0]) if shape else 1

    def _raise_failed(self, call: str, failed_column: np.ndarray, error) -> None:
        """Raise on every rank when any rank failed (``failed_column``: each rank's flag; ``error``: this
        rank's exception or None)."""
        failed = [r for r in range(self.size) if failed_column[r]]
        if not failed:
            return
        mine = f"{type(error).__name__}: {error}" if error is not None else ""
        texts = [b.decode() for b in collectives.gather_bytes(mine.encode(), f"{call}'s error report")]
        silent = [r for r in failed if not texts[r]]
        if silent:  # (a rank that fails always says how: these rows were not of this exchange)
            raise DistributedError(f"{call}: rank(s) {silent} reported a failure without a message: the ranks' "
                                   f"exchanges are out of step (a protocol error, not an error of the batch); "
                                   f"nothing was updated (this is rank {self.rank})")
        said = "; ".join(f"rank {r} raised {texts[r]}" for r in failed)
        raise RankFailedError(f"{call}: {said}. Every rank stops at this call; nothing was updated "
                              f"(this is rank {self.rank})", failed, [texts[r] for r in failed]) from error

    def _check_batches(self, call: str, digests: np.ndarray, batch: dict) -> None:
        """Raise on every rank when the ranks' batches differ beyond the sample dim."""
        if len(set(digests)) > 1:
            texts = [b.decode() for b in collectives.gather_bytes(_batch_text(batch).encode(), f"{call}'s batch check")]
            ranks = "; ".join(f"rank {r}: {t}" for r, t in enumerate(texts))
            raise ProgramMismatchError(f"{call}: the ranks' batches differ beyond the first (sample) dim ({ranks}); "
                                       f"ranks split a global batch along its first dim only")


def _denominator_program(graph, loss, backend: str):
    """The compiled program of the loss's mean denominator (``graph.mean_counts``), or None when the
    loss has none registered (its samples count)."""
    count = getattr(graph, "mean_counts", {}).get(loss.node.id)
    if count is None:
        return None
    if getattr(count, "graph", None) is not graph or tuple(count.shape) != ():
        raise ValueError("compile_step(data_parallel=True): graph.mean_counts must map the loss to a 0-d tensor of "
                         "its graph (the count its mean divides by)")
    # (a program of the graph applies the graph's own updates: here they are kept as read, for the step's
    # gradients program applies them, once)
    return compile_graph([count], backend=backend, updates={st: graph.state(st) for st in graph.updates})


def _checked_denominator(value) -> float:
    d = float(np.asarray(value))
    if not (math.isfinite(d) and d >= 0):
        raise ValueError(f"the loss's mean denominator (graph.mean_counts) is {d}; it must be a count >= 0")
    return d


def _sample_input(graph) -> str | None:
    """The input whose leading dim counts the samples: the first declared with a symbolic leading dim
    (the batch dim), else the first with a leading dim (every rank's count is then the same)."""
    shaped = [(name, node.shape) for name, node in graph.inputs.items() if node.shape]
    for name, shape in shaped:
        if not isinstance(shape[0], int):
            return name
    return shaped[0][0] if shaped else None


def _batch_text(batch: dict) -> str:
    return ", ".join(f"{k} {tuple(np.shape(v))}" for k, v in sorted(batch.items()))


def _batch_digest(batch: dict) -> float:
    """48 bits of a hash of the batch's names and dims beyond the first (exact as a float64)."""
    text = ";".join(f"{k}{tuple(np.shape(v))[1:]}" for k, v in sorted(batch.items()))
    return float(int.from_bytes(hashlib.blake2b(text.encode(), digest_size=6).digest(), "big"))


def _persistent(step, dp: DataParallel) -> list[State]:
    """The States rank 0 gives every rank at the first call: everything the step's graph reads but the
    buffers of the exchange itself (parameters, frozen ones too, BatchNorm statistics, the loss scale,
    runtime scalars), every optimizer parameter and its state, and the accumulated gradients."""
    own = {id(s) for s in [*dp.grads, dp.weight]}
    found: dict[int, State] = {}
    for s in step.graph.states.values():
        found.setdefault(id(s), s)
    for _, p in step.optimizer.params():
        found.setdefault(id(p), p)
    for _, p in dp._used:
        for s in step.optimizer.state_for(p).values():
            found.setdefault(id(s), s)
    for s in dp.acc:
        found.setdefault(id(s), s)
    if step.scaler is not None:  # (the loss scale; its inverse follows from it)
        found.setdefault(id(step.scaler._scale), step.scaler._scale)
    return [s for k, s in found.items() if k not in own]


def describe(step, used, roots, positions) -> dict:
    """What must be the same on every rank, as JSON: a digest of the graph's structure, the trained
    parameters (in the optimizer's order, each with its place among them in the graph: ``positions``),
    the optimizer, the step's options and the GradScaler's settings (its scale and counters are rank 0's)."""
    hyper = [_ADDRESS.sub("", f"group {i}: {k}={v!r}") for i, g in enumerate(step.optimizer.param_groups)
             for k, v in sorted(g.items()) if k not in ("params", "_scalars")]
    sc = step.scaler
    scaler = None if sc is None else (f"GradScaler(growth_factor={sc.growth_factor}, "
                                      f"backoff_factor={sc.backoff_factor}, growth_interval={sc.growth_interval}, "
                                      f"enabled={sc.enabled})")
    return {
        "graph": _graph_digest(roots),
        "parameters": [f"{p.name or '(unnamed)'} {tuple(p.shape)} {p.dtype.name} (group {gi}, the graph's parameter "
                       f"{k} of {len(used)})" for (gi, p), k in zip(used, positions)],
        "optimizer": [type(step.optimizer).__name__, *hyper],
        "options": [f"accumulate={step.accumulate}", f"check_finite={step.check_finite}",
                    f"clip_grad_norm={step._clip[0]}", f"clip_grad_value={step._clip[1]}",
                    f"norm_type={step._clip[2]}", f"compute_dtype={getattr(step.compute_dtype, 'name', None)}",
                    f"scaler={scaler}"],
    }


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _graph_digest(roots) -> str:
    """A sha256 of the nodes ``roots`` reach, in creation order, each as its op, argument, dtype, shape
    and inputs (by position, with their views): equal exactly when two processes built the same graph."""
    nodes = sorted(postorder(roots, lambda n: [s for s, _ in n.srcs]), key=lambda n: n.id)
    pos = {n.id: i for i, n in enumerate(nodes)}
    h = hashlib.sha256()
    for n in nodes:
        srcs = ";".join(f"{pos[s.id]}:{v!r}" for s, v in n.srcs)
        h.update(_ADDRESS.sub("", f"{n.op} {n.arg!r} {n.dtype.name} {n.shape!r} [{srcs}]\n").encode())
    return h.hexdigest()


def _first_difference(a: dict, b: dict, r: int) -> str | None:
    """The first entry where rank 0's description ``a`` and rank ``r``'s ``b`` differ, in words; None
    when they agree."""
    for key in a:
        x, y = a[key], b.get(key)
        if x == y:
            continue
        if key == "graph":
            return "the loss's graph has another structure: another model, loss or input shapes"
        if isinstance(x, list) and isinstance(y, list):
            for u, v in zip(x, y):
                if u != v:
                    hint = "; the optimizer must list the parameters in the same order on every rank" \
                        if key == "parameters" and u.split(" (")[0] == v.split(" (")[0] else ""
                    return f"{key}: {u!r} on rank 0, {v!r} on rank {r}{hint}"
            return f"{key}: {len(x)} on rank 0, {len(y)} on rank {r}"
        return f"{key}: {x!r} on rank 0, {y!r} on rank {r}"
    return None

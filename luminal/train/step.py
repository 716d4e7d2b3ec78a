"""``train.compile_step``: forward + backward + optimizer update compiled as one program.

The step differentiates the loss with respect to every optimizer parameter the loss's graph reads,
optionally clips the gradients, and applies the optimizer's update as graph ops. Parameters and
optimizer state are persistent States written back in place after each run; the optimizer's
runtime scalars (learning rate, bias corrections) are refreshed from its param groups before each
run, so a scheduler changing ``group["lr"]`` takes effect without recompiling.

A call is whole under Ctrl-C: the generated code writes some States in place, the runner copies the
others back and the step count follows in Python, so a KeyboardInterrupt between two of those would
leave parameters, moments and count at different steps (and a checkpoint saved after catching it would
keep that). A SIGINT during a call is raised once all of it is written (``core/interrupts.py``).

``check_finite=True`` guards against silent divergence (a learning rate far too large drives the
loss to inf, then NaN, and every later step trains on NaN weights): the compiled update writes its
new values only where the loss (and the gradient norm, when clipping by norm computes it) is
finite, one elementwise select per written tensor inside the same program, and the call then
raises :class:`NonFiniteLossError`. The parameters, the optimizer state and the accumulated
gradients are left as they were before the bad call. Off by default: the select costs a little on
every step, and a run may want to see the NaN (anomaly hunting).

Mixed precision (``compute_dtype=lm.float16`` or ``lm.bfloat16``, see ``amp.py``): the program is built
from :func:`~luminal.train.amp.autocast`'s 16-bit rewrite of the loss graph, reading the float32
parameters through casts, so forward and backward run in 16 bits, each gradient reaches its float32
parameter through its cast (in float32), and the optimizer updates the float32 masters. A
:class:`~luminal.train.amp.GradScaler` (``scaler=``) scales the loss before the backward pass and the
gradients back after it; a step whose gradients overflowed is skipped by the same in-program select as
``check_finite`` (every written State keeps its old value; the accumulated gradients are cleared) and
the scaler backs off, without raising.

Data parallel (``data_parallel=True``, see ``data_parallel.py``): the step runs on every rank of an MPI
job on the rank's share of each global batch, split at the gradient boundary into a gradients program
and an update program with the sum of the gradients over the ranks between them; the update is the
one a single process makes from the whole batch.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import math
import numbers
import threading
import typing
from collections.abc import Sequence
from typing import Any, Generic, TypeVar, overload

import numpy as np

from luminal.compiler import compile as compile_graph
from luminal.core import dtype as dt
from luminal.core.errors import op_error
from luminal.core.interrupts import interrupts_deferred
from luminal.frontend.checks import got
from luminal.frontend.ops import clamp, isfinite, logical_and, minimum, where, zeros_like
from luminal.frontend.state import State, zeros_state
from luminal.frontend.tensor import GraphTensor
from luminal.train.amp import GradScaler, autocast
from luminal.train.autograd import grad, has_grad, reaches
from luminal.train.data_parallel import DataParallel
from luminal.train.optim.optimizer import Optimizer


def _wide(t: GraphTensor) -> GraphTensor:
    """``t`` for a reduction or a finiteness check: float64 as it is, anything else in float32 (a 16-bit
    sum overflows at 65504; a float64 gradient cast to float32 would lose its digits, or read inf)."""
    return t if t.dtype is dt.float64 else t.float()


def norm_type_of(v, owner: str = "compile_step") -> float:
    """``clip_grad_norm``'s ``norm_type`` as a float, taken as torch's ``clip_grad_norm_`` takes it
    (``float(norm_type)``: a number, or a str such as ``"inf"``); refused here, when the step is
    compiled (``owner``: the function named in the error), if it is no number, a bool or NaN (torch's NaN
    norm makes every gradient NaN)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Real, str)):
        raise TypeError(f"{owner}: norm_type must be a number (2.0, 1, float('inf'), 'inf', ...), got "
                        f"{type(v).__name__} {v!r}")
    try:
        p = float(v)
    except ValueError:
        raise ValueError(f"{owner}: norm_type {v!r} is not a number (torch's clip_grad_norm_ takes "
                         f"float(norm_type): 2.0, 1, 'inf', '-inf', 0, ...)") from None
    if math.isnan(p):
        raise ValueError(f"{owner}: norm_type must not be NaN (the norm, and every clipped gradient, would be "
                         f"NaN)")
    return p


def clip_by_norm(grads: list[GraphTensor], max_norm: float, norm_type: float = 2.0):
    """torch.nn.utils.clip_grad_norm_ as graph ops: scale all gradients by
    ``min(1, max_norm / (total_norm + 1e-6))``. Returns (clipped gradients, total norm).

    The total is torch's: ``vector_norm`` of each gradient, then of those norms, for every order
    torch takes: ``inf`` (the largest magnitude), ``-inf`` (the smallest), ``0`` (torch's nested count:
    the number of gradients with a nonzero element) and any other real ``p``
    (``(sum |g|**p) ** (1/p)``, negative ``p`` too). Computed in float64 when a gradient is float64, else
    in float32 (the max and min in the gradients' own dtype, which loses nothing)."""
    p = norm_type_of(norm_type, "clip_by_norm")
    if p in (math.inf, -math.inf):
        parts = [g.abs().amax() if p > 0 else g.abs().amin() for g in grads]
        total = parts[0]
        for q in parts[1:]:
            total = total.maximum(q) if p > 0 else total.minimum(q)
    elif p == 0:
        total = None
        for g in grads:
            term = (g != 0).float().amax()
            total = term if total is None else total + term
    else:
        total = None
        for g in grads:
            g = _wide(g)
            term = (g * g if p == 2.0 else g.abs() if p == 1.0 else g.abs() ** p).sum()
            total = term if total is None else total + term
        total = total if p == 1.0 else total ** (1.0 / p)
    coef = minimum((total + 1e-6).reciprocal() * max_norm, 1.0)
    return [(g * coef).to(g.dtype) for g in grads], total


def clip_by_value(grads: list[GraphTensor], clip_value: float):
    """torch.nn.utils.clip_grad_value_ as graph ops."""
    return [clamp(g, -clip_value, clip_value) for g in grads]


class NonFiniteLossError(FloatingPointError):
    """The loss (or the gradient norm) of a train step was inf or NaN under ``check_finite=True``.
    ``call`` is the 1-based count of calls of the step that saw it, ``loss`` and ``grad_norm`` the
    values; the bad call changed no parameter, optimizer state or accumulated gradient. ``all_ranks``:
    raised by every rank of a data-parallel step at the same call."""

    all_ranks = False

    def __init__(self, msg: str, call: int, loss: float, grad_norm: float | None):
        super().__init__(msg)
        self.call, self.loss, self.grad_norm = call, loss, grad_norm


def _handle(t):
    """A handle of its own on ``t``'s value (anything else as it is)."""
    return t.graph.tensor(t.node, t.layout) if isinstance(t, GraphTensor) else t


def _positive(name: str, v) -> float | None:
    """A clip bound must be a finite number > 0: ``clip_grad_norm=-1`` would scale every gradient by a
    negative factor (ascent instead of descent), ``clip_grad_value=-1`` clamp to an empty interval."""
    if v is None:
        return None
    if not isinstance(v, numbers.Real) or isinstance(v, (bool, np.bool_)):
        raise TypeError(f"compile_step: {name} must be a positive number, got {type(v).__name__} {v!r}")
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"compile_step: {name} must be a positive finite number, got {v!r}")
    return float(v)


StepResult = TypeVar("StepResult", covariant=True)  # the loss (a float), or (loss, *output arrays)


class TrainStep(Generic[StepResult]):
    """One optimizer update per call (every ``accumulate`` calls with gradient accumulation).

    ``step(**batch)`` returns the loss as a float, or ``(loss, *outputs)`` when extra outputs were
    requested (as numpy arrays): ``TrainStep[float]`` or ``TrainStep[tuple[Any, ...]]`` to a type
    checker (``compile_step``'s overloads say which; not ``tuple[float, *tuple[np.ndarray, ...]]``,
    which mypy refuses to unpack into ``loss, logits = step(...)``). ``last_grad_norm`` holds the total
    gradient norm when clipping by norm. ``calls`` counts the calls; with ``check_finite`` a non-finite loss raises
    :class:`NonFiniteLossError` naming the call, before anything is written. With a ``scaler``,
    ``last_step_skipped`` says whether the last optimizer step was skipped for overflowing gradients.

    Args:
        loss: the scalar loss tensor (its graph reads the optimizer's parameters).
        optimizer: a ``train`` optimizer over the parameters.
        backend: the backend name for ``lm.compile``.
        outputs: extra tensors returned by each call.
        clip_grad_norm: max total gradient norm (``norm_type``), or None.
        clip_grad_value: clamp every gradient element to this magnitude, or None.
        accumulate: apply the mean gradient of this many calls.
        norm_type: the norm of ``clip_grad_norm``: any real number, ``inf``, ``-inf``, or a str ``float``
            takes (``"inf"``), as torch's ``clip_grad_norm_`` (see :func:`clip_by_norm`).
        check_finite: raise :class:`NonFiniteLossError` on a non-finite loss (or gradient norm), writing nothing.
        compute_dtype: None (compute as built) or ``lm.float16`` / ``lm.bfloat16``: mixed precision on
            float32 master weights (module docstring).
        scaler: a :class:`~luminal.train.amp.GradScaler` for dynamic loss scaling (float16), or None.
        shapes: ``{input name: shape}``: generate the step's code for batches of these shapes now
            (:meth:`prepare`), so that the compile's time includes it and the first step only runs.
        data_parallel: average the gradients over the ranks of an MPI job (``luminal.distributed``),
            each rank calling the step with its share of every global batch (module docstring).
        search: ``lm.compile``'s ``search=N`` for the step's programs: the egglog search times up to N
            alternative programs, and the cpu backend times up to N layouts of each new batch shape
            on its first call, keeping the fastest (for one machine: the cost models' defaults were
            measured on others). 0 (the default): the cost models' choices, nothing timed.
    """

    @overload  # (the result's type, for type checkers: see compile_step)
    def __init__(self: TrainStep[tuple[Any, ...]], loss: GraphTensor, optimizer,
                 backend: str = "cpu", *, outputs: Sequence[GraphTensor], **options: Any) -> None: ...

    @overload
    def __init__(self: TrainStep[float], loss: GraphTensor, optimizer, backend: str = "cpu",
                 **options: Any) -> None: ...

    def __init__(self, loss: GraphTensor, optimizer, backend: str = "cpu", outputs=(),
                 clip_grad_norm: float | None = None, clip_grad_value: float | None = None,
                 accumulate: int = 1, norm_type: float = 2.0, check_finite: bool = False,
                 compute_dtype=None, scaler: GradScaler | None = None, shapes: dict | None = None,
                 data_parallel: bool = False, search: int = 0):
        # (what a rebuild after the optimizer's structure changed compiles again: ``_rebuild``)
        # (handles of their own: an in-place method on the caller's loss or outputs rebinds those, not these)
        self._args = dict(loss=_handle(loss), optimizer=optimizer, backend=backend,
                          outputs=[_handle(o) for o in outputs] if isinstance(outputs, (list, tuple)) else outputs,
                          clip_grad_norm=clip_grad_norm, clip_grad_value=clip_grad_value, accumulate=accumulate,
                          norm_type=norm_type, check_finite=check_finite, compute_dtype=compute_dtype, scaler=scaler,
                          shapes=shapes, data_parallel=data_parallel, search=search)
        if isinstance(search, bool) or not isinstance(search, int) or search < 0:
            raise op_error(ValueError, "compile_step", f"search must be a non-negative int, got {search!r}")
        if not isinstance(loss, GraphTensor):
            raise TypeError(f"compile_step: loss must be a GraphTensor, got {type(loss).__name__}")
        if not isinstance(optimizer, Optimizer):
            raise op_error(TypeError, "compile_step", f"needs an optimizer (train.SGD, train.AdamW, ...), got "
                           f"{'None' if optimizer is None else type(optimizer).__name__}")
        if isinstance(outputs, GraphTensor):
            raise op_error(TypeError, "compile_step", "outputs must be a list of GraphTensors, got a GraphTensor "
                           "(outputs=[t] for one)", outputs)
        if not isinstance(outputs, (list, tuple)):
            raise op_error(TypeError, "compile_step", f"outputs must be a list of GraphTensors, got {got(outputs)}")
        for i, o in enumerate(outputs):
            if not isinstance(o, GraphTensor):
                raise op_error(TypeError, "compile_step", f"outputs[{i}] must be a GraphTensor, got {got(o)}")
        if not isinstance(accumulate, int) or accumulate < 1:
            raise ValueError(f"compile_step: accumulate must be a positive int, got {accumulate!r}")
        if not isinstance(check_finite, (bool, np.bool_)):
            raise TypeError(f"compile_step: check_finite must be True or False, got {check_finite!r}")
        if not isinstance(data_parallel, (bool, np.bool_)):
            raise TypeError(f"compile_step: data_parallel must be True or False, got {data_parallel!r}")
        clip_grad_norm = _positive("clip_grad_norm", clip_grad_norm)
        clip_grad_value = _positive("clip_grad_value", clip_grad_value)
        norm_type = norm_type_of(norm_type)
        if scaler is not None and not isinstance(scaler, GradScaler):
            raise TypeError(f"compile_step: scaler must be a train.GradScaler, got {type(scaler).__name__}")
        graph = loss.graph
        self.scaler, self.last_step_skipped = scaler, False
        # a disabled scaler (enabled=False) neither scales nor skips, as torch's: the plain step
        self.scaling = scaler is not None and scaler.enabled
        self.compute_dtype = None if compute_dtype is None else dt.as_dtype(compute_dtype)
        outputs = list(outputs)
        graph_updates = {}  # the graph's own assigns (running statistics), rewritten with the loss
        if self.compute_dtype is not None:
            ups = list(graph.updates.items())
            new = autocast([loss, *outputs, *(t for _, t in ups)], self.compute_dtype)
            loss = new[0].float() if new[0].dtype is self.compute_dtype else new[0]  # reported in float32
            outputs = [t.to(o.dtype) for t, o in zip(new[1:1 + len(outputs)], outputs)]
            graph_updates = {st: t for (st, _), t in zip(ups, new[1 + len(outputs):])}
        self.graph, self.optimizer, self.accumulate = graph, optimizer, accumulate
        self.check_finite = bool(check_finite)
        self.calls = 0  # calls that ran the program, a non-finite one included (NonFiniteLossError names it)
        self._lock = threading.Lock()
        self.micro_step = 0  # calls since the last update (0 <= micro_step < accumulate)
        # the layouts ``load_state_dict`` gave, until the next call: a step built again at that call (the
        # load changed its optimizer's first steps) lays its new programs out so too (``_rebuild``)
        self._layouts_loaded: dict | None = None
        self.last_grad_norm: float | None = None
        self._outputs = outputs
        self._clip = (clip_grad_norm, clip_grad_value, norm_type)
        used = [(gi, p) for gi, p in optimizer.params() if getattr(p, "requires_grad", True)
                and graph.state_node(p) is not None]
        if not used:
            if all(not getattr(p, "requires_grad", True) for _, p in optimizer.params()):
                # (torch: "element 0 of tensors does not require grad"; the graph may well read them)
                raise ValueError(f"compile_step: every parameter of the optimizer is frozen (requires_grad=False, "
                                 f"all {len(optimizer.params())} of them), so a step would train nothing; unfreeze "
                                 f"some (p.requires_grad_(True), module.requires_grad_()) or give the optimizer "
                                 f"the ones that train")
            raise ValueError("compile_step: the loss's graph reads none of the optimizer's parameters "
                             "(was the model called on a tensor of this graph?)")
        if not any(reaches(loss, [p for _, p in used])):  # (torch: "does not require grad")
            raise op_error(ValueError, "compile_step", "the loss depends on none of the optimizer's parameters "
                           "through ops with a gradient: every step would leave them as they are", loss)
        # a parameter the loss reads only through detach() (a target network) or a comparison has no
        # gradient in torch (None), so its optimizer skips it: no weight decay, no momentum, no step of its
        # own; a zero gradient here would move it. (One read through ops with a zero gradient, floor or
        # sign, trains as torch's.)
        used = [u for u, r in zip(used, has_grad(loss, [p for _, p in used])) if r]
        self._trained = frozenset(id(p) for _, p in used)
        scaled = loss * graph.state(scaler._scale) if self.scaling else loss
        dp_weight = DataParallel.loss_weight(loss) if data_parallel else None
        if dp_weight is not None:
            scaled = scaled * graph.state(dp_weight)
        grads = grad(scaled, [p for _, p in used], allow_unused=True)

        updates: dict[State, GraphTensor] = {}
        old: dict[State, GraphTensor] = {}  # what each written State holds before the call
        # (data parallel: the global loss is checked on the host, before the update program runs)
        loss_ok = isfinite(_wide(loss)) if check_finite and not data_parallel else None
        acc_grads = grads
        dp: DataParallel | None = None
        self._dp = None
        if data_parallel:  # gradients into buckets, summed over the ranks; the update reads the sums
            self._dp = dp = DataParallel(self, used, grads, [loss, *self._outputs], graph_updates, backend, dp_weight)
            self._acc = dp.acc
            acc_grads = dp.reduced
        elif accumulate > 1:
            self._acc = [zeros_state(p.shape, p.dtype, f"{p.name or 'param'}.grad_acc")
                         for _, p in used]
            acc_t = [graph.state(a) for a in self._acc]
            micro = {a: at + g for a, at, g in zip(self._acc, acc_t, grads)}
            if check_finite:
                micro = {a: where(loss_ok, v, at) for (a, v), at in zip(micro.items(), acc_t)}
            self._micro = compile_graph([loss, *self._outputs], backend=backend, updates={**graph_updates, **micro},
                                        search=search)
            acc_grads = [(at + g) * (1.0 / accumulate) for at, g in zip(acc_t, grads)]
            updates.update({a: zeros_like(at) for a, at in zip(self._acc, acc_t)})  # not at * 0: inf * 0 is NaN
            old.update(zip(self._acc, acc_t))
        extra = []
        ok = loss_ok
        grads_ok = None
        if self.scaling:  # overflow check on the scaled gradients, then unscale (torch's unscale_)
            total = None
            for g_ in acc_grads:
                term = _wide(g_).sum()
                total = term if total is None else total + term
            grads_ok = isfinite(total)
            inv = graph.state(scaler._inv_scale)
            acc_grads = [(g_ * inv).to(g_.dtype) for g_ in acc_grads]
        if clip_grad_value is not None:
            acc_grads = clip_by_value(acc_grads, clip_grad_value)
        if clip_grad_norm is not None:
            acc_grads, norm = clip_by_norm(acc_grads, clip_grad_norm, norm_type)
            extra.append(norm)
            if check_finite and not self.scaling:  # with a scaler, overflowing gradients skip the step instead
                ok = isfinite(_wide(norm)) if ok is None else logical_and(ok, isfinite(_wide(norm)))

        # the parameters of a group share its scalars, but for those that first trained later (a layer
        # unfrozen, a group added), which count their own steps, and float64 ones, which read them in
        # float64: one set per (group, first step, scalar dtype)
        cohorts = [(gi, optimizer.first_step(p), optimizer.scalar_dtype(p).name) for gi, p in used]
        t = optimizer.steps + 1
        scalars = {(gi, start, sdt): {k: graph.state(s) for k, s in optimizer.scalar_states(gi, t, start, sdt).items()}
                   for gi, start, sdt in set(cohorts)}
        for (gi, p), g, c in zip(used, acc_grads, cohorts):
            st = optimizer.state_for(p)
            st_t = {n: graph.state(s) for n, s in st.items()}
            p_t = graph.state(p)
            new_p, new_st = optimizer.update(p_t, g, st_t, scalars[c], optimizer.param_groups[gi])
            updates[p], old[p] = new_p, p_t
            for n, v in new_st.items():
                if v is not st_t[n]:
                    updates[st[n]], old[st[n]] = v, st_t[n]
        if grads_ok is not None:  # an overflowing step writes back what was read, but clears the accumulation
            acc_states = set(getattr(self, "_acc", []))
            updates = {st_: v if st_ in acc_states else where(grads_ok, v, old[st_]) for st_, v in updates.items()}
            extra.append(grads_ok)
        if check_finite and ok is not None:  # a bad step writes back what was read: undone inside the program
            updates = {st_: where(ok, v, old[st_]) for st_, v in updates.items()}
        # each cohort's parameters, whose first steps are read again at every call: another step sharing the
        # optimizer moves them on for the updates they sit out (Optimizer.count_update)
        self._cohorts = {c: [id(p) for (_, p), pc in zip(used, cohorts) if pc == c] for c in sorted(scalars)}
        self._moved_seen = optimizer.first_steps_moved
        self._n_extra = len(extra)
        self._has_norm = clip_grad_norm is not None
        if dp is not None:  # no forward here: the graph's own updates are the gradients program's, kept as read
            keep = {st_: graph.state(st_) for st_ in graph.updates}
            self._update = compile_graph([graph.state(dp.weight), *extra], backend=backend,
                                         updates={**keep, **updates}, search=search)
        else:
            self._update = compile_graph([loss, *self._outputs, *extra], backend=backend,
                                         updates={**graph_updates, **updates}, search=search)
        self._structure = self._structure_now()
        if shapes:
            self.prepare(**shapes)

    def _refresh_scalars(self) -> None:
        """Set the runtime scalars (lr & co., from the possibly scheduled groups) for this update, per
        cohort at its parameters' own step count: their first step now, which another step sharing the
        optimizer may have moved on (``Optimizer.count_update``)."""
        opt = self.optimizer
        for (gi, start, sdt), ids in self._cohorts.items():
            opt.scalar_states(gi, opt.steps + 1 - opt.first_steps[ids[0]] + start, start, sdt)

    def _cohorts_split(self) -> bool:
        """Whether another step's updates moved some parameters of one of this step's cohorts on and not
        the others (it trained some of them): the cohort's scalars no longer fit all of it. Looked at only
        when some first step moved since the last look (one int compared per call otherwise)."""
        opt = self.optimizer
        if opt.first_steps_moved == self._moved_seen:
            return False
        split = any(len({opt.first_steps[i] for i in ids}) > 1 for ids in self._cohorts.values())
        if not split:  # (a split waiting for the end of an accumulation is looked at again at the next call)
            self._moved_seen = opt.first_steps_moved
        return split

    def _structure_now(self) -> tuple:
        """What the compiled update is built from, beyond the numbers it reads at run time (lr, betas,
        ...: the groups' scalars): per param group, the parameters that train (``requires_grad``), the
        options on (nesterov, amsgrad, ...) and the update's terms (weight decay on or off, momentum or
        none: the scalars' names); and each parameter's first step, when a checkpoint loaded after the
        compile changed them. A few microseconds a call."""
        opt = self.optimizer
        groups = tuple((tuple(id(p) for p in g["params"] if getattr(p, "requires_grad", True)),
                        tuple(sorted(k for k, v in g.items() if isinstance(v, (bool, np.bool_)) and v)),
                        tuple(sorted(opt.scalars(g, 1)))) for g in opt.param_groups)
        return opt.first_steps_loaded, groups

    def _rebuild(self) -> None:
        """The optimizer's structure changed since the step was compiled (a layer frozen or unfrozen, a
        param group added, weight decay or momentum switched on or off): build and compile the step
        again, as torch's next ``optimizer.step()`` would follow the change (a compiled update would
        go on computing the old one, silently). New optimizer state starts at zero, as torch's."""
        if self._dp is not None:
            raise ValueError("train step: the optimizer's parameters or options changed since compile_step (a layer "
                             "frozen or unfrozen, a param group added, weight decay or momentum switched on or off); "
                             "a data-parallel step cannot follow that on every rank at once: call compile_step again")
        if self.micro_step:
            raise ValueError(f"train step: the optimizer's parameters or options changed in the middle of a gradient "
                             f"accumulation (micro-step {self.micro_step} of {self.accumulate}); change them between "
                             f"optimizer updates")
        try:  # built apart and taken over whole: a failed build leaves this step as it was
            new = TrainStep(**self._args)
        except ValueError as e:
            raise ValueError(f"train step: the optimizer's parameters or options changed since compile_step, and "
                             f"the step cannot be built with them: {e}") from e
        kept = {k: self.__dict__[k] for k in ("calls", "last_grad_norm", "last_step_skipped", "_lock")}
        loaded = self._layouts_loaded
        self.__dict__.update(new.__dict__)
        self.__dict__.update(kept)  # (the lock this call holds, so another thread waits on it still)
        if loaded:  # (built again at the first call after a load: the saved run's programs are these)
            with contextlib.suppress(ValueError):
                self._prepare_layouts(loaded)()

    def prepare(self, **shapes) -> None:
        """Generate the step's code now for a batch of these shapes (``Compiled.prepare``): the first
        step with them then only runs.

        Args:
            **shapes: every input's shape, by name (a tuple of ints, or an array of that shape).
        """
        if self._dp is not None:  # the update program reads no input
            self._dp.program.prepare(**shapes)
            self._update.prepare()
            return
        for program in (self._update, getattr(self, "_micro", None)):
            if program is not None:
                program.prepare(**shapes)

    def __call__(self, /, *args, **batch) -> StepResult:
        # a step is whole: its scalars, its program run and its counters, one thread at a time, and a
        # Ctrl-C during it is raised once all of it is written (``core/interrupts.py``)
        if args:
            names = (self._dp.program if self._dp is not None else self._update).input_names
            raise TypeError(f"train step: give the batch by name, as step({', '.join(f'{n}=...' for n in names)}); "
                            f"got {len(args)} positional argument(s)")
        with self._lock, interrupts_deferred():
            return self._step(batch)

    def _step(self, batch):
        if self._structure_now() != self._structure or (self._cohorts_split() and not self.micro_step):
            self._rebuild()
        self._layouts_loaded = None
        self.calls += 1
        if self._dp is not None:
            loss, extra = self._dp(self, batch)
            return loss if not self._outputs else (loss, *extra)
        final = self.micro_step + 1 == self.accumulate
        if final:
            self._refresh_scalars()
        try:
            res = self._update(**batch) if final else self._micro(**batch)
        except BaseException:  # a refused batch (a wrong shape, a label out of range): no call of the step
            self.calls -= 1
            raise
        res = res if isinstance(res, tuple) else (res,)
        loss = float(res[0])
        n_out = 1 + len(self._outputs)
        norm = float(res[n_out]) if final and self._has_norm else None
        found_inf = final and self.scaling and not bool(res[-1])
        norm_bad = norm is not None and not math.isfinite(norm) and not self.scaling
        if self.check_finite and (not math.isfinite(loss) or norm_bad):
            raise self._non_finite(loss, norm, final)
        if final:
            if self.scaler is not None:  # a skipped step leaves the optimizer's step count as it was
                self.scaler.update(found_inf)
                self.last_step_skipped = found_inf
            if not found_inf:
                self.optimizer.count_update(self._trained)
            self.micro_step = 0
            if self._has_norm:
                self.last_grad_norm = norm
            res = res[:n_out]
        else:
            self.micro_step += 1
        return typing.cast(StepResult, loss if not self._outputs else (loss, *res[1:]))

    def _non_finite(self, loss: float, norm: float | None, final: bool, note: str = "",
                    all_ranks: bool = False) -> NonFiniteLossError:
        """The error of a call whose loss or gradient norm is not finite (``note``: where, for data
        parallel; ``all_ranks``: every rank raises it at this call)."""
        what = f"the loss is {loss}" if not math.isfinite(loss) else f"the gradient norm is {norm} (loss {loss})"
        kind = f"optimizer step {self.optimizer.steps + 1}" if final else \
            f"micro-step {self.micro_step + 1} of {self.accumulate}"
        err = NonFiniteLossError(
            f"train step: {what} at call {self.calls} ({kind}{note}); nothing was updated by this call (parameters, "
            f"optimizer state and accumulated gradients are as before it). Training has diverged or met a bad "
            f"batch: lower the learning rate, clip the gradients, or check the data "
            f"(check_finite=True raised this)", self.calls, loss, norm)
        err.all_ranks = all_ranks
        return err

    def report(self, show: bool = True):
        """The compile report of the update program (forward + backward + update), as
        ``Compiled.report``: kernels, loops rolled, memory, time per stage. Data parallel: the
        gradients program's (forward + backward; the update is a program of its own)."""
        return (self._update if self._dp is None else self._dp.program).report(show)

    def state_dict(self) -> dict:
        """What a checkpoint needs beyond model and optimizer: the accumulation position, the
        accumulated gradients, the graph's random generator (dropout masks) and the layouts its
        programs timed on this machine (``Compiled.layouts``: a resumed step lays out alike). A data-parallel step
        is saved between updates only: mid-accumulation, each rank holds a part of the gradients."""
        if self._dp is not None and self.micro_step:
            raise ValueError(f"TrainStep.state_dict: a data-parallel step is saved between optimizer updates; it is "
                             f"at micro-step {self.micro_step} of {self.accumulate}, whose gradients are spread over "
                             f"the ranks (save when micro_step is 0)")
        arrays = {f"grad_acc.{i}": a.data for i, a in enumerate(getattr(self, "_acc", []))}
        sd = {"micro_step": self.micro_step, "rng": self.graph.rng.bit_generator.state, "arrays": arrays}
        if self.scaler is not None:
            sd["scaler"] = self.scaler.state_dict()
        layouts = {name: p.layouts() for name, p in self._programs().items()}
        if any(layouts.values()):
            sd["layouts"] = {name: entries for name, entries in layouts.items() if entries}
        return sd

    def _programs(self) -> dict:
        """The step's compiled programs by name: the update (every call, or the last of an accumulation),
        the accumulating micro-step, a data-parallel step's gradients program."""
        named = {"update": self._update, "micro": getattr(self, "_micro", None),
                 "gradients": self._dp.program if self._dp is not None else None}
        return {name: p for name, p in named.items() if p is not None}

    def load_state_dict(self, sd: dict) -> None:
        """Restore what ``state_dict`` returned, after checking all of it (``prepare_load``): nothing
        changes when a check fails.

        Args:
            sd: a dict from ``state_dict``.
        """
        self.prepare_load(sd)()

    def prepare_load(self, sd: dict):
        """``load_state_dict``'s checks and conversions, changing nothing; returns ``apply()``. The
        accumulation position must fit this step's ``accumulate`` and the accumulated gradients match
        its parameters one to one."""
        micro = sd["micro_step"]
        if not isinstance(micro, numbers.Integral) or isinstance(micro, bool):  # 1.9 or "1" is not a position
            raise ValueError(f"TrainStep.load_state_dict: micro_step must be an int, got {type(micro).__name__} "
                             f"{micro!r}")
        micro = int(micro)
        if not 0 <= micro < self.accumulate:
            raise ValueError(f"TrainStep.load_state_dict: micro_step {micro} does not fit accumulate="
                             f"{self.accumulate} (the state comes from a step with another accumulate)")
        if self._dp is not None and micro:
            raise ValueError(f"TrainStep.load_state_dict: the state is at micro-step {micro} of an accumulation; a "
                             f"data-parallel step resumes between optimizer updates only (micro_step 0)")
        acc = getattr(self, "_acc", [])
        want = {f"grad_acc.{i}" for i in range(len(acc))}
        if set(sd["arrays"]) != want:
            raise ValueError(f"TrainStep.load_state_dict: accumulated gradients {sorted(sd['arrays'])} in the "
                             f"state, {sorted(want)} here (another accumulate, or other parameters)")
        values = [(a, a.prepared(sd["arrays"][f"grad_acc.{i}"])) for i, a in enumerate(acc)]
        rng = np.random.default_rng()
        try:  # checked by numpy before the graph's generator is touched
            rng.bit_generator.state = sd["rng"]
        except (ValueError, TypeError, OverflowError) as e:  # (a value past 64 bits: numpy's OverflowError)
            raise ValueError(f"TrainStep.load_state_dict: the random generator's state is not one numpy takes: "
                             f"{e}") from None
        scaler_apply = self.scaler.prepare_load(sd["scaler"]) if self.scaler is not None and "scaler" in sd \
            else (lambda: None)
        layouts_apply = self._prepare_layouts(sd.get("layouts", {}))

        def apply():
            with interrupts_deferred():
                scaler_apply()
                layouts_apply()
                self.micro_step = micro
                self.graph.rng.bit_generator.state = sd["rng"]
                for a, v in values:
                    np.copyto(a.data, v, casting="unsafe")

        return apply

    def _prepare_layouts(self, layouts):
        """The layouts the saved run's programs had timed (``Compiled.layouts``), checked, as one
        ``apply()``: a resumed run lays its bindings out as the run it continues did, where a timing of
        its own could pick a layout that rounds differently (``docs/training.md``, Checkpoints)."""
        programs = self._programs()
        if not isinstance(layouts, dict) or not set(layouts) <= set(programs):
            what = sorted(layouts) if isinstance(layouts, dict) else type(layouts).__name__
            raise ValueError(f"TrainStep.load_state_dict: layouts for {what} in the state, this step's programs are "
                             f"{sorted(programs)} (another accumulate or data-parallel setting)")
        applies = []
        for name, entries in layouts.items():
            try:
                applies.append(programs[name].prepare_layouts(entries))
            except ValueError as e:
                raise ValueError(f"TrainStep.load_state_dict: the {name} program's layouts: {e}") from None

        def apply():
            for a in applies:
                a()
            for name in set(programs) - set(layouts):  # (their own layouts: none kept from the saved run)
                programs[name].prepare_layouts([])()
            self._layouts_loaded = layouts

        return apply


@overload
def compile_step(loss: GraphTensor, optimizer, backend: str = "cpu", *, outputs: Sequence[GraphTensor],
                 **options: Any) -> TrainStep[tuple[Any, ...]]: ...


@overload
def compile_step(loss: GraphTensor, optimizer, backend: str = "cpu", **options: Any) -> TrainStep[float]: ...


def compile_step(loss: GraphTensor, optimizer, backend: str = "cpu", **options) -> TrainStep:
    """Compile forward + backward + update of ``loss`` for ``optimizer``'s parameters.

    Options: ``outputs`` (extra tensors returned by each call), ``clip_grad_norm`` (max total norm;
    ``norm_type``), ``clip_grad_value`` (both positive finite numbers), ``accumulate`` (apply the mean
    gradient of this many calls), ``check_finite`` (default False: raise :class:`NonFiniteLossError`
    when the loss, or the gradient norm when clipping by norm, is inf or NaN, leaving the parameters
    and optimizer state as before that call; costs one select per updated tensor, see the module
    docstring), ``compute_dtype`` (``lm.float16``/``lm.bfloat16``: mixed precision on float32 master
    weights) and ``scaler`` (a :class:`~luminal.train.amp.GradScaler`: dynamic loss scaling, skipping
    steps whose gradients overflow), ``shapes`` (``{input name: shape}``: generate the code for
    batches of these shapes now, :meth:`TrainStep.prepare`), ``data_parallel`` (each rank of an MPI job
    calls the step with its share of every global batch; the update is the whole batch's, see
    ``luminal/train/data_parallel.py``), ``search`` (``lm.compile``'s ``search=N``: time alternatives on
    this machine and keep the fastest).

    Args:
        loss: the scalar loss tensor.
        optimizer: the optimizer whose parameters the loss reads.
        backend: the backend name.
        **options: the options above (see :class:`TrainStep`).

    Returns:
        A :class:`TrainStep`: ``step(**batch)`` runs one call.
    """
    for k in options:
        if k not in _OPTIONS:  # (not TrainStep.__init__'s TypeError, which names no option it takes)
            near = difflib.get_close_matches(k, _OPTIONS, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise op_error(TypeError, "compile_step", f"unknown option {k!r}{hint}; the options: {', '.join(_OPTIONS)}")
    return TrainStep(loss, optimizer, backend=backend, **options)


# compile_step's options: TrainStep's arguments beyond compile_step's own (loss, optimizer, backend)
_OPTIONS = tuple(n for n in inspect.signature(TrainStep.__init__).parameters
                 if n != "self" and n not in inspect.signature(compile_step).parameters)

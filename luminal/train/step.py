"""``train.compile_step``: forward + backward + optimizer update compiled as one program.

The step differentiates the loss with respect to every optimizer parameter the loss's graph reads,
optionally clips the gradients, and applies the optimizer's update as graph ops. Parameters and
optimizer state are persistent States written back in place after each run; the optimizer's
runtime scalars (learning rate, bias corrections) are refreshed from its param groups before each
run, so a scheduler changing ``group["lr"]`` takes effect without recompiling.
"""

from __future__ import annotations

import numpy as np

from ..compile import compile as compile_graph
from ..frontend.ops import clamp, minimum
from ..frontend.state import State
from ..frontend.tensor import GraphTensor
from .autograd import grad


def clip_by_norm(grads: list[GraphTensor], max_norm: float, norm_type: float = 2.0):
    """torch.nn.utils.clip_grad_norm_ as graph ops: scale all gradients by
    ``min(1, max_norm / (total_norm + 1e-6))``. Returns (clipped gradients, total norm)."""
    if norm_type == float("inf"):
        parts = [g.abs().amax() for g in grads]
        total = parts[0]
        for q in parts[1:]:
            total = total.maximum(q)
    else:
        total = None
        for g in grads:
            g = g.float()
            term = (g * g if norm_type == 2.0 else g.abs() ** norm_type).sum()
            total = term if total is None else total + term
        total = total ** (1.0 / norm_type)
    coef = minimum((total + 1e-6).reciprocal() * max_norm, 1.0)
    return [(g * coef).to(g.dtype) for g in grads], total


def clip_by_value(grads: list[GraphTensor], clip_value: float):
    """torch.nn.utils.clip_grad_value_ as graph ops."""
    return [clamp(g, -clip_value, clip_value) for g in grads]


class TrainStep:
    """One optimizer update per call (every ``accumulate`` calls with gradient accumulation).

    ``step(**batch)`` returns the loss as a float, or ``(loss, *outputs)`` when extra outputs were
    requested (as numpy arrays). ``last_grad_norm`` holds the total gradient norm when clipping by
    norm."""

    def __init__(self, loss: GraphTensor, optimizer, backend: str = "cpu", outputs=(),
                 clip_grad_norm: float | None = None, clip_grad_value: float | None = None,
                 accumulate: int = 1, norm_type: float = 2.0):
        if not isinstance(loss, GraphTensor):
            raise TypeError(f"compile_step: loss must be a GraphTensor, got {type(loss).__name__}")
        if not isinstance(accumulate, int) or accumulate < 1:
            raise ValueError(f"compile_step: accumulate must be a positive int, got {accumulate!r}")
        graph = loss.graph
        self.graph, self.optimizer, self.accumulate = graph, optimizer, accumulate
        self.micro_step = 0  # calls since the last update (0 <= micro_step < accumulate)
        self.last_grad_norm: float | None = None
        self._outputs = list(outputs)
        used = [(gi, p) for gi, p in optimizer.params() if getattr(p, "requires_grad", True)
                and graph.state_node(p) is not None]
        if not used:
            raise ValueError("compile_step: the loss's graph reads none of the optimizer's parameters "
                             "(was the model called on a tensor of this graph?)")
        grads = grad(loss, [p for _, p in used], allow_unused=True)

        updates: dict[State, GraphTensor] = {}
        acc_grads = grads
        if accumulate > 1:
            self._acc = [State(np.zeros(p.shape, p.data.dtype), p.dtype, f"{p.name or 'param'}.grad_acc")
                         for _, p in used]
            acc_t = [graph.state(a) for a in self._acc]
            micro = {a: at + g for a, at, g in zip(self._acc, acc_t, grads)}
            self._micro = compile_graph([loss, *self._outputs], backend=backend, updates=micro)
            acc_grads = [(at + g) * (1.0 / accumulate) for at, g in zip(acc_t, grads)]
            updates.update({a: at * 0.0 for a, at in zip(self._acc, acc_t)})
        extra = []
        if clip_grad_value is not None:
            acc_grads = clip_by_value(acc_grads, clip_grad_value)
        if clip_grad_norm is not None:
            acc_grads, norm = clip_by_norm(acc_grads, clip_grad_norm, norm_type)
            extra.append(norm)

        t = optimizer.steps + 1
        scalars = {gi: {k: graph.state(s) for k, s in optimizer.scalar_states(gi, t).items()}
                   for gi in {gi for gi, _ in used}}
        for (gi, p), g in zip(used, acc_grads):
            st = optimizer.state_for(p)
            st_t = {n: graph.state(s) for n, s in st.items()}
            new_p, new_st = optimizer.update(graph.state(p), g, st_t,
                                             scalars[gi], optimizer.param_groups[gi])
            updates[p] = new_p
            for n, v in new_st.items():
                if v is not st_t[n]:
                    updates[st[n]] = v
        self._groups = sorted(scalars)
        self._n_extra = len(extra)
        self._update = compile_graph([loss, *self._outputs, *extra], backend=backend, updates=updates)

    def __call__(self, /, **batch):
        final = self.micro_step + 1 == self.accumulate
        if final:
            for gi in self._groups:  # lr & co. for this step, from the (possibly scheduled) groups
                self.optimizer.scalar_states(gi, self.optimizer.steps + 1)
            res = self._update(**batch)
        else:
            res = self._micro(**batch)
        res = res if isinstance(res, tuple) else (res,)
        if final:
            self.optimizer.steps += 1
            self.micro_step = 0
            if self._n_extra:
                self.last_grad_norm = float(res[-1])
                res = res[:-1]
        else:
            self.micro_step += 1
        loss = float(res[0])
        return loss if not self._outputs else (loss, *res[1:])

    def report(self, show: bool = True):
        """The compile report of the update program (forward + backward + update), as
        ``Compiled.report``: kernels, loops rolled, memory, time per stage."""
        return self._update.report(show)

    def state_dict(self) -> dict:
        """What a checkpoint needs beyond model and optimizer: the accumulation position, the
        accumulated gradients and the graph's random generator (dropout masks)."""
        arrays = {f"grad_acc.{i}": a.data for i, a in enumerate(getattr(self, "_acc", []))}
        return {"micro_step": self.micro_step, "rng": self.graph.rng.bit_generator.state, "arrays": arrays}

    def load_state_dict(self, sd: dict) -> None:
        self.prepare_load(sd)()

    def prepare_load(self, sd: dict):
        """``load_state_dict``'s checks and conversions, changing nothing; returns ``apply()``. The
        accumulation position must fit this step's ``accumulate`` and the accumulated gradients match
        its parameters one to one."""
        micro = int(sd["micro_step"])
        if not 0 <= micro < self.accumulate:
            raise ValueError(f"TrainStep.load_state_dict: micro_step {micro} does not fit accumulate="
                             f"{self.accumulate} (the state comes from a step with another accumulate)")
        acc = getattr(self, "_acc", [])
        want = {f"grad_acc.{i}" for i in range(len(acc))}
        if set(sd["arrays"]) != want:
            raise ValueError(f"TrainStep.load_state_dict: accumulated gradients {sorted(sd['arrays'])} in the "
                             f"state, {sorted(want)} here (another accumulate, or other parameters)")
        values = [(a, a.prepared(sd["arrays"][f"grad_acc.{i}"])) for i, a in enumerate(acc)]
        rng = np.random.default_rng()
        rng.bit_generator.state = sd["rng"]  # checked by numpy before the graph's generator is touched

        def apply():
            self.micro_step = micro
            self.graph.rng.bit_generator.state = sd["rng"]
            for a, v in values:
                np.copyto(a.data, v, casting="unsafe")

        return apply


def compile_step(loss: GraphTensor, optimizer, backend: str = "cpu", **options) -> TrainStep:
    """Compile forward + backward + update of ``loss`` for ``optimizer``'s parameters.

    Options: ``outputs`` (extra tensors returned by each call), ``clip_grad_norm`` (max total norm;
    ``norm_type``), ``clip_grad_value``, ``accumulate`` (apply the mean gradient of this many calls)."""
    return TrainStep(loss, optimizer, backend=backend, **options)

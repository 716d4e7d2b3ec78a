"""Mixed precision: 16-bit compute on casts of float32 master weights, and a dynamic loss scaler.

``compile_step(loss, opt, compute_dtype=lm.float16, scaler=train.GradScaler())`` builds its program
from :func:`autocast`'s rewrite of the loss graph: every float32 op computes in the compute dtype,
reading float32 leaves (a parameter, an input batch, a constant) through a cast to it. The
parameters stay float32 States (the masters); the gradient of each reaches it through its cast, so it
arrives in float32, and the optimizer (its moments float32 too) updates the masters. The model, the
optimizer and checkpoints are exactly those of a float32 run; only the step's program differs.

Why a rewrite of the finished graph rather than a model built in 16 bits: a graph's nodes carry their
dtypes, and ``compile_step`` receives the loss after the model was called. Rewriting there needs no
change to the model or to ``nn`` (any model, any loss), keeps a single copy of every parameter (the
float32 one the optimizer and ``state_dict`` see), and lets the same loss graph also compile an
ordinary float32 step or eval program. Every float32 op computes in 16 bits but ops of one element (a
loss's final sum and scaling), the values written back to States (running statistics), ops of other
dtypes (casts to int or float64, comparisons) and the ops torch's CPU autocast runs in float32: losses,
``prod``, ``cdist``, ``quantile``, ``trace`` and the solvers (``frontend/float32_ops.py``), which read
the 16-bit values reaching them widened back. Softmax and the norms compute in 16 bits, as torch's CPU
autocast runs them (its CUDA autocast runs them in float32; the cpu backend accumulates half sums and
matmuls in float32 anyway). Measured on Linear, LayerNorm, ReLU, Linear and cross_entropy in bfloat16:
the loss 1.1e-4 off float32's (torch's 0.8e-4; 2e-3 while the loss computed in bfloat16).

float16's range is small (max 65504, smallest normal 6e-5): gradients of a loss near 1 underflow.
:class:`GradScaler` (torch's ``GradScaler``) multiplies the loss by ``scale`` before the backward pass
and the gradients by ``1 / scale`` before the update; a step whose gradients overflowed to inf/NaN
changes nothing (the same in-program select as ``check_finite``, see ``step.py``) and halves the
scale; ``growth_interval`` good steps in a row double it. bfloat16 has float32's range and needs no
scaler.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import NoReturn, overload

import numpy as np

from luminal.core import dtype as dt
from luminal.core.interrupts import interrupts_deferred
from luminal.core.primitives import LEAVES
from luminal.core.symbolic import is_static
from luminal.frontend.eager import eager_only
from luminal.frontend.graph import ancestors
from luminal.frontend.ops import cast
from luminal.frontend.ops.core import _device_name
from luminal.frontend.state import scalar_state
from luminal.frontend.tensor import GraphTensor


@overload
def autocast(tensors: GraphTensor, dtype) -> GraphTensor: ...


@overload
def autocast(tensors: Sequence[GraphTensor], dtype) -> list[GraphTensor]: ...


def autocast(tensors, dtype):
    """Rewrite the computation of ``tensors`` to run in ``dtype`` wherever it ran in float32.

    Every float32 op is rebuilt in ``dtype`` over its rewritten operands, through the same views; a
    float32 leaf (an input, a parameter or other State, a constant) it reads is read through a Cast to
    ``dtype`` of the whole leaf (the leaf itself is unchanged, so gradients with respect to a float32
    parameter still arrive in float32); a Cast to float32 becomes a Cast to ``dtype``. Every other op
    is kept as built, reading its operands in their built dtypes (a 16-bit value widened back, exactly;
    a leaf as it is): the nodes of the ops torch's CPU autocast runs in float32 (losses, ``prod``,
    ``cdist``, ``quantile``, ``trace``, the solvers: ``Graph.float32_ops``), integer, bool and float64
    computations, comparisons and Casts to another dtype, which torch's autocast leaves alone too
    (``y.to(lm.int32)`` of a float32 input's 2049.0 is 2049, not float16's 2048; 70000.0 not float16's
    inf). So is a float32 op with a single element: a
    loss's last reductions and scalings, where the backward pass starts from the loss scale, which
    float16 cannot hold (``GradScaler``'s default 2**16 > 65504: every first step was skipped). The
    new nodes are added to the same graph (the original ones stay, so the graph can still compile a
    float32 program); a node with a ``Graph.custom_vjp`` keeps its rule, and one the user detached (or
    an int or bool result of the user's op) stays so (``train.autograd.has_grad``).

    A tensor that is a State's new value (``graph.updates``: a BatchNorm's running statistics, which
    ``compile_step`` passes with the loss) is computed as built, in float32, over the 16-bit values it
    shares with the other tensors (the batch statistics), cast back: as torch's float32 buffers. A
    running mean blended in 16 bits stalls where ``momentum * (batch_mean - running_mean)`` rounds
    away, within ``2**-9 / momentum`` (bfloat16: 4%) of the batch mean.

    Args:
        tensors: tensors of one graph (a loss, extra outputs, State update values), or one tensor.
        dtype: the compute dtype, ``lm.float16`` or ``lm.bfloat16``.

    Returns:
        The rewritten tensors, in order, each in ``dtype`` where it was float32 (same shapes and views);
        one tensor for one tensor.
    """
    if isinstance(tensors, GraphTensor):  # (one tensor, as lm.compile takes one: one back)
        return autocast([tensors], dtype)[0]
    if dtype is None:  # (as_dtype(None) is float64, torch's default float: "got float64" named no mistake)
        raise ValueError("autocast: dtype is None; pass the compute dtype, lm.float16 or lm.bfloat16")
    dtype = dt.as_dtype(dtype)
    if dtype not in (dt.float16, dt.bfloat16):
        raise ValueError(f"autocast: compute dtype must be float16 or bfloat16, got {dtype.name}")
    tensors = list(tensors)
    for i, t in enumerate(tensors):  # (a number or an array here failed as an AttributeError on .graph)
        if not isinstance(t, GraphTensor):
            raise TypeError(f"autocast: tensors[{i}] is a {type(t).__name__}, not a GraphTensor")
    if not tensors:
        return []
    graph = tensors[0].graph
    for i, t in enumerate(tensors):
        if t.graph is not graph:
            raise ValueError(f"autocast: the tensors must be of one graph; tensors[{i}] is of another graph than "
                             f"tensors[0]")
    written = {t.node.id for t in graph.updates.values()}
    need = ancestors([t.node for t in tensors])
    # the nodes the other tensors need compute in dtype; those only a State's new value needs stay as built
    low = ancestors([t.node for t in tensors if t.node.id not in written])
    new = {}  # node id -> its rewritten node
    leaf_casts = {}  # float32 leaf id -> its Cast to dtype, in the leaf's own shape (read through the views)
    made = len(graph.nodes)  # (nodes from here on are the rewrite's)

    def operand(s, v, in_dtype: bool) -> GraphTensor:
        """Source ``s`` read through ``v`` by an op computing in ``dtype`` (``in_dtype``) or as built."""
        if in_dtype and s.dtype is dt.float32:
            if s.op in LEAVES and not _one_element(s.shape):
                if s.id not in leaf_casts:
                    leaf_casts[s.id] = cast(graph.tensor(s), dtype).node
                return graph.tensor(leaf_casts[s.id], v)
            t = graph.tensor(new[s.id], v)  # (a one-element float32 operand, a mean's 1/N, joins as dtype)
            return t if t.dtype is dtype else cast(t, dtype)
        if s.op in LEAVES:
            return graph.tensor(s, v)
        t = graph.tensor(new[s.id], v)  # a 16-bit value widened back exactly
        return t if t.dtype is s.dtype else cast(t, s.dtype)

    for nid in sorted(need):  # ids are creation order: producers first
        n = graph.nodes[nid]
        if n.op in LEAVES:
            new[nid] = n
            continue
        # float32 ops compute in dtype; as built: a float32 op of one element (a loss's last reductions and
        # scalings), an op of another dtype (a Cast to int32 or float64, a comparison: a float32 input's
        # 70000.0 or 2049.0 is not read through float16's inf or 2048) and a running statistic's blend
        in_dtype = n.dtype is dt.float32 and not _one_element(n.shape) and nid in low and nid not in graph.float32_ops
        srcs = [operand(s, v, in_dtype) for s, v in n.srcs]
        out_dtype = dtype if in_dtype else n.dtype
        arg = dtype if in_dtype and n.op == "Cast" else n.arg  # (a Cast to float32 casts to dtype)
        if out_dtype is n.dtype and arg is n.arg and all(t.node is s for t, (s, _) in zip(srcs, n.srcs)):
            new[nid] = n  # nothing float32 upstream: the node as it was
        else:
            new[nid] = graph.add(n.op, srcs, arg, out_dtype, n.shape)
            if new[nid].id >= made:  # where the gradient is None (the user's detach, comparisons), as before
                for marks in (graph.user_detached, graph.no_grad_results):
                    (marks.add if nid in marks else marks.discard)(new[nid].id)
            custom = graph.vjps.get(nid)
            if custom is not None:  # the rewritten node differentiates by the same formula
                rule, inputs = custom
                graph.vjps[new[nid].id] = (rule, tuple((t.node, t.layout) for t in
                                                       (operand(s, v, in_dtype) for s, v in inputs)))
    return [graph.tensor(new[t.node.id], t.layout) for t in tensors]


def _one_element(shape) -> bool:
    return all(is_static(d) for d in shape) and math.prod(shape) == 1


class GradScaler:
    """Dynamic loss scaling for float16 training (torch.amp.GradScaler), used by ``compile_step``.

    The step multiplies the loss by :attr:`scale` before differentiating and the gradients by
    ``1 / scale`` after; when any gradient is inf or NaN the step is skipped (parameters, optimizer
    state and its step count unchanged) and the scale is multiplied by ``backoff_factor``; after
    ``growth_interval`` consecutive good steps it is multiplied by ``growth_factor``. The scale is a
    runtime scalar of the compiled program, so changing it never recompiles.

    Args:
        device: torch.amp.GradScaler's first argument, where its scale tensor lives (``"cuda"``,
            ``"cpu"``). Any torch device name is accepted and changes nothing: the scale is a runtime
            scalar of the compiled step, on the backend the step was compiled for. A number here
            (``torch.cuda.amp.GradScaler(65536.0)``'s order) is refused, naming ``init_scale=``.
        init_scale: the first scale (default ``2**16``, torch's).
        growth_factor: the factor applied after ``growth_interval`` good steps (> 1).
        backoff_factor: the factor applied after an overflow (in (0, 1)).
        growth_interval: good steps in a row before the scale grows (an int >= 1).
        enabled: False makes the scaler a no-op (scale 1, never skips), as torch's ``enabled``.
    """

    def __init__(self, device: str = "cpu", init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):
        if not isinstance(device, str) or _device_name(device) is None:
            hint = f"; for a scale, pass init_scale={device!r}" if isinstance(device, numbers.Real) else ""
            raise ValueError(f"GradScaler: device must be a device name as torch.amp.GradScaler's first argument "
                             f"('cuda', 'cpu'), got {device!r}{hint}")
        _check_settings("GradScaler", init_scale=init_scale, growth_factor=growth_factor,
                        backoff_factor=backoff_factor, growth_interval=growth_interval)
        self.enabled = bool(enabled)
        self.growth_factor, self.backoff_factor = float(growth_factor), float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self.growth_tracker = 0  # good steps since the last growth or overflow
        self.skipped = 0  # steps skipped for overflow, in total
        self._scale = scalar_state(float(init_scale) if self.enabled else 1.0, "amp.scale")
        self._inv_scale = scalar_state(1.0 / float(self._scale.data), "amp.inv_scale")

    @property
    def scale(self) -> float:
        """The current loss scale, a float. (torch's ``scaler.scale(loss)`` calls it: that raises an
        :class:`~luminal.frontend.eager.EagerOnlyError` naming ``compile_step``, which scales the loss.)"""
        return _Scale(self._scale.data)

    def get_scale(self) -> float:
        """torch's ``get_scale()``: the current loss scale (:attr:`scale`)."""
        return float(self._scale.data)

    # torch's accessors (the settings are read by ``update``, on the host: a change applies at the next step)
    def is_enabled(self) -> bool:
        """torch's ``is_enabled()``."""
        return self.enabled

    def get_growth_factor(self) -> float:
        """torch's ``get_growth_factor()``."""
        return self.growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        """torch's ``set_growth_factor``, checked as the constructor's argument (> 1)."""
        _check_settings("GradScaler.set_growth_factor", new_factor, self.backoff_factor, self.growth_interval)
        self.growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        """torch's ``get_backoff_factor()``."""
        return self.backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        """torch's ``set_backoff_factor``, checked as the constructor's argument (in (0, 1))."""
        _check_settings("GradScaler.set_backoff_factor", self.growth_factor, new_factor, self.growth_interval)
        self.backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        """torch's ``get_growth_interval()``."""
        return self.growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        """torch's ``set_growth_interval``, checked as the constructor's argument (an int >= 1)."""
        _check_settings("GradScaler.set_growth_interval", self.growth_factor, self.backoff_factor, new_interval)
        self.growth_interval = int(new_interval)

    # torch's per-step calls: the compiled step makes them (an error naming it, frontend/eager.py) -----------
    def step(self, optimizer, *args, **kwargs) -> NoReturn:
        """torch's ``scaler.step(optimizer)``; raises :class:`~luminal.frontend.eager.EagerOnlyError`: the
        train step this scaler was passed to (``compile_step(..., scaler=...)``) unscales the gradients
        and updates, or skips a step whose gradients overflowed, on every call.

        Args:
            optimizer: accepted for torch's signature.
            args: accepted for torch's signature.
            kwargs: accepted for torch's signature.
        """
        raise _per_step("step")

    def unscale_(self, optimizer) -> NoReturn:
        """torch's ``scaler.unscale_(optimizer)``; raises :class:`~luminal.frontend.eager.EagerOnlyError`:
        the train step unscales the gradients before clipping them (``compile_step(..., clip_grad_norm=)``
        clips the unscaled gradients).

        Args:
            optimizer: accepted for torch's signature.
        """
        raise _per_step("unscale_")

    def _set(self, value: float) -> None:
        self._scale.set(np.float32(value))
        self._inv_scale.set(np.float32(1.0) / self._scale.data)

    def update(self, found_inf: bool | None = None) -> None:
        """Adjust the scale after a step (the train step calls it). torch's ``scaler.update()`` (no
        argument, or a new scale) raises an :class:`~luminal.frontend.eager.EagerOnlyError`: the step
        this scaler was passed to makes this call itself.

        Args:
            found_inf: whether that step's gradients had an inf or NaN (it was skipped).
        """
        if not isinstance(found_inf, (bool, np.bool_)):
            raise _per_step("update")
        if not self.enabled:
            return
        if found_inf:
            self.skipped += 1
            self.growth_tracker = 0
            self._set(self.scale * self.backoff_factor)
            return
        self.growth_tracker += 1
        if self.growth_tracker == self.growth_interval:
            grown = self.scale * self.growth_factor
            if grown <= _F32_MAX_ROUNDED:  # torch keeps the scale finite too (its float32 rounding of grown)
                self._set(grown)
            self.growth_tracker = 0

    def state_dict(self) -> dict:
        """The scaler's state as plain values (a checkpoint's step metadata holds it), under torch's keys
        (``_growth_tracker`` too), so that a torch GradScaler's ``load_state_dict`` takes it; ``skipped``
        and ``enabled`` are luminal's own (torch ignores keys it does not read)."""
        return {"scale": self.get_scale(), "growth_factor": self.growth_factor, "backoff_factor": self.backoff_factor,
                "growth_interval": self.growth_interval, "_growth_tracker": self.growth_tracker,
                "skipped": self.skipped, "enabled": self.enabled}

    def load_state_dict(self, sd: dict) -> None:
        """Restore :meth:`state_dict`'s values.

        Args:
            sd: a dict from :meth:`state_dict`.
        """
        self.prepare_load(sd)()

    def prepare_load(self, sd: dict):
        """``load_state_dict``'s checks, changing nothing; returns ``apply()``. A torch GradScaler's
        ``state_dict()`` loads too (a disabled torch scaler's is empty, which only a disabled scaler takes,
        as torch's), and so does a state saved before luminal wrote torch's ``_growth_tracker``
        (``growth_tracker``).

        Args:
            sd: a dict from :meth:`state_dict` (or torch's).
        """
        name = "GradScaler.load_state_dict"
        if not isinstance(sd, dict):
            raise ValueError(f"{name}: the state must be a dict, got {type(sd).__name__}")
        if not self.enabled and "enabled" not in sd:  # (torch's disabled scaler loads nothing, whatever the state)
            return lambda: None
        if not sd:
            if self.enabled:
                raise ValueError(f"{name}: the state is empty, as a disabled scaler's (torch's) is; this scaler "
                                 f"is enabled")
            return lambda: None
        if "_growth_tracker" in sd:  # (torch's name)
            if "growth_tracker" in sd:
                raise ValueError(f"{name}: the state has both 'growth_tracker' and torch's '_growth_tracker'")
            sd = {("growth_tracker" if k == "_growth_tracker" else k): v for k, v in sd.items()}
        known = {"scale", "growth_factor", "backoff_factor", "growth_interval", "growth_tracker", "skipped", "enabled"}
        unknown = sorted(str(k) for k in set(sd) - known)
        if unknown:  # (a setting this scaler does not have would be dropped, silently)
            raise ValueError(f"{name}: the state has {', '.join(map(repr, unknown))}, which a GradScaler does not")
        enabled = sd.get("enabled", self.enabled)
        if enabled is not self.enabled:  # (an enabled scaler's step scales the loss: another program)
            raise ValueError(f"{name}: the state is of a scaler with enabled={enabled!r}, this one has enabled="
                             f"{self.enabled}; build the GradScaler as the checkpoint's")
        settings = {k: sd.get(k, getattr(self, k)) for k in ("growth_factor", "backoff_factor", "growth_interval")}
        _check_settings(name, scale=sd["scale"], **settings)
        counts = {k: sd[k] if k in sd else getattr(self, k) for k in ("growth_tracker", "skipped")}
        for k, v in counts.items():
            if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{name}: {k} must be an int >= 0, got {v!r}")
        scale = float(sd["scale"])
        values = {**{k: int(v) for k, v in counts.items()}, "growth_interval": int(settings["growth_interval"]),
                  **{k: float(settings[k]) for k in ("growth_factor", "backoff_factor")}}

        def apply():
            with interrupts_deferred():
                self._set(float(scale))
                for k, v in values.items():
                    setattr(self, k, v)

        return apply

    def __repr__(self):
        return (f"GradScaler(scale={self.get_scale()}, growth_factor={self.growth_factor}, "
                f"backoff_factor={self.backoff_factor}, growth_interval={self.growth_interval}, "
                f"enabled={self.enabled})")


_F32_MAX = float(np.finfo(np.float32).max)
# the largest float64 that rounds to a finite float32 (to nearest even): float32's max plus half its last ulp
_F32_MAX_ROUNDED = math.nextafter(_F32_MAX + 2.0**103, 0.0)


def _check_settings(name: str, growth_factor, backoff_factor, growth_interval, **scales) -> None:
    """The constructor's checks, which a loaded state passes too: a scale (``init_scale``, ``scale``)
    positive and finite, growth_factor > 1, 0 < backoff_factor < 1 (a NaN backoff made the scale NaN and
    every later step skipped, silently), growth_interval an int >= 1."""
    for k, v in (*scales.items(), ("growth_factor", growth_factor), ("backoff_factor", backoff_factor)):
        if not isinstance(v, numbers.Real) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"{name}: {k} must be a positive finite number, got {v!r}")
    for k, v in scales.items():  # (float32(1e39) is inf: every step skipped, the scale inf for ever)
        if v > _F32_MAX:
            raise ValueError(f"{name}: {k} {v!r} is above float32's largest value {_F32_MAX!r}; the scale is a "
                             f"float32, as torch's")
    if growth_factor <= 1:
        raise ValueError(f"{name}: growth_factor must be > 1, got {growth_factor!r}")
    if backoff_factor >= 1:
        raise ValueError(f"{name}: backoff_factor must be < 1, got {backoff_factor!r}")
    if not isinstance(growth_interval, numbers.Integral) or isinstance(growth_interval, bool) or growth_interval < 1:
        raise ValueError(f"{name}: growth_interval must be an int >= 1, got {growth_interval!r}")


_PER_STEP = ("luminal's GradScaler is passed to the compiled step, train.compile_step(loss, optimizer, "
             "compute_dtype=lm.float16, scaler=scaler), and every step(**batch) call scales the loss, unscales "
             "the gradients, skips a step whose gradients overflowed and updates the scale: there is nothing to "
             "call per step (scaler.scale is the current scale, a float)")


def _per_step(call: str):
    return eager_only(f"GradScaler.{call}", _PER_STEP)


class _Scale(float):
    """The loss scale: a float, which torch code calls (``scaler.scale(loss)``) to scale a loss; that
    raises an EagerOnlyError naming ``compile_step``, where luminal's scaling happens."""

    def __call__(self, *args, **kwargs) -> NoReturn:
        raise _per_step("scale")

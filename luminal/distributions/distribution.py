"""The ``Distribution`` base (torch.distributions.Distribution's interface) and ``broadcast_all``.

A distribution's parameters are GraphTensors of one graph: those given (GraphTensors, Parameters and
Buffers, which join the graph as every op's operands do, ``frontend/join.py``, or numbers) broadcast
together as torch's ``broadcast_all``, in the float dtype they promote to (float32 when all are
numbers). With numbers alone the parameters live in a host graph (``frontend/host.py``): their
values are known now and join any graph they meet (``Normal(0., 1.)`` as a VAE's prior).

Validation (torch's default, ``validate_args``): a parameter outside its constraint, or a
``log_prob``/``cdf`` value outside the support, is torch's ValueError naming the distribution, the
parameter and the constraint: raised now where the values are known (computed from numbers,
constants and host tensors alone, of static shapes: a constant broadcast against a symbolic batch
waits for the run), else when a compiled program computing the result is called, before it runs
(``Graph.guard``), with the count of bad entries.
"""

from __future__ import annotations

import copy
import numbers

from luminal.core import dtype as dt
from luminal.core.backend import get_backend
from luminal.core.errors import op_error
from luminal.core.symbolic import is_static, shape_str
from luminal.frontend import ops
from luminal.frontend.join import into, target
from luminal.frontend.ops.core import broadcast_shapes
from luminal.frontend.state import State
from luminal.frontend.tensor import GraphTensor


def broadcast_all(name: str, *values, event_dims=None) -> list[GraphTensor]:
    """torch.distributions.utils.broadcast_all: ``values`` (GraphTensors, Parameters, Buffers or
    numbers) as float GraphTensors of one graph and dtype, their batch shapes broadcast together
    (``event_dims``: how many trailing dims of each are its event, kept as they are; default none).
    Python bools are numbers, 0.0 and 1.0, as torch's (``Bernoulli(True)``)."""
    event_dims = event_dims or [0] * len(values)
    values = [float(v) if isinstance(v, bool) else v for v in values]
    for v in values:
        if not isinstance(v, (GraphTensor, State, numbers.Real)):
            raise op_error(TypeError, name, f"the parameters must be tensors, Parameters or numbers, got "
                           f"{type(v).__name__} {v!r}")
    # (a Parameter needs a graph to join: no host copy of its value, which would carry no gradient)
    g = target(name, values, {}, host_ok=not any(isinstance(v, State) for v in values))
    joined = [into(v, g) for v in values]
    tensors = [t for t in joined if isinstance(t, GraphTensor)]
    if any(t.graph is not g for t in tensors):  # (checked now: the first op on them would name itself)
        raise op_error(ValueError, name, "the parameters belong to different graphs", *tensors)
    floats = [t.dtype for t in joined if isinstance(t, GraphTensor) and t.dtype.is_float]
    d = floats[0] if floats else dt.float32
    for f in floats[1:]:
        d = dt.promote_types(d, f)
    ts = [ops.cast(t, d) if isinstance(t, GraphTensor) else g.constant(float(t), d) for t in joined]
    batch = broadcast_shapes(name, shapes=[t.shape[:t.ndim - e] for t, e in zip(ts, event_dims)])
    return [t.expand(*batch, *t.shape[t.ndim - e:]) if t.shape != (*batch, *t.shape[t.ndim - e:]) else t
            for t, e in zip(ts, event_dims)]


def _known(t: GraphTensor):
    """``t``'s values if known now: when it is computed from constants alone (no input, State, noise or
    symbolic size anywhere on the way), evaluated by the reference interpreter (as a host tensor's,
    ``host.value``); else None."""

    def static(shape) -> bool:
        return all(is_static(d) for d in shape)

    seen, stack = set(), [t.node]
    if not static(t.shape):
        return None
    while stack:
        n = stack.pop()
        if n.id in seen:
            continue
        seen.add(n.id)
        if n.op == "Input" or (n.op == "Constant" and n.arg.digest == "sym") or not static(n.shape) \
                or not all(static(v.shape) for _, v in n.srcs):
            return None
        stack.extend(s for s, _ in n.srcs)
    (out,) = get_backend("reference").interpret([(t.node, t.layout)], t.graph.constants)({}, {})
    return out


class Distribution:
    """torch.distributions.Distribution: ``batch_shape``, ``event_shape``, ``mean``, ``mode``,
    ``variance``, ``stddev``, ``log_prob``, ``entropy``, ``sample``, ``rsample``, ``cdf``, ``icdf``,
    ``expand``. A method a distribution lacks raises NotImplementedError, as torch's."""

    arg_constraints: dict = {}
    support = None
    has_rsample = False
    _default_validate = True
    _params: dict = {}  # name -> number of event dims of that parameter (for expand)
    _given: tuple | None = None  # the parameters given, when not the arg_constraints set as attributes

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """torch's ``Distribution.set_default_validate_args``: whether new distributions validate."""
        if value not in (True, False):
            raise op_error(ValueError, "set_default_validate_args", f"expects True or False, got {value!r}")
        Distribution._default_validate = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None) -> None:
        self._batch_shape, self._event_shape = tuple(batch_shape), tuple(event_shape)
        self._validate_args = Distribution._default_validate if validate_args is None else bool(validate_args)
        self._guards: list[tuple[GraphTensor, str]] = []
        if self._validate_args:  # only the parameters given (torch's rule: not those computed from them)
            given = self._given if self._given is not None else [n for n in self.arg_constraints if n in vars(self)]
            for name in given:
                self._check(getattr(self, name), self.arg_constraints[name], f"parameter {name}")

    def _check(self, t: GraphTensor, constraint, what: str) -> None:
        """torch's ValueError if an entry of parameter ``t`` is outside ``constraint``: now where the
        values are known, else a guard on every result this distribution computes (``_guarded``)."""
        guard = self._test(t, constraint, what)
        if guard is not None:
            self._guards.append(guard)

    @property
    def batch_shape(self) -> tuple:
        """The shape over which the parameters are batched (torch's ``batch_shape``, a tuple)."""
        return self._batch_shape

    @property
    def event_shape(self) -> tuple:
        """The shape of a single sample (torch's ``event_shape``, a tuple)."""
        return self._event_shape

    def _test(self, t: GraphTensor, constraint, what: str):
        """torch's ValueError now if an entry of ``t`` is known to be outside ``constraint``; where the
        values are not known, the guard to register: ``(bad entries, message)``."""
        message = (f"expected {what} (of shape {shape_str(t.shape)}) to satisfy the constraint {constraint!r}, "
                   f"but found invalid values")
        ok = constraint.check(t)
        known = _known(ok)
        if known is not None:
            if not known.all():
                raise op_error(ValueError, repr(self), message)
            return None
        return ops.logical_not(ok), f"{repr(self)}: {message}: {{value}} of them"

    def _guarded(self, out: GraphTensor, extra=()) -> GraphTensor:
        """``out``, with this distribution's run-time checks (and ``extra`` ones) guarding every program
        that computes it."""
        for bad, message in (*self._guards, *extra):
            if bad.graph is out.graph:
                g = out.graph
                g.guard(ops.any(bad), ops.sum(ops.cast(bad, dt.int32)), ValueError, message, of=out)
        return out

    def _value(self, x, op: str) -> GraphTensor:
        """A ``log_prob``/``cdf`` argument as a tensor (a number joins the parameters' graph), its shape
        broadcastable with ``batch_shape + event_shape`` (torch's ValueError otherwise). A tensor of another
        graph than the parameters' (neither a host one) is a ValueError naming this method, not the first
        op that would meet both."""
        g = self._graph()
        if not isinstance(x, GraphTensor):
            if isinstance(x, State):
                x = into(x, g)
            elif isinstance(x, numbers.Real) and not isinstance(x, bool):
                x = g.constant(float(x), self._dtype())
            else:
                raise op_error(TypeError, f"{type(self).__name__}.{op}", f"expects a tensor, got {type(x).__name__}")
        if not (x.graph is g or x.graph.host or g.host):
            raise op_error(ValueError, f"{type(self).__name__}.{op}", "the value and the distribution's parameters "
                           "belong to different graphs", x, next(iter(self._tensors())))
        want = (*self._batch_shape, *self._event_shape)
        try:
            broadcast_shapes(op, shapes=[x.shape, want])
        except ValueError:
            raise op_error(ValueError, f"{type(self).__name__}.{op}", f"the value's shape {shape_str(x.shape)} does "
                           f"not broadcast with batch_shape + event_shape {shape_str(want)}", x) from None
        return x

    def _validate_sample(self, x: GraphTensor, out: GraphTensor) -> GraphTensor:
        """``out`` (computed from the value ``x``), after torch's support check of ``x`` when validating."""
        guard = self._test(x, self.support, "value argument") if self._validate_args and self.support else None
        return self._guarded(out, [guard] if guard else [])

    def _graph(self):
        return next(iter(self._tensors())).graph

    def _dtype(self) -> dt.DType:
        return next(iter(self._tensors())).dtype

    def _tensors(self):
        return [getattr(self, n) for n in self._params]

    def _extended_shape(self, sample_shape=()) -> tuple:
        """``sample_shape + batch_shape + event_shape`` (torch's ``_extended_shape``)."""
        if isinstance(sample_shape, numbers.Integral):
            sample_shape = (sample_shape,)
        return (*tuple(sample_shape), *self._batch_shape, *self._event_shape)

    def _noise_like(self, shape) -> GraphTensor:
        """A tensor of ``shape`` in the parameters' graph and dtype, for the random ops' ``*_like``."""
        return self._graph().constant(0.0, self._dtype()).expand(*shape)

    def expand(self, batch_shape, _instance=None) -> Distribution:
        """torch's ``expand``: the same distribution with its parameters broadcast to ``batch_shape``."""
        batch_shape = tuple(batch_shape)
        new = copy.copy(self)
        for name, event in self._params.items():
            t = getattr(self, name)
            setattr(new, name, t.expand(*batch_shape, *t.shape[t.ndim - event:]))
        new._batch_shape = batch_shape
        new._guards = list(self._guards)
        return new

    def sample(self, sample_shape=()) -> GraphTensor:
        """Draws of shape ``sample_shape + batch_shape + event_shape``, afresh on every call of a compiled
        program; no gradient flows to the parameters (torch's ``sample`` runs under no_grad)."""
        if self.has_rsample:
            return self.rsample(sample_shape).detach()
        raise NotImplementedError(f"{type(self).__name__}.sample is not implemented")

    def rsample(self, sample_shape=()) -> GraphTensor:
        """Reparameterised draws: gradients flow to the parameters (torch's ``rsample``)."""
        raise NotImplementedError(f"{type(self).__name__} has no rsample (torch's has_rsample is False)")

    def log_prob(self, value) -> GraphTensor:
        """The log of the density (or mass) at ``value``."""
        raise NotImplementedError(f"{type(self).__name__}.log_prob")

    def entropy(self) -> GraphTensor:
        """The entropy, of shape ``batch_shape``."""
        raise NotImplementedError(f"{type(self).__name__}.entropy")

    def cdf(self, value) -> GraphTensor:
        """The cumulative distribution function at ``value``."""
        raise NotImplementedError(f"{type(self).__name__}.cdf")

    def icdf(self, value) -> GraphTensor:
        """The inverse cumulative distribution function at ``value`` in [0, 1]."""
        raise NotImplementedError(f"{type(self).__name__}.icdf")

    @property
    def mean(self) -> GraphTensor:
        """The mean."""
        raise NotImplementedError(f"{type(self).__name__}.mean")

    @property
    def mode(self) -> GraphTensor:
        """The mode."""
        raise NotImplementedError(f"{type(self).__name__}.mode")

    @property
    def variance(self) -> GraphTensor:
        """The variance."""
        raise NotImplementedError(f"{type(self).__name__}.variance")

    @property
    def stddev(self) -> GraphTensor:
        """The standard deviation, ``sqrt(variance)``."""
        return ops.sqrt(self.variance)

    def __repr__(self) -> str:
        names = self._given if self._given is not None else [n for n in self._params if n in vars(self)]
        args = ", ".join(f"{n}: {shape_str(getattr(self, n).shape)}" for n in names)
        return f"{type(self).__name__}({args})"

"""Shared helpers for layers: parameter creation, tuple arguments, and input checks that name the layer."""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import op_error, renamed
from luminal.core.symbolic import shape_str
from luminal.frontend.checks import check_tensors
from luminal.frontend.tensor import GraphTensor
from luminal.nn.parameter import Buffer, Parameter


def param(shape, dtype) -> Parameter:
    """An uninitialised (zero) parameter; the layer's ``reset_parameters`` fills it."""
    d = dt.as_dtype(dtype or dt.float32)
    return Parameter(np.zeros(tuple(shape), d.np), d)


def buffer(value, dtype) -> Buffer:
    d = dt.as_dtype(dtype or dt.float32)
    return Buffer(np.asarray(value, d.np), d)


def ntuple(x, n: int, name: str, minimum: int | None = None) -> tuple[int, ...]:
    """torch's ``_pair``/``_single``: an int repeats, a sequence must have ``n`` entries, each at least
    ``minimum`` when given (1 for kernel sizes, strides and dilations, 0 for paddings)."""
    if isinstance(x, (tuple, list)):
        if len(x) != n:
            raise ValueError(f"{name} must be an int or {n} ints, got {tuple(x)}")
        out = tuple(int(v) for v in x)
    else:
        out = (int(x),) * n
    if minimum is not None and any(v < minimum for v in out):
        raise ValueError(f"{name} must be at least {minimum}, got {x!r}")
    return out


_F = typing.TypeVar("_F", bound=Callable)


def layer_forward(forward: _F) -> _F:
    """Decorator for a layer's ``forward(self, x, ...)``: ``x`` must be a GraphTensor, and errors of the
    ops the layer is built from are reported under the layer (``Linear(in_features=3, ...): matmul:
    ...``), the call the user wrote. Thin wrappers of one functional op (Softmax, Flatten) go without:
    the op's own name is the clearer one there."""

    @functools.wraps(forward)
    def run(self, x, *args, **kwargs):
        name = layer_name(self)
        check_tensors(name, input=x)
        with renamed(name):
            return forward(self, x, *args, **kwargs)

    return typing.cast(_F, run)  # (a layer's forward keeps its signature for type checkers)


def bad_input(layer, expected: str, x: GraphTensor, kind=ValueError, what: str | None = None):
    """The error for an input of the wrong rank/shape: names the layer, the input (``what``: "query",
    "weight", when it is not the only one), the expected and the actual shape."""
    which = f"{what}: " if what else ""
    return op_error(kind, str(layer), f"{which}expected input of shape {expected}, got {shape_str(x.shape)}", x)


def check_float(layer, x: GraphTensor) -> None:
    if not x.dtype.is_float:
        raise op_error(TypeError, str(layer), f"expected a float input, got {x.dtype.name}", x)


def layer_name(m) -> str:
    return f"{type(m).__name__}({m.extra_repr()})"

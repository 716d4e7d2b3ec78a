"""Where user code made a tensor, and errors that point there.

Every GraphTensor remembers the first stack frame outside the ``luminal`` package that created it,
so an error raised while building a later op can name the op, the operands' shapes and dtypes, and
the user's lines that made each operand.

An op built from other ops reports their errors under its own name (``renamed``): the user called
``unflatten``, and an error that names only the ``reshape`` inside it points at code they never wrote.
Plain arguments (a learning rate, a fill value, a size) are checked by ``check_number`` and
``check_int``, which raise the same errors; tensor arguments by ``checks.py``.
"""

from __future__ import annotations

import functools
import linecache
import numbers
import os
import sys
import threading
import typing
from collections.abc import Callable

import numpy as np

_F = typing.TypeVar("_F", bound=Callable)

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_frame() -> tuple[str, int] | None:
    """The file and line of the first frame outside the package, or None. Called for every tensor made,
    so whether a file is the package's is looked up by name (``_INSIDE``) rather than tested per frame."""
    f = sys._getframe(1)
    inside = _INSIDE
    while f is not None:
        name = f.f_code.co_filename
        k = inside.get(name)
        if k is None:
            k = inside[name] = name.startswith(_PKG)
        if not k:
            return name, f.f_lineno
        f = f.f_back
    return None


_INSIDE: dict[str, bool] = {}  # source file name -> whether it is the package's (one entry per file seen)


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a ``warnings.warn`` in the function calling this name the user's line:
    the first frame outside the ``luminal`` package, as ``user_frame`` finds it (Python 3.12's
    ``skip_file_prefixes``, which 3.11 lacks). 1, the caller's own line, when every frame is luminal's."""
    f, level = sys._getframe(1), 1
    while f is not None and f.f_code.co_filename.startswith(_PKG):
        f, level = f.f_back, level + 1
    return level if f is not None else 1


def where(origin) -> str:
    if origin is None:
        return "<unknown>"
    file, line = origin
    text = linecache.getline(file, line).strip()
    return f"{file}:{line}" + (f": {text}" if text else "")


def shape_str(shape) -> str:
    """``(B, 3)``, ``(4,)``, ``()``: a shape as messages write it."""
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def describe(t) -> str:
    return f"{shape_str(t.shape)} {t.dtype.name}{_state_of(t)}, made at {where(t.origin)}"


def _state_of(t) -> str:
    """`` (Parameter fc.weight)`` when ``t`` reads a State (a module's parameter or buffer, which an op
    may have read into its graph itself), so an error names it; else empty."""
    node = t.node
    if node.op != "Input":
        return ""
    s = getattr(t.graph, "states", {}).get(node.arg)
    return "" if s is None else f" ({type(s).__name__} {s.name or str(node.arg).lstrip('$')})"


def op_error(kind, op: str, msg: str, *operands):
    """Build a ValueError/TypeError naming the op, the problem, and where each operand came from.

    The error keeps ``(op, msg, operands)`` as ``luminal_op`` so that ``renamed`` can report it again
    under the name of the op the user called (it stays a plain builtin exception)."""
    lines = [f"{op}: {msg}"]
    for i, t in enumerate(operands):
        lines.append(f"  operand {i}: {describe(t)}")
    site = user_frame()
    if site is not None:
        lines.append(f"  called at {where(site)}")
    err = kind("\n".join(lines))
    err.luminal_op = (op, msg, operands)
    return err


_calling = threading.local()  # .ops: the ``renamed`` ops being built now on this thread, outermost first


def outermost_op() -> str | None:
    """The op or layer the user called that is being built now (the outermost ``renamed``), or None:
    what a primitive made inside it is reported as when it fails at run time (``Graph.add``)."""
    ops = getattr(_calling, "ops", None)
    return ops[0] if ops else None


class renamed:  # noqa: N801 - used like a function: ``@renamed("unflatten")``, ``with renamed(name):``
    """Re-raise an ``op_error`` of an inner op under ``op``, the op or layer the user called, keeping
    the inner op's name and message: ``unflatten: reshape: cannot reshape ...``.

    A decorator for a fixed name, or a ``with`` block for a name known only at the call (a layer's
    ``Linear(in_features=3, ...)``). Errors already naming ``op``, and errors not built by ``op_error``,
    pass through unchanged. On the good path it costs one ``with``. The ops being built are kept per
    thread (``outermost_op``)."""

    __slots__ = ("op",)

    def __init__(self, op: str):
        self.op = op

    def __enter__(self):
        ops = getattr(_calling, "ops", None)
        if ops is None:
            ops = _calling.ops = []
        ops.append(self.op)
        return self

    def __exit__(self, kind, err, tb):
        _calling.ops.pop()
        tag = getattr(err, "luminal_op", None)
        if tag is None or tag[0] == self.op:
            return False
        inner, msg, operands = tag
        raise op_error(kind, self.op, f"{inner}: {msg}", *operands) from err

    def __call__(self, f: _F) -> _F:  # (typed: a decorated op keeps its signature for type checkers)
        @functools.wraps(f)
        def run(*args, **kwargs):
            with self:
                return f(*args, **kwargs)

        return typing.cast(_F, run)


def check_number(owner: str, what: str, v, *operands):
    """A numeric hyperparameter (a learning rate, a probability, a fill value) must be a real number;
    a str or None would fail later in a comparison or conversion that names nothing. Returns ``v``."""
    if not isinstance(v, (int, float, numbers.Real, np.bool_)):  # int, float first: an ABC check is slower
        raise op_error(TypeError, owner, f"{what} must be a number, got {type(v).__name__} {v!r}", *operands)
    return v


def check_int(owner: str, what: str, v, minimum: int | None = None) -> int:
    """A size or count (features, channels, an output size) must be an int of at least ``minimum``:
    a negative one would otherwise fail in numpy when the parameter is allocated, or at forward."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
        raise op_error(TypeError, owner, f"{what} must be an int, got {type(v).__name__} {v!r}")
    if minimum is not None and v < minimum:
        raise op_error(ValueError, owner, f"{what} must be at least {minimum}, got {v}")
    return int(v)

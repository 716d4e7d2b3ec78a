"""Which formulas a float64 function composes: within about an ulp (``elementwise``'s double-double
paths for log, expm1, tanh, sigmoid, ...), or the plain ones.

The accurate paths cost tens of operations each. They pay for a float64 result, but not inside a
composition that computes a narrower input in float64 and rounds once at the end (``elementwise._wide``,
the special functions, ``airy_ai``, Gumbel noise): that rounding hides float64's last bits, so there the
plain formulas keep the values and the cost they had (the accurate ones made a float32 lgamma 82%
bigger, zeta 111%). ``narrow()`` marks such a composition; ``plain_unless_float64`` marks an op that is
one for inputs other than float64; ``Graph.custom_vjp`` builds a gradient rule under the marks its
function was built under, so the backward pass of a float32 function takes the plain formulas too.

The mark is per thread: graphs are built per thread (``frontend/building.py``), and one thread's
composition must not change another's float64 functions.
"""

from __future__ import annotations

import contextlib
import functools
import threading


class _Depth(threading.local):
    """How many narrow compositions enclose the op being built, on this thread."""

    depth = 0


_NARROW = _Depth()


@contextlib.contextmanager
def narrow(depth: int | None = None):
    """Compose one narrow composition deeper (or at ``depth``, a depth saved before), restored on exit,
    errors too."""
    saved = _NARROW.depth
    _NARROW.depth = saved + 1 if depth is None else depth
    try:
        yield
    finally:
        _NARROW.depth = saved


def depth() -> int:
    """The current depth (0: float64 functions take their accurate paths)."""
    return _NARROW.depth


def accurate(dtype) -> bool:
    """Whether a function of a ``dtype`` value takes its float64 path within about an ulp: a float64
    value outside any narrow composition."""
    return dtype.name == "float64" and not _NARROW.depth


def as_built(rule):
    """``rule`` (a gradient rule) run at the depth current now, when its function is built: the
    backward pass composes as the forward pass did."""
    at = _NARROW.depth

    @functools.wraps(rule)
    def run(*args, **kwargs):
        with narrow(at):
            return rule(*args, **kwargs)

    return run


def plain_unless_float64(op):
    """Decorate ``op``, which computes inputs narrower than float64 in float64 and rounds once: built
    for no float64 input, it is a narrow composition (its float64 functions take the plain formulas)."""

    @functools.wraps(op)
    def run(*args, **kwargs):
        if any(getattr(getattr(a, "dtype", None), "name", None) == "float64" for a in (*args, *kwargs.values())):
            return op(*args, **kwargs)
        with narrow():
            return op(*args, **kwargs)

    return run

"""Where user code made a tensor, and errors that point there.

Every GraphTensor remembers the first stack frame outside the ``luminal`` package that created it,
so an error raised while building a later op can name the op, the operands' shapes and dtypes, and
the user's lines that made each operand.
"""

from __future__ import annotations

import linecache
import os
import sys

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_frame() -> tuple[str, int] | None:
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_PKG):
        f = f.f_back
    return (f.f_code.co_filename, f.f_lineno) if f is not None else None


def where(origin) -> str:
    if origin is None:
        return "<unknown>"
    file, line = origin
    text = linecache.getline(file, line).strip()
    return f"{file}:{line}" + (f": {text}" if text else "")


def describe(t) -> str:
    from .symbolic import shape_str

    return f"{shape_str(t.shape)} {t.dtype.name}, made at {where(t.origin)}"


def op_error(kind, op: str, msg: str, *operands):
    """Build a ValueError/TypeError naming the op, the problem, and where each operand came from."""
    lines = [f"{op}: {msg}"]
    for i, t in enumerate(operands):
        lines.append(f"  operand {i}: {describe(t)}")
    site = user_frame()
    if site is not None:
        lines.append(f"  called at {where(site)}")
    return kind("\n".join(lines))

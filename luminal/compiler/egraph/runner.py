"""The shared e-graph, one per thread that compiles: the vocabulary and rulesets are parsed once per
thread (the main one, mostly); each compile runs between ``(push)`` and ``(pop)``, so a 10-node
compile costs milliseconds.

Why per thread: egglog's EGraph is a PyO3 "unsendable" object, usable and droppable only on the thread
that made it. A process-wide one made by the first thread to compile panicked in any other thread
that compiled after it ("EGraph is unsendable, but sent to another thread"), and dropping it there
panicked again. A thread's e-graph lives in its ``threading.local`` slot and goes with the thread.

The rules are data: egglog text in ``rules/*.egg`` (``RULE_FILES``, the schema first), each file
runnable by egglog on its own after ``schema.egg`` (``tests/compile/test_egg_files.py`` does so).
Python adds only the facts that come from its tables (``fusion.facts()``) and the combined
``rewrite`` ruleset the schedules run (``schedule.py``).

Every call into egglog goes through :func:`run`, which turns any failure into a
:class:`CompileError` naming the stage. egglog's Rust panics arrive as ``pyo3_runtime.PanicException``,
a ``BaseException``: those are caught too (KeyboardInterrupt and SystemExit are not), and the
e-graph, whose state after a panic is unknown, is thrown away and rebuilt on the next compile.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from importlib import resources

from luminal.compiler.egraph import fusion
from luminal.compiler.egraph.egglog_bindings import bindings
from luminal.compiler.errors import CompileError

RULE_FILES = ("schema", "algebra", "matmul", "contraction", "fusion")
REWRITE = ("algebra", "matmul", "contraction")  # the rulesets the schedules run together as ``rewrite``

_SPAN = bindings.RustSpan("", 0, 0)
_LOCK = threading.RLock()
_local = threading.local()  # .eg: this thread's e-graph (None until its first compile, or after a failure)


def _current() -> bindings.EGraph | None:
    return getattr(_local, "eg", None)


def _forget(eg: bindings.EGraph) -> None:
    """Throw this thread's e-graph away (its state after a failure is unknown): rebuilt on the next compile."""
    if _current() is eg:
        _local.eg = None


def egg(name: str) -> str:
    """The egglog text of ``rules/<name>.egg`` (package data: also there in a non-editable install)."""
    return (resources.files("luminal.compiler.egraph") / "rules" / f"{name}.egg").read_text()


def _prelude() -> str:
    combined = f"(unstable-combined-ruleset rewrite {' '.join(REWRITE)})"
    return "\n".join([egg(n) for n in RULE_FILES] + [fusion.facts(), combined])


def _new_egraph() -> bindings.EGraph:
    eg = bindings.EGraph()
    eg.run_program(*eg.parse_program(_prelude()))
    return eg


def run(eg: bindings.EGraph, stage: str, text: str | None = None, commands=()):
    """Parse ``text`` (or take ready ``commands``) and run it; egglog failures -> CompileError."""
    try:
        cmds = eg.parse_program(text) if text is not None else list(commands)
        return eg.run_program(*cmds)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 - PanicException derives from BaseException
        _forget(eg)
        raise CompileError(stage, f"{type(e).__name__}: {_short(e)}") from e


def guard(eg: bindings.EGraph, stage: str, fn, *args):
    """Call ``fn(*args)`` (a bindings call other than running commands) with the same conversion."""
    try:
        return fn(*args)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001
        _forget(eg)
        raise CompileError(stage, f"{type(e).__name__}: {_short(e)}") from e


def _short(e: BaseException, limit: int = 500) -> str:
    s = str(e)
    return s if len(s) <= limit else s[:limit] + " ..."


@contextmanager
def session():
    """The shared e-graph, pushed for one compile and popped after it (one compile at a time)."""
    with _LOCK:
        if _current() is None:
            try:
                _local.eg = _new_egraph()
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as e:  # noqa: BLE001
                raise CompileError("egglog: lower", f"could not build the rulesets: {_short(e)}") from e
        eg = _local.eg
        run(eg, "egglog: lower", commands=[bindings.Push(1)])
        try:
            yield eg
        finally:
            if _current() is eg:
                try:
                    eg.run_program(bindings.Pop(_SPAN, 1))
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException:  # noqa: BLE001 - a failed pop leaves an unknown state: rebuild
                    _forget(eg)

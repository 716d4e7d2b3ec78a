"""The egglog stage of the compiler: frontend nodes -> an optimised Term DAG.

``optimize(roots, constants=None, budget=None, search=0, seed=0, timer=None, cost_model=CPU)``
lowers the graph into one shared e-graph (``lower.py``, ``schema.py``, folding constants on the way:
``fold.py``), runs the rulesets ``algebra``, ``matmul``, ``contraction`` and ``fusion`` (egglog
text: ``rules/*.egg``) under bounded schedules (``schedule.py``, ``budget.py``), extracts one
program with a DAG cost model (``egraph_read.py``, ``extract.py``, ``cost.py``) and, with
``search=N``, times neighbours of it (``search.py``).
``res.terms`` maps each root node id to its Term; ``res.stats`` explains the run (see ``optimize.py``).

Importing this package does not import egglog (its bindings: ``egglog_bindings.py``): ``optimize`` and ``Result``
load ``optimize.py``, and egglog with it, when first asked for. ``lm.compile`` imports ``Budget`` from
here on every compile, and a compile served by the compile cache (``compiler/cache.py``) must not pay
for egglog. The package's ``optimize`` attribute is the function, as it always was: the import system
sets a submodule as an attribute of its package when it loads it, so ``_Package`` stores the
function in its place (the module stays in ``sys.modules`` as ``luminal.compiler.egraph.optimize``).
"""

import importlib
import sys
import threading
import types
from typing import TYPE_CHECKING

from luminal.compiler.egraph.budget import Budget
from luminal.compiler.egraph.cost import CPU, CostModel

if TYPE_CHECKING:  # what type checkers and editors see; at run time ``_Package.__getattr__``
    from luminal.compiler.egraph.optimize import Result, optimize

_LAZY = ("Result", "optimize")  # names of ``optimize.py``


def _import_apart(name: str):
    """Import module ``name`` on a thread of its own. egglog keeps the frame that defines its classes,
    and a frame keeps its callers' frames: imported from inside the first ``lm.compile``, it kept that
    compile's frames, and the program, graph and weights they held, for the life of the process. A
    thread's import has none of our frames above it. (Never at import time of another module: a
    compile asks for ``optimize``, so the main thread holds no import lock the thread could wait on.)"""
    got: dict = {}

    def work():
        try:
            got["module"] = importlib.import_module(name)
        except BaseException as e:  # noqa: BLE001 - re-raised on the caller's thread
            got["error"] = e

    t = threading.Thread(target=work, name="luminal import")
    t.start()
    t.join()
    if "error" in got:
        raise got["error"]
    return got["module"]


class _Package(types.ModuleType):
    def __getattr__(self, name):
        if name in _LAZY:
            module = _import_apart(f"{__name__}.optimize")  # sets ``optimize`` (``__setattr__``)
            return getattr(module, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def __setattr__(self, name, value):
        if name == "optimize" and isinstance(value, types.ModuleType):
            value = value.optimize  # the submodule, loaded: the package exports its function
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = ["Budget", "CPU", "CostModel", "Result", "optimize"]

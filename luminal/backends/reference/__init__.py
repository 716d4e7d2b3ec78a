"""``backend="reference"``: the primitive graph evaluated op by op with numpy (``interpreter.py``).

It reads no kernel graph and nothing of the compiler, so it can check them: every other backend is
tested against it."""

from luminal.backends.reference.interpreter import EVAL, ReferenceInterpreter
from luminal.core.backend import Backend, register_backend


class Reference(Backend):
    name = "reference"
    level = "graph"
    primitives = frozenset(EVAL)

    def interpret(self, roots, constants):
        return ReferenceInterpreter(roots, constants)


register_backend(Reference())

__all__ = ["Reference", "ReferenceInterpreter"]

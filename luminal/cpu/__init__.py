"""CPU backends: the reference interpreter (and, once the compiler lands, the compiled runner)."""

from .reference import ReferenceInterpreter

__all__ = ["ReferenceInterpreter"]

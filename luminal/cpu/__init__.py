"""CPU backends: the reference interpreter (the semantic ground truth, op by op) and the compiled
runner (``compiled.CpuProgram``: a kernel graph as a flat list of numpy calls); both take each
primitive's numpy semantics from ``numpy_ops``."""

from .reference import ReferenceInterpreter

__all__ = ["ReferenceInterpreter"]

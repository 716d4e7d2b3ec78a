"""The compiler: ``lm.compile`` (api.py) runs the pipeline (pipeline.py): loop rolling, the egglog
rewrite search and our own extraction (egraph/), kernels (kernels.py -> kernel_graph.py), a memory
plan, and a backend program. ``CompileError`` names the stage that failed; ``compiled.report()``
explains a compile."""

from luminal.compiler.api import Compiled, compile
from luminal.compiler.errors import CompileError

__all__ = ["Compiled", "CompileError", "compile"]

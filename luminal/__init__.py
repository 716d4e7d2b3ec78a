"""luminal: a lazy tensor DSL with training support and a search-based compiler.

``Graph`` builds lazy ``GraphTensor``s; ``compile`` turns outputs into a callable on numpy arrays.
"""

# (the cyclic collector is off while the package imports (``core/gc_paused.py``): importing allocates
# thousands of functions, classes and tables and frees next to none, so its passes, each walking the
# whole heap, were wasted; measured: ``import luminal`` 0.25-0.28 s -> 0.16-0.25 on a 2-vCPU EPYC)
from luminal.core.gc_paused import gc_paused as _gc_paused

with _gc_paused():
    from luminal import amp, autograd, cuda, distributions, linalg, optim, special  # lm.amp.autocast, lm.optim.SGD...
    from luminal.compiler import compile
    from luminal.core.backend import backend_names, register_backend
    from luminal.core.dtype import bool_, finfo, iinfo, promote_types
    from luminal.core.safetensors_io import load_file as load_safetensors
    from luminal.core.safetensors_io import save_file as save_safetensors
    from luminal.frontend import DType, Graph, GraphTensor, Sym, bfloat16, float16, float32, float64, int32, sym
    from luminal.frontend.eager import autocast, inference_mode, no_grad
    from luminal.frontend.ops import *  # noqa: F403 - the public ops, listed once in frontend/ops
    from luminal.frontend.ops import __all__ as _ops_all
    from luminal.frontend.seed import manual_seed
    from luminal.serialization import load, save  # torch.save / torch.load, as safetensors (no pickle)

bool = bool_  # noqa: A001 - lm.bool, as torch.bool
long = int32  # lm.long, as torch.long: int32, luminal's one integer type (``Tensor.long()`` casts to it too)
int = int32  # noqa: A001 - lm.int, as torch.int
half, float, double = float16, float32, float64  # noqa: A001 - torch's names

__version__ = "0.1.0"

# what ``from luminal import *`` and type checkers see as public (pyright reads a py.typed package's
# re-exports from ``__all__`` only, and follows ``+=`` of another module's ``__all__`` imported by name)
__all__ = ["DType", "Graph", "GraphTensor", "Sym", "amp", "autocast", "autograd", "backend_names", "bfloat16", "bool",
           "bool_", "compile", "distributions", "double", "finfo", "float", "float16", "float32", "float64", "half",
           "iinfo", "inference_mode", "int", "int32", "linalg", "load", "load_safetensors", "long", "manual_seed",
           "no_grad", "optim", "promote_types", "register_backend", "save", "save_safetensors", "special", "sym"]
__all__ += _ops_all

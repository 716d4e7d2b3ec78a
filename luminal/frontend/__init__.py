"""The lazy tensor DSL: graphs, dtypes, symbolic dims, views, primitives and high-level ops."""

from luminal.core.dtype import DType, bfloat16, bool_, float16, float32, float64, int32
from luminal.core.symbolic import Sym, sym
from luminal.core.view import View
from luminal.frontend import ops
from luminal.frontend.graph import Graph, Node
from luminal.frontend.tensor import GraphTensor

__all__ = ["DType", "Graph", "GraphTensor", "Node", "Sym", "View", "bfloat16", "bool_", "float16",
           "float32", "float64", "int32", "ops", "sym"]

"""The lazy tensor DSL: graphs, dtypes, symbolic dims, views, primitives and high-level ops."""

from . import ops
from .dtype import DType, bfloat16, bool_, float16, float32, float64, int32
from .graph import Graph, Node
from .symbolic import Sym, sym
from .tensor import GraphTensor
from .view import View

__all__ = ["DType", "Graph", "GraphTensor", "Node", "Sym", "View", "bfloat16", "bool_", "float16",
           "float32", "float64", "int32", "ops", "sym"]

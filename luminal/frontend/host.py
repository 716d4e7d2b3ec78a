"""Host tensors: tensors made outside any graph, whose values are known when they are made.

torch code makes tensors before any model input exists: ``nn.Parameter(torch.ones(n))`` and
``torch.tril(torch.ones(T, T)).view(1, 1, T, T)`` for a buffer, in a module's ``__init__``; and reads
parameters there (``nn.Parameter(wpe.weight[:16])``). A luminal tensor is a node of a graph, so these
are built in a *host graph*: a fresh Graph, marked ``host``, holding only constants (no inputs), so
every tensor of it has a value now. A Parameter, a Buffer or ``np.asarray`` takes that value
(:func:`value`, the reference interpreter evaluating the few nodes), and an op that meets a host tensor
together with a tensor of a real graph takes it into that graph as a constant (``frontend/join.py``),
as torch mixes a constant tensor into a model's computation.
"""

from __future__ import annotations

import numpy as np

from luminal.core.backend import get_backend
from luminal.core.errors import op_error
from luminal.core.symbolic import is_static, shape_str
from luminal.frontend.eager import COMPILE_TO_READ, eager_only
from luminal.frontend.graph import Graph
from luminal.frontend.tensor import GraphTensor


def host_graph() -> Graph:
    """A new host graph (one per tensor made outside a graph: nothing keeps its constants alive but
    the tensors that read them)."""
    g = Graph()
    g.host = True
    return g


def value(t: GraphTensor, op: str = "value") -> np.ndarray:
    """The values of the host tensor ``t`` (in its dtype's storage form: bfloat16 as float32), computed
    now by the reference interpreter (``backend="reference"``, the ground truth, reached through the
    backend registry as ``lm.compile`` reaches it)."""
    if not t.graph.host:
        raise eager_only(op, COMPILE_TO_READ, t)
    if not all(is_static(d) for d in t.shape):
        raise op_error(ValueError, op, f"a tensor made outside any graph has the symbolic shape {shape_str(t.shape)}, "
                       "so its values are not known now; build it in a graph (graph=g) or inside a module's "
                       "forward", t)
    g = t.graph
    noise = {name: g.rng.random(n.shape, dtype="float32") for name, n in g.random.items()}  # (dropout)
    (out,) = get_backend("reference").interpret([(t.node, t.layout)], g.constants)(noise, {})
    return out


def _array(self: GraphTensor, dtype=None, copy=None) -> np.ndarray:
    """``np.asarray(t)``: the values of a host tensor (what ``nn.Parameter(t)`` copies); a tensor of a
    graph has none until a compiled program runs (an :class:`~luminal.frontend.eager.EagerOnlyError`, as
    ``t.numpy()``)."""
    a = value(self, "numpy")
    return a if dtype is None else a.astype(dtype)


def install() -> None:
    """Give GraphTensor ``__array__`` (installed, as the ops are: the tensor module imports no graph)."""
    GraphTensor.__array__ = _array  # type: ignore[attr-defined]

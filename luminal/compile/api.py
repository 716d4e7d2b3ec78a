"""``lm.compile(outputs, backend=...)``: a callable that runs the graph on named numpy inputs."""

from __future__ import annotations

import numpy as np

from ..frontend.binding import bind
from ..frontend.tensor import GraphTensor

BACKENDS = ("reference", "cpu")


class Compiled:
    """A compiled graph. Call it with inputs as keyword arguments; get one array per output
    (a single array for a single output, else a tuple)."""

    def __init__(self, outputs, backend: str):
        from ..cpu import ReferenceInterpreter

        self.graph = outputs[0].graph
        self.backend = backend
        self.runner = ReferenceInterpreter(self.graph, outputs)
        self._single = len(outputs) == 1

    @property
    def input_names(self) -> list[str]:
        return [n.arg for n in self.runner.inputs]

    def __call__(self, **inputs):
        arrays, env = bind(self.graph, self.runner.inputs, inputs)
        outs = self.runner(arrays, env)
        return outs[0] if self._single else tuple(outs)

    def __repr__(self):
        return f"Compiled(backend={self.backend!r}, inputs={self.input_names})"


def compile(outputs, backend: str = "cpu") -> Compiled:  # noqa: A001 - the public name
    """Compile ``outputs`` (a GraphTensor or a sequence of them, from one graph) for ``backend``."""
    if isinstance(outputs, GraphTensor):
        outputs = [outputs]
    outputs = list(outputs)
    if not outputs or not all(isinstance(t, GraphTensor) for t in outputs):
        raise TypeError("compile: expected a GraphTensor or a non-empty sequence of GraphTensors")
    if any(t.graph is not outputs[0].graph for t in outputs):
        raise ValueError("compile: all outputs must come from the same graph")
    if backend not in BACKENDS:
        raise ValueError(f"compile: unknown backend {backend!r}; available: {list(BACKENDS)}")
    return Compiled(outputs, backend)


_ = np

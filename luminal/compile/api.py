"""``lm.compile(outputs, backend=...)``: a callable that runs the graph on named numpy inputs."""

from __future__ import annotations

from ..frontend.binding import bind
from ..frontend.symbolic import evaluate, free_vars, shape_str
from ..frontend.tensor import GraphTensor

BACKENDS = ("reference", "cpu")


def _dims_used(nodes, outputs) -> set[str]:
    """Every symbolic dim name the computation of ``nodes`` (and reading ``outputs``) depends on."""
    used: set[str] = set()

    def dims(x):
        if isinstance(x, (tuple, list)):
            for y in x:
                dims(y)
        elif hasattr(x, "terms"):
            used.update(free_vars(x))

    def view(v):
        dims((v.shape, v.strides, v.offset, v.mask))

    for n in nodes:
        dims(n.shape)
        dims(getattr(n.arg, "scalar", n.arg))
        for _, v in n.srcs:
            view(v)
    for t in outputs:
        view(t.layout)
    return used


class Compiled:
    """A compiled graph. Call it with inputs as keyword arguments; get one array per output
    (a single array for a single output, else a tuple). Every input is checked, and every symbolic
    dim bound, before any work is done."""

    def __init__(self, outputs, backend: str):
        from ..cpu import ReferenceInterpreter

        self.graph = outputs[0].graph
        self.backend = backend
        self.runner = ReferenceInterpreter(self.graph, outputs)
        self._single = len(outputs) == 1
        self._out_shapes = [t.shape for t in outputs]
        self._dims = _dims_used(self.runner.order, outputs)

    @property
    def input_names(self) -> list[str]:
        return [n.arg for n in self.runner.inputs]

    def __call__(self, /, *args, **inputs):  # positional-only self: an input may be named "self"
        if args:
            raise TypeError(f"compiled graph: give inputs by name ({', '.join(self.input_names) or 'none'}), "
                            f"got {len(args)} positional argument(s)")
        given = [self.graph.inputs[k] for k in inputs if k in self.graph.inputs]
        extra = [n for n in given if n not in self.runner.inputs]  # unread, but may bind dims
        arrays, env = bind(self.graph, self.runner.inputs + extra, inputs)
        unbound = sorted(self._dims - env.keys())
        if unbound:
            raise ValueError(f"symbolic dim(s) {unbound} are used by the graph but no input's shape "
                             f"determines them")
        outs = self.runner(arrays, env)
        for i, (o, shape) in enumerate(zip(outs, self._out_shapes, strict=True)):
            want = tuple(evaluate(d, env) for d in shape)
            if o.shape != want:
                raise RuntimeError(f"backend {self.backend!r} returned shape {o.shape} for output {i}, "
                                   f"expected {shape_str(shape)} = {want}")
        return outs[0] if self._single else tuple(outs)

    def __repr__(self):
        return f"Compiled(backend={self.backend!r}, inputs={self.input_names})"


def compile(outputs, backend: str = "cpu") -> Compiled:  # noqa: A001 - the public name
    """Compile ``outputs`` (a GraphTensor or a sequence of them, from one graph) for ``backend``."""
    if isinstance(outputs, GraphTensor):
        outputs = [outputs]
    if isinstance(outputs, (str, bytes)) or not hasattr(outputs, "__iter__"):
        raise TypeError(f"compile: expected a GraphTensor or a non-empty sequence of GraphTensors, "
                        f"got {type(outputs).__name__}")
    outputs = list(outputs)
    if not outputs or not all(isinstance(t, GraphTensor) for t in outputs):
        raise TypeError("compile: expected a GraphTensor or a non-empty sequence of GraphTensors")
    if any(t.graph is not outputs[0].graph for t in outputs):
        raise ValueError("compile: all outputs must come from the same graph")
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"compile: unknown backend {backend!r}; available: {list(BACKENDS)}")
    return Compiled(outputs, backend)

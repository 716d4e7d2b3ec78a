"""Ops that mixed precision leaves in float32: losses, and the few others torch's CPU autocast runs in
float32 (``prod``, ``cdist``, ``quantile``, ``trace``, the linear-algebra solvers).

``train.autocast`` (what ``compile_step(..., compute_dtype=lm.bfloat16)`` applies) rewrites a finished
graph: every float32 op computes in the 16-bit dtype. A loss computed that way loses what the model
was trained for: cross-entropy's log-sum-exp and mean in bfloat16 put the loss 2e-3 off float32's
(torch's 1e-4), and its gradient, the start of the backward pass, with it. torch's autocast runs
these ops in float32 over the 16-bit values that reach them, and so does luminal's: a function
decorated here records the nodes its call made (``Graph.float32_ops``), and the rewrite computes them
as built, in float32, reading the 16-bit values widened back (exactly).

The mark is on the nodes one call made: a node an earlier op had made already (the graph builds each
expression once) keeps its own precision, as the value it is. Outside a rewrite the mark changes
nothing.
"""

from __future__ import annotations

import functools

from luminal.frontend.tensor import GraphTensor


def float32_under_autocast(fn):
    """Decorate op ``fn`` so that the nodes each call of it makes compute in float32 under
    ``train.autocast`` (see the module docstring); its results and errors are ``fn``'s."""

    @functools.wraps(fn)
    def op(*args, **kwargs):
        graphs = {id(g): g for g in _graphs(args, kwargs) if not g.host}
        first = {k: len(g.nodes) for k, g in graphs.items()}
        out = fn(*args, **kwargs)
        for k, g in graphs.items():
            g.float32_ops.update(range(first[k], len(g.nodes)))
        return out

    return op


def _graphs(args, kwargs):
    """The graphs of the GraphTensors among the arguments (and in lists or tuples of them: ``cdist``'s
    points, a solver's matrices)."""
    for a in (*args, *kwargs.values()):
        if isinstance(a, GraphTensor):
            yield a.graph
        elif isinstance(a, (list, tuple)):
            yield from (x.graph for x in a if isinstance(x, GraphTensor))

"""Reverse-mode autograd as a graph transform.

``grad(loss, wrt)`` appends the backward graph to ``loss``'s graph and returns one gradient tensor per
requested tensor or parameter. Gradients come from one rule per primitive (``RULES``) and one rule
for views (``view_grad``), so every high-level op, being a composition of primitives and views,
differentiates without a rule of its own. The exception is a function that a long chain of
primitives approximates (erf's rational, tanh's exp formula): ``Graph.custom_vjp`` gives its output
node the function's own derivative, built of ops (so gradients of gradients work), and autograd sends
the adjoint to its inputs by that rule instead of through the chain, whose partial values would
otherwise all be kept for the backward pass.

A rule may give an exception instead of a gradient for an input it has no derivative for (torch's
"the derivative for ... is not implemented": ``gammainc`` by ``a``, ``zeta`` by ``x``): ``grad`` raises
it when a gradient asked for would flow through that input, and ignores it otherwise, so asking is an
error when the backward graph is built (``grad``, ``compile_step``) rather than a NaN gradient.

Some edges carry no gradient: comparisons (``LessThan``), a ``Where``'s condition, indices of
``Gather``/``ScatterAdd``, casts to int/bool, ``detach()`` (a ``Copy`` with arg ``"detach"``, which
rounding ops use; the user's has arg ``USER_STOP``) and everything of int or bool dtype. Asking for
the gradient of something the loss reaches only through such edges is an error naming where the
gradient stops, not silent zeros (with ``allow_unused=True`` it is zeros, as torch's).

Where a composition's gradient at an edge value differs from torch's, the composition is rewritten
(never given a rule of its own): e.g. no ``where`` branch may compute an inf that its zero adjoint
would turn into 0 * inf = NaN (sigmoid, softplus, elu, erf, pow feed those branches safe inputs).
"""

from __future__ import annotations

import math

from luminal.core import dtype as dt
from luminal.core.errors import op_error, where
from luminal.frontend.graph import USER_STOP
from luminal.frontend.graph import ancestors as graph_ancestors
from luminal.frontend.ops import cast, div, eq, full_like, gt
from luminal.frontend.ops import where as select
from luminal.frontend.ops.core import prim
from luminal.frontend.ops.elementwise import round_
from luminal.frontend.state import State
from luminal.frontend.tensor import GraphTensor
from luminal.train.view_grad import view_grad

LN2 = math.log(2.0)


# rules: (node, output tensor, adjoint, inputs as read) -> gradient per input (None: no gradient) ---
def _add(n, out, a, xs):
    return a, a


def _mul(n, out, a, xs):
    return a * xs[1], a * xs[0]


def _mod(n, out, a, xs):
    """fmod(x, y) = x - q * y with q = trunc(x / y) of the exact quotient: ``x - fmod(x, y)`` is a
    multiple of y, so its quotient rounds to q (``trunc`` of the rounded quotient x / y is off by one
    where that rounds up to an integer: 7 / 0.1f). This is torch's remainder backward (its floor
    division); torch's fmod backward uses the rounded quotient (they differ only at such points).
    16-bit floats divide in float32 (torch rounds ``x - fmod(x, y)`` to 16 bits first, which is off
    by up to a few units in bfloat16 once |x| > 256)."""
    x, y = xs
    if x.dtype in (dt.float16, dt.bfloat16):
        x, y, out = cast(x, dt.float32), cast(y, dt.float32), cast(out, dt.float32)
    q = cast(round_(div(x - out, y)), a.dtype)
    return a, -(a * q)


def _max(n, out, a, xs):  # torch.maximum: ties share the gradient equally; with a NaN both get it all
    x, y = xs
    half = a * 0.5
    zero = full_like(a, 0)
    tie = eq(x, y)
    return select(tie, half, select(gt(y, x), zero, a)), select(tie, half, select(gt(x, y), zero, a))


def _where(n, out, a, xs):
    zero = full_like(a, 0)
    return None, select(xs[0], a, zero), select(xs[0], zero, a)


def _log2(n, out, a, xs):
    return (a / (xs[0] * LN2),)


def _exp2(n, out, a, xs):
    return (a * out * LN2,)


def _sin(n, out, a, xs):
    return (a * xs[0].cos(),)


def _sqrt(n, out, a, xs):
    return (a / (out * 2),)


def _recip(n, out, a, xs):
    return (-(a * out * out),)


def _copy(n, out, a, xs):
    return (a,)


def _cast(n, out, a, xs):
    return (cast(a, xs[0].dtype),)


def _sum(n, out, a, xs):
    return (a.unsqueeze(n.arg).expand(*xs[0].shape),)


def _max_reduce(n, out, a, xs):  # torch.amax: ties share the gradient equally
    x = xs[0]
    hit = cast(eq(x, out.unsqueeze(n.arg).expand(*x.shape)), a.dtype)
    share = a / hit.sum(n.arg)
    return (share.unsqueeze(n.arg).expand(*x.shape) * hit,)


def _gather(n, out, a, xs):
    x, idx = xs
    zeros = x.graph.zeros(x.shape, a.dtype)
    return prim("ScatterAdd", zeros, idx, a, arg=n.arg, shape=x.shape), None


def _scatter_add(n, out, a, xs):
    _, idx, src = xs
    # off the axis, dst may be larger than idx (torch.scatter_add allows it): read the part idx covers
    picked = a
    for k, (m, d) in enumerate(zip(idx.shape, a.shape)):
        if k != n.arg and m != d:
            picked = picked._slice_dim(k, 0, m, 1)
    return a, None, prim("Gather", picked, idx, arg=n.arg, shape=src.shape)


RULES = {
    "Add": _add, "Mul": _mul, "Mod": _mod, "Max": _max, "Where": _where, "Log2": _log2, "Exp2": _exp2,
    "Sin": _sin, "Sqrt": _sqrt, "Recip": _recip, "Copy": _copy, "Cast": _cast, "SumReduce": _sum,
    "MaxReduce": _max_reduce, "Gather": _gather, "ScatterAdd": _scatter_add,
}
# (op, input index) edges along which no gradient flows, whatever the dtypes
_NO_GRAD_EDGES = {("Where", 0), ("Gather", 1), ("ScatterAdd", 1), ("LessThan", 0), ("LessThan", 1)}
_DETACHED = ("detach", USER_STOP)  # the args of Copy nodes that pass no gradient: an op's detach(), the user's


def _carries_grad(n, i: int, graph) -> bool:
    """Whether a gradient flows along input ``i`` of ``n`` (of ``_grad_srcs(n, graph)``)."""
    if n.id in graph.vjps:
        return n.dtype.is_float and graph.vjps[n.id][1][i][0].dtype.is_float
    src = n.srcs[i][0]
    return (n.dtype.is_float and src.dtype.is_float and (n.op, i) not in _NO_GRAD_EDGES
            and not (n.op == "Copy" and n.arg in _DETACHED))


def _grad_srcs(n, graph) -> tuple:
    """The inputs a gradient flows back to from ``n``: those of its ``Graph.custom_vjp`` rule if it has
    one (the primitives computing it are not differentiated), else its own."""
    custom = graph.vjps.get(n.id)
    return custom[1] if custom is not None else n.srcs


# the transform ------------------------------------------------------------------------------
def grad(loss: GraphTensor, wrt, grad_output: GraphTensor | None = None, allow_unused: bool = False):
    """Gradients of ``loss`` with respect to ``wrt`` (a tensor, a Parameter/State, or a list of them).

    ``loss`` must be a float scalar unless ``grad_output`` (same shape) seeds the backward pass.
    Tensors in ``wrt`` must be whole nodes (not views of one), as with torch's leaves. A returned
    gradient has the shape and dtype of what it is for (a ``grad_output`` of another dtype is cast to
    the loss's, as torch does). Unused ``wrt`` entries, and entries the loss reaches only through
    edges without a gradient (comparisons, rounding, int casts, ``detach()``), are an error unless
    ``allow_unused`` (then their gradient is zeros, as torch's).

    The graph builds each distinct expression once, so a ``wrt`` tensor stands for every copy of its
    expression: with ``a = x.exp()`` and ``b = x.exp()`` built separately, the gradient with respect
    to ``a`` also counts ``b``'s uses (torch's counts ``a``'s alone; README, deviations).
    """
    single = isinstance(wrt, (GraphTensor, State))
    targets = [wrt] if single else list(wrt)
    graph = _check_loss(loss, grad_output)
    nodes = [_node_of(t, graph) for t in targets]

    ancestors = graph_ancestors([loss.node])
    # nodes that reach a wrt node along gradient-carrying edges, in topological (id) order
    wanted = {n.id for n in nodes if n is not None}
    carries: set[int] = set()
    for nid in sorted(ancestors):
        n = graph.nodes[nid]
        if nid in wanted or any(s.id in carries and _carries_grad(n, i, graph)
                                for i, (s, _) in enumerate(_grad_srcs(n, graph))):
            carries.add(nid)

    to_loss = _reaching(loss.node, graph, ancestors)
    for t, n in zip(targets, nodes):
        if n is None or n.id not in ancestors:
            if not allow_unused:
                raise op_error(ValueError, "grad", f"{_describe(t)} is not used to compute the loss "
                               f"(pass allow_unused=True to get zeros)", loss)
        elif n.id not in to_loss and not allow_unused:
            _no_path_error(t, n, loss, graph, ancestors)

    seed = cast(grad_output, loss.dtype) if grad_output is not None else full_like(loss, 1.0)  # torch's dtype rule
    adjoint: dict[int, GraphTensor] = {loss.node.id: view_grad(seed, loss.layout, loss.node.shape)}
    for nid in sorted(carries, reverse=True):
        a = adjoint.get(nid)
        n = graph.nodes[nid]
        if a is None or not n.srcs:
            continue
        srcs = _grad_srcs(n, graph)
        xs = [graph.tensor(s, v) for s, v in srcs]
        custom = graph.vjps.get(nid)
        outs = custom[0](graph.tensor(n), a, *xs) if custom is not None else RULES[n.op](n, graph.tensor(n), a, xs)
        for i, ((s, v), gi) in enumerate(zip(srcs, outs)):
            if gi is None or s.id not in carries or not _carries_grad(n, i, graph):
                continue
            if isinstance(gi, Exception):  # (a rule's refusal: no derivative by this input)
                raise gi.with_traceback(None)
            gb = view_grad(gi, v, s.shape)
            prev = adjoint.get(s.id)
            adjoint[s.id] = gb if prev is None else prev + gb

    result = []
    for t, n in zip(targets, nodes):
        g = adjoint.get(n.id) if n is not None else None
        if g is None:
            g = graph.zeros(t.shape, t.dtype)
        result.append(g)
    return result[0] if single else result


def _check_loss(loss, grad_output):
    if not isinstance(loss, GraphTensor):
        raise TypeError(f"grad: loss must be a GraphTensor, got {type(loss).__name__}")
    if not loss.dtype.is_float:
        raise op_error(TypeError, "grad", f"loss has dtype {loss.dtype.name}; only float losses have gradients", loss)
    if grad_output is None:
        if loss.shape != ():
            raise op_error(ValueError, "grad", f"loss has shape {loss.shape}; a non-scalar loss needs grad_output "
                           f"(or reduce it first, e.g. loss.sum())", loss)
    elif not isinstance(grad_output, GraphTensor) or tuple(grad_output.shape) != tuple(loss.shape):
        raise op_error(ValueError, "grad", "grad_output must be a tensor of the loss's shape", loss)
    return loss.graph


def _node_of(t, graph):
    if isinstance(t, State):
        if not t.dtype.is_float:
            raise TypeError(f"grad: {t.describe()} is not a float tensor and has no gradient")
        return graph.state_node(t)
    if not isinstance(t, GraphTensor):
        raise TypeError(f"grad: expected GraphTensors or Parameters to differentiate by, got {type(t).__name__}")
    if t.graph is not graph:
        raise op_error(ValueError, "grad", "a tensor to differentiate by belongs to another graph", t)
    if not t.dtype.is_float:
        raise op_error(TypeError, "grad", f"cannot differentiate by a {t.dtype.name} tensor", t)
    if not (t.layout.is_contiguous() and tuple(t.shape) == tuple(t.node.shape)):
        raise op_error(ValueError, "grad", "cannot differentiate by a view (reshape, slice, transpose...) of a "
                       "tensor; differentiate by the tensor itself and apply the view to its gradient", t)
    return t.node


def reaches(loss: GraphTensor, wrt) -> list[bool]:
    """Whether ``loss`` depends on each of ``wrt`` (Parameters/States or whole tensors of its graph)
    along edges that carry a gradient: where ``grad`` would give more than zeros."""
    nodes = [_node_of(t, loss.graph) for t in wrt]
    live = _reaching(loss.node, loss.graph, graph_ancestors([loss.node]))
    return [n is not None and n.id in live for n in nodes]


def has_grad(loss: GraphTensor, wrt) -> list[bool]:
    """Whether torch would give each of ``wrt`` a gradient tensor for ``loss`` rather than None: whether
    the loss reads it other than only through the user's ``detach()`` or an int or bool result of an op
    the user called (a comparison, an int cast, argmax: ``Graph.user_stop``, a node of the user's alone,
    so the answer does not depend on whether an op built the same comparison before or after). Where
    every op on the way has a zero gradient (``floor``, ``sign``, ``trunc``, whose own detach and
    comparisons are inner ones) torch's gradient is zeros, not None. An optimizer skips a parameter
    whose gradient is None (no weight decay, no step of its own)."""
    graph = loss.graph
    nodes = [_node_of(t, graph) for t in wrt]
    stops = graph.user_detached | graph.no_grad_results
    seen, stack = set(), [loss.node]
    while stack:
        n = stack.pop()
        if n.id not in seen:
            seen.add(n.id)
            if n.id not in stops:
                stack.extend(s for s, _ in n.srcs)
                custom = graph.vjps.get(n.id)
                if custom is not None:  # (a straight-through estimator: the rule's inputs have a gradient
                    stack.extend(s for s, _ in custom[1])  # though its own chain passes a comparison)
    return [n is not None and n.id in seen for n in nodes]


def _reaching(target, graph, ancestors) -> set[int]:
    """The nodes ``target`` depends on along gradient-carrying edges (itself included): one pass from
    ``target`` back through its ancestors, newest first, whatever the number of tensors asked about."""
    live = {target.id}
    for nid in sorted(ancestors, reverse=True):
        if nid in live:
            m = graph.nodes[nid]
            for i, (s, _) in enumerate(_grad_srcs(m, graph)):
                if _carries_grad(m, i, graph):
                    live.add(s.id)
    return live


def _describe(t) -> str:
    if isinstance(t, State):
        return t.describe()
    return f"the tensor made at {where(t.origin)}" if t.origin is not None else "a tensor"


def _no_path_error(t, n, loss, graph, ancestors):
    """The loss reads ``n`` only through edges without a gradient: name the ops where the gradient
    stops (the first such edge on each path, in graph order)."""
    blocking: list[str] = []
    live = {n.id}  # reached from n along gradient-carrying edges
    for nid in sorted(i for i in ancestors if i > n.id):
        m = graph.nodes[nid]
        for i, (s, _) in enumerate(_grad_srcs(m, graph)):
            if s.id in live:
                if _carries_grad(m, i, graph):
                    live.add(nid)
                elif (what := _no_grad_reason(m, i)) not in blocking:
                    blocking.append(what)
    what = ", ".join(blocking[:4]) + (", ..." if len(blocking) > 4 else "") if blocking else "non-differentiable ops"
    raise op_error(ValueError, "grad", f"the loss depends on {_describe(t)} only through {what}; comparisons, "
                   f"argmax, rounding (floor, round...), detach(), integer and bool ops have no gradient", loss)


def _no_grad_reason(m, i: int) -> str:
    if m.op == "Copy" and m.arg in _DETACHED:
        return "Copy (detach)"
    if m.op == "LessThan":
        return "LessThan (a comparison)"
    if m.op == "Cast":
        return f"Cast (to {m.dtype.name})"
    if (m.op, i) in _NO_GRAD_EDGES:
        return f"{m.op} ({'condition' if m.op == 'Where' else 'index'})"
    return f"{m.op} ({m.dtype.name} result)"

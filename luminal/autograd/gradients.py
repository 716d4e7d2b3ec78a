"""``lm.autograd.grad``: ``torch.autograd.grad`` over graph tensors, on ``luminal.train.grad`` (the
graph transform that appends a backward pass to the graph).

torch's ``create_graph`` and ``retain_graph`` are accepted and change nothing: a luminal gradient is
itself a lazy tensor of the same graph, built of ordinary ops, so it can always be differentiated
again (``create_graph=True``'s behaviour) and nothing is freed by differentiating (``retain_graph``).
The result is a tensor the user compiles with ``lm.compile`` (or a loss for ``train.compile_step``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from luminal.core.errors import op_error
from luminal.frontend.ops import full_like, stack
from luminal.frontend.state import State
from luminal.frontend.tensor import GraphTensor
from luminal.train.autograd import grad as _graph_grad
from luminal.train.autograd import has_grad

__all__ = ["grad"]


def grad(outputs, inputs, grad_outputs=None, retain_graph: bool | None = None, create_graph: bool = False,
         only_inputs: bool = True, allow_unused: bool | None = None, is_grads_batched: bool = False,
         materialize_grads: bool = False) -> tuple[GraphTensor | None, ...]:
    """torch.autograd.grad: the sum over ``outputs`` of the vector-Jacobian products
    ``grad_outputs[i]ᵀ · d outputs[i] / d inputs``, one per input, as a tuple.

    As torch's: an input the outputs do not read (or read only through the user's ``detach()``, a
    comparison, an int cast) is an error unless ``allow_unused=True``, which gives None for it
    (``materialize_grads=True``: zeros, and ``allow_unused`` defaults to True); an input read only
    through ops whose gradient is zero (``floor``, ``sign``) gets zeros. ``is_grads_batched=True``
    takes each ``grad_outputs[i]`` with a leading batch dim (a static size, the same for all) and
    returns gradients with that leading dim: one backward pass per batch entry, stacked.

    The gradients are lazy tensors of the outputs' graph, differentiable again (higher derivatives,
    gradient penalties, physics-informed losses); ``create_graph``, ``retain_graph`` and the deprecated
    ``only_inputs`` have no effect (see the module docstring). An input must be a whole tensor (a
    graph input, a Parameter/State, an op's result), not a view of one, and stands for every copy of
    its expression in the graph (``train.grad``).

    Args:
        outputs: a float GraphTensor or an iterable of them, all of one graph.
        inputs: the GraphTensors or Parameters/States to differentiate by: one, or any iterable of them
            (a list, ``model.parameters()``, a dict's ``values()``).
        grad_outputs: the vector of each output's vector-Jacobian product: a tensor of its shape (of
            any dtype, an int or bool one too, cast to the output's, as torch's), or None for a
            one-element output (ones); one, or an iterable of them.
        retain_graph: accepted; no effect.
        create_graph: accepted; no effect (gradients are always differentiable).
        only_inputs: accepted; no effect (deprecated in torch too).
        allow_unused: None for an unused input instead of an error (default: ``materialize_grads``).
        is_grads_batched: ``grad_outputs`` carry a leading batch dim (see above).
        materialize_grads: zeros instead of None for an unused input.

    Returns:
        A tuple with one gradient (or None) per input, each of the input's shape and dtype.
    """
    if allow_unused is None:
        allow_unused = materialize_grads
    elif materialize_grads and not allow_unused:
        raise ValueError("grad: materialize_grads=True needs allow_unused=True or left unset (as torch's)")
    outs = _as_list(outputs, "outputs", GraphTensor, "a GraphTensor")
    ins = _as_list(inputs, "inputs", (GraphTensor, State), "a GraphTensor or a Parameter/State")
    seeds = _seeds(outs, grad_outputs, is_grads_batched)
    if not is_grads_batched:
        res = vjp_list(outs, ins, seeds)
    else:
        n = _batch_size(outs, seeds)
        rows = [vjp_list(outs, ins, [s[k] for s in seeds]) for k in range(n)]
        res = [None if not u else stack([r[j] for r in rows]) if n else outs[0].graph.zeros((0, *t.shape), t.dtype)
               for j, (t, u) in enumerate(zip(ins, _used(outs, ins)))]
    for j, (g, t) in enumerate(zip(res, ins)):
        if g is None and not allow_unused:
            if _read_as_constant(outs, t):
                raise op_error(RuntimeError, "grad", f"input {j} ({_describe(t)}) is read by the outputs only as a "
                               f"constant of its current values: a value computed from it outside any graph (an "
                               f"op on its indexed values, in a script or __init__) joined the outputs' graph as a "
                               f"constant, which carries no gradient. Compute that value inside the graph: in the "
                               f"module's forward, or from the Parameter's tensor there (w.on(x.graph)[0] * 2 for "
                               f"w[0] * 2); w[...] itself combined with a graph's tensor is differentiable", *outs)
            raise op_error(RuntimeError, "grad", f"input {j} ({_describe(t)}) is not used to compute the outputs (or "
                           f"only through detach(), a comparison or an int cast); pass allow_unused=True to get None "
                           f"for it, or materialize_grads=True to get zeros", *outs)
    if materialize_grads:  # (torch's zeros_like(input), without the batch dim also when is_grads_batched)
        res = [g if g is not None else _zeros_for(t, outs[0]) for g, t in zip(res, ins)]
    return tuple(res)


def vjp_list(outs: list, ins: list, seeds: list) -> list:
    """The summed vector-Jacobian products of ``outs`` seeded by ``seeds`` (a tensor of each output's
    shape, or None for a one-element output) for each of ``ins``: a gradient, or None where torch's
    is None (no output reads the input other than through the user's stops, ``has_grad``). One
    backward pass, whatever the number of outputs, unless a seed reads one of ``ins`` (then one per
    output: the seeds are the products' constants, as torch's, not factors to differentiate)."""
    used = _used(outs, ins)
    wanted = [t for t, u in zip(ins, used) if u]
    if not wanted:
        return [None] * len(ins)
    if len(outs) == 1 or any(s is not None and any(has_grad(s, wanted)) for s in seeds):
        parts = [_graph_grad(o, wanted, grad_output=s if s is not None or o.shape == () else full_like(o, 1),
                             allow_unused=True) for o, s in zip(outs, seeds)]
        got = [sum(p[1:], p[0]) for p in zip(*parts)]
    else:  # one scalar whose gradient is the sum of the products: one backward pass for all outputs
        terms = [o.sum() if s is None else (o * s.cast(o.dtype)).sum() for o, s in zip(outs, seeds)]
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        got = _graph_grad(total, wanted, allow_unused=True)
    it = iter(got)
    return [next(it) if u else None for u in used]


def _used(outs: list, ins: list) -> list[bool]:
    """Whether torch would give each of ``ins`` a gradient (not None) for some output (``has_grad``)."""
    used = [False] * len(ins)
    for o in outs:
        used = [u or h for u, h in zip(used, has_grad(o, ins))]
    return used


def _read_as_constant(outs: list, t) -> bool:
    """Whether the outputs read State ``t`` through a constant of its values (``join.into`` records
    those it warned of in the graph's ``constant_reads``: torch's eager value would carry a gradient)."""
    reads = outs[0].graph.__dict__.get("constant_reads")
    if not isinstance(t, State) or not reads or not any(p is t for p in reads.values()):
        return False
    seen, todo = set(), [o.node for o in outs]
    while todo:
        n = todo.pop()
        if n.id in seen:
            continue
        seen.add(n.id)
        if reads.get(n.id) is t:
            return True
        todo.extend(s for s, _ in n.srcs)
    return False


def _as_list(x, what: str, kinds, expected: str) -> list:
    """``x`` as a list: one tensor, or any iterable of them (a list, a generator such as
    ``model.parameters()``, a dict's ``values()``), as torch's ``grad`` takes."""
    if isinstance(x, kinds):
        return [x]
    if isinstance(x, Iterable) and not isinstance(x, (str, bytes, Mapping)):
        items = list(x)
        for i, t in enumerate(items):
            if not isinstance(t, kinds):
                raise TypeError(f"grad: {what}[{i}] is a {type(t).__name__}; expected {expected}")
        if not items:
            raise ValueError(f"grad: {what} is empty")
        return items
    hint = " (a dict: pass its .values())" if isinstance(x, Mapping) else ""
    raise TypeError(f"grad: {what} must be {expected} or an iterable of them, got a {type(x).__name__}{hint}")


def _seeds(outs: list, grad_outputs, batched: bool) -> list:
    """``grad_outputs`` as one entry per output, checked: a tensor of the output's shape (with the
    batch dim in front when ``batched``), or None for a one-element output."""
    if grad_outputs is None:
        seeds = [None] * len(outs)
    elif isinstance(grad_outputs, GraphTensor):
        seeds = [grad_outputs]
    elif isinstance(grad_outputs, Iterable) and not isinstance(grad_outputs, (str, bytes, Mapping)):
        seeds = list(grad_outputs)
    else:
        raise TypeError(f"grad: grad_outputs must be a GraphTensor, an iterable of them (or None), got "
                        f"{type(grad_outputs).__name__}")
    if len(seeds) != len(outs):
        raise ValueError(f"grad: {len(seeds)} grad_outputs for {len(outs)} outputs")
    for i, (o, s) in enumerate(zip(outs, seeds)):
        if o.graph is not outs[0].graph:
            raise op_error(ValueError, "grad", f"outputs[{i}] belongs to another graph than outputs[0]", outs[0], o)
        if not o.dtype.is_float:
            raise op_error(TypeError, "grad", f"outputs[{i}] has dtype {o.dtype.name}; only float outputs have "
                           f"gradients", o)
        if s is None:
            if batched:
                raise op_error(ValueError, "grad", f"is_grads_batched=True needs grad_outputs[{i}] (a batch of "
                               f"vectors of outputs[{i}]'s shape with a leading batch dim)", o)
            if not all(isinstance(d, int) and d == 1 for d in o.shape):
                raise op_error(RuntimeError, "grad", f"grad can be implicitly created only for one-element outputs: "
                               f"outputs[{i}] has shape {tuple(o.shape)}; pass grad_outputs[{i}]", o)
            continue
        if not isinstance(s, GraphTensor):
            raise TypeError(f"grad: grad_outputs[{i}] is a {type(s).__name__}; expected a GraphTensor or None")
        if s.graph is not o.graph:
            raise op_error(ValueError, "grad", f"grad_outputs[{i}] belongs to another graph than outputs[{i}]", o, s)
        want = tuple(s.shape[1:]) if batched else tuple(s.shape)
        if (batched and s.ndim == 0) or want != tuple(o.shape):
            raise op_error(RuntimeError, "grad", f"mismatch in shape: grad_outputs[{i}] has shape {tuple(s.shape)} "
                           f"and outputs[{i}] has shape {tuple(o.shape)}"
                           + (" (with is_grads_batched=True, grad_outputs carry a leading batch dim)" if batched
                              else ""), o, s)
    return seeds


def _batch_size(outs: list, seeds: list) -> int:
    sizes = {s.shape[0] for s in seeds}
    if len(sizes) != 1:
        raise op_error(RuntimeError, "grad", f"is_grads_batched=True: the grad_outputs have different batch sizes "
                       f"{sorted(map(str, sizes))}", *seeds)
    (n,) = sizes
    if not isinstance(n, int):
        raise op_error(ValueError, "grad", f"is_grads_batched=True needs a static batch size (one backward pass "
                       f"per entry), got the symbolic {n}", *seeds)
    return n


def _zeros_for(t, like: GraphTensor) -> GraphTensor:
    return like.graph.zeros(t.shape, t.dtype)


def _describe(t) -> str:
    return t.describe() if isinstance(t, State) else f"shape {tuple(t.shape)} {t.dtype.name}"

"""``lm.autograd.functional``: torch.autograd.functional's ``vjp``, ``jvp``, ``jacobian``, ``hessian``,
``hvp`` and ``vhp`` over a Python function of GraphTensors.

Each builds its result once, as lazy tensors of the inputs' graph, for the user to compile with
``lm.compile``; nothing runs here. As torch's, the function is called on fresh copies of the inputs
(torch's detached ``requires_grad`` leaves): a Copy node of each, of its own, so a function that reads
the input's expression again by another path (``f(y) = y + 2 * x`` for ``y = 2 * x``) is
differentiated by its argument alone, and the input may be a view. The copies pass gradients back to
the originals, so every result can be differentiated again (torch's ``create_graph=True``, whatever the
argument; it only adds strict mode's checks, below).

As torch's functions take any tensor, the inputs (and ``v``, and the function's outputs) may be
Parameters or Buffers (``jacobian(f, model.weight)``, ``jacobian(f, (m.weight, m.bias))``) or host
tensors made outside any graph (``lm.arange(3.0)``): they are read into the graph the function builds
in, the graph of a graph tensor among the inputs, else of the enclosing module call, else of a graph
tensor the function reads by name (``lambda w: F.linear(x, w)``, ``x`` a graph input; a global it loads,
a closure variable, a partial's argument, ``self.x`` in a method, or so in a helper it calls); with none of
those, a new host graph of their values, whose results have values now (``np.asarray(J)``), as torch's
eager ones. The function is differentiated by a fresh copy of each, as torch's: a function that reads
the model rather than its argument (``jacobian(lambda w: model(x), model.weight)``) gets zeros, as
torch's does; torch's ``torch.func.functional_call``, which runs a module on substituted weights, has
no luminal counterpart: write the model's forward as a function of its weights (``F.linear(x, w, b)``).

Costs, as torch's defaults: ``vjp`` and ``vhp`` (``hvp``) are one backward pass (two); ``jvp`` is two,
by the double-vjp trick (``vjp(u)`` is linear in ``u``, so the gradient of ``<vjp(u), v>`` by ``u`` is
``J v``: luminal has no forward mode); ``jacobian`` is one backward pass per output element (torch's
reverse-mode strategy: its graph and compile time grow with the output size times the function's),
and ``hessian`` the jacobian of the gradient (one more per input element).

``strict=True`` raises where torch's does: an output that does not "require grad", an input no output
depends on, and (``jacobian``) an output independent of one input; ``strict=False`` gives zeros there.
With ``create_graph=True`` too, a result that does not "require grad" (the vjp of a linear function, a
constant hessian) is an error, as torch's. Luminal has no ``requires_grad`` flag on graph tensors, so it
is read from the graph (``_requires_grad``): a tensor requires grad when it reads one of the function's
inputs or a trainable Parameter (``requires_grad=True``: a module's weights the function closes over,
which make torch's outputs require grad too); a graph input is torch's plain tensor.
"""

from __future__ import annotations

import dis
import functools
import inspect
import types

from luminal.autograd.gradients import vjp_list
from luminal.core.errors import op_error
from luminal.frontend import building, join
from luminal.frontend.graph import Graph
from luminal.frontend.ops import full_like, stack
from luminal.frontend.state import State
from luminal.frontend.tensor import GraphTensor
from luminal.train.autograd import has_grad

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]


def vjp(func, inputs, v=None, create_graph: bool = False, strict: bool = False) -> tuple:
    """torch.autograd.functional.vjp: ``func``'s outputs and the vector-Jacobian product ``vᵀ J`` at
    ``inputs``.

    Args:
        func: a Python function of GraphTensors returning a GraphTensor or a tuple of them.
        inputs: a GraphTensor or a tuple of them (of one graph); a Parameter counts (the module docstring).
        v: the vector: a tensor per output, of its shape; None for a one-element output (ones).
        create_graph: results are always differentiable; with ``strict``, a result that does not
            require grad is an error (the module docstring).
        strict: raise where an output and an input are independent, instead of giving zeros.

    Returns:
        ``(outputs, vjp)``: ``func``'s outputs (a tuple if it returned one) and the product per input
        (a tuple if ``inputs`` is one).
    """
    in_tuple, xs = _inputs(inputs, func, "vjp")
    out_tuple, outs = _outputs(_call(func, xs, "vjp"), "vjp", xs, strict)
    vs = _vectors(v, outs, out_tuple, "vjp", "the user-provided function returns")
    res = _fill_in_zeros(vjp_list(outs, list(xs), vs), xs, strict, create_graph, "back", "vjp")
    return _post(outs, out_tuple), _post(res, in_tuple)


def jvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False) -> tuple:
    """torch.autograd.functional.jvp: ``func``'s outputs and the Jacobian-vector product ``J v`` at
    ``inputs``, by the double-vjp trick (the module docstring): two backward passes.

    Args:
        func: a Python function of GraphTensors returning a GraphTensor or a tuple of them.
        inputs: a GraphTensor or a tuple of them (of one graph); a Parameter counts (the module docstring).
        v: the vector: a tensor per input, of its shape; None for a one-element input (ones).
        create_graph: results are always differentiable; with ``strict``, a result that does not
            require grad is an error (the module docstring).
        strict: raise where an output and an input are independent, instead of giving zeros.

    Returns:
        ``(outputs, jvp)``: ``func``'s outputs and the product per output (tuples if ``func``
        returned a tuple).
    """
    in_tuple, xs = _inputs(inputs, func, "jvp")
    vs = _vectors(v, xs, in_tuple, "jvp", "the input to the user-provided function is")
    out_tuple, outs = _outputs(_call(func, xs, "jvp"), "jvp", xs, strict)
    graph = xs[0].graph
    # the vjp's seeds: nodes of their own (their value, zeros, never reaches the result: vjp is linear in them)
    us = [_fresh(graph.zeros(o.shape, o.dtype), "jvp seed") for o in outs]
    back = vjp_list(outs, list(xs), us)
    if strict:  # (the products depend on the seeds at least, as torch's require grad through them)
        _check_requires_grad(back, (*xs, *us), "grad_inputs", "jvp")
    keep = [j for j, b in enumerate(back) if b is not None]
    res = vjp_list([back[j] for j in keep], us, [vs[j] for j in keep]) if keep else [None] * len(outs)
    res = _fill_in_zeros(res, outs, strict, create_graph, "back_trick", "jvp", xs)
    return _post(outs, out_tuple), _post(res, out_tuple)


def jacobian(func, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
             strategy: str = "reverse-mode") -> GraphTensor | tuple:
    """torch.autograd.functional.jacobian: the Jacobian of ``func`` at ``inputs``, one backward pass
    per output element (torch's default reverse mode; the outputs' sizes must be static).

    The block for output i and input j has shape ``outputs[i].shape + inputs[j].shape``. torch's
    ``vectorize=True`` (vmap) and ``strategy="forward-mode"`` are refused: luminal has neither vmap
    nor forward-mode AD; the default gives the same values.

    Args:
        func: a Python function of GraphTensors returning a GraphTensor or a tuple of them.
        inputs: a GraphTensor or a tuple of them (of one graph); a Parameter counts (the module docstring).
        create_graph: results are always differentiable; with ``strict``, a result that does not
            require grad is an error (the module docstring).
        strict: raise where an output is independent of an input, instead of giving zeros.
        vectorize: only False.
        strategy: only ``"reverse-mode"``.

    Returns:
        A tensor when both ``inputs`` and ``func``'s output are single tensors; a tuple over the inputs
        (single output) or over the outputs (single input); else a tuple (per output) of tuples (per
        input).
    """
    _check_strategy("jacobian", vectorize, strategy, "strategy")
    return _jacobian(func, inputs, create_graph, strict, "jacobian")


def _jacobian(func, inputs, create_graph: bool, strict: bool, fn: str):
    """``jacobian``'s work, its errors naming ``fn``: the function the user called (``hessian``'s
    outer jacobian is of the gradient, so its messages say so)."""
    in_tuple, xs = _inputs(inputs, func, fn)
    out_tuple, outs = _outputs(_call(func, xs, fn), fn, xs, strict)
    blocks = []
    for i, o in enumerate(outs):
        what = f"output {i} of the user-provided function" if fn == "jacobian" else \
            f"the gradient of the user-provided function by input {i}"
        n = _static_numel(o, fn, f"output {i}")
        used = has_grad(o, list(xs))
        if strict and not all(used):
            j = used.index(False)
            raise op_error(RuntimeError, fn, f"{what} is independent of input {j}; this is not allowed in strict "
                           f"mode", o, xs[j])
        wanted = [x for x, u in zip(xs, used) if u]
        flat = o.reshape(-1)
        rows = [vjp_list([flat[k]], wanted, [None]) for k in range(n)] if wanted and n else []
        if strict and create_graph:  # (torch's check, row by row: each must require grad)
            for r in rows:
                if not all(_requires_grad(e, xs) for e in r):
                    raise op_error(RuntimeError, fn, f"the jacobian of {what} is independent of the inputs; this is "
                                   f"not allowed in strict mode when create_graph=True", o)
        row, k = [], 0
        for x, u in zip(xs, used):
            shape = (*o.shape, *x.shape)
            if u and n:
                row.append(stack([r[k] for r in rows]).reshape(shape))
                k += 1
            else:
                row.append(x.graph.zeros(shape, x.dtype))
        blocks.append(_post(row, in_tuple))
    return _post(blocks, out_tuple)


def hessian(func, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
            outer_jacobian_strategy: str = "reverse-mode") -> GraphTensor | tuple:
    """torch.autograd.functional.hessian: the Hessian of a scalar ``func`` at ``inputs``: the jacobian
    of its gradient (one backward pass for the gradient, then one per input element; static input
    sizes).

    Args:
        func: a Python function of GraphTensors returning a one-element GraphTensor.
        inputs: a GraphTensor or a tuple of them (of one graph); a Parameter counts (the module docstring).
        create_graph: results are always differentiable; with ``strict``, a result that does not
            require grad is an error (the module docstring).
        strict: raise where torch's does (an input the output or its gradient does not depend on).
        vectorize: only False (as ``jacobian``).
        outer_jacobian_strategy: only ``"reverse-mode"``.

    Returns:
        For a single input of shape S, a tensor of shape ``S + S``; for a tuple, a tuple of tuples
        whose entry ``[i][j]`` has shape ``inputs[i].shape + inputs[j].shape``.
    """
    _check_strategy("hessian", vectorize, outer_jacobian_strategy, "outer_jacobian_strategy")
    in_tuple, xs = _placed(inputs, func, "hessian")
    for j, x in enumerate(xs):  # (the outer jacobian's outputs, the gradients, have the inputs' shapes)
        _static_numel(x, "hessian", f"input {j}")

    def scalar(*inp):
        return _single_output(func(*inp), "hessian", inp, strict).reshape(())

    def jac_func(*inp):
        jac = _jacobian(scalar, inp, False, False, "hessian")
        if strict:
            _check_requires_grad(jac, inp, "jacobian", "hessian")
        return jac

    res = _jacobian(jac_func, xs, create_graph, strict, "hessian")
    return res if in_tuple else res[0][0]


def vhp(func, inputs, v=None, create_graph: bool = False, strict: bool = False) -> tuple:
    """torch.autograd.functional.vhp: a scalar ``func``'s output and the vector-Hessian product
    ``vᵀ H`` at ``inputs``: the gradient of ``<grad func, v>``, two backward passes.

    Args:
        func: a Python function of GraphTensors returning a one-element GraphTensor.
        inputs: a GraphTensor or a tuple of them (of one graph); a Parameter counts (the module docstring).
        v: the vector: a tensor per input, of its shape; None for a one-element input (ones).
        create_graph: results are always differentiable; with ``strict``, a result that does not
            require grad is an error (the module docstring).
        strict: raise where torch's does (an input the output or its gradient does not depend on).

    Returns:
        ``(output, vhp)``: ``func``'s output and the product per input (a tuple if ``inputs`` is one).
    """
    return _hessian_product(func, inputs, v, create_graph, strict, "vhp")


def hvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False) -> tuple:
    """torch.autograd.functional.hvp: a scalar ``func``'s output and the Hessian-vector product
    ``H v`` at ``inputs``. The Hessian of a twice continuously differentiable function is symmetric,
    so this is ``vhp``'s product (torch computes it by the double-vjp trick, one more backward pass,
    to the same value).

    Args:
        func: a Python function of GraphTensors returning a one-element GraphTensor.
        inputs: a GraphTensor or a tuple of them (of one graph); a Parameter counts (the module docstring).
        v: the vector: a tensor per input, of its shape; None for a one-element input (ones).
        create_graph: results are always differentiable; with ``strict``, a result that does not
            require grad is an error (the module docstring).
        strict: raise where torch's does (an input the output or its gradient does not depend on).

    Returns:
        ``(output, hvp)``: ``func``'s output and the product per input (a tuple if ``inputs`` is one).
    """
    return _hessian_product(func, inputs, v, create_graph, strict, "hvp")


# helpers ------------------------------------------------------------------------------------------------
def _hessian_product(func, inputs, v, create_graph: bool, strict: bool, fn: str) -> tuple:
    in_tuple, xs = _inputs(inputs, func, fn)
    vs = _vectors(v, xs, in_tuple, fn, "the input to the user-provided function is")
    out = _single_output(_call(func, xs, fn), fn, xs, strict)
    jac = vjp_list([out], list(xs), [None])
    if strict:
        _check_requires_grad(jac, xs, "jacobian", fn)
    keep = [j for j, g in enumerate(jac) if g is not None]
    res = vjp_list([jac[j] for j in keep], list(xs), [vs[j] for j in keep]) if keep else [None] * len(xs)
    stage = "double_back" if fn == "vhp" else "double_back_trick"
    return out, _post(_fill_in_zeros(res, xs, strict, create_graph, stage, fn), in_tuple)


def _as_tuple(x, what: str, fn: str) -> tuple[bool, tuple]:
    """torch's ``_as_tuple``: a tensor or a tuple of them (a list is neither, as in torch). A tensor is a
    GraphTensor or, as torch's ``nn.Parameter`` is a tensor, a State (a Parameter or Buffer: the caller
    reads it into its graph, ``join.into``)."""
    if isinstance(x, (GraphTensor, State)):
        return False, (x,)
    if isinstance(x, tuple):
        for i, t in enumerate(x):
            if not isinstance(t, (GraphTensor, State)):
                raise TypeError(f"{fn}: the {what} must be a GraphTensor or a tuple of GraphTensors, but the value "
                                f"at index {i} is a {type(t).__name__} (a Parameter or Buffer is a tensor too)")
        return True, x
    raise TypeError(f"{fn}: the {what} must be a GraphTensor or a tuple of GraphTensors, got a {type(x).__name__} "
                    f"(a Parameter or Buffer is a tensor too)")


def _inputs(inputs, func, fn: str) -> tuple[bool, tuple]:
    """The inputs placed and checked (``_placed``) as fresh copies: what ``func`` is called on."""
    is_tuple, xs = _placed(inputs, func, fn)
    return is_tuple, tuple(_fresh(x, f"{fn} input {j}") for j, x in enumerate(xs))


def _placed(inputs, func, fn: str) -> tuple[bool, tuple]:
    """The inputs as tensors of the graph ``func`` is built in (``_graph_for``), checked: float, of that
    graph, not an empty tuple. A Parameter or Buffer is read there as ``p.on(g)`` (``join.into``), a
    tensor made outside any graph (a host tensor: ``lm.arange(3.0)``, ``p[0]``) joins it as a constant
    of its values, as torch's ``jacobian(f, model.weight)`` or ``jacobian(f, torch.arange(3.0))``
    differentiate by a fresh leaf of those values."""
    is_tuple, xs = _as_tuple(inputs, "inputs", fn)
    if not xs:
        raise ValueError(f"{fn}: inputs is an empty tuple")
    graph = _graph_for(xs, func, fn)
    xs = tuple(join.into(x, graph) for x in xs)
    for j, x in enumerate(xs):
        if x.graph is not xs[0].graph:
            raise op_error(ValueError, fn, f"input {j} belongs to another graph than input 0", xs[0], x)
        if not x.dtype.is_float:
            raise op_error(TypeError, fn, f"input {j} has dtype {x.dtype.name}; only float inputs have "
                           f"gradients", x)
    return is_tuple, xs


def _graph_for(xs: tuple, func, fn: str) -> Graph:
    """The graph ``func`` is built in: that of a graph's tensor among the inputs; else the enclosing
    module call's (``frontend/building.py``); else (the inputs are Parameters or host tensors) that of
    a graph's tensor the function reads by name (``_closure_graph``: torch's
    ``jacobian(lambda w: model_fn(x, w), model.weight)`` with ``x`` a graph input); else a new host
    graph, where the results have values now, as torch's eager ones (``frontend/host.py``)."""
    for x in xs:
        if isinstance(x, GraphTensor) and not x.graph.host:
            return x.graph
    ctx = building.current()
    if not isinstance(ctx, Graph):
        ctx = _closure_graph(func)
    return ctx if ctx is not None else join.target(fn, xs, {}, host_ok=True)


def _closure_graph(func) -> Graph | None:
    """The graph of the first (non-host) GraphTensor that ``func`` reads by name (``_read_by_name``), else
    that of one a Python function it reads by name reads (a helper: ``lambda w: helper(w)``), and so on
    to ``_HELPER_DEPTH`` levels; values are also looked at one level inside a list, tuple or dict
    (``building.graph_in``). None when there is none."""
    todo, seen = [func], set()
    for _ in range(_HELPER_DEPTH + 1):
        helpers = []
        for f in todo:
            values = _read_by_name(f, seen)
            for a in values:
                g = building.graph_in((a,), {})
                if g is not None and not g.host:
                    return g
            helpers += [a for a in values if inspect.isfunction(a) or inspect.ismethod(a)
                        or isinstance(a, functools.partial)]
        todo = helpers
    return None


_HELPER_DEPTH = 2  # levels of helper functions ``_closure_graph`` looks into


def _read_by_name(func, seen: set) -> list:
    """The values ``func`` reads by name: the arguments ``functools.partial`` bound (a partial of a partial
    included), its closure's variables (an empty cell, a variable assigned after the call, is skipped), the
    module globals its code loads, its nested functions', lambdas' and comprehensions' included (not an
    attribute name that is also a global's: ``(w * w).mean()`` reads no global ``mean``), and for a bound
    method or a callable object's ``__call__``, the attributes of ``self`` it names. Empty for a function
    in ``seen`` (it is added) and for anything else (a builtin)."""
    values = []
    while isinstance(func, functools.partial):
        values += [*func.args, *func.keywords.values()]
        func = func.func
    owner = None
    if inspect.ismethod(func):
        owner, func = func.__self__, func.__func__
    elif not inspect.isfunction(func):  # a callable object: its class's __call__, ``self`` the object
        owner, func = func, inspect.getattr_static(type(func), "__call__", None)
    if not inspect.isfunction(func) or func in seen:
        return values
    seen.add(func)
    for cell in func.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:  # (a closure variable not assigned yet)
            pass
    loaded, attributes = _names(func.__code__)
    values += [func.__globals__[n] for n in loaded if n in func.__globals__]
    own = getattr(owner, "__dict__", None) or {}
    return values + [own[n] for n in attributes if n in own]


def _names(code) -> tuple[list, list]:
    """The global names ``code`` loads and the attribute names it reads, each in the order of first use,
    its nested code objects' (functions, lambdas, comprehensions) included."""
    loaded, attributes = {}, {}
    todo = [code]
    while todo:
        c = todo.pop(0)
        for ins in dis.get_instructions(c):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                loaded[ins.argval] = None
            elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD"):
                attributes[ins.argval] = None
        todo += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    return list(loaded), list(attributes)


def _fresh(t: GraphTensor, what: str) -> GraphTensor:
    """``t`` as a Copy node of its own (torch's fresh leaf): the graph builds each expression once, and
    differentiating by ``t``'s own node would also count every other copy of its expression. The
    compiler drops the copy; gradients pass through it."""
    g = t.graph
    return g.tensor(g.add("Copy", (t,), f"lm.autograd {what} #{len(g.nodes)}", t.dtype, t.shape))


def _call(func, xs: tuple, fn: str):
    """``func(*xs)`` building in the inputs' graph, as a module's forward does (``frontend/building.py``):
    a Parameter the function closes over and uses with no tensor operand (``w[0]``, ``w.sum()``) joins
    that graph and is differentiable, as torch's, instead of being read as a constant of its current
    values (indexing) or refused (no graph to join)."""
    with building.module_call(xs[0].graph, lambda: fn, xs, {}):
        return func(*xs)


def _outputs(out, fn: str, xs: tuple, strict: bool) -> tuple[bool, tuple]:
    """``func``'s outputs as tensors of the inputs' graph (a Parameter returned is read there, a host
    tensor is a constant there, as torch's outputs that do not require grad), checked."""
    is_tuple, outs = _as_tuple(out, "outputs of the user-provided function", fn)
    graph = xs[0].graph
    outs = tuple(join.into(o, graph) for o in outs)
    for i, o in enumerate(outs):
        if o.graph is not graph:
            hint = "" if not graph.host else (
                "; the inputs were made outside any graph (Parameters or host tensors), and no input, module call "
                "or variable the function reads by name is a graph's tensor, so the function was called on "
                "them in a new graph of their values, while it builds in another one: pass the inputs as tensors "
                "of the output's graph (p.on(x.graph) for a Parameter p, with x the tensor the function reads)")
            raise op_error(ValueError, fn, f"output {i} of the user-provided function belongs to another graph "
                           f"than the inputs{hint}", o)
        if not o.dtype.is_float:
            raise op_error(TypeError, fn, f"output {i} of the user-provided function has dtype {o.dtype.name}; "
                           f"only float outputs have gradients", o)
        if strict and not _requires_grad(o, xs):
            raise op_error(RuntimeError, fn, f"output {i} of the user-provided function does not depend on the inputs "
                           f"(nor on a trainable Parameter), so it does not require grad; the outputs must be "
                           f"computed in a differentiable manner from the inputs in strict mode", o)
    return is_tuple, outs


def _single_output(out, fn: str, xs: tuple, strict: bool) -> GraphTensor:
    """``func``'s one-element output as a tensor of the inputs' graph (``_outputs``)."""
    if not isinstance(out, (GraphTensor, State)):
        raise TypeError(f"{fn}: the function given to {fn} should return a single GraphTensor, got a "
                        f"{type(out).__name__}")
    out = _outputs(out, fn, xs, strict)[1][0]
    if _static_numel(out, fn, "the output of the user-provided function") != 1:
        raise op_error(RuntimeError, fn, f"the tensor returned by the function given to {fn} should contain a "
                       f"single element; it has shape {tuple(out.shape)}", out)
    return out


def _vectors(v, refs: tuple, refs_tuple: bool, fn: str, single: str) -> list:
    """torch's ``_validate_v``: ``v`` as one tensor per ref, of its shape; None only for a single
    one-element ref (then ones)."""
    if v is None:
        if len(refs) != 1 or not _is_one(_numel(refs[0])):
            raise op_error(RuntimeError, fn, f"the vector v can only be None if {single} a single tensor with a "
                           f"single element", *refs)
        return [full_like(refs[0], 1)]
    _, vs = _as_tuple(v, "v", fn)
    if len(vs) != len(refs):
        raise op_error(RuntimeError, fn, f"v is a tuple of invalid length: should be {len(refs)} but got {len(vs)}"
                       if refs_tuple else "the given v should contain a single tensor")
    vs = [join.into(a, r.graph) for a, r in zip(vs, refs)]  # (a Parameter read there, a host tensor a constant)
    for j, (a, r) in enumerate(zip(vs, refs)):
        entry = f"entry {j} in " if refs_tuple else ""
        if a.graph is not r.graph:
            raise op_error(ValueError, fn, f"{entry}v belongs to another graph", a)
        if tuple(a.shape) != tuple(r.shape):
            raise op_error(RuntimeError, fn, f"{entry}v has invalid size: should "
                           f"be {tuple(r.shape)} but got {tuple(a.shape)}", a)
    return list(vs)


def _requires_grad(t: GraphTensor, xs: tuple) -> bool:
    """torch's ``t.requires_grad`` inside the functional API (the module docstring): ``t`` reads, along a
    gradient-carrying path, one of the fresh inputs ``xs`` or a trainable Parameter of its graph (in a host
    graph, ``_graph_for``, a Parameter is a constant of its values: ``join.into`` records which)."""
    g = t.graph
    params = [s for s in g.states.values() if getattr(s, "requires_grad", False) and s.dtype.is_float]
    params += [g.tensor(g.nodes[i]) for i, s in g.__dict__.get("parameter_constants", {}).items() if s.requires_grad]
    return any(has_grad(t, [*xs, *params]))


def _check_requires_grad(grads: list, xs: tuple, stage: str, fn: str) -> None:
    """strict mode: every gradient exists and requires grad (torch's ``_check_requires_grad``)."""
    for j, g in enumerate(grads):
        if g is None:
            raise RuntimeError(f"{fn}: the output of the user-provided function is independent of input {j}; this "
                               f"is not allowed in strict mode")
        if not _requires_grad(g, xs):
            if stage == "jacobian":
                raise RuntimeError(f"{fn}: while computing the hessian, found that the jacobian of the user-provided "
                                   f"function with respect to input {j} is independent of the input; this is not "
                                   f"allowed in strict mode (the function must be twice differentiable with a "
                                   f"jacobian that depends on the inputs: a linear function's does not)")
            raise RuntimeError(f"{fn}: the gradient with respect to input {j} is independent of the inputs of the "
                               f"user-provided function; this is not allowed in strict mode")


_STRICT_MESSAGES = {
    "back": "the output of the user-provided function is independent of input {i}",
    "back_trick": "the gradient with respect to the input is independent of entry {i} in the grad_outputs when "
                  "using the double backward trick to compute forward mode gradients",
    "double_back": "the jacobian of the user-provided function is independent of input {i}",
    "double_back_trick": "the hessian of the user-provided function is independent of entry {i} in the grad_jacobian",
}


def _fill_in_zeros(grads: list, refs, strict: bool, create_graph: bool, stage: str, fn: str, xs=None) -> list:
    """torch's ``_fill_in_zeros``: zeros of ``refs[i]``'s shape and dtype for a None, or (strict) an
    error saying which is independent of which; with ``create_graph`` too, also for a result that does
    not require grad (it reads neither the inputs ``xs``, default ``refs``, nor a trainable Parameter)."""
    res = []
    for i, (g, r) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(f"{fn}: " + _STRICT_MESSAGES[stage].format(i=i) + "; this is not allowed in "
                                   "strict mode")
            g = r.graph.zeros(r.shape, r.dtype)
        elif strict and create_graph and not _requires_grad(g, refs if xs is None else xs):
            what = "jacobian" if "double" not in stage else "hessian"
            raise RuntimeError(f"{fn}: the {what} of the user-provided function is independent of "
                               f"{'output' if stage == 'back_trick' else 'input'} {i} (its result does not depend "
                               f"on the inputs); this is not allowed in strict mode when create_graph=True")
        res.append(g)
    return res


def _check_strategy(fn: str, vectorize: bool, strategy: str, name: str) -> None:
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError(f"{fn}: {name} must be 'reverse-mode' or 'forward-mode', got {strategy!r}")
    if strategy == "forward-mode":
        raise NotImplementedError(f"{fn}: {name}='forward-mode' is not supported: luminal has no forward-mode AD; "
                                  f"the default 'reverse-mode' (one backward pass per output element) gives the same "
                                  f"values")
    if vectorize:
        raise NotImplementedError(f"{fn}: vectorize=True is not supported: luminal has no vmap; vectorize=False "
                                  f"(one backward pass per output element, built once into the graph) gives the "
                                  f"same values")


def _numel(t: GraphTensor):
    n = 1
    for d in t.shape:
        n = n * d
    return n


def _is_one(n) -> bool:
    return isinstance(n, int) and n == 1


def _static_numel(t: GraphTensor, fn: str, what: str) -> int:
    n = _numel(t)
    if not isinstance(n, int):
        raise op_error(ValueError, fn, f"{what} has the symbolic shape {tuple(t.shape)}; {fn} builds one backward "
                       f"pass per element, so its size must be static", t)
    return n


def _post(items, is_tuple: bool):
    return tuple(items) if is_tuple else items[0]

"""``nn.utils.parameters_to_vector`` / ``vector_to_parameters``: all parameters as one flat vector, and back.

torch's ``parameters_to_vector`` is a tensor in its autograd graph. Here it is a tensor of the graph
being built (the graph of a tensor among the parameters, else of the enclosing module call), so that
a loss built from it differentiates to the parameters; in a script, outside any graph, it is a host
tensor of the current values (``np.asarray`` reads it; a host tensor used in a graph is a constant
there, with no gradient: pass ``[p.on(g) for p in model.parameters()]`` to build it in ``g``).

torch's ``vector_to_parameters`` points each ``param.data`` at a slice of the vector (sharing its
memory and taking its dtype). Here it copies each slice into its Parameter, converted to the
Parameter's dtype (a Parameter keeps its own storage: optimizers and compiled programs read it), and
needs values: an array, or a tensor whose values are known now. A tensor of a graph has none until a
compiled program runs, and is refused.
"""

from __future__ import annotations

from luminal.frontend import join
from luminal.frontend.ops import cat
from luminal.frontend.state import State
from luminal.frontend.tensor import GraphTensor
from luminal.nn.utils.parametrize import _tensor_values


def _listed(op: str, parameters) -> list:
    """``parameters`` (an iterable of Parameters/Buffers or tensors, or one of them) as a list."""
    if isinstance(parameters, (State, GraphTensor)):
        return [parameters]
    try:
        return list(parameters)
    except TypeError:
        raise TypeError(f"{op}: parameters must be an iterable of Parameters (model.parameters()), got "
                        f"{type(parameters).__name__}") from None


def parameters_to_vector(parameters) -> GraphTensor:
    """The parameters flattened and concatenated in order, as torch's (see the module docstring for the
    graph it is built in).

    Args:
        parameters: an iterable of Parameters (``model.parameters()``) or tensors.

    Returns:
        A 1-d tensor of ``sum(p.numel())`` elements.
    """
    params = _listed("parameters_to_vector", parameters)
    if not params:
        raise ValueError("parameters_to_vector: no parameters given (torch.cat of an empty list)")
    for i, p in enumerate(params):
        if not isinstance(p, (State, GraphTensor)):
            raise TypeError(f"parameters_to_vector: parameter {i} is a {type(p).__name__}, not a Parameter or a "
                            f"tensor")
    g = join.target("parameters_to_vector", tuple(params), {}, host_ok=True)
    return cat([join.into(p, g).reshape(-1) for p in params])


def vector_to_parameters(vec, parameters) -> None:
    """Copy consecutive slices of the 1-d ``vec`` into the parameters, in order (each slice reshaped to its
    parameter's shape and converted to its dtype), as torch's; see the module docstring for how this
    differs. Every value is checked before any is written.

    Args:
        vec: a 1-d array (or a tensor whose values are known now) of exactly ``sum(p.numel())`` elements.
        parameters: an iterable of Parameters (``model.parameters()``).
    """
    params = _listed("vector_to_parameters", parameters)
    for i, p in enumerate(params):
        if not isinstance(p, State):
            what = ("a tensor of a graph, which holds no values to write into" if isinstance(p, GraphTensor)
                    else f"a {type(p).__name__}")
            raise TypeError(f"vector_to_parameters: parameter {i} is {what}; pass the module's Parameters "
                            f"(model.parameters())")
    values, _ = _tensor_values(vec, "vector_to_parameters (vec)")
    if values.ndim != 1:
        raise ValueError(f"vector_to_parameters: vec must be 1-d, got shape {tuple(values.shape)}")
    total = sum(p.numel() for p in params)
    if values.shape[0] != total:
        raise ValueError(f"vector_to_parameters: vec has {values.shape[0]} elements but the {len(params)} "
                         f"parameters hold {total}")
    chunks, start = [], 0
    for p in params:
        chunks.append(p.prepared(values[start:start + p.numel()].reshape(p.shape)))
        start += p.numel()
    for p, c in zip(params, chunks):
        p.set(c)


__all__ = ["parameters_to_vector", "vector_to_parameters"]

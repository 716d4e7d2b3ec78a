"""Checking a call's inputs against the graph and binding symbolic dims, before any work is done."""

from __future__ import annotations

import numpy as np

from luminal.core import dtype as dt
from luminal.core.symbolic import evaluate, free_vars, shape_str, solve_linear, substitute

_INT32 = (-2**31, 2**31 - 1)


def convert(name: str, value, node) -> np.ndarray:
    """One input's value as the array a program reads (its storage dtype, C-contiguous), or the error
    that says what is wrong with it."""
    want: dt.DType = node.dtype
    if type(value) is int and want.kind == "i" and not _INT32[0] <= value <= _INT32[1]:
        raise ValueError(f"input {name!r}: integer value {value} does not fit in int32")
    python = isinstance(value, (bool, int, float, list, tuple))  # no dtype of its own: numpy's guess
    try:
        arr = np.asarray(value)
    except ValueError as e:  # numpy's "inhomogeneous shape after 1 dimensions": rows of unequal length
        if isinstance(value, (list, tuple)):
            raise ValueError(f"input {name!r}: the nested list is ragged (its rows differ in length), so it is "
                             f"not an array; expected {len(node.shape)} dims {shape_str(node.shape)}") from None
        raise ValueError(f"input {name!r}: cannot make an array of the value: {e}") from None
    if isinstance(value, (list, tuple)) and arr.size == 0:  # np.asarray([]) is float64 whatever was meant
        arr = arr.astype(np.float32 if want is dt.bfloat16 else want.np)
    if arr.dtype.kind not in "biufc":
        what = f"an array of dtype {arr.dtype}" if isinstance(value, np.ndarray) else type(value).__name__
        raise TypeError(f"input {name!r}: expected a numpy array or a number, got {what}")
    if arr.ndim != len(node.shape):
        raise ValueError(f"input {name!r}: expected {len(node.shape)} dims {shape_str(node.shape)}, "
                         f"got an array of shape {arr.shape}")
    kind = arr.dtype.kind
    if python:  # Python numbers take the input's dtype, as torch.tensor(data, dtype=...) does; a float
        # list for an int input is still refused (that conversion would truncate)
        ok = {"b": kind == "b", "i": kind in "bi", "f": kind in "bif"}[want.kind]
    elif want is dt.bfloat16:
        ok = arr.dtype == np.float32
    elif want.kind == "i":
        ok = kind in "iu"
    else:
        ok = arr.dtype == want.np
    if not ok:
        hint = f" (convert with .astype(np.{want.np.name}))" if want is not dt.bfloat16 else \
            " (bfloat16 inputs are given as float32 arrays)"
        raise TypeError(f"input {name!r}: expected dtype {want.name}, got {arr.dtype}{hint}")
    if want.kind == "i" and arr.size and (arr.min() < _INT32[0] or arr.max() > _INT32[1]):
        raise ValueError(f"input {name!r}: integer values do not fit in int32 "
                         f"(range [{arr.min()}, {arr.max()}])")
    out = dt.to_storage(arr, want)
    # np.ascontiguousarray would turn a 0-d array into a 1-d one
    return out if out.flags.c_contiguous else np.ascontiguousarray(out)


def as_is(value, node) -> bool:
    """Whether ``convert`` hands ``value`` on unchanged whatever the numbers in it: a numpy array of
    exactly ``ndarray`` type, already C-contiguous and of the input's storage dtype (not bfloat16,
    which is rounded on every call). For such an array every check ``convert`` makes reads only its
    type, dtype and number of dims (an int32 array always fits int32), so a call with an array of the
    same type, dtype, shape and contiguity passes them too, and the compiled callable's per-signature
    cache (``compiler/api.py``) skips them. Any other value (a copy, a rounding, a value-dependent
    range check) is converted by ``convert`` again on every call. Keep in step with ``convert``."""
    want = node.dtype
    return (type(value) is np.ndarray and want is not dt.bfloat16 and value.dtype == want.np
            and value.flags.c_contiguous)


def bind(graph, needed: list, values: dict) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Validate ``values`` for the ``needed`` input nodes; return converted arrays and dim bindings.

    Plain names (``B``) are bound first, from the first input that has them; then dims linear in one
    still-unknown name (``S+1``, ``2*M``, ``S*T`` once ``S`` is known) are solved; then every dim is
    checked against its array. Every problem is reported here, before any work is done.
    """
    unknown = sorted(set(values) - set(graph.inputs))
    if unknown:
        raise TypeError(f"unexpected input(s) {unknown}; this graph's inputs are {sorted(graph.inputs)}")
    missing = [n.arg for n in needed if n.arg not in values]
    if missing:
        raise TypeError(f"missing input(s) {missing}; this call needs {sorted(n.arg for n in needed)}")
    arrays = {n.arg: convert(n.arg, values[n.arg], n) for n in needed}
    env: dict[str, int] = {}
    source: dict[str, str] = {}

    def via(d) -> str:
        known = [f"{v}={env[v]} from input {source[v]!r}" for v in sorted(free_vars(d)) if v in source]
        return f" ({', '.join(known)})" if known else ""

    def set_var(v, x, name, i, d):
        if x < 0:
            raise ValueError(f"input {name!r}: dim {i} ({d}) would make symbolic dim {v} negative ({v}={x}); "
                             f"the array has shape {arrays[name].shape}")
        env[v], source[v] = x, name

    for n in needed:
        for i, (d, got) in enumerate(zip(n.shape, arrays[n.arg].shape, strict=True)):
            if isinstance(d, int) and d != got:
                raise ValueError(f"input {n.arg!r}: dim {i} should be {d}, but the array has shape "
                                 f"{arrays[n.arg].shape}")

    progress = True
    while progress:
        progress = False
        for plain_only in (True, False):
            for n in needed:
                for i, (d, got) in enumerate(zip(n.shape, arrays[n.arg].shape, strict=True)):
                    unbound = free_vars(d) - env.keys()
                    if len(unbound) != 1 or (plain_only and str(d) != next(iter(unbound))):
                        continue
                    try:
                        solved = solve_linear(substitute(d, env), got)
                    except ValueError:
                        raise ValueError(f"input {n.arg!r}: dim {i} is {d}{via(d)}, and no integer "
                                         f"{next(iter(unbound))} makes it {got} (the array has shape "
                                         f"{arrays[n.arg].shape})") from None
                    if solved is not None:
                        set_var(*solved, n.arg, i, d)
                        progress = True
            if progress:
                break

    for n in needed:
        for i, (d, got) in enumerate(zip(n.shape, arrays[n.arg].shape, strict=True)):
            unbound = free_vars(d) - env.keys()
            if unbound:
                raise ValueError(f"input {n.arg!r}: cannot infer {sorted(unbound)} from dim {i} ({d}){via(d)}; "
                                 f"give each symbolic dim a dim of its own in some input")
            expected = evaluate(d, env)
            if expected != got:
                raise ValueError(f"input {n.arg!r}: dim {i} should be {d} = {expected}{via(d)}, but the array "
                                 f"has shape {arrays[n.arg].shape}")
    return arrays, env

"""Checking a call's inputs against the graph and binding symbolic dims, before any work is done."""

from __future__ import annotations

import numpy as np

from . import dtype as dt
from .symbolic import evaluate, free_vars, shape_str, solve_linear


def _convert(name: str, value, node) -> np.ndarray:
    want: dt.DType = node.dtype
    arr = np.asarray(value)
    if arr.dtype == object:
        raise TypeError(f"input {name!r}: expected a numpy array or a number, got {type(value).__name__}")
    if arr.ndim != len(node.shape):
        raise ValueError(f"input {name!r}: expected {len(node.shape)} dims {shape_str(node.shape)}, "
                         f"got an array of shape {arr.shape}")
    kind = arr.dtype.kind
    if isinstance(value, (bool, int, float)) and arr.ndim == 0:
        ok = {"b": kind == "b", "i": kind in "bi", "f": kind in "bif"}[want.kind]
    elif want is dt.bfloat16:
        ok = arr.dtype == np.float32
    elif want.kind == "i":
        ok = kind in "iu"
        if ok and arr.size and (arr.min() < -2**31 or arr.max() >= 2**31):
            raise ValueError(f"input {name!r}: integer values do not fit in int32")
    else:
        ok = arr.dtype == want.np
    if not ok:
        hint = f" (convert with .astype(np.{want.np.name}))" if want is not dt.bfloat16 else \
            " (bfloat16 inputs are given as float32 arrays)"
        raise TypeError(f"input {name!r}: expected dtype {want.name}, got {arr.dtype}{hint}")
    return np.ascontiguousarray(dt.to_storage(arr, want))


def bind(graph, needed: list, values: dict) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Validate ``values`` for the ``needed`` input nodes; return converted arrays and dim bindings."""
    unknown = sorted(set(values) - set(graph.inputs))
    if unknown:
        raise TypeError(f"unexpected input(s) {unknown}; this graph's inputs are {sorted(graph.inputs)}")
    missing = [n.arg for n in needed if n.arg not in values]
    if missing:
        raise TypeError(f"missing input(s) {missing}")
    arrays = {n.arg: _convert(n.arg, values[n.arg], n) for n in needed}
    env: dict[str, int] = {}
    source: dict[str, str] = {}

    def mismatch(name, i, d, got):
        expected = evaluate(d, env)
        via = ", ".join(f"{v}={env[v]} from input {source[v]!r}" for v in sorted(free_vars(d)) if v in source)
        raise ValueError(f"input {name!r}: dim {i} should be {d} = {expected}" + (f" ({via})" if via else "")
                         + f", but the array has shape {arrays[name].shape}")

    for stage in ("vars", "linear", "check"):
        for n in needed:
            for i, (d, got) in enumerate(zip(n.shape, arrays[n.arg].shape)):
                unbound = free_vars(d) - set(env)
                if stage == "vars" and isinstance(d, int) and d != got:
                    raise ValueError(f"input {n.arg!r}: dim {i} should be {d}, but the array has shape "
                                     f"{arrays[n.arg].shape}")
                if stage != "check" and len(unbound) == 1:
                    solved = solve_linear(d, got)
                    if solved is not None and (stage == "linear" or str(d) == solved[0]):
                        env[solved[0]], source[solved[0]] = solved[1], n.arg
                if stage == "check":
                    if unbound:
                        raise ValueError(f"input {n.arg!r}: cannot infer {sorted(unbound)} from dim {i} ({d})")
                    if evaluate(d, env) != got:
                        mismatch(n.arg, i, d, got)
    for v, x in env.items():
        if x < 0:
            raise ValueError(f"symbolic dim {v} bound to the negative value {x} from input {source[v]!r}")
    return arrays, env

"""The one lowering from the kernel graph's kinds to the kernel IR, for every target.

``lower(kernel, target, memory, name, option)`` makes the IR kernels computing one kernel-graph
kernel on ``target`` (a :class:`~luminal.codegen.target.Target` record: how work maps onto the
machine, what it has), its buffers placed by the backend's ``memory`` (``work.py``'s protocol).
``options(kernel, target, memory)`` lists the schedules the kernel may take there, the cost model's
pick first; each is data (a name), and every one of them can be built, so a search can time them.

| kind        | options (``cpu``)                | options (``cuda``)
|-------------|----------------------------------|----------------------------------------------
| elementwise | items                            | items
| reduce      | thread, split                    | row / warp / thread / split (``reduce.options``)
| matmul      | library, thread (masked: thread) | gemv / warp / mma / tiled / blocked / thread / row
| gather      | items                            | items
| scatter_add | lines                            | atomics, lines

A run of kernels over the same rows (reductions, then the elementwise kernel using their results:
softmax, LayerNorm, RMSNorm) may instead be lowered as one kernel, ``rows.lower``, which each backend
does where ``rows.runs`` finds one and its memory plan allows.

The per-element code, its dtype rules and masked reads are ``codegen/lower.py``'s, shared by every
schedule; a target differs in its record, its op table and its renderer, never in a lowering.
"""

from __future__ import annotations

from luminal.codegen.lowering import elementwise, indexing, matmul, reduce
from luminal.codegen.lowering.epilogue import epilogue

__all__ = ["epilogue", "lower", "options"]


def options(k, target, memory) -> tuple:
    """The schedules kernel-graph kernel ``k`` may take on ``target``, the default first."""
    kind = k.kind
    if kind in ("elementwise", "gather"):
        return ("items",)
    if kind == "reduce":
        return reduce.options(k, target, memory)
    if kind == "matmul":
        return matmul.options(k, target, memory)
    if kind == "scatter_add":
        return indexing.scatter_options(k, target, memory)
    raise NotImplementedError(f"{target.name} lowering: no lowering for kernel kind {kind!r}")


def lower(k, target, memory, name: str, option: str | None = None) -> list:
    """The IR kernels computing ``k`` on ``target`` in schedule ``option`` (None: the default)."""
    choices = options(k, target, memory)
    option = choices[0] if option is None else option
    if option not in choices:
        raise ValueError(f"{target.name}: a {k.kind} kernel has no schedule {option!r} here (options: {choices})")
    if k.kind == "elementwise":
        return elementwise.elementwise(k, target, memory, name)
    if k.kind == "gather":
        return indexing.gather(k, target, memory, name)
    if k.kind == "reduce":
        return reduce.lower(k, target, memory, name, option)
    if k.kind == "matmul":
        return matmul.lower(k, target, memory, name, option)
    return indexing.scatter_add(k, target, memory, name, option)

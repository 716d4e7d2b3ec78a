"""A product whose contraction has one element is elementwise: ``Acc = a * b``, no GEMM.

The e-graph finds a matmul in every broadcast product summed over an axis, the size-1 axes included:
a Llama step writes its key and value rows into the KV cache as ``(write @ k).where(written, cache)``,
where ``write`` is the (capacity, 1) one-hot map of the step's position, so the product is an outer
product over the whole cache. As a GEMM, BLAS writes all ``capacity x head_dim`` products into a
scratch and the epilogue's select reads them back: most of a small model's decode step at a capacity
of 1024. As an elementwise kernel the product is computed where it is used, and the select's in-place
store into the cache (``plan.py``: ``_stores_last``) then writes only the rows ``written`` marks.

The matmul's operands become the kernel's first two inputs (their views without the contracted
axes, which take index 0), its epilogue inputs the next ones, and ``Acc`` the product of the two
loads in the matmul's accumulator dtype.
"""

from __future__ import annotations

import dataclasses

from luminal.core.kernel_graph import Expr, Kernel, KernelGraph
from luminal.core.view import View


def outer_products(kg: KernelGraph) -> KernelGraph:
    """``kg`` with every matmul over a contraction of one element made an elementwise kernel, in the
    program and in every rolled loop's body."""
    bodies = {}
    for body in kg.bodies():
        kernels = [_elementwise(k) or k for k in body.kernels]
        if any(a is not b for a, b in zip(kernels, body.kernels)):
            bodies[id(body)] = dataclasses.replace(body, kernels=kernels)
    kernels = [_elementwise(k) or k for k in kg.kernels]
    if not bodies and all(a is b for a, b in zip(kernels, kg.kernels)):
        return kg
    kernels = [dataclasses.replace(k, body=bodies[id(k.body)]) if k.kind == "call" and id(k.body) in bodies else k
               for k in kernels]
    return dataclasses.replace(kg, kernels=kernels)


def _elementwise(k: Kernel) -> Kernel | None:
    """Matmul ``k`` as an elementwise kernel, or None when it is no matmul over a contraction of one
    element (a static size 1, read at index 0)."""
    if k.kind != "matmul" or not k.axes or any(not isinstance(k.domain[a], int) or k.domain[a] != 1 for a in k.axes):
        return None
    views = []
    for _, v in k.inputs:
        view = _without(v, k.axes)
        if view is None:
            return None
        views.append(view)
    acc = k.acc_dtype
    loads = [Expr("Load", (), i, b.dtype) for i, (b, _) in enumerate(k.inputs)]
    loads = [x if x.dtype is acc else Expr("Cast", (x,), acc, acc) for x in loads]
    product = Expr("Mul", tuple(loads), None, acc)
    memo: dict = {}

    def rewrite(e: Expr) -> Expr:
        got = memo.get(id(e))
        if got is None:
            if e.op == "Acc":
                got = product
            elif e.op == "Load":
                got = Expr("Load", (), e.arg + 2, e.dtype)
            else:
                got = Expr(e.op, tuple(rewrite(a) for a in e.args), e.arg, e.dtype)
            memo[id(e)] = got
        return got

    domain = tuple(d for i, d in enumerate(k.domain) if i not in k.axes)
    inputs = [(b, v) for (b, _), v in zip(k.inputs, views)] + list(k.epilogue_inputs)
    return Kernel("elementwise", domain, inputs, [(b, rewrite(e)) for b, e in k.outputs], fused=k.fused)


def _without(v: View, axes: tuple) -> View | None:
    """View ``v`` with its size-1 ``axes`` fixed at index 0 (removed), or None when its mask leaves that
    index out (the read would be its pad value: left to the matmul)."""
    if v.mask is not None and any(not (v.mask[a][0] <= 0 < v.mask[a][1]) for a in axes):
        return None
    keep = [i for i in range(len(v.shape)) if i not in axes]
    mask = None if v.mask is None else tuple(v.mask[i] for i in keep)
    return View(tuple(v.shape[i] for i in keep), tuple(v.strides[i] for i in keep), v.offset, mask, v.pad)

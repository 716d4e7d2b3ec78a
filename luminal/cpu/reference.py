"""The reference interpreter: executes the primitive graph with numpy, op by op.

It is the semantic ground truth every other backend is tested against, so it does exactly what the
table in ``frontend/primitives.py`` says and nothing clever, with one exception: a ``SumReduce`` of a
``Mul`` that nothing else reads is evaluated as one ``einsum`` contraction, so that matmuls written as
broadcast-multiply + sum do not materialise the broadcast product.
"""

from __future__ import annotations

import numpy as np

from ..frontend import dtype as dt
from ..frontend.symbolic import evaluate
from ..frontend.view import View

_UNARY = {"Log2": np.log2, "Exp2": np.exp2, "Sin": np.sin, "Sqrt": np.sqrt, "Recip": np.reciprocal}
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def read(buf: np.ndarray, view: View, env: dict[str, int]) -> np.ndarray:
    """Materialise ``view`` over the contiguous buffer ``buf`` (zero-copy when unmasked)."""
    shape = tuple(evaluate(d, env) for d in view.shape)
    strides = [evaluate(s, env) for s in view.strides]
    offset = evaluate(view.offset, env)
    flat = buf.reshape(-1)
    if view.mask is not None:
        box = [(max(0, min(evaluate(lo, env), n)), max(0, min(evaluate(hi, env), n)))
               for (lo, hi), n in zip(view.mask, shape)]
        out = np.full(shape, view.pad, dtype=buf.dtype)
        if all(hi > lo for lo, hi in box):
            inner = View(tuple(hi - lo for lo, hi in box), tuple(strides),
                         offset + sum(lo * s for (lo, _), s in zip(box, strides)))
            out[tuple(slice(lo, hi) for lo, hi in box)] = read(buf, inner, {})
        return out
    if any(n == 0 for n in shape):
        return np.empty(shape, dtype=buf.dtype)
    lo = offset + sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
    hi = offset + sum(max(0, (n - 1) * s) for n, s in zip(shape, strides))
    if lo < 0 or hi >= flat.size:
        raise IndexError(f"view {view} reads outside a buffer of {flat.size} elements")
    item = flat.itemsize
    return np.lib.stride_tricks.as_strided(flat[offset:], shape, [s * item for s in strides], writeable=False)


def _compute_dtype(d: dt.DType):
    return np.float32 if d in (dt.float16, dt.bfloat16) else d.np


class ReferenceInterpreter:
    def __init__(self, graph, outputs):
        self.graph = graph
        self.outputs = [(t.node, t.layout) for t in outputs]
        needed: set[int] = set()
        stack = [n for n, _ in self.outputs]
        while stack:
            n = stack.pop()
            if n.id not in needed:
                needed.add(n.id)
                stack.extend(s for s, _ in n.srcs)
        self.order = [graph.nodes[i] for i in sorted(needed)]
        self.inputs = [n for n in self.order if n.op == "Input"]
        readers: dict[int, list] = {}
        for n in self.order:
            for s, v in n.srcs:
                readers.setdefault(s.id, []).append((n, v))
        outs = {n.id for n, _ in self.outputs}
        # Muls read only by SumReduces through the identity view are folded into a contraction.
        self.fused = {n.id for n in self.order if n.op == "Mul" and n.id not in outs and all(
            r.op == "SumReduce" and v.is_contiguous() for r, v in readers.get(n.id, []))}

    def __call__(self, arrays: dict[str, np.ndarray], env: dict[str, int]) -> list[np.ndarray]:
        vals: dict[int, np.ndarray] = {}
        with np.errstate(all="ignore"):
            for n in self.order:
                if n.id in self.fused:
                    continue
                v = self._eval(n, vals, arrays, env)
                # buffers are contiguous (views index them flat); einsum and friends may return strided results
                vals[n.id] = v if v.flags.c_contiguous else np.array(v, order="C")
            # np.array, not np.ascontiguousarray: the latter turns 0-d results into shape (1,)
            return [np.array(read(vals[n.id], v, env), order="C") for n, v in self.outputs]

    def _eval(self, n, vals, arrays, env) -> np.ndarray:
        op, d = n.op, n.dtype
        if op == "Input":
            return arrays[n.arg]
        if op == "Constant":
            if n.arg.scalar is None:
                return self.graph.constants[n.arg]
            return np.asarray(evaluate(n.arg.scalar, env) if n.arg.digest == "sym" else n.arg.scalar, d.np)
        if op == "Arange":
            return np.arange(evaluate(n.arg, env), dtype=np.int32)
        if op == "SumReduce" and n.srcs[0][0].id in self.fused:
            return dt.to_storage(self._contract(n, vals, env), d)
        xs = [read(vals[s.id], v, env) for s, v in n.srcs]
        if op == "Copy":
            return np.array(xs[0], order="C")
        if op == "Cast":
            return _cast(xs[0], n.srcs[0][0].dtype, d)
        if op in ("Where", "Gather", "ScatterAdd"):
            return getattr(self, "_" + op.lower())(n, xs)
        if n.srcs[0][0].dtype is dt.float16:  # half math runs in float32, rounded once at the end
            xs = [x.astype(np.float32) for x in xs]
        if op in _UNARY:
            out = _UNARY[op](xs[0])
        elif op == "Add":
            out = np.logical_or(*xs) if d.kind == "b" else np.add(*xs)
        elif op == "Mul":
            out = np.logical_and(*xs) if d.kind == "b" else np.multiply(*xs)
        elif op == "Mod":
            out = np.fmod(*xs)
        elif op == "Max":
            out = np.maximum(*xs)
        elif op == "LessThan":
            out = np.less(*xs)
        elif op == "SumReduce":
            out = np.sum(xs[0], axis=n.arg, dtype=np.int32 if d.kind == "i" else None)
        elif op == "MaxReduce":
            if xs[0].shape[n.arg] == 0:
                raise ValueError(f"MaxReduce over an empty axis (node {n})")
            out = np.max(xs[0], axis=n.arg)
        else:
            raise NotImplementedError(f"reference interpreter has no rule for {op}")
        return dt.to_storage(np.asarray(out), d)

    def _where(self, n, xs):
        return dt.to_storage(np.where(*xs), n.dtype)

    @staticmethod
    def _check_index(idx, size, op):
        if idx.size and (idx.min() < 0 or idx.max() >= size):
            bad = idx[(idx < 0) | (idx >= size)].flat[0]
            raise IndexError(f"{op}: index {bad} is out of range for a dim of size {size}")

    def _gather(self, n, xs):
        x, idx = xs
        self._check_index(idx, x.shape[n.arg], "gather")
        return np.ascontiguousarray(np.take_along_axis(x, idx.astype(np.intp), axis=n.arg))

    def _scatteradd(self, n, xs):
        dst, idx, src = xs
        self._check_index(idx, dst.shape[n.arg], "scatter_add")
        out = dst.astype(_compute_dtype(n.dtype), copy=True)
        grid = list(np.indices(idx.shape, sparse=True))
        grid[n.arg] = idx.astype(np.intp)
        if n.dtype.kind == "b":
            np.logical_or.at(out, tuple(grid), src)
        else:
            np.add.at(out, tuple(grid), src.astype(out.dtype))
        return dt.to_storage(out, n.dtype)

    def _contract(self, n, vals, env) -> np.ndarray:
        mul = n.srcs[0][0]
        ops = [read(vals[s.id], v, env) for s, v in mul.srcs]
        cd = _compute_dtype(mul.dtype)
        ndim = len(mul.shape)
        letters = _LETTERS[:ndim]
        subs, arrs = [], []
        for k, a in enumerate(ops):
            keep = [i for i in range(ndim) if not (a.strides[i] == 0 and a.shape[i] > 1 and k == 1)
                    and not (a.strides[i] == 0 and a.shape[i] > 1 and k == 0 and ops[1].strides[i] != 0)]
            a = a[tuple(slice(None) if i in keep else 0 for i in range(ndim))]
            subs.append("".join(letters[i] for i in keep))
            arrs.append(a.astype(cd, copy=False))
        out_letters = letters[:n.arg] + letters[n.arg + 1:]
        if mul.dtype.kind == "b":
            return np.einsum(f"{subs[0]},{subs[1]}->{out_letters}", *[x.astype(np.int32) for x in arrs]) > 0
        return np.einsum(f"{subs[0]},{subs[1]}->{out_letters}", *arrs, optimize=True)


def _cast(x: np.ndarray, src: dt.DType, dst: dt.DType) -> np.ndarray:
    if dst.kind == "b":
        return x != 0
    if dst.kind == "i" and src.is_float:
        return np.trunc(x).astype(np.int32)
    return dt.to_storage(x.astype(_compute_dtype(dst)), dst)

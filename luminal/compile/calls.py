"""Calls in the kernel graph: a loop body's kernels are built once and copied for every call.

A rolled loop reaches the kernel stage as Call terms (``term.py``), one call per trip. Cutting each
trip's terms into kernels again would cost the whole unrolled program; instead the body is cut once,
into a :class:`Fragment` over buffers of its own, and every call copies its kernels with the
buffers relinked:

- the body's Input placeholders become the call's argument buffers;
- its leaves (inputs, states, constants shared by every trip) become the program's own leaf buffers;
- every other buffer becomes a fresh temporary of the program (the memory plan then packs them).

Kernels that read no argument, directly or through other kernels of the body (a causal mask, a
symbolic scalar), compute the same values in every trip: they are emitted once, at the first call,
and their buffers shared by every later one.
"""

from __future__ import annotations

from .kernel_graph import Kernel
from .term import Body, topological


class Fragment:
    """The kernels of one Body, over buffers of the body's own (see the module docstring)."""

    def __init__(self, body: Body, parent):
        from .kernels import KernelBuilder

        kb = KernelBuilder(topological(list(body.outputs)), body.outputs, parent.input_kinds, parent.constants)
        kb.decide()
        for d in kb.merge(kb.drafts()):
            kb.emit(d)
        self.outputs = [kb.buffer(t) for t in body.outputs]
        arg_index = {t.arg: i for i, t in enumerate(body.inputs)}
        self.args: dict = {}  # fragment buffer -> index of the call argument it stands for
        self.fixed: dict = {}  # fragment buffer -> program buffer: leaves, then the invariant kernels' outputs
        for t, b in kb.buffer_of.items():
            if t.op == "Input" and t.arg in arg_index:
                self.args[b] = arg_index[t.arg]
            elif b.kind != "temp":  # a leaf's buffer (kernel_graph.BUFFER_KINDS)
                self.fixed[b] = parent.buffer(t)
        varies = set(self.args)
        self.originals = kb.kernels
        self.invariant: list[Kernel] = []
        self.kernels: list[Kernel] = []  # the ones copied per call
        for k in kb.kernels:
            if any(b in varies for b, _ in k.inputs) or any(b in varies for b, _ in k.epilogue_inputs):
                varies.update(b for b, _ in k.outputs)
                self.kernels.append(k)
            else:
                self.invariant.append(k)
        parent.expr_args += kb.expr_args

    def call(self, parent, args: list) -> list:
        """Append one call's kernels to ``parent`` (a KernelBuilder), reading the argument buffers
        ``args``; returns the buffers of the body's outputs."""
        links = dict(self.fixed)
        for b, i in self.args.items():
            links[b] = args[i]
        if self.invariant:
            for k in self.invariant:
                parent.kernels.append(_relinked(k, links, parent))
            self.fixed.update((b, links[b]) for k in self.invariant for b, _ in k.outputs)
            self.invariant = []
        for k in self.kernels:
            parent.kernels.append(_relinked(k, links, parent))
        return [links[b] for b in self.outputs]


def _relinked(k: Kernel, links: dict, parent) -> Kernel:
    """``k`` over the program's buffers: each fragment buffer through ``links``; the ones it writes
    first get fresh temporaries of the program."""
    outs = []
    for b, e in k.outputs:
        nb = links.get(b)
        if nb is None:
            nb = links[b] = parent._new_buffer(b.shape, b.dtype)
        outs.append((nb, e))
    copy = Kernel(k.kind, k.domain, [(links[b], v) for b, v in k.inputs], outs, k.axes, k.reduce_op, k.prologue,
                  k.acc_dtype, [(links[b], v) for b, v in k.epilogue_inputs], k.fused)
    parent.copies.add(id(copy))
    return copy

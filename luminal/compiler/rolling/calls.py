"""Calls in the kernel graph: a loop body's kernels are built once and called per trip.

A rolled loop reaches the kernel stage as Call terms (``term.py``), one call per trip, of a body of
terms (``body.py``). Cutting each trip's terms into kernels again would cost the whole unrolled
program; instead the body is cut once, over buffers of its own (:class:`BodyKernels`), into a
``kernel_graph.Body``, and every trip becomes one ``call`` kernel of it:

- the body's Input placeholders are its params, bound to the call's argument buffers;
- its leaves (inputs, states, constants shared by every trip) are the program's own leaf buffers;
- the buffers of its outputs are its results, bound to fresh temporaries of the program per call;
  a packed output's buffer (``body.py``) is bound to its part of the call's pack instead;
- every other buffer is scratch: it lives within one call (the memory plan places it once, in
  slots every call reuses).

Kernels that read no argument, directly or through other kernels of the body (a causal mask, a
symbolic scalar), compute the same values in every trip: they are emitted once, before the first
call, and the body reads their buffers (every call lists them among its inputs, after the
arguments, so that they live as long as a call may read them).
"""

from __future__ import annotations

from luminal.compiler.term import topological
from luminal.core.kernel_graph import Body, Buffer, Kernel, relinked
from luminal.core.view import View


class BodyKernels:
    """A body of terms (``body.py``) cut into kernels: ``body``, a ``kernel_graph.Body``, and how a
    call binds it (see the module docstring). Made at the body's first call: it emits the invariant
    kernels into ``parent`` (a KernelBuilder) there."""

    def __init__(self, body, parent):
        # a builder of the parent's own class (``kernels.KernelBuilder``), which imports this module:
        # named through ``parent``, so that this module never imports kernels.py back
        kb = type(parent)(topological(list(body.outputs)), body.outputs, parent.input_kinds, parent.constants,
                          parent.ids)
        kb.decide()
        for d in kb.merge(kb.drafts()):
            kb.emit(d)
        parent.expr_args += kb.expr_args
        arg_index = {t.arg: i for i, t in enumerate(body.inputs)}
        # (first: a body output that is one of its inputs, read by no kernel of the body, gets its buffer
        # here, and is then an argument the call returns as it is: a body of copies the rewrites removed)
        outputs = [kb.buffer(t) for t in body.outputs]
        param_of: dict = {}  # buffer of the body's own -> index of the call argument it stands for
        links: dict = {}  # buffer of the body's own -> program buffer: leaves, then the invariant kernels' outputs
        for t, b in kb.buffer_of.items():
            if t.op == "Input" and t.arg in arg_index:
                param_of[b] = arg_index[t.arg]
            elif b.kind != "temp":  # a leaf's buffer (kernel_graph.BUFFER_KINDS)
                links[b] = parent.buffer(t)
        varies = set(param_of)
        per_call: list[Kernel] = []
        for k in kb.kernels:
            if any(b in varies for b, _ in k.inputs) or any(b in varies for b, _ in k.epilogue_inputs):
                varies.update(b for b, _ in k.outputs)
                per_call.append(k)
            else:  # the same values in every trip: computed once, into buffers of the program
                for b, _ in k.outputs:
                    links[b] = parent._new_buffer(b.shape, b.dtype)
                parent.kernels.append(relinked(k, links))
        written = list(dict.fromkeys(b for k in per_call for b, _ in k.outputs))
        packed = {outputs[i]: g for g, p in enumerate(body.packs) for i in p.members}
        assert all(b in varies and b not in param_of for b in packed), "a packed output not computed per call"
        results = list(dict.fromkeys(b for b in outputs if b in varies and b not in param_of and b not in packed))
        taken = set(results) | set(packed)
        params = sorted(param_of, key=param_of.get)
        self.arg_index = [param_of[b] for b in params]
        kernels = [relinked(k, links) for k in per_call]
        packs = [[(outputs[i], off) for i, off in zip(p.members, p.offsets)] for p in body.packs]
        self.packs = body.packs
        self.body = Body(body.name, params, results, [b for b in written if b not in taken], kernels, packs)
        # the program's temps the body reads (the invariant kernels' outputs): inputs of every call
        read = {b for k in kernels for b, _ in k.inputs + k.epilogue_inputs}
        self.shared = [(b, View.contiguous(b.shape)) for b in links.values() if b.kind == "temp" and b in read]
        # what a call returns for each body output: ("param", i), ("packed", pack), ("result", i) or
        # ("fixed", buffer)
        self.returns = [("param", param_of[b]) if b in param_of else ("packed", packed[b]) if b in packed else
                        ("result", results.index(b)) if b in taken else ("fixed", links[b]) for b in outputs]

    def call(self, parent, args: list, views: list) -> list:
        """Append one call kernel to ``parent`` (a KernelBuilder) on the argument buffers ``args``
        (read through ``views``); returns the buffers of the body's outputs (None for a packed one),
        then of its packs: what the call's Out terms hold, by their arg."""
        ids = parent.ids
        outs = [Buffer(next(ids), b.shape, b.dtype) for b in self.body.results]  # temps (``_new_buffer``)
        packs = [Buffer(next(ids), (p.size,), p.dtype) for p in self.packs]
        parent.buffers += outs
        parent.buffers += packs
        parent.kernels.append(Kernel("call", (), [(args[i], views[i]) for i in self.arg_index] + self.shared,
                                     [(b, None) for b in outs + packs], fused=(self.body.name,), body=self.body))
        return [args[x] if how == "param" else outs[x] if how == "result" else None if how == "packed" else x
                for how, x in self.returns] + packs

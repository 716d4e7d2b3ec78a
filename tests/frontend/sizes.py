"""``check_sizes``: the parity check of ``parity.check`` for graphs with symbolic dims, where ONE
compiled graph is run at several sizes (so nothing may be specialised to the first size). Gradients
are checked as in ``parity.check`` (one backward graph, built once with the symbolic shapes)."""

from __future__ import annotations

from parity import _compare_grads, _luminal_grads, compare_outputs, to_torch

import luminal as lm


def check_sizes(op, make, shapes, *, backend, sizes=(5, 2), dtypes=None, torch_op=None, pre=None, grad=True):
    """``make(n)`` gives the input arrays for symbolic size ``n``; ``shapes`` are the graph shapes."""
    first = make(sizes[0])
    dtypes = dtypes or [lm.core.dtype.as_dtype(a.dtype) for a in first]
    g = lm.Graph()
    xs_in = [g.input(f"x{i}", s, dtype=d) for i, (s, d) in enumerate(zip(shapes, dtypes, strict=True))]
    xs = [pre(x) for x in xs_in] if pre is not None else xs_in
    out = op(*xs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    diff = [i for i, d in enumerate(dtypes) if d.is_float] if grad else []
    float_outs = [k for k, o in enumerate(outs) if o.dtype.is_float]
    grads = _luminal_grads(outs, float_outs, [xs_in[i] for i in diff]) if diff and float_outs else None
    f = lm.compile(list(outs) + [x for x in (grads or []) if x is not None], backend=backend)
    for n in sizes:
        inputs = make(n)
        leaves = [to_torch(a, d) for a, d in zip(inputs, dtypes, strict=True)]
        for i in diff:
            leaves[i].requires_grad_(True)
        ts = [pre(t) for t in leaves] if pre is not None else leaves
        ref = (torch_op or op)(*ts)
        refs = ref if isinstance(ref, (tuple, list)) else (ref,)
        got = f(**{f"x{i}": a for i, a in enumerate(inputs)})
        got = got if isinstance(got, tuple) else (got,)
        if grads is not None:
            _compare_grads(got[len(outs):], grads, refs, float_outs, [leaves[i] for i in diff],
                           [dtypes[i] for i in diff], None, None, False, where=f"size {n}, ")
        compare_outputs(outs, got[:len(outs)], refs, where=f"size {n}, ")

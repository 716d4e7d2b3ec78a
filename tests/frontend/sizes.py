"""``check_sizes``: the parity check of ``parity.check`` for graphs with symbolic dims, where ONE
compiled graph is run at several sizes (so nothing may be specialised to the first size)."""

from __future__ import annotations

import numpy as np
import torch
from parity import EXPECTED_DTYPE, TOLERANCE, from_torch, to_torch

import luminal as lm


def check_sizes(op, make, shapes, *, backend, sizes=(5, 2), dtypes=None, torch_op=None, pre=None):
    """``make(n)`` gives the input arrays for symbolic size ``n``; ``shapes`` are the graph shapes."""
    first = make(sizes[0])
    dtypes = dtypes or [lm.frontend.dtype.as_dtype(a.dtype) for a in first]
    g = lm.Graph()
    xs = [g.input(f"x{i}", s, dtype=d) for i, (s, d) in enumerate(zip(shapes, dtypes, strict=True))]
    if pre is not None:
        xs = [pre(x) for x in xs]
    out = op(*xs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    f = lm.compile(list(outs), backend=backend)
    for n in sizes:
        inputs = make(n)
        ts = [to_torch(a, d) for a, d in zip(inputs, dtypes, strict=True)]
        if pre is not None:
            ts = [pre(t) for t in ts]
        ref = (torch_op or op)(*ts)
        refs = ref if isinstance(ref, (tuple, list)) else (ref,)
        got = f(**{f"x{i}": a for i, a in enumerate(inputs)})
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(refs)
        for k, (o, g_arr, r) in enumerate(zip(outs, got, refs, strict=True)):
            r = r if isinstance(r, torch.Tensor) else torch.tensor(r)
            want_dtype = EXPECTED_DTYPE[r.dtype]
            assert o.dtype is want_dtype, f"output {k}: dtype {o.dtype} vs torch's {r.dtype}"
            want = from_torch(r)
            assert g_arr.shape == want.shape, f"size {n}, output {k}: shape {g_arr.shape} vs {want.shape}"
            rt, at = TOLERANCE[want_dtype]
            np.testing.assert_allclose(g_arr.astype(np.float64) if want_dtype.is_float else g_arr,
                                       want.astype(np.float64) if want_dtype.is_float else want,
                                       rtol=rt, atol=at, equal_nan=True, err_msg=f"size {n}, output {k}")

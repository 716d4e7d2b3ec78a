"""The shared parity harness: run the same op through luminal and through torch, compare.

``check(op, inputs)`` builds a graph whose inputs have the given arrays' shapes and dtypes (or the
symbolic ``shapes``), applies ``op`` to the graph tensors and, separately, ``torch_op`` (default: the
same ``op``) to torch tensors, compiles for ``backend`` and compares shape, dtype and values with
explicit tolerances. ``pre`` transforms every input on both sides before the op (permute, slice,
expand...) so ops are also tested on non-contiguous views. Designed so that gradient checks slot in:
the torch side already builds leaf tensors with ``requires_grad`` where ``grad=True`` is asked.
"""

from __future__ import annotations

import numpy as np
import torch

import luminal as lm

BACKENDS = ("reference", "cpu")

TORCH_DTYPE = {
    lm.float16: torch.float16, lm.bfloat16: torch.bfloat16, lm.float32: torch.float32,
    lm.float64: torch.float64, lm.int32: torch.int32, lm.bool: torch.bool,
}
# torch produces int64 where we produce int32 (integer sums, indices)
EXPECTED_DTYPE = {torch.int64: lm.int32, **{v: k for k, v in TORCH_DTYPE.items()}}
TOLERANCE = {  # (rtol, atol) per result dtype
    lm.float64: (1e-6, 1e-6), lm.float32: (1e-5, 1e-5), lm.float16: (2e-3, 2e-3),
    lm.bfloat16: (1.6e-2, 1.6e-2), lm.int32: (0, 0), lm.bool: (0, 0),
}


def rand(shape, dtype=lm.float32, seed=0, low=-2.0, high=2.0) -> np.ndarray:
    """Seeded random input of an lm dtype (bfloat16 values arrive as bf16-exact float32)."""
    rng = np.random.default_rng(seed)
    if dtype is lm.bool:
        return rng.random(shape) < 0.5
    if dtype is lm.int32:
        return rng.integers(int(low), int(high) + 1, size=shape).astype(np.int32)
    x = rng.uniform(low, high, size=shape)
    return lm.frontend.dtype.to_storage(x, dtype)


def to_torch(a: np.ndarray, dtype) -> torch.Tensor:
    t = torch.from_numpy(np.array(a, copy=True))  # a copy keeps 0-d arrays 0-d
    return t.to(TORCH_DTYPE[dtype])


def from_torch(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    if t.dtype in (torch.bfloat16,):
        t = t.float()
    if t.dtype == torch.int64:
        t = t.to(torch.int32)
    return t.numpy()


def check(op, inputs, *, dtypes=None, torch_op=None, backend="reference", shapes=None, pre=None,
          rtol=None, atol=None, equal_nan=True):
    """Compare ``op`` on luminal against ``torch_op`` on torch. ``inputs``: list of numpy arrays.

    dtypes: lm dtype per input (default inferred; needed for bfloat16);
    shapes: graph input shapes per input (ints or symbolic names), default the arrays' shapes;
    pre: function applied to each input tensor (both sides) before ``op``.
    Returns the luminal outputs.
    """
    dtypes = dtypes or [lm.frontend.dtype.as_dtype(a.dtype) for a in inputs]
    shapes = shapes or [a.shape for a in inputs]
    g = lm.Graph()
    xs = [g.input(f"x{i}", s, dtype=d) for i, (s, d) in enumerate(zip(shapes, dtypes))]
    ts = [to_torch(a, d) for a, d in zip(inputs, dtypes)]
    if pre is not None:
        xs, ts = [pre(x) for x in xs], [pre(t) for t in ts]
    out = op(*xs)
    ref = (torch_op or op)(*ts)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    assert len(outs) == len(refs), f"{len(outs)} outputs vs torch's {len(refs)}"
    f = lm.compile(list(outs), backend=backend)
    got = f(**{f"x{i}": a for i, a in enumerate(inputs)})
    got = got if isinstance(got, tuple) else (got,)
    for k, (o, g_arr, r) in enumerate(zip(outs, got, refs)):
        if not isinstance(r, torch.Tensor):
            r = torch.tensor(r)
        want_dtype = EXPECTED_DTYPE[r.dtype]
        assert o.dtype is want_dtype, f"output {k}: dtype {o.dtype} vs torch's {r.dtype}"
        want = from_torch(r)
        assert g_arr.shape == want.shape, f"output {k}: shape {g_arr.shape} vs torch's {want.shape}"
        rt, at = TOLERANCE[want_dtype]
        np.testing.assert_allclose(
            g_arr.astype(np.float64) if want_dtype.is_float else g_arr,
            want.astype(np.float64) if want_dtype.is_float else want,
            rtol=rt if rtol is None else rtol, atol=at if atol is None else atol,
            equal_nan=equal_nan, err_msg=f"output {k}")
    return got

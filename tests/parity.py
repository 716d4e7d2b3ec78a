"""The shared parity harness: run the same op through luminal and through torch, compare.

``check(op, inputs)`` builds a graph whose inputs have the given arrays' shapes and dtypes (or the
symbolic ``shapes``), applies ``op`` to the graph tensors and, separately, ``torch_op`` (default: the
same ``op``) to torch tensors, compiles for ``backend`` and compares shape, dtype and values with
explicit tolerances. ``pre`` transforms every input on both sides before the op (permute, slice,
expand...) so ops are also tested on non-contiguous views.

Gradients are checked too, by default, whenever the op has float inputs and float outputs: the sum of
every float output is differentiated with ``train.grad`` and with ``torch.autograd``, and the
gradients of the float inputs compared (``GRAD_TOLERANCE``). Where luminal reports that the output
does not depend differentiably on an input (comparisons, rounding), torch's gradient must be zero.
"""

from __future__ import annotations

import numpy as np
import torch

import luminal as lm
from luminal import train

# every registered backend that can run here runs every parity test (``cuda`` where a GPU is)
BACKENDS = tuple(b for b in lm.backend_names() if b != "cuda" or lm.cuda.is_available())

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


GRAD_TOLERANCE = {  # (rtol, atol) per input dtype: backward passes accumulate more rounding
    lm.float64: (1e-6, 1e-6), lm.float32: (1e-4, 1e-5), lm.float16: (1e-2, 1e-2), lm.bfloat16: (5e-2, 5e-2),
}


def rand(shape, dtype=lm.float32, seed=0, low=-2.0, high=2.0) -> np.ndarray:
    """Seeded random input of an lm dtype (bfloat16 values arrive as bf16-exact float32)."""
    rng = np.random.default_rng(seed)
    if dtype is lm.bool:
        return rng.random(shape) < 0.5
    if dtype is lm.int32:
        return rng.integers(int(low), int(high) + 1, size=shape).astype(np.int32)
    x = rng.uniform(low, high, size=shape)
    return lm.core.dtype.to_storage(x, dtype)


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
          rtol=None, atol=None, equal_nan=True, grad=True, grad_rtol=None, grad_atol=None):
    """Compare ``op`` on luminal against ``torch_op`` on torch. ``inputs``: list of numpy arrays.

    dtypes: lm dtype per input (default inferred; needed for bfloat16);
    shapes: graph input shapes per input (ints or symbolic names), default the arrays' shapes;
    pre: function applied to each input tensor (both sides) before ``op``;
    grad: also compare gradients (see the module docstring); "finite": only at finite input elements
    (special-value tables: gradients at +-inf/NaN inputs are not specified by torch's docs either).
    Returns the luminal outputs.
    """
    dtypes = dtypes or [lm.core.dtype.as_dtype(a.dtype) for a in inputs]
    shapes = shapes or [a.shape for a in inputs]
    g = lm.Graph()
    xs = [g.input(f"x{i}", s, dtype=d) for i, (s, d) in enumerate(zip(shapes, dtypes))]
    leaves = [to_torch(a, d) for a, d in zip(inputs, dtypes)]
    diff = [i for i, d in enumerate(dtypes) if d.is_float] if grad else []
    for i in diff:
        leaves[i].requires_grad_(True)
    xs_in, ts = xs, leaves
    if pre is not None:
        xs, ts = [pre(x) for x in xs], [pre(t) for t in ts]
    out = op(*xs)
    ref = (torch_op or op)(*ts)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    assert len(outs) == len(refs), f"{len(outs)} outputs vs torch's {len(refs)}"
    float_outs = [k for k, o in enumerate(outs) if o.dtype.is_float]
    grads = _luminal_grads(outs, float_outs, [xs_in[i] for i in diff]) if diff and float_outs else None
    n_out = len(outs)
    f = lm.compile(list(outs) + [x for x in (grads or []) if x is not None], backend=backend)
    got = f(**{f"x{i}": a for i, a in enumerate(inputs)})
    got = got if isinstance(got, tuple) else (got,)
    if grads is not None:
        _compare_grads(got[n_out:], grads, refs, float_outs, [leaves[i] for i in diff],
                       [dtypes[i] for i in diff], grad_rtol, grad_atol, grad == "finite")
    got = got[:n_out]
    compare_outputs(outs, got, refs, rtol=rtol, atol=atol, equal_nan=equal_nan)
    return got


def compare_outputs(outs, got, refs, *, rtol=None, atol=None, equal_nan=True, where=""):
    """luminal's output tensors ``outs`` computed as arrays ``got`` against torch's results ``refs``:
    dtype, shape, then values within the dtype's tolerance (or ``rtol``/``atol``)."""
    assert len(got) == len(refs), f"{where}{len(got)} outputs vs torch's {len(refs)}"
    for k, (o, g_arr, r) in enumerate(zip(outs, got, refs)):
        if not isinstance(r, torch.Tensor):
            r = torch.tensor(r)
        want_dtype = EXPECTED_DTYPE[r.dtype]
        assert o.dtype is want_dtype, f"{where}output {k}: dtype {o.dtype} vs torch's {r.dtype}"
        want = from_torch(r)
        assert g_arr.shape == want.shape, f"{where}output {k}: shape {g_arr.shape} vs torch's {want.shape}"
        rt, at = TOLERANCE[want_dtype]
        np.testing.assert_allclose(
            g_arr.astype(np.float64) if want_dtype.is_float else g_arr,
            want.astype(np.float64) if want_dtype.is_float else want,
            rtol=rt if rtol is None else rtol, atol=at if atol is None else atol,
            equal_nan=equal_nan, err_msg=f"{where}output {k}")


def _luminal_grads(outs, float_outs, wrt):
    """Gradients of the sum of the float outputs, or None per input when luminal says the outputs
    do not depend on it differentiably (then torch's gradient must be zero)."""
    loss = None
    for k in float_outs:
        o = outs[k].sum() if outs[k].ndim else outs[k]
        o = o.float() if o.dtype in (lm.float16, lm.bfloat16) else o
        loss = o if loss is None else loss + o
    result = []
    for x in wrt:
        try:
            result.append(train.grad(loss, x, allow_unused=True))
        except ValueError as e:
            if "only through" not in str(e):
                raise
            result.append(None)
    return result


def _compare_grads(got, grads, refs, float_outs, leaves, dtypes, rtol, atol, finite_only, where=""):
    loss = sum(refs[k].float().sum() if refs[k].dtype in (torch.float16, torch.bfloat16) else refs[k].sum()
               for k in float_outs)
    if not loss.requires_grad:
        want = [None] * len(leaves)
    else:
        try:
            want = torch.autograd.grad(loss, leaves, allow_unused=True)
        except RuntimeError as e:  # e.g. floor_divide: torch has no derivative to compare with
            if "not implemented" in str(e):
                return
            raise
    it = iter(got)
    for i, (gl, w, d) in enumerate(zip(grads, want, dtypes)):
        w = np.zeros(leaves[i].shape) if w is None else from_torch(w).astype(np.float64)
        if gl is None:
            assert not np.any(w), f"{where}grad of input {i}: luminal says no differentiable path, torch's is nonzero"
            continue
        g = next(it).astype(np.float64)
        assert g.shape == w.shape, f"{where}grad of input {i}: shape {g.shape} vs torch's {w.shape}"
        if finite_only:
            keep = np.isfinite(from_torch(leaves[i]).astype(np.float64))
            g, w = g[keep], w[keep]
        rt, at = GRAD_TOLERANCE[d]
        np.testing.assert_allclose(g, w, rtol=rt if rtol is None else rtol, atol=at if atol is None else atol,
                                   equal_nan=True, err_msg=f"{where}gradient of input {i}")

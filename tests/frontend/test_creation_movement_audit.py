"""Audit of tensor creation and movement ops against torch 2.13 (``frontend/ops/creation.py``,
``movement.py``, ``combine.py``): values, result dtypes, gradients (``parity.check``), and the errors
where torch refuses. What ``test_movement.py``, ``test_factories_numpy.py`` and
``test_diff_rot90_cross_kron.py`` already cover is not repeated."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity import check, rand

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

F32, F64, F16, I32, BOOL = lm.float32, lm.float64, lm.float16, lm.int32, lm.bool


def _made(op, backend):
    """The factory ``op(g)`` compiled and run (its graph reads a dummy input so that it runs)."""
    g = lm.Graph()
    x = g.input("x", (1,))
    out = op(g)
    outs = out if isinstance(out, tuple) else (out,)
    got = lm.compile([*outs, x], backend=backend)(x=np.zeros(1, np.float32))
    return [(o.dtype, a) for o, a in zip(outs, got[:len(outs)])]


def _ns(t):
    return torch if isinstance(t, torch.Tensor) else lm


# --- arange ------------------------------------------------------------------------------------------

ARANGE_FLOAT = [(0, 1, 0.1), (1, 2.5, 0.5), (0, 1, 0.3), (1, 0, -0.1), (0.5, -2.5, -0.7), (-1, 1, 0.2),
                (0.1, 0.9, 0.1), (0, 5.5), (2.0,), (0, 1, 1 / 3), (-3, 3, 0.25), (1e6, 1e6 + 1, 0.1)]


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("args", ARANGE_FLOAT, ids=str)
def test_arange_float_steps(args, dtype, backend):
    """torch's count ceil((end - start) / step) in float64, and the values start + i * step in float64
    rounded once to the dtype (the float32 arithmetic gave arange(0, 1, 0.1)[9] = 0.90000004)."""
    kw = {} if dtype is F32 else {"dtype": dtype}
    [(d, got)] = _made(lambda g: g.arange(*args, **kw), backend)
    start, end, step = (0, *args, 1)[:3] if len(args) == 1 else (*args, 1)[:3]
    n = int(np.ceil((end - start) / step))
    want = (start + np.arange(n, dtype=np.float64) * step).astype(dtype.np)
    assert d is dtype and got.dtype == dtype.np
    np.testing.assert_array_equal(got, want)  # exactly the float64 formula, rounded once
    ref = torch.arange(*args, **({} if dtype is F32 else {"dtype": torch.float64})).numpy()
    assert got.shape == ref.shape
    # (torch's vectorised loop adds the step to a rounded base: within an ulp of the formula)
    np.testing.assert_allclose(got, ref, rtol=4e-16 if dtype is F64 else 1.2e-7, atol=4e-16 if dtype is F64 else 1e-7)


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16])
def test_arange_half_precision(dtype, backend):
    [(d, got)] = _made(lambda g: g.arange(-2.5, 2.7, 0.9, dtype=dtype), backend)
    tdt = {lm.float16: torch.float16, lm.bfloat16: torch.bfloat16}[dtype]
    assert d is dtype
    ref = torch.arange(-2.5, 2.7, 0.9, dtype=tdt).float().numpy()
    np.testing.assert_allclose(np.asarray(got, np.float32), ref, rtol=1e-2, atol=0)


@pytest.mark.parametrize("args", [(0.5, 4.7), (0, 5, 1.5), (2.9, 7.1, 2.9), (-2.5, 2.7, 1.9), (7.9, -3.2, -2.5),
                                  (0, 5.5), (True, 5)], ids=str)
def test_arange_integer_dtype_truncates_like_torch_int64(args, backend):
    """An integer dtype truncates float bounds and step toward zero first (torch's int64 arange):
    arange(0, 5, 1.5, dtype=int) is [0, 1, 2, 3, 4], not the truncated float values [0, 1, 3]."""
    [(d, got)] = _made(lambda g: g.arange(*args, dtype=I32), backend)
    want = torch.arange(*args, dtype=torch.int64).numpy().astype(np.int32)
    assert d is I32
    np.testing.assert_array_equal(got, want)


def test_arange_dtype_inference(backend):
    cases = [((5,), I32), ((1, 5, 2), I32), ((5.0,), F32), ((0, 5, 1.0), F32), ((True, 3), I32)]
    for args, want in cases:
        [(d, got)] = _made(lambda g: g.arange(*args), backend)
        assert d is want, args
        np.testing.assert_array_equal(got, torch.arange(*args).numpy().astype(want.np))


@pytest.mark.parametrize("call,kind,match", [
    (lambda g: g.arange(0, 3, -1), ValueError, r"^arange: .*inconsistent with the step's sign.*start 0, end 3"),
    (lambda g: g.arange(3, 0), ValueError, r"^arange: .*inconsistent"),
    (lambda g: g.arange(-4.5), ValueError, r"^arange: .*inconsistent"),
    (lambda g: g.arange(1.0, 0, 0.5), ValueError, r"^arange: .*inconsistent"),
    (lambda g: g.arange(0, 3, dtype=BOOL if isinstance(g, lm.Graph) else torch.bool), TypeError, r"^arange: .*bool"),
    (lambda g: g.arange(0, 1, 0.1, dtype=I32 if isinstance(g, lm.Graph) else torch.int64), ValueError,
     r"^arange: step 0.1 truncates to 0 .*int32"),
], ids=["neg-step-up", "down-default-step", "neg-end", "float-down", "bool", "int-fraction-step"])
def test_arange_refuses_what_torch_refuses(call, kind, match):
    with pytest.raises(kind, match=match):
        call(lm.Graph())
    with pytest.raises((RuntimeError, ValueError)):
        call(torch)


# --- linspace / logspace / eye / full / tril_indices -------------------------------------------------

@pytest.mark.parametrize("steps", [0, 1, 2, 7])
def test_linspace_logspace_ends_and_dtypes(steps, backend):
    cases = [
        (lambda g: g.linspace(-2.5, 3.3, steps), torch.linspace(-2.5, 3.3, steps)),
        (lambda g: g.linspace(10, -10, steps, dtype=I32), torch.linspace(10, -10, steps, dtype=torch.int64)),
        (lambda g: g.linspace(0, 1, steps, dtype=F64), torch.linspace(0, 1, steps, dtype=torch.float64)),
        (lambda g: g.logspace(-1, 2, steps), torch.logspace(-1, 2, steps)),
        (lambda g: g.logspace(0, 3, steps, base=2.0), torch.logspace(0, 3, steps, base=2.0)),
        (lambda g: g.logspace(0, 3, steps, 0.5), torch.logspace(0, 3, steps, 0.5)),
        (lambda g: g.logspace(0, 4, steps, dtype=I32), torch.logspace(0, 4, steps, dtype=torch.int64)),
    ]
    for op, ref in cases:
        [(d, got)] = _made(op, backend)
        want = ref.numpy()
        assert got.shape == want.shape and d.np == (np.int32 if want.dtype == np.int64 else want.dtype)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        if steps >= 2 and d.is_float:  # both ends exactly
            assert got[0] == want[0] and got[-1] == want[-1]


def test_eye_full_and_like_dtypes(backend):
    g_cases = [
        (lambda g: g.eye(0), torch.eye(0)), (lambda g: g.eye(3, 0), torch.eye(3, 0)),
        (lambda g: g.eye(2, 5), torch.eye(2, 5)),
        (lambda g: g.eye(5, 2, dtype=I32), torch.eye(5, 2, dtype=torch.int64)),
        (lambda g: g.full((2, 3), 2), torch.full((2, 3), 2)), (lambda g: g.full((2,), -1.5), torch.full((2,), -1.5)),
        (lambda g: g.full((2,), False), torch.full((2,), False)),
        (lambda g: g.full((2,), -2.7, dtype=I32), torch.full((2,), -2.7, dtype=torch.int64)),
        (lambda g: g.full((2,), 2, dtype=BOOL), torch.full((2,), 2, dtype=torch.bool)),
        (lambda g: lm.zeros(0, 3, graph=g), torch.zeros(0, 3)), (lambda g: lm.ones((), graph=g), torch.ones(())),
    ]
    for i, (op, ref) in enumerate(g_cases):
        [(d, got)] = _made(op, backend)
        want = ref.numpy()
        assert got.shape == want.shape, i
        assert d.np == (np.int32 if want.dtype == np.int64 else want.dtype), i
        np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=str(i))


@pytest.mark.parametrize("rows,cols,offset", [(3, 3, 0), (4, 3, 1), (3, 4, -1), (3, 3, 5), (3, 3, -5), (0, 3, 0),
                                              (4, 0, 0), (5, 2, -2), (2, 5, 3)])
def test_tril_triu_indices(rows, cols, offset, backend):
    for name in ("tril_indices", "triu_indices"):
        [(d, got)] = _made(lambda g: getattr(lm, name)(rows, cols, offset, graph=g), backend)
        want = getattr(torch, name)(rows, cols, offset).numpy()
        assert d is I32 and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [F32, F64, F16, I32, BOOL])
def test_like_factories_keep_or_take_the_dtype(dtype, backend):
    x = rand((2, 3), dtype)
    check(lambda t: (_ns(t).zeros_like(t), _ns(t).ones_like(t), _ns(t).full_like(t, 7),
                     _ns(t).full_like(t, True), _ns(t).zeros_like(t, dtype=BOOL if isinstance(t, lm.GraphTensor)
                                                                   else torch.bool)),
          [x], dtypes=[dtype], backend=backend, grad=False)


@pytest.mark.parametrize("dtype", [F32, F64, lm.float16, lm.bfloat16])
def test_rand_like(dtype, backend):
    g = lm.Graph()
    x = g.input("x", (3, 400), dtype=dtype)
    r, r64 = lm.rand_like(x), lm.rand_like(x, dtype=F64)
    assert (r.dtype, r.shape, r64.dtype) == (dtype, (3, 400), F64)
    f = lm.compile([r, r64], backend=backend)
    zeros = lm.core.dtype.to_storage(np.zeros((3, 400)), dtype)
    a, b = f(x=zeros)
    c, _ = f(x=zeros)
    for v in (np.asarray(a, np.float64), b):
        assert v.min() >= 0 and v.max() < 1 and 0.4 < v.mean() < 0.6
    assert not np.array_equal(a, c)  # fresh noise on every call


def test_rand_like_refuses_integer_dtypes():
    x = lm.Graph().input("x", (2,), dtype=I32)
    with pytest.raises(TypeError, match=r"^rand_like: needs a float dtype .*int32"):
        lm.rand_like(x)
    with pytest.raises(RuntimeError):
        torch.rand_like(torch.ones(2, dtype=torch.int32))


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid(indexing, backend):
    a, b, c = rand((3,)), rand((4,), seed=1), rand((2,), seed=2)
    check(lambda x, y, z: _ns(x).meshgrid(x, y, z, indexing=indexing), [a, b, c], backend=backend)
    check(lambda x, y: _ns(x).meshgrid([x, y], indexing=indexing), [rand(()), b], backend=backend)
    check(lambda x, y: _ns(x).meshgrid(x, y, indexing=indexing), [a, rand((0,))], backend=backend)


def test_meshgrid_refuses_mixed_dtypes():
    g = lm.Graph()
    a, b = g.input("a", (3,)), g.input("b", (2,), dtype=I32)
    with pytest.raises(TypeError, match=r"^meshgrid: expects tensors of one dtype .*float32, int32"):
        lm.meshgrid(a, b, indexing="ij")
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.meshgrid(torch.ones(3), torch.ones(2, dtype=torch.int64), indexing="ij")


# --- movement -----------------------------------------------------------------------------------------

X234 = rand((2, 3, 4))

MOVES = {  # (op, input); the same op runs on torch (lm. / torch. by the tensor's kind)
    "reshape_-1": (lambda t: t.reshape(-1, 4), X234),
    "reshape_empty_-1": (lambda t: t.reshape(-1, 3), rand((0, 3))),
    "view_0d": (lambda t: t.view(1, 1), rand(())),
    "flatten_0d": (lambda t: _ns(t).flatten(t, 0, -1), rand(())),
    "flatten_same": (lambda t: t.flatten(1, 1), X234),
    "flatten_neg": (lambda t: t.flatten(-2), X234),
    "unflatten_-1": (lambda t: t.unflatten(1, (-1, 1)), X234),
    "unflatten_one": (lambda t: t.unflatten(2, (4,)), X234),
    "permute_neg": (lambda t: t.permute(-1, 0, -2), X234),
    "movedim_lists": (lambda t: _ns(t).movedim(t, (0, 1), (2, 0)), X234),
    "moveaxis_neg": (lambda t: _ns(t).moveaxis(t, 1, -1), X234),
    "movedim_0d": (lambda t: _ns(t).movedim(t, 0, -1), rand(())),
    "swapaxes_neg": (lambda t: _ns(t).swapaxes(t, -1, -3), X234),
    "transpose_0d": (lambda t: t.transpose(0, -1), rand(())),
    "transpose_1d": (lambda t: t.transpose(0, -1), rand((5,))),
    "t_0d": (lambda t: t.t(), rand(())),
    "t_1d": (lambda t: t.t(), rand((5,))),
    "squeeze_tuple": (lambda t: t.squeeze((0, -1, 1)), rand((1, 3, 1, 1))),
    "squeeze_0d": (lambda t: t.squeeze(-1), rand(())),
    "unsqueeze_0d": (lambda t: t.unsqueeze(-1), rand(())),
    "expand_-1": (lambda t: t.expand(2, -1, 4, -1), rand((3, 1, 1))),
    "expand_0": (lambda t: t.expand(2, 0, 3), rand((0, 3))),
    "repeat_more_dims": (lambda t: t.repeat(2, 1, 1, 3), X234),
    "repeat_0d": (lambda t: t.repeat(3, 2), rand(())),
    "repeat_zero": (lambda t: t.repeat(0, 2), rand((2, 3))),
    "ri_none": (lambda t: _ns(t).repeat_interleave(t, 2), X234),
    "ri_neg_dim": (lambda t: _ns(t).repeat_interleave(t, 3, -1), X234),
    "ri_zero": (lambda t: _ns(t).repeat_interleave(t, 0, 1), X234),
    "ri_output_size": (lambda t: _ns(t).repeat_interleave(t, 2, 0, output_size=4), X234),
    "roll_neg": (lambda t: _ns(t).roll(t, -1, 1), X234),
    "roll_multi": (lambda t: _ns(t).roll(t, (1, -5), (0, -1)), X234),
    "roll_big": (lambda t: _ns(t).roll(t, 13, 2), X234),
    "roll_flat": (lambda t: _ns(t).roll(t, -30), X234),
    "roll_same_dim_twice": (lambda t: _ns(t).roll(t, (1, 2), (1, 1)), X234),
    "roll_empty": (lambda t: _ns(t).roll(t, 1), rand((0, 3))),
    "flip_neg": (lambda t: _ns(t).flip(t, (-1, 0)), X234),
    "fliplr": (lambda t: _ns(t).fliplr(t), X234),
    "flipud_1d": (lambda t: _ns(t).flipud(t), rand((5,))),
    "rot90_-5": (lambda t: _ns(t).rot90(t, -5, (-1, 0)), X234),
    "rot90_6": (lambda t: _ns(t).rot90(t, 6, (1, 2)), X234),
    "narrow_neg_start": (lambda t: _ns(t).narrow(t, -1, -3, 2), X234),
    "narrow_empty_at_end": (lambda t: _ns(t).narrow(t, 1, 3, 0), X234),
    "unfold_step_gt_size": (lambda t: t.unfold(-1, 1, 3), X234),
    "unfold_step_big": (lambda t: t.unfold(0, 3, 10), rand((6,))),
    "diagonal_offsets": (lambda t: tuple(_ns(t).diagonal(t, k, -1, 0) for k in (-5, -1, 0, 2, 4, 6)), X234),
    "diag_1d": (lambda t: tuple(_ns(t).diag(t, k) for k in (-3, 0, 2)), rand((3,))),
    "diag_2d": (lambda t: tuple(_ns(t).diag(t, k) for k in (-5, -1, 0, 3, 6)), rand((4, 5))),
    "diag_embed_dims": (lambda t: tuple(_ns(t).diag_embed(t, k, d1, d2) for k in (-2, 0, 1)
                                        for d1, d2 in ((0, 2), (-1, 0))), rand((2, 3))),
    "diagflat": (lambda t: tuple(_ns(t).diagflat(t, k) for k in (-2, 0, 3)), rand((2, 2))),
    "diagflat_0d": (lambda t: _ns(t).diagflat(t, 1), rand(())),
    "diagflat_1d": (lambda t: _ns(t).diagflat(t), rand((3,))),
    "tril_beyond": (lambda t: tuple(_ns(t).tril(t, k) for k in (-9, -3, 4, 9)), X234),
    "triu_beyond": (lambda t: tuple(_ns(t).triu(t, k) for k in (-9, -4, 3, 9)), X234),
    "contiguous": (lambda t: t.transpose(0, 2).contiguous(), X234),
    "clone_view": (lambda t: _ns(t).clone(t[:, ::2]), X234),
    "clone_0d": (lambda t: t.clone(), rand(())),
}


@pytest.mark.parametrize("name", MOVES)
def test_moves(name, backend):
    op, x = MOVES[name]
    check(op, [x], backend=backend)


@pytest.mark.parametrize("dtype", [I32, BOOL, F16])
def test_moves_other_dtypes(dtype, backend):
    x = rand((2, 3, 4), dtype)
    check(lambda t: (_ns(t).roll(t, 5), _ns(t).repeat_interleave(t, 2, 1), _ns(t).diagflat(t[0]),
                     _ns(t).rot90(t, 1, (0, 2)), _ns(t).diag_embed(t[0], 1)), [x], dtypes=[dtype], backend=backend)


SPLITS = {
    "split_uneven": lambda t: _ns(t).split(t, 3),
    "split_big": lambda t: _ns(t).split(t, 10),
    "split_sizes": lambda t: _ns(t).split(t, [2, 0, 5]),
    "chunk_3": lambda t: _ns(t).chunk(t, 3),
    "chunk_4": lambda t: _ns(t).chunk(t, 4),  # torch gives 4 pieces of 2, 2, 2, 1
    "chunk_6": lambda t: _ns(t).chunk(t, 6),  # ... and 4 of 2, 2, 2, 1 here too
    "chunk_8": lambda t: _ns(t).chunk(t, 8),
    "tensor_split_3": lambda t: _ns(t).tensor_split(t, 3),
    "tensor_split_9": lambda t: _ns(t).tensor_split(t, 9),
    "tensor_split_idx": lambda t: _ns(t).tensor_split(t, [5, 2, -2, 10]),
    "tensor_split_neg": lambda t: _ns(t).tensor_split(t, [-10, 3]),
}


@pytest.mark.parametrize("name", SPLITS)
def test_splits(name, backend):
    check(SPLITS[name], [rand((7, 2))], backend=backend)


def test_split_of_an_empty_dim_by_zero(backend):
    """torch takes a split size of 0 for an empty dim (one empty piece); it was refused."""
    check(lambda t: _ns(t).split(t, 0), [rand((0, 3))], backend=backend)
    check(lambda t: _ns(t).split(t, 0, 1), [rand((2, 0))], backend=backend)


# --- joins ----------------------------------------------------------------------------------------

def test_cat_promotes_and_skips_legacy_empty(backend):
    """torch.cat promotes dtypes, and skips 1-d empty tensors (shape (0,)) whatever the others' shapes
    (they were refused: 'shapes must match')."""
    f23, i23, b23, e0 = rand((2, 3)), rand((2, 3), I32), rand((2, 3), BOOL), rand((0,))
    check(lambda a, b: _ns(a).cat([a, b]), [f23, i23], backend=backend)
    check(lambda a, b: _ns(a).cat([a, b], -1), [i23, b23], backend=backend)
    check(lambda a, b: _ns(a).cat([a, b]), [rand((2, 3), F16), i23], dtypes=[F16, I32], backend=backend)
    check(lambda a, b: _ns(a).cat([a, b]), [rand((2, 3), F64), f23], backend=backend)
    check(lambda a, b: _ns(a).cat([a, b, a]), [f23, e0], backend=backend)
    check(lambda a, b: _ns(a).cat([b, a], 1), [f23, e0], backend=backend)
    check(lambda a, b: _ns(a).cat([b, a]), [i23, e0], backend=backend)  # the skipped float one still promotes
    check(lambda a, b: _ns(a).cat([a, b]), [rand((0, 3)), f23], backend=backend)
    check(lambda a, b: _ns(a).hstack([b, a]), [f23, e0], backend=backend)


def test_cat_errors_name_the_shapes():
    g = lm.Graph()
    a, b, s = g.input("a", (2, 3)), g.input("b", (2, 4)), g.input("s", ())
    with pytest.raises(ValueError, match=r"^cat: shapes must match except in dim 0, got \(2, 3\) and \(2, 4\)"):
        lm.cat([a, b])
    with pytest.raises(ValueError, match=r"^cat: tensors must have the same number of dims, got 2 and 1"):
        lm.cat([a, g.input("c", (3,))])
    with pytest.raises(ValueError, match=r"^cat: tensors\[1\] is 0-d"):  # was a bare IndexError
        lm.cat([s.reshape(1), s])
    for bad in ([torch.ones(2, 3), torch.ones(2, 4)], [torch.ones(1), torch.tensor(1.0)]):
        with pytest.raises(RuntimeError):
            torch.cat(bad)


STACKS = ["hstack", "vstack", "dstack", "column_stack", "row_stack"]


@pytest.mark.parametrize("name", STACKS)
@pytest.mark.parametrize("shapes", [[(6,), (6,)], [(), ()], [(2, 3), (2, 3)], [(2, 3, 4), (2, 3, 4)],
                                    [(0,), (0,)], [(0, 3), (0, 3)], [(), (1,)]], ids=str)
def test_stacks(name, shapes, backend):
    a, b = rand(shapes[0]), rand(shapes[1], I32, seed=1)  # mixed dtypes: torch promotes
    check(lambda x, y: getattr(_ns(x), name)([x, y]), [a, b], backend=backend)


def test_dstack_column_stack_mixed_ranks(backend):
    check(lambda x, y: _ns(x).column_stack([x, y]), [rand((2,)), rand((2, 3))], backend=backend)
    check(lambda x, y: _ns(x).dstack([x, y]), [rand((3,)), rand((1, 3))], backend=backend)
    check(lambda x, y: _ns(x).dstack([x, y]), [rand((2, 3)), rand((2, 3, 2))], backend=backend)


def test_stack_dims_and_empty(backend):
    a, b = rand((2, 3)), rand((2, 3), I32)
    check(lambda x, y: _ns(x).stack([x, y], -3), [a, b], backend=backend)
    check(lambda x, y: _ns(x).stack([x, y], 2), [a, b], backend=backend)
    check(lambda x, y: _ns(x).stack([x, y]), [rand((0, 3)), rand((0, 3))], backend=backend)
    check(lambda x: _ns(x).stack([x, x]), [rand(())], backend=backend)


# --- errors where torch refuses -------------------------------------------------------------------

ERRORS = {  # (op, input, luminal's error, its message)
    "ri_output_size": (lambda t: _ns(t).repeat_interleave(t, 2, 0, output_size=5), (6,), ValueError,
                       r"^repeat_interleave: output_size=5 but 2 repeats of dim 0 of size 6 give 12"),
    "split_zero": (lambda t: _ns(t).split(t, 0), (7,), ValueError, r"^split: the size must be positive.*got 0"),
    "reshape_two_-1": (lambda t: t.reshape(-1, -1), (2, 3), ValueError, r"^reshape: "),
    "unflatten_bad": (lambda t: t.unflatten(1, (2, 2)), (2, 3), ValueError, r"^unflatten: .*\(2, 2\).*3"),
    "permute_dup": (lambda t: t.permute(0, 0), (2, 3), ValueError, r"^permute: "),
    "t_3d": (lambda t: t.t(), (2, 3, 4), ValueError, r"^t: .*3"),
    "expand_bad": (lambda t: t.expand(2, 5), (6,), ValueError, r"^expand: .*6.*5"),
    "expand_-1_new": (lambda t: t.expand(-1, 6), (6,), ValueError, r"^expand: "),
    "repeat_fewer": (lambda t: t.repeat(2), (2, 3), ValueError, r"^repeat: "),
    "roll_lengths": (lambda t: _ns(t).roll(t, (1, 2), 0), (2, 3), ValueError, r"^roll: .*\(1, 2\)"),
    "rot90_same": (lambda t: _ns(t).rot90(t, 1, (0, -2)), (2, 3), ValueError, r"^rot90: "),
    "narrow_past": (lambda t: _ns(t).narrow(t, 1, 2, 2), (2, 3), IndexError, r"^narrow: start 2 \+ length 2"),
    "unfold_step_0": (lambda t: t.unfold(0, 2, 0), (6,), ValueError, r"^unfold: "),
    "chunk_0": (lambda t: _ns(t).chunk(t, 0), (6,), ValueError, r"^chunk: "),
    "tensor_split_0": (lambda t: _ns(t).tensor_split(t, 0), (6,), ValueError, r"^tensor_split: "),
    "diagonal_same": (lambda t: _ns(t).diagonal(t, 0, 1, -2), (2, 3, 4), ValueError, r"^diagonal: "),
    "diag_3d": (lambda t: _ns(t).diag(t), (2, 3, 4), ValueError, r"^diag: .*3-d"),
    "tril_1d": (lambda t: _ns(t).tril(t), (3,), ValueError, r"^tril: "),
    "stack_shapes": (lambda t: _ns(t).stack([t, t.T]), (2, 3), ValueError, r"^stack: "),
}


@pytest.mark.parametrize("name", ERRORS)
def test_errors_where_torch_raises(name):
    op, shape, kind, match = ERRORS[name]
    with pytest.raises((RuntimeError, IndexError, ValueError)):
        op(torch.zeros(shape))
    with pytest.raises(kind, match=match):
        op(lm.Graph().input("x", shape))


def test_eye_m_keyword_and_factories_without_a_size(backend):
    """torch.eye(n, m=...) takes m by keyword (it was refused); torch.zeros() without a size is a
    TypeError (a 0-d tensor was made)."""
    [(d, got)] = _made(lambda g: lm.eye(3, m=2, graph=g), backend)
    np.testing.assert_array_equal(got, torch.eye(3, m=2).numpy())
    for name in ("zeros", "ones"):
        with pytest.raises(TypeError):
            getattr(torch, name)()
        with pytest.raises(TypeError, match=rf"^{name}: missing the size"):
            getattr(lm, name)(graph=lm.Graph())
    with pytest.raises(TypeError, match=r"^eye: m given both"):
        lm.eye(3, 2, m=2, graph=lm.Graph())


@pytest.mark.parametrize("shape,repeats,dim,size", [((2, 2), [1, 0, 2, 3], None, 6), ((3,), 2, 0, 6),
                                                     ((3,), [2], 0, 6), ((2, 3, 4), [1, 0, 2], 1, 3),
                                                     ((2, 3, 4), [0, 1, 2, 1], -1, 4)], ids=str)
def test_repeat_interleave_tensor_repeats(shape, repeats, dim, size, backend):
    """A tensor of counts (0-d, one for all, or one per element; dim None flattens) with output_size."""
    def op(t, k):
        if isinstance(t, torch.Tensor):
            return torch.repeat_interleave(t, k.long(), dim, output_size=size)
        return lm.repeat_interleave(t, k, dim, output_size=size)
    check(op, [rand(shape), np.asarray(repeats, np.int32)], backend=backend)

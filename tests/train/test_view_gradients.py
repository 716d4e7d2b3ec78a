"""Gradients through views, and autograd situations built from several of them, against torch.

tests/frontend/test_movement.py checks each movement op (and short chains of two or three) with the
gradient of the summed output; tests/train/test_autograd.py checks what ``train.grad`` refuses plus
one large mixed graph. This file audits the combinations in between, where ``view_grad`` has to undo
several view steps at once (luminal/train/view_grad.py) or gradients of several reads of one buffer
must add up:

* long chains on 3-4 d tensors: permute -> reshape that copies -> negative-step slice -> expand ->
  pad (positive and negative) -> overlapping unfold -> flip -> strided "diagonal" reads, in several
  orders; expands (stride 0) that are then sliced; masked (padded) views read by reductions, scans
  and matmul;
* one tensor read through several views by one op (``x * x.T``, ``x[1:] * x[:-1]``, cat of
  overlapping slices, products of windows, pads whose valid regions overlap);
* gradients with respect to intermediate tensors, several targets at once, seeds (``grad_output``)
  with values and seeds that are themselves views, losses that are views, ``allow_unused``, several
  ``train.grad`` calls on one graph, and gradients of gradients (double backward);
* gather / scatter_add / index_select / take_along_dim / tensor indices with repeated and negative
  indices, index tensors that are views, and data read through views;
* the same with symbolic dims (one compiled graph run at several sizes).

Each case runs on every backend. Torch has no negative slice steps: ``rev`` spells them for both.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as tF
from frontend.sizes import check_sizes  # tests/frontend (tests/ is on the path)
from parity import check, rand

import luminal as lm
from luminal import train
from luminal.frontend.state import State

I32 = lm.int32

pytestmark = pytest.mark.usefixtures("one_torch_thread")



# spelling one op for both libraries ------------------------------------------------------------------
def is_torch(t) -> bool:
    return isinstance(t, torch.Tensor)


def pad(t, pads, value=0.0):
    return tF.pad(t, pads, value=value) if is_torch(t) else t.pad(pads, value)


def rev(t, dim, step=1, start=None):
    """``t[..., start::-step]`` along ``dim`` (torch: flip, then a positive step)."""
    dim = dim % t.ndim
    if not is_torch(t):
        return t[(slice(None),) * dim + (slice(start, None, -step),)]
    n = t.shape[dim]
    first = 0 if start is None else n - 1 - (start % n)
    return t.flip(dim)[(slice(None),) * dim + (slice(first, None, step),)]


def cat(ts, dim=0):
    return torch.cat(ts, dim) if is_torch(ts[0]) else lm.cat(ts, dim)


def stack(ts, dim=0):
    return torch.stack(ts, dim) if is_torch(ts[0]) else lm.stack(ts, dim)


def long(i):
    return i.long() if is_torch(i) else i


def run(outs, **inputs):
    res = lm.compile(list(outs))(**inputs)
    return res if isinstance(res, tuple) else (res,)


def close(got, want, msg=""):
    np.testing.assert_allclose(got, want.detach().numpy() if is_torch(want) else want, rtol=1e-4, atol=1e-5,
                               err_msg=msg)


# chains of views ------------------------------------------------------------------------------------
CHAINS = {  # name: (input shapes, op on both sides)
    "permute_copy_negstep_expand_pad_unfold_flip": ([(2, 3, 4)], lambda x: pad(
        rev(x.permute(0, 2, 1).reshape(2, 12), 1, 2)[:, None].expand(2, 3, 6), (2, -1, 0, 0, -1, 1), 0.5)
        .unfold(2, 3, 1).flip(1).sin()),
    "negstep_pad_unfold_permute_copy": ([(3, 4, 5)], lambda x: pad(rev(x, 0)[:, 1:, ::2], (1, 1), -1.0)
                                        .unfold(2, 3, 1).permute(3, 1, 0, 2).reshape(9, -1).pow(2)),
    "expand_then_sliced": ([(3, 4)], lambda x: rev(rev(x[:, None, :].expand(3, 5, 4), 0)[:, 1::2], 2, 3)
                           .reshape(-1).exp()),
    "expand_sliced_to_one_then_expanded": ([(3, 4)], lambda x: x[:, None].expand(3, 4, 4)[:, 2:3]
                                           .expand(3, 5, 4).transpose(0, 2).sin()),
    "expand_merge_copy_then_step": ([(3, 4)], lambda x: x[:, None].expand(3, 2, 4).reshape(6, 4)[1::2].cos()),
    "expand_pad_expand": ([(1, 4)], lambda x: pad(x.expand(3, 4), (1, 2, -1, 0), 2.0)[:, None]
                          .expand(2, 3, 7).flip(2).tanh()),
    "unfold2d_of_permuted_conv": ([(2, 5, 6), (3, 2)], lambda x, w: (
        x.permute(0, 2, 1).unfold(1, 3, 1).unfold(2, 2, 1) * w).sum((-1, -2)).sin()),
    "unfold_overlap_negstep_windows": ([(3, 8)], lambda x: rev(x.unfold(1, 4, 1), 1, 2)[:, :, 1::2].pow(3)),
    "unfold_of_unfold_same_dim": ([(2, 9)], lambda x: x.unfold(1, 4, 1).unfold(1, 3, 2).sin()),
    "pad_neg_pad_unfold_overlap_flip": ([(3, 7)], lambda x: pad(x, (-1, 2), 1.5).unfold(1, 4, 2).flip(0, 2).exp()),
    "pad_both_dims_unfold_both": ([(4, 5)], lambda x: pad(x, (1, 1, 2, 0)).unfold(0, 3, 1).unfold(1, 2, 2)
                                  .sin()),
    "unfold_pad_transposes": ([(2, 3, 6)], lambda x: pad(x.unfold(2, 3, 2), (1, 0, 0, 1)).transpose(1, 3)
                              .mT.pow(2)),
    "diag_of_transposed": ([(4, 4)], lambda x: x.T.reshape(16)[::5].exp() + x.flatten()[3:13:3].sin()),
    "batched_diag_of_transposed": ([(3, 4, 4)], lambda x: x.transpose(1, 2).flatten(1)[:, ::5].pow(2)),
    "antidiag_negstep": ([(5, 5)], lambda x: rev(x.reshape(25)[4:21], 0, 4).sin()),
    "4d_permute_negstep_copy_unfold_pad": ([(2, 3, 4, 5)], lambda x: pad(
        rev(x.permute(3, 1, 0, 2), 0, 2)[..., 1:].reshape(3, 3, 6).unfold(2, 4, 2), (1, 1, -1, 0)).exp()),
    "4d_expand_slice_transposes": ([(2, 1, 3, 4)], lambda x: rev(x.expand(2, 5, 3, 4)[:, 1::2], 3)
                                   .transpose(1, 3).swapaxes(0, 2).sin()),
    "repeat_then_unfold_overlap": ([(2, 3)], lambda x: x.T.repeat(2, 2).unfold(0, 4, 1).pow(2)),
    "reshape_split_flip_merge_copy": ([(4, 6)], lambda x: x.reshape(4, 2, 3).flip(1).reshape(4, 6)[:, 1:-1]
                                      .sin()),
    # masked (padded) views read by reductions, scans and matmul
    "pad_amax": ([(4, 5)], lambda x: pad(x, (1, 2), 0.5).amax(1)),
    "pad_logsumexp_softmax": ([(3, 4)], lambda x: (pad(x, (2, 0, 0, 1), 1.0).logsumexp(0),
                                                   pad(x.T, (1, 1), -1.0).softmax(1).pow(2))),
    "pad_mean_var": ([(3, 5)], lambda x: (pad(x, (0, 0, 1, 2), 3.0).mean(0), pad(x, (-1, 2)).var(1))),
    "pad_flip_cumsum": ([(3, 5)], lambda x: pad(x, (2, 0)).flip(1).cumsum(1).sin()),
    "pad_matmul_contracted_over_mask": ([(3, 4), (4, 5)], lambda x, w: pad(x, (1, 1)) @ pad(w, (0, 0, 1, 1))),
    "pad_matmul_same_tensor_overlapping": ([(4, 3)], lambda x: pad(x, (0, 0, 1, 0)).T @ pad(x, (0, 0, 0, 1), 2.0)),
    "windows_gram_matmul": ([(2, 7)], lambda x: x.unfold(1, 3, 1) @ x.unfold(1, 3, 2).mT),
    "negstep_expand_matmul": ([(3, 4), (4,)], lambda x, v: rev(x, 1) @ v[:, None].expand(4, 2)),
}


@pytest.mark.parametrize("name", CHAINS)
def test_view_chain(name, backend):
    shapes, op = CHAINS[name]
    check(op, [rand(s, seed=k) for k, s in enumerate(shapes)], backend=backend)


# one tensor through several views in one op ------------------------------------------------------------
MULTI = {
    "x_times_xT": ([(4, 4)], lambda x: x * x.T),
    "shifted_product": ([(5, 3)], lambda x: x[1:] * x[:-1] + x[1:] + x[:-1]),
    "cat_overlapping_slices": ([(4, 3)], lambda x: cat([x[:3], x[1:], rev(x, 0), rev(x[1:3], 1)], 0).sin()),
    "windows_times_windows": ([(3, 7)], lambda x: x.unfold(1, 3, 1) * x.flip(1).unfold(1, 3, 1)),
    "windows_times_reversed_windows": ([(2, 8)], lambda x: x.unfold(1, 4, 2) * x.unfold(1, 4, 2).flip(-1)),
    "overlapping_masks": ([(3, 5)], lambda x: pad(x, (1, 0)) * pad(x, (0, 1), 2.0)),
    "shifted_by_pad": ([(3, 5)], lambda x: pad(x, (2, 0), 1.0)[:, :5] * x),
    "xTx_with_reversed": ([(4, 3)], lambda x: x.T @ rev(x, 0) + (x @ x.T)[:3, 1:]),
    "stack_views": ([(3, 3)], lambda x: stack([x, x.T, x.flip(1), x[:, :1].expand(3, 3)], 0).pow(2)),
    "outer_with_itself": ([(3, 4)], lambda x: (x[:, None] * x[None]).sum(-1).exp()),
    "expand_plus_negsteps": ([(3, 4)], lambda x: (x + x[:1].expand_as(x) + rev(x, 1)) * rev(x, 0, 2, 2)[:1]),
    "windows_times_rows": ([(4, 6)], lambda x: x.unfold(0, 2, 1) * x[:-1, :, None]),
    "diag_times_rows": ([(4, 4)], lambda x: x.reshape(16)[::5][:, None] * x),
    "double_unfold_product": ([(6, 6)], lambda x: (x.unfold(0, 3, 1).unfold(1, 3, 1)
                                                   * x.T.unfold(0, 3, 1).unfold(1, 3, 1)).sum((-1, -2))),
}


@pytest.mark.parametrize("name", MULTI)
def test_one_tensor_many_views(name, backend):
    shapes, op = MULTI[name]
    check(op, [rand(s, seed=k) for k, s in enumerate(shapes)], backend=backend)


# indexing with repeats, negatives and index views ----------------------------------------------------------
IDX = np.array([[0, 2, 2, 1], [3, 3, 3, 0], [1, 0, 1, 1]], np.int32)  # repeats along both dims, values < 4
NEG = np.array([-1, 2, -1, 0, -4, 2], np.int32)

INDEXING = {  # (inputs, op on both sides; the index input is int32 here, int64 for torch)
    "gather_repeats_from_flipped_T": ([rand((4, 3)), IDX], lambda x, i: x.flip(0).T.gather(1, long(i))),
    "gather_index_flipped": ([rand((3, 4)), IDX], lambda x, i: x.gather(1, long(i).flip(1))),
    "gather_index_expanded": ([rand((3, 4)), IDX], lambda x, i: x.gather(1, long(i)[:, :1].expand(3, 6)).sin()),
    "gather_index_transposed": ([rand((4, 4)), IDX], lambda x, i: x.gather(0, long(i).T[:3])),
    "gather_from_padded": ([rand((3, 2)), IDX], lambda x, i: pad(x, (1, 1), 5.0).gather(1, long(i)) ** 2),
    "gather_from_windows": ([rand((3, 5)), IDX[:, :2]], lambda x, i: x.unfold(1, 4, 1).gather(
        2, long(i)[:, :, None].expand(3, 2, 2))),
    "gather_of_gather": ([rand((3, 4)), IDX], lambda x, i: x.gather(1, long(i)).gather(1, long(i).flip(1))),
    "gather_shared_data_two_indices": ([rand((3, 4)), IDX], lambda x, i: x.gather(1, long(i)) * x.gather(
        1, long(i).flip(0))),
    "scatter_add_src_is_view_of_dst": ([rand((4, 4)), IDX], lambda x, i: x.flip(0).scatter_add(
        0, long(i), x[:1].expand(3, 4)).sin()),
    "scatter_add_repeats_index_T": ([rand((4, 3)), rand((4, 3), seed=1), IDX], lambda x, s, i: x.scatter_add(
        0, long(i).T, s.pow(2))),
    "scatter_add_into_padded_copy": ([rand((3, 2)), rand((3, 4), seed=1), IDX], lambda x, s, i: pad(
        x, (1, 1)).scatter_add(1, long(i), s.flip(1)) * 2),
    "index_select_repeats_reversed_index": ([rand((3, 4)), NEG[[1, 3, 1, 5]]], lambda x, i: x.T.index_select(
        0, long(i).flip(0)).exp()),
    "take_along_dim_broadcast_data": ([rand((3, 1, 4)), np.stack([IDX] * 2, 1)], lambda x, i: x.take_along_dim(
        long(i), 2).pow(2)),
    "take_along_dim_expanded_index": ([rand((3, 4)), IDX[:, :1]], lambda x, i: x.flip(1).take_along_dim(
        long(i).expand(3, 5), 1)),
    "getitem_negative_repeated": ([rand((4, 3)), NEG], lambda x, i: x[long(i)].sin()),
    "getitem_of_windows": ([rand((5, 3)), NEG[:4]], lambda x, i: x.unfold(0, 2, 1)[long(i)] ** 2),
    "getitem_twice_same_data": ([rand((4, 3)), NEG], lambda x, i: x[long(i)] * rev(x[long(i).flip(0)], 1)),
    "take_along_dim_index_broadcast_over_rows": ([rand((3, 4)), np.array([[0, 3, 3, -4 % 4, 1]], np.int32)],
                                                 lambda x, i: x.T.flip(0).T.take_along_dim(long(i), 1).exp()),
    "scatter_add_dst_is_src": ([rand((3, 4)), IDX % 3], lambda x, i: x.scatter_add(0, long(i), x).sin()),
    "scatter_unique_src_is_view_of_dst": ([rand((3, 4)), np.array([[3, 0], [1, 2], [0, 3]], np.int32)],
                                          lambda x, i: x.scatter(1, long(i), x.flip(1)[:, :2].exp())),
    "getitem_index_view_2d": ([rand((4, 3)), IDX], lambda x, i: x[:, long(i).T[:2, ::2] % 3] * 3),
}


@pytest.mark.parametrize("name", INDEXING)
def test_indexing_gradients(name, backend):
    inputs, op = INDEXING[name]
    check(op, inputs, backend=backend)


# symbolic dims -----------------------------------------------------------------------------------------
SYMBOLIC = {  # name: (graph shapes, make(n), op on both sides); run at B = 5 and 3
    "shifted_product": ([("B", 4)], lambda n: [rand((n, 4), seed=n)],
                        lambda x: (x[1:] * x[:-1], rev(x, 0, 2).sum(0))),
    "windows_over_B": ([("B", 4)], lambda n: [rand((n, 4), seed=n)], lambda x: x.unfold(0, 3, 1).pow(2)),
    "windows_over_B_times_flipped": ([("B", 2)], lambda n: [rand((n, 2), seed=n)],
                                     lambda x: x.unfold(0, 2, 1) * x.flip(0).unfold(0, 2, 1)),
    "permute_copy_negstep_pad": ([("B", 3, 4)], lambda n: [rand((n, 3, 4), seed=n)],
                                 lambda x: pad(rev(x.permute(0, 2, 1).reshape(-1, 12), 1, 2), (1, -1)).sin()),
    "padded_matmul": ([("B", 4), (4, 3)], lambda n: [rand((n, 4), seed=n), rand((4, 3), seed=9)],
                      lambda x, w: pad(x, (0, 0, 1, 2), 1.0) @ w),
    "padded_T_matmul_self": ([("B", 3)], lambda n: [rand((n, 3), seed=n)],
                             lambda x: pad(x, (0, 0, 1, 0)).T @ pad(x, (0, 0, 0, 1))),
    "expand_slice_transpose": ([("B", 4)], lambda n: [rand((n, 4), seed=n)],
                               lambda x: x[None].expand(3, x.shape[0], 4)[:, 1:].transpose(0, 1).sin()),
    "strided_flat_read": ([("B", 5)], lambda n: [rand((n, 5), seed=n)], lambda x: x.reshape(-1)[::6].exp()),
    "pad_amax_over_B": ([("B", 3)], lambda n: [rand((n, 3), seed=n)], lambda x: pad(x, (0, 0, 1, 1), 0.5).amax(0)),
    "cat_overlapping": ([("B", 2)], lambda n: [rand((n, 2), seed=n)],
                        lambda x: cat([x[1:], x, rev(x, 0)], 0).sin()),
    "pad_then_step": ([("B", 3)], lambda n: [rand((n, 3), seed=n)],
                      lambda x: pad(x, (0, 0, 1, 1), 2.0)[::2].sin()),
    "pad_then_negstep": ([("B", 3)], lambda n: [rand((n, 3), seed=n)],
                         lambda x: rev(pad(x, (0, 0, 2, 1), 2.0), 0, 2).sin()),
    "windows_step_3_over_B": ([("B", 2)], lambda n: [rand((n, 2), seed=n)], lambda x: x.T.unfold(1, 2, 3).exp()),
    "padded_windows_over_B": ([("B", 2)], lambda n: [rand((n, 2), seed=n)],
                              lambda x: pad(x, (0, 0, 1, 1)).unfold(0, 2, 1).pow(2)),
    "outer_of_shifted": ([("B",)], lambda n: [rand((n,), seed=n)], lambda x: (x[1:, None] * x[None, :-1]).sin()),
    "gather_along_B_repeats": ([("B", 4), (3, 4)], lambda n: [rand((n, 4), seed=n), np.array(
        [[0, n - 1, 0, 1], [n - 1, n - 1, 2, 0], [1, 1, 1, 1]], np.int32)],
        lambda x, i: x.flip(0).gather(0, long(i)).pow(2)),
    "getitem_negative_of_B": ([("B", 3), (5,)], lambda n: [rand((n, 3), seed=n), np.array(
        [-1, 0, -1, 2, -n], np.int32)], lambda x, i: x[long(i), ::2].sin()),
}


@pytest.mark.parametrize("name", SYMBOLIC)
def test_symbolic_view_gradients(name, backend):
    shapes, make, op = SYMBOLIC[name]
    check_sizes(op, make, shapes, sizes=(5, 3), backend=backend)


# train.grad beyond leaves and scalar losses --------------------------------------------------------------
def test_grad_wrt_intermediates_and_the_leaf():
    """Intermediates (an elementwise result and a reshape that copies) read through views, asked for
    together with the leaf they come from: each gets torch's gradient."""
    def f(x, keep=None):
        h = (x * 1.5).sin()
        e = h.permute(0, 2, 1).contiguous()    # a Copy node
        c = e.reshape(2, 12)                    # a view of it
        if keep is not None:
            keep += [h, e]
        return (c.unfold(1, 4, 2) * rev(c, 1)[:, :5, None]).sum() + (h * x).sum() + pad(c, (1, 1), 1.0).pow(2).mean()

    g = lm.Graph()
    x = g.input("x", (2, 3, 4))
    mid: list = []
    loss = f(x, mid)
    h, e = mid
    assert e.node.op == "Copy"
    grads = train.grad(loss, [h, x, e])
    xv = rand((2, 3, 4))
    xt = torch.tensor(xv, requires_grad=True)
    tmid: list = []
    ref = f(xt, tmid)
    want = torch.autograd.grad(ref, [tmid[0], xt, tmid[1]])
    for k, (a, b) in enumerate(zip(run(grads, x=xv), want)):
        close(a, b, f"target {k}")


def test_grad_wrt_one_of_two_equal_intermediates():
    """A documented deviation (README; ``train.grad``): the graph builds each distinct expression once,
    so the gradient with respect to one of two separately built copies of ``x.exp()`` counts both
    copies' uses (5 here, where torch's counts that copy's alone: 2)."""
    g = lm.Graph()
    x = g.input("x", (3,))
    a, b = x.exp(), x.exp()
    ga = train.grad((a * 2).sum() + (b * 3).sum(), a)
    close(run([ga], x=np.ones(3, np.float32))[0], np.full(3, 5.0, np.float32))


@pytest.mark.parametrize("seed_view", ["plain", "transposed", "expanded", "flipped_padded"])
def test_grad_output_with_values_and_views(seed_view, backend):
    """A non-scalar output (a chain of views) seeded with non-trivial values; the seed itself may be a view."""
    def f(x):
        return rev(x.unfold(1, 3, 1), 0) * 2 + x[:, :4, None].sin()   # (3, 4, 3)

    g = lm.Graph()
    x = g.input("x", (3, 6))
    seeds = {
        "plain": ((3, 4, 3), lambda s: s),
        "transposed": ((3, 4, 3), lambda s: s.permute(2, 1, 0).reshape(3, 4, 3).transpose(0, 2)),
        "expanded": ((1, 4, 3), lambda s: s.expand(3, 4, 3)),
        "flipped_padded": ((3, 3, 2), lambda s: pad(s.flip(0), (0, 1, 1, 0), 0.25)),
    }
    shape, make = seeds[seed_view]
    s = g.input("s", shape)
    gx = train.grad(f(x), x, grad_output=make(s))
    xv, sv = rand((3, 6)), rand(shape, seed=4)
    xt = torch.tensor(xv, requires_grad=True)
    want, = torch.autograd.grad(f(xt), xt, grad_outputs=make(torch.tensor(sv)))
    got = lm.compile(gx, backend=backend)(x=xv, s=sv)
    close(got, want)


def test_loss_that_is_a_view_of_the_target(backend):
    """The 'loss' is x itself read through a view (no op at all): the seed is sent back through it."""
    g = lm.Graph()
    x, s = g.input("x", (3, 4)), g.input("s", (4, 2, 3))
    y = rev(x.T, 1)[:, None].expand(4, 2, 3)
    gx = train.grad(y, x, grad_output=s)
    gy = train.grad(pad(x, (1, -1), 3.0)[1:, ::-1].sum(), x)
    sv = rand((4, 2, 3), seed=1)
    xt = torch.tensor(rand((3, 4)), requires_grad=True)
    want, = torch.autograd.grad(rev(xt.T, 1)[:, None].expand(4, 2, 3), xt, grad_outputs=torch.tensor(sv))
    want2, = torch.autograd.grad(tF.pad(xt, (1, -1), value=3.0)[1:].flip(1).sum(), xt)
    got = lm.compile([gx, gy], backend=backend)(x=rand((3, 4)), s=sv)
    close(got[0], want)
    close(got[1], want2)


@pytest.mark.parametrize("name", ["element", "element_of_flip", "element_of_pad", "padded_transposed_seeded"])
def test_losses_that_are_views(name, backend):
    """A 0-d loss that is one element of x (a view with an offset, no op), one that reads only a pad
    value, and a padded view seeded by grad_output."""
    g = lm.Graph()
    x, s = g.input("x", (3, 4)), g.input("s", (7, 3))
    fs = {"element": lambda x: x[1, 2], "element_of_flip": lambda x: x.flip(0)[0, -1],
          "element_of_pad": lambda x: pad(x, (1, 0), 2.0)[0, 0],
          "padded_transposed_seeded": lambda x: pad(x, (1, 2), 3.0).T}
    f = fs[name]
    seeded = name == "padded_transposed_seeded"
    gx = train.grad(f(x), x, grad_output=s if seeded else None)
    xv, sv = rand((3, 4)), rand((7, 3), seed=1)
    xt = torch.tensor(xv, requires_grad=True)
    want, = torch.autograd.grad(f(xt), xt, grad_outputs=torch.tensor(sv) if seeded else None)
    close(lm.compile(gx, backend=backend)(x=xv, s=sv), want)


@pytest.mark.parametrize("x_dtype,seed_dtype", [(lm.float32, lm.float64), (lm.float16, lm.float32)], ids=str)
def test_grad_output_of_another_dtype(x_dtype, seed_dtype):
    """Found by this audit (fixed): the gradient took grad_output's dtype (float64 for a float32 input);
    torch casts the seed to the output's dtype."""
    g = lm.Graph()
    x, s = g.input("x", (3, 4), dtype=x_dtype), g.input("s", (4, 3), dtype=seed_dtype)
    gx = train.grad(x.T.sin(), x, grad_output=s)
    assert gx.dtype is x_dtype


def test_state_read_through_views(backend):
    """A parameter (State) read only through views, several times, in a loss on a view of it."""
    w = State(rand((4, 6)), name="w")
    g = lm.Graph()
    x = g.input("x", (3, 4))
    wv = g.state(w)
    loss = ((x @ rev(wv, 1, 2)).tanh().sum() + (wv.unfold(1, 3, 2) * wv[:, None, :3]).sum()
            + pad(wv.T, (1, 0), 1.0)[::2].pow(2).mean())
    gw = train.grad(loss, w)
    xv = rand((3, 4), seed=1)
    xt, wt = torch.tensor(xv), torch.tensor(w.data, requires_grad=True)
    ref = ((xt @ wt.flip(1)[:, ::2]).tanh().sum() + (wt.unfold(1, 3, 2) * wt[:, None, :3]).sum()
           + tF.pad(wt.T, (1, 0), value=1.0)[::2].pow(2).mean())
    want, = torch.autograd.grad(ref, wt)
    close(lm.compile(gw, backend=backend)(x=xv), want)


def test_allow_unused_with_views(backend):
    """Targets read only through views that read nothing of them (a crop of the whole dim, an empty
    slice) get zeros, as a target not read at all does with allow_unused."""
    g = lm.Graph()
    x, y, z, u = g.input("x", (3, 4)), g.input("y", (3, 2)), g.input("z", (5,)), g.input("u", (2,))
    loss = (x.unfold(1, 2, 1) ** 2).sum() + pad(y, (3, 0), 1.0)[:, :3].sum() + z[4:1].sum()
    gx, gy, gz, gu = train.grad(loss, [x, y, z, u], allow_unused=True)
    xv = rand((3, 4))
    got = lm.compile([gx, gy, gz, gu], backend=backend)(x=xv, y=rand((3, 2)), z=rand((5,)))
    xt = torch.tensor(xv, requires_grad=True)
    close(got[0], torch.autograd.grad((xt.unfold(1, 2, 1) ** 2).sum(), xt)[0])
    for a, shape in zip(got[1:], [(3, 2), (5,), (2,)]):
        np.testing.assert_array_equal(a, np.zeros(shape, np.float32))


def test_several_grad_calls_on_one_graph(backend):
    """Two losses over one forward graph, differentiated by separate train.grad calls (one of them
    twice), compiled into one program: each backward graph stands alone."""
    def parts(x, w):
        h = (x.unfold(1, 3, 1) * w).sum(-1)               # (4, 4)
        return (h * h.T).sum(), (rev(h, 0)[:, 1:] - x[:, :3]).pow(2).mean()

    g = lm.Graph()
    x, w = g.input("x", (4, 6)), g.input("w", (3,))
    l1, l2 = parts(x, w)
    g1 = train.grad(l1, [x, w])
    g2 = train.grad(l2, [w, x])
    g1_again = train.grad(l1, x)
    g12 = train.grad(l1 + l2 * 3, x)
    xv, wv = rand((4, 6)), rand((3,), seed=1)
    got = lm.compile([*g1, *g2, g1_again, g12], backend=backend)(x=xv, w=wv)
    xt, wt = torch.tensor(xv, requires_grad=True), torch.tensor(wv, requires_grad=True)
    t1, t2 = parts(xt, wt)
    w1 = torch.autograd.grad(t1, [xt, wt], retain_graph=True)
    w2 = torch.autograd.grad(t2, [wt, xt], retain_graph=True)
    w12 = torch.autograd.grad(t1 + t2 * 3, xt)
    for k, (a, b) in enumerate(zip(got, [*w1, *w2, w1[0], w12[0]])):
        close(a, b, f"gradient {k}")


DOUBLE = {  # f(x, w) -> scalar; the test differentiates |grad_x f|^2 + <grad_x f, x> + |grad_w f|^2
    "windows_sin": lambda x, w: (x.unfold(1, 3, 1) * w).sum(-1).sin().sum(),
    "padded_negstep_exp": lambda x, w: (rev(pad(x, (1, 2), 0.5), 1, 2) * w[:, :1]).exp().sum(),
    "matmul_of_views": lambda x, w: ((x.T @ rev(x, 0)) * w[:1, :1]).tanh().sum() + (x * x.T[:, :1].T).sum(),
    "shifted_product": lambda x, w: (x[1:] * x[:-1] * w[1:, :1]).pow(2).sum(),
    "amax_of_pad": lambda x, w: (pad(x * w[:, :1], (1, 1), -5.0).amax(1) ** 2).sum(),
    "gather_repeats": lambda x, w: (x.gather(1, long(idx_t(x))) * w[:, 1:2]).pow(3).sum(),
    "softmax_of_expand": lambda x, w: (x[:, None].expand(4, 2, 6).softmax(1) * x.unsqueeze(1)).sum()
    + (w * w.flip(0)).sum(),
}


def idx_t(x):
    i = np.array([[0, 5, 5, 1], [3, 3, 3, 0], [1, 0, 1, 1], [2, 2, 4, 4]], np.int32)
    return torch.tensor(i).long() if is_torch(x) else x.graph.constant(i)


@pytest.mark.parametrize("name", DOUBLE)
def test_double_backward(name, backend):
    """Gradients of gradients (train.grad differentiates the graphs it builds), against torch's
    create_graph=True."""
    f = DOUBLE[name]

    def second(gx, gw, x):
        return (gx * gx).sum() + (gx * x).sum() + (gw * gw).sum()

    g = lm.Graph()
    x, w = g.input("x", (4, 6)), g.input("w", (4, 3))
    gx, gw = train.grad(f(x, w), [x, w])
    hx, hw = train.grad(second(gx, gw, x), [x, w], allow_unused=True)
    xv, wv = rand((4, 6)), rand((4, 3), seed=1)
    got = lm.compile([gx, gw, hx, hw], backend=backend)(x=xv, w=wv)
    xt, wt = torch.tensor(xv, requires_grad=True), torch.tensor(wv, requires_grad=True)
    tgx, tgw = torch.autograd.grad(f(xt, wt), [xt, wt], create_graph=True)
    want = torch.autograd.grad(second(tgx, tgw, xt), [xt, wt], allow_unused=True)
    want = [np.zeros_like(v) if t is None else t for t, v in zip(want, (xv, wv))]
    for k, (a, b) in enumerate(zip(got, [tgx, tgw, *want])):
        close(a, b, f"{['gx', 'gw', 'hx', 'hw'][k]}")


def test_sequence_major_reads_of_a_symbolic_batch_are_one_piece():
    """A batch-first ``MultiheadAttention`` reads its ``("B", S, E)`` input sequence-major. The gradient
    of those reads is one box of the buffer; it used to be built as a sum of S padded pieces (the box
    test could not tell that ``0 // (16*B)`` is 0), which made a GPT block's backward kernels sum 64
    masked loads per element: the graph grew with S, and the step ran 1.6x slower."""
    from luminal import nn

    added = {}
    for s in (4, 8):
        g = lm.Graph()
        x = g.input("x", ("B", s, 16))
        attn = nn.MultiheadAttention(16, 2, batch_first=True)
        loss = attn(x, x, x, need_weights=False, is_causal=True)[0].sum()
        before = len(g.nodes)
        train.grad(loss, [x, *attn.parameters()])
        added[s] = len(g.nodes) - before
    assert added[4] == added[8], added


def test_a_crop_gradient_under_an_empty_binding(backend):
    """The gradient of a crop reads its adjoint through a box of the input's buffer whose bounds divide
    by the input's strides (``1 // (4*S)`` here). With ``S = 0`` nothing is read, but evaluating the
    bounds divided by zero in both backends (found by the fuzzer: ``build(seed=1000001, n_ops=2,
    grad=True)``); a non-empty binding of the same program must still match torch."""
    g = lm.Graph()
    x = g.input("x", (3, "S", 4))
    y = x.pad((-1, 0, 2, 2), 1.0)
    (gx,) = train.grad((y * y).sum(), [x])
    f = lm.compile([y, gx], backend=backend)
    for s in (0, 3, 0):
        xv = rand((3, s, 4), seed=s)
        got_y, got_gx = f(x=xv)
        xt = torch.tensor(xv, requires_grad=True)
        yt = tF.pad(xt, (-1, 0, 2, 2), value=1.0)
        (want_gx,) = torch.autograd.grad((yt * yt).sum(), [xt])
        close(got_y, yt, f"y under S={s}")
        close(got_gx, want_gx, f"the gradient under S={s}")

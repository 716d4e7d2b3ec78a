"""One compiled object, called under a changing binding of its symbolic dims.

Why this file: a compiled CPU program allocates its buffers, views and lowered calls once per binding
(``luminal/cpu/compiled.py``: ``Binding``, at most ``MAX_BINDINGS`` kept) and caches the views over
the caller's arrays by array identity (``Binding._rebind``). The size-dependent choices (GEMM or
reduction, small-reduce unrolling, storage layouts, masked loads) are made per binding, so a result
can only be trusted if *every* binding of the same object is right, in any order: growing, shrinking
to 0 and 1, and coming back to an earlier binding with new data. The other tests run a graph under
one or two bindings; here each call sequence is B=3, 0, 1, 3 (new data every call), every result is
kept and checked again after the later calls (nothing returned may alias a buffer a later call
writes), and the caller's arrays are mutated in place, given as non-contiguous/read-only views, as
lists and in the wrong dtype. Values are compared with torch (``parity``'s tolerances, gradients
included) on both backends, which also checks ``backend="reference"`` under the same sequences.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity import _compare_grads, _luminal_grads, compare_outputs, rand, to_torch

import luminal as lm
from luminal import nn, train
from luminal.backends.cpu.compiled import MAX_BINDINGS
from luminal.core.dtype import as_dtype
from luminal.frontend.seed import manual_seed
from luminal.frontend.state import State

pytestmark = pytest.mark.filterwarnings(r"ignore:var\(\). degrees of freedom:UserWarning")  # torch, at N <= 1
TF = torch.nn.functional
I32 = lm.int32
f32 = np.float32
SIZES = (3, 0, 1, 3)  # grow, empty, one, back to the first binding (with new data)
S = lm.sym("S")


def _tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def cycle(op, make, shapes, *, backend, torch_op=None, sizes=SIZES, dtypes=None, grad=True):
    """Compile ``op`` once; for call k with size n = ``sizes[k]``, run it on ``make(n, k)`` and compare
    outputs (and the gradients of their sum w.r.t. the float inputs) with torch. At the end, every
    result of every call must still hold its value, and no two results may share memory."""
    first = make(sizes[0], 0)
    dtypes = dtypes or [as_dtype(a.dtype) for a in first]
    g = lm.Graph()
    xs = [g.input(f"x{i}", s, dtype=d) for i, (s, d) in enumerate(zip(shapes, dtypes, strict=True))]
    outs = _tuple(op(*xs))
    diff = [i for i, d in enumerate(dtypes) if d.is_float] if grad else []
    float_outs = [k for k, o in enumerate(outs) if o.dtype.is_float]
    grads = _luminal_grads(outs, float_outs, [xs[i] for i in diff]) if diff and float_outs else None
    f = lm.compile(list(outs) + [x for x in (grads or []) if x is not None], backend=backend)
    kept = []
    for call, n in enumerate(sizes):
        inputs = make(n, call)
        leaves = [to_torch(a, d) for a, d in zip(inputs, dtypes, strict=True)]
        for i in diff:
            leaves[i].requires_grad_(True)
        refs = _tuple((torch_op or op)(*leaves))
        got = _tuple(f(**{f"x{i}": a for i, a in enumerate(inputs)}))
        where = f"call {call} (size {n}), "
        if grads is not None:
            _compare_grads(got[len(outs):], grads, refs, float_outs, [leaves[i] for i in diff],
                           [dtypes[i] for i in diff], None, None, False, where=where)
        compare_outputs(outs, got[:len(outs)], refs, where=where)
        kept.append([(a, a.copy()) for a in got])
    assert_kept(kept)
    return f


def assert_kept(kept):
    """``kept``: per call, [(returned array, copy taken right away)]: later calls changed nothing."""
    for call, res in enumerate(kept):
        for k, (a, c) in enumerate(res):
            np.testing.assert_array_equal(a, c, err_msg=f"result {k} of call {call} changed by a later call")
    arrays = [a for res in kept for a, _ in res if a.size]
    for i, a in enumerate(arrays):
        assert a.flags.writeable and a.flags.c_contiguous
        assert not any(np.may_share_memory(a, b) for b in arrays[i + 1:]), "two results share memory"


def R(*shape, seed=0):
    return rand(shape, seed=seed)


def idx(shape, hi, seed=0):
    return np.random.default_rng(seed + 100).integers(0, max(hi, 1), size=shape).astype(np.int32)


# --- ops whose lowering depends on the sizes -----------------------------------------------------
CASES = {  # name: (graph shapes, make(n, seed), op, torch op or None for the same)
    "matmul_rows_B": ([("B", 4), (4, 3)], lambda n, s: [R(n, 4, seed=s), R(4, 3, seed=s + 1)],
                      lambda a, b: a @ b, None),
    "matmul_inner_K": ([(2, "K"), ("K", 3)], lambda n, s: [R(2, n, seed=s), R(n, 3, seed=s + 1)],
                       lambda a, b: a @ b, None),  # K = 0: zeros
    "bmm_batch_and_inner_B": ([("B", 2, "B"), ("B", "B", 3)], lambda n, s: [R(n, 2, n, seed=s), R(n, n, 3, seed=s + 1)],
                              lambda a, b: a @ b, None),
    "linear_bias_relu_K": ([(5, "K"), (3, "K"), (3,)],
                           lambda n, s: [R(5, n, seed=s), R(3, n, seed=s + 1), R(3, seed=s)],
                           lambda x, w, b: (x @ w.T + b).relu(), None),
    "vec_dot_K": ([("K",), ("K",)], lambda n, s: [R(n, seed=s), R(n, seed=s + 1)], lambda a, b: a @ b, None),
    "reduce_inner_N": ([(4, "N")], lambda n, s: [R(4, n, seed=s)],
                       lambda x: (x.sum(1), x.mean(1), x.softmax(1), x.log_softmax(-1), x.logsumexp(1),
                                  x.cumsum(1), x.sum(), x.var(1, correction=0)), None),
    "reduce_outer_B_keepdim": ([("B", 3)], lambda n, s: [R(n, 3, seed=s)],
                               lambda x: (x.sum(0, keepdim=True), x.mean((0, 1), keepdim=True), x.logsumexp(0, True),
                                          x.softmax(0) * x, x.amax(1), x.argmax(1), (x > 0).sum(0)), None),
    "gather_index_select_scatter_add_B": (
        [("B", 4), ("B", 4), ("B",)], lambda n, s: [R(n, 4, seed=s), idx((n, 4), 4, s), idx((n,), 4, s)],
        lambda x, i, j: (x.gather(1, i), x.index_select(1, j), x.scatter_add(1, i, x * 2), x.T[j]),
        lambda x, i, j: (x.gather(1, i.long()), x.index_select(1, j.long()), x.scatter_add(1, i.long(), x * 2),
                         x.T[j.long()])),
    "index_into_B_with_K_indices": ([("B", 3), ("K",)], lambda n, s: [R(n + 1, 3, seed=s), idx((n,), n + 1, s)],
                                    lambda x, i: x[i] * 2, lambda x, i: x[i.long()] * 2),
    "movement_B": ([("B", 4)], lambda n, s: [R(n, 4, seed=s)],
                   lambda x: (x.pad((1, 2, 0, 1), 3.0), x[1:], x[:-1], x.flip(0), x.unfold(1, 2, 1), x[::-2],
                              x.T.reshape(-1), x.repeat(2, 1), lm.cat([x, x[:1] + 1], 0)),
                   lambda t: (TF.pad(t, (1, 2, 0, 1), value=3.0), t[1:], t[:-1], t.flip(0), t.unfold(1, 2, 1),
                              t.flip(0)[::2], t.T.reshape(-1), t.repeat(2, 1), torch.cat([t, t[:1] + 1], 0))),
    "unfold_pad_along_B": ([("B", 3)], lambda n, s: [R(n + 2, 3, seed=s)],
                           lambda x: (x.unfold(0, 2, 1).sum(-1), x.pad((0, 0, 1, 1)).unfold(0, 3, 2).amax(-1)),
                           lambda t: (t.unfold(0, 2, 1).sum(-1), TF.pad(t, (0, 0, 1, 1)).unfold(0, 3, 2).amax(-1))),
    "dims_S_and_S_plus_1": ([("S", 3), (S + 1, 3), (S, S + 1)],
                            lambda n, s: [R(n, 3, seed=s), R(n + 1, 3, seed=s + 1), R(n, n + 1, seed=s + 2)],
                            lambda a, b, c: (lm.cat([a, b], 0).flip(0), b[1:] * b[:-1], c[:, 1:] + c[:, :-1], c @ b,
                                             c.T @ a),
                            lambda a, b, c: (torch.cat([a, b], 0).flip(0), b[1:] * b[:-1], c[:, 1:] + c[:, :-1], c @ b,
                                             c.T @ a)),
    "dim_2B": ([(2 * lm.sym("B"),), ("B", 2)], lambda n, s: [R(2 * n, seed=s), R(n, 2, seed=s + 1)],
               lambda a, b: (a.reshape(-1, 2) * b, a.reshape(2, -1).T.cumsum(0),
                             lm.stack([b, b], 1).reshape(-1, 2)),
               lambda a, b: (a.reshape(-1, 2) * b, a.reshape(2, -1).T.cumsum(0),
                             torch.stack([b, b], 1).reshape(-1, 2))),
    "losses_B": ([("B", 5), ("B",), ("B", 5)], lambda n, s: [R(n, 5, seed=s), idx((n,), 5, s), R(n, 5, seed=s + 1)],
                 lambda x, y, t: (train.cross_entropy(x, y), train.cross_entropy(x, y, reduction="sum"),
                                  train.cross_entropy(x, y, reduction="none"), train.nll_loss(x.log_softmax(-1), y),
                                  train.mse_loss(x, t), train.l1_loss(x, t), train.smooth_l1_loss(x, t),
                                  train.binary_cross_entropy_with_logits(x, t.sigmoid())),
                 lambda x, y, t: (TF.cross_entropy(x, y.long()), TF.cross_entropy(x, y.long(), reduction="sum"),
                                  TF.cross_entropy(x, y.long(), reduction="none"),
                                  TF.nll_loss(x.log_softmax(-1), y.long()),
                                  TF.mse_loss(x, t), TF.l1_loss(x, t), TF.smooth_l1_loss(x, t),
                                  TF.binary_cross_entropy_with_logits(x, t.sigmoid()))),
    "sdpa_S_queries_S_plus_1_keys": (
        [(2, "S", 4), (2, S + 1, 4), (2, S + 1, 4)],
        lambda n, s: [R(2, n, 4, seed=s), R(2, n + 1, 4, seed=s + 1), R(2, n + 1, 4, seed=s + 2)],
        lambda q, k, v: nn.scaled_dot_product_attention(q, k, v), TF.scaled_dot_product_attention),
    "sdpa_causal_S": ([(1, 2, "S", 4)] * 3, lambda n, s: [R(1, 2, n, 4, seed=s + j) for j in range(3)],
                      lambda q, k, v: nn.scaled_dot_product_attention(q, k, v, is_causal=True),
                      lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=True)),
}


@pytest.mark.parametrize("name", CASES)
def test_one_object_many_bindings(name, backend):
    shapes, make, op, top = CASES[name]
    cycle(op, make, shapes, torch_op=top, backend=backend)


def _load(ours, theirs):
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


LAYERS = {  # name: (build (ours, torch module), graph shape, array shape for n, sizes)
    "conv2d_relu_maxpool_B": (lambda: (nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)),
                                       torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3, padding=1), torch.nn.ReLU(),
                                                           torch.nn.MaxPool2d(2))),
                              ("B", 2, 6, 6), lambda n: (n, 2, 6, 6), SIZES),
    "conv1d_avgpool_L": (lambda: (nn.Sequential(nn.Conv1d(2, 3, 3), nn.AvgPool1d(2)),
                                  torch.nn.Sequential(torch.nn.Conv1d(2, 3, 3), torch.nn.AvgPool1d(2))),
                         (2, 2, "L"), lambda n: (2, 2, n + 4), SIZES),  # pooled length (L-2)//2: 1, 1, 1, 1+
    "conv2d_HW": (lambda: (nn.Conv2d(2, 3, 3, stride=2, padding=1), torch.nn.Conv2d(2, 3, 3, stride=2, padding=1)),
                  (1, 2, "H", "W"), lambda n: (1, 2, n + 1, 2 * n + 1), SIZES),
    "layernorm_linear_B": (lambda: (nn.Sequential(nn.LayerNorm(4), nn.Linear(4, 3)),
                                    torch.nn.Sequential(torch.nn.LayerNorm(4), torch.nn.Linear(4, 3))),
                           ("B", 4), lambda n: (n, 4), SIZES),
    "mha_S_batch_first": (lambda: (nn.MultiheadAttention(8, 2, batch_first=True),
                                   torch.nn.MultiheadAttention(8, 2, batch_first=True)),
                          (2, "S", 8), lambda n: (2, n, 8), (3, 1, 2, 3)),
}


@pytest.mark.parametrize("name", LAYERS)
def test_layers_many_bindings(name, backend):
    build, shape, arr, sizes = LAYERS[name]
    torch.manual_seed(0)
    ours, theirs = _load(*build())
    if name.startswith("mha"):
        op = lambda x: ours(x, x, x)  # noqa: E731  (output, head-averaged weights)
        top = lambda t: theirs(t, t, t)  # noqa: E731
    else:
        op, top = ours, theirs
    cycle(op, lambda n, s: [R(*arr(n), seed=s)], [shape], torch_op=top, backend=backend, sizes=sizes)


def test_embedding_symbolic_sequence(backend):
    torch.manual_seed(0)
    ours, theirs = _load(nn.Embedding(7, 4, padding_idx=0), torch.nn.Embedding(7, 4, padding_idx=0))
    cycle(lambda i: (ours(i), ours(i).sum(1)), lambda n, s: [idx((2, n), 7, s)], [(2, "S")],
          torch_op=lambda i: (theirs(i.long()), theirs(i.long()).sum(1)), backend=backend)


def test_many_bindings_evict_and_come_back(backend):
    """More distinct bindings than the program keeps, then the first ones again."""
    sizes = tuple(range(MAX_BINDINGS + 3)) + (0, 1, 2, MAX_BINDINGS + 2)
    cycle(lambda x, w: ((x @ w).relu().sum(1), x.cumsum(0)), lambda n, s: [R(n, 4, seed=s), R(4, 3, seed=s + 1)],
          [("B", 4), (4, 3)], backend=backend, sizes=sizes, grad=False)


def test_max_over_an_axis_bound_to_zero_raises_then_recovers(backend):
    # torch: "amax(): Expected reduction dim 0 to have non-zero size"; a static (0, 3) input is rejected
    # when the op is built (test_reduce.test_reduce_errors); a symbolic one when it runs
    g = lm.Graph()
    x = g.input("x", ("B", 3))
    f = lm.compile([x.amax(0), x.argmax(0), x.sum(0)], backend=backend)
    X = R(3, 3)
    first = f(x=X)
    keep = [a.copy() for a in first]
    for _ in range(2):  # a failed binding is not cached half-built
        with pytest.raises(IndexError, match=r"max: reducing dim 0 of a \(B, 3\) tensor, which is empty"):
            f(x=np.zeros((0, 3), f32))
    again = f(x=X * 2)
    np.testing.assert_array_equal(again[0], X.max(0) * 2)
    np.testing.assert_array_equal(again[1], X.argmax(0))
    for a, k in zip(first, keep, strict=True):
        np.testing.assert_array_equal(a, k)
    one = f(x=X[:1])
    np.testing.assert_array_equal(one[0], X[0])


# --- a training step under changing batch sizes ----------------------------------------------------
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(6, 8), nn.Linear(8, 4)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


def _torch_mlp(m):
    t = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    sd = m.state_dict()
    t.load_state_dict({"0.weight": torch.tensor(sd["fc1.weight"]), "0.bias": torch.tensor(sd["fc1.bias"]),
                       "2.weight": torch.tensor(sd["fc2.weight"]), "2.bias": torch.tensor(sd["fc2.bias"])})
    return t


def _batches(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((b, 6)).astype(f32), rng.integers(0, 4, b).astype(np.int32)) for b in sizes]


@pytest.mark.parametrize("opt_cls,kw,clip", [("AdamW", dict(lr=1e-2), dict(clip_grad_norm=0.5)),
                                             ("SGD", dict(lr=0.1, momentum=0.9), {})])
def test_train_step_with_changing_batch_size(backend, opt_cls, kw, clip):
    """One compiled step, batches of 5, 1, 3, 0, 5, 2: losses, logits, gradient norms and weights track
    torch's (a 0-row batch: NaN mean loss, zero gradients, and the optimizer still steps, as torch)."""
    manual_seed(0)
    model = MLP()
    tm = _torch_mlp(model)
    g = lm.Graph()
    x, y = g.input("x", ("B", 6)), g.input("y", ("B",), dtype=I32)
    logits = model(x)
    opt = getattr(train, opt_cls)(model.parameters(), **kw)
    step = train.compile_step(train.cross_entropy(logits, y), opt, backend=backend, outputs=[logits], **clip)
    topt = getattr(torch.optim, opt_cls)(tm.parameters(), foreach=False, **kw)
    kept = []
    for k, (xb, yb) in enumerate(_batches((5, 1, 3, 0, 5, 2))):
        loss, lg = step(x=xb, y=yb)
        topt.zero_grad()
        tl_logits = tm(torch.tensor(xb))
        tl = TF.cross_entropy(tl_logits, torch.tensor(yb).long())
        tl.backward()
        if clip:
            norm = torch.nn.utils.clip_grad_norm_(tm.parameters(), clip["clip_grad_norm"])
            assert step.last_grad_norm == pytest.approx(norm.item(), rel=1e-5, abs=1e-7), f"step {k}"
        topt.step()
        np.testing.assert_allclose(loss, tl.item(), rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=f"step {k}")
        np.testing.assert_allclose(lg, tl_logits.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=f"step {k}")
        kept.append([(lg, lg.copy())])
        for name, p in (("fc1.weight", tm[0].weight), ("fc2.bias", tm[2].bias)):
            np.testing.assert_allclose(model.state_dict()[name], p.detach().numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=f"{name} after step {k}")
    assert_kept(kept)


def test_train_step_accumulation_over_changing_batch_sizes(backend):
    """accumulate=2 with micro-batches of 3 and 1, then 0 and 4, then 2 and 2 (torch: loss / 2 each)."""
    manual_seed(1)
    model = MLP()
    tm = _torch_mlp(model)
    g = lm.Graph()
    x, y = g.input("x", ("B", 6)), g.input("y", ("B",), dtype=I32)
    opt = train.Adam(model.parameters(), lr=1e-2)
    step = train.compile_step(train.cross_entropy(model(x), y), opt, backend=backend, accumulate=2)
    topt = torch.optim.Adam(tm.parameters(), lr=1e-2, foreach=False)
    for k, (xb, yb) in enumerate(_batches((3, 1, 0, 4, 2, 2), seed=1)):
        step(x=xb, y=yb)
        if len(yb):  # torch's backward of a 0-row mean gives zero parameter gradients too
            (TF.cross_entropy(tm(torch.tensor(xb)), torch.tensor(yb).long()) / 2).backward()
        if k % 2 == 1:
            topt.step()
            topt.zero_grad()
            np.testing.assert_allclose(model.state_dict()["fc1.weight"], tm[0].weight.detach().numpy(),
                                       rtol=1e-5, atol=1e-6, err_msg=f"after call {k}")
    assert opt.steps == 3


# --- the caller's arrays ---------------------------------------------------------------------------
def _graph():
    g = lm.Graph()
    x, w = g.input("x", ("B", 4)), g.input("w", (4, 3))
    # a GEMM, a reduction over B, the input itself and views of it (outputs that read the caller's array)
    return [(x @ w).relu(), x.sum(0), x, x.T, x[::-1], x.reshape(-1)], lambda X, W: [
        np.maximum(X @ W, 0), X.sum(0), X, X.T, X[::-1], X.reshape(-1)]


def _check(got, want):
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a.shape == b.shape, f"output {k}"
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=f"output {k}")


def test_inputs_mutated_in_place_between_calls_and_bindings(backend):
    outs, want = _graph()
    f = lm.compile(outs, backend=backend)
    rng = np.random.default_rng(0)
    X, W = rng.standard_normal((3, 4)).astype(f32), rng.standard_normal((4, 3)).astype(f32)
    kept = []
    for k in range(6):
        got = f(x=X, w=W)  # the same array objects every call
        _check(got, want(X, W))
        assert not any(np.may_share_memory(a, X) or np.may_share_memory(a, W) for a in got)
        kept.append([(a, a.copy()) for a in got])
        X[:] = rng.standard_normal(X.shape)  # new values, same objects
        W[k % 4, :] += 1
        if k % 2:  # another binding runs in between, with arrays of its own
            other = rng.standard_normal((k, 4)).astype(f32)
            _check(f(x=other, w=W), want(other, W))
    assert_kept(kept)


def test_state_mutated_replaced_and_set_between_bindings(backend):
    """A State read by the graph: changed in place, replaced by a new array, ``set``; each binding
    must read the current value (the array identity cache is per binding)."""
    st = State(np.ones((4, 3), f32), name="w")
    g = lm.Graph()
    x = g.input("x", ("B", 4))
    f = lm.compile(x @ g.state(st), backend=backend)
    X = {b: R(b, 4, seed=b) for b in (1, 2, 3)}
    for k, change in enumerate([lambda: None, lambda: st.data.__imul__(2), lambda: setattr(st, "data", st.data + 1),
                                lambda: st.set(np.full((4, 3), -1.0)), lambda: st.data.fill(0.5)]):
        change()
        for b in (3, 1, 2, 3) if k % 2 else (2, 3, 1):
            np.testing.assert_allclose(f(x=X[b]), X[b] @ st.data, rtol=1e-5, atol=1e-6, err_msg=f"change {k}, B={b}")


def test_non_contiguous_and_read_only_inputs(backend):
    outs, want = _graph()
    f = lm.compile(outs, backend=backend)
    rng = np.random.default_rng(1)
    base = rng.standard_normal((8, 10)).astype(f32)
    W = np.asfortranarray(rng.standard_normal((4, 3)).astype(f32))
    views = {
        "strided": lambda: base[::2, 1:9:2],
        "negative_strides": lambda: base[::-3, ::-2][:, :4],
        "transposed": lambda: base[:4, :3].T,
        "size_1_rows_strided": lambda: base[2:3, ::3][:, :4],
        "empty_strided": lambda: base[:0, ::2][:, :4],
        "broadcast_read_only": lambda: np.broadcast_to(base[0, :4], (5, 4)),
        "read_only_copy": lambda: np.require(base[:3, :4].copy(), requirements="C"),
    }
    for name, make in views.items():
        for _ in range(2):
            xv = make()
            if name == "read_only_copy":
                xv.flags.writeable = False
            assert not xv.flags.c_contiguous or name in ("read_only_copy", "size_1_rows_strided", "empty_strided")
            _check(f(x=xv, w=W), want(np.array(xv), np.array(W)))
            base[:] = rng.standard_normal(base.shape)  # the views' base changes: the next call must see it


def test_int_lists_and_wrong_dtypes_between_good_calls(backend):
    g = lm.Graph()
    x, i = g.input("x", ("B", 3)), g.input("i", ("K",), dtype=I32)
    f = lm.compile([x[i].sum(1), i * 2], backend=backend)
    X = R(4, 3)
    s, d = f(x=X, i=[3, 0, 0])  # a list of ints: converted to int32
    s_first = s.copy()
    np.testing.assert_allclose(s, X[[3, 0, 0]].sum(1), rtol=1e-6)
    assert d.dtype == np.int32 and d.tolist() == [6, 0, 0]
    s2, d2 = f(x=X, i=np.array([1], np.int64))  # int64 array: converted (values fit)
    np.testing.assert_allclose(s2, X[[1]].sum(1), rtol=1e-6)
    with pytest.raises(TypeError, match=r"input 'x': expected dtype float32, got float64.*astype\(np.float32\)"):
        f(x=X.astype(np.float64), i=[0])
    s3, _ = f(x=X.tolist(), i=[0])  # a Python list has no dtype of its own: it takes the input's
    np.testing.assert_allclose(s3, X[[0]].sum(1), rtol=1e-6)
    with pytest.raises(TypeError, match=r"input 'i': expected dtype int32, got float32"):
        f(x=X, i=np.zeros(2, f32))
    with pytest.raises(ValueError, match=r"input 'i': integer values do not fit in int32"):
        f(x=X, i=np.array([2**40]))
    X[:] += 1  # the object cached by the first call, changed after the failed calls
    s3, d3 = f(x=X, i=[2, 2])
    np.testing.assert_allclose(s3, X[[2, 2]].sum(1), rtol=1e-6)
    np.testing.assert_array_equal(s, s_first)  # the first result kept its value
    assert d3.tolist() == [4, 4] and d.tolist() == [6, 0, 0] and d2.tolist() == [2]


def test_one_array_for_two_inputs(backend):
    g = lm.Graph()
    a, b = g.input("a", ("B", 3)), g.input("b", ("B", 3))
    f = lm.compile([a * b, (a - b).sum(0), a @ b.T], backend=backend)
    A = R(4, 3)
    for k in range(3):
        got = f(a=A, b=A)
        _check(got, [A * A, np.zeros(3, f32), A @ A.T])
        B_ = R(*A.shape, seed=k + 1)
        _check(f(a=A, b=B_), [A * B_, (A - B_).sum(0), A @ B_.T])
        A = A[: 3 - k] if k < 2 else A


# --- bugs found (see the reasons) -----------------------------------------------------------------
def test_empty_int_list_for_an_index_input(backend):
    """Found here: [] was np.asarray([]), float64, and rejected for an int32 input ([0, 2] was accepted)."""
    g = lm.Graph()
    x, i = g.input("x", (4, 2)), g.input("i", ("N",), dtype=I32)
    f = lm.compile(x[i].sum(0), backend=backend)
    X = R(4, 2)
    np.testing.assert_allclose(f(x=X, i=[0, 2]), X[[0, 2]].sum(0), rtol=1e-6)
    np.testing.assert_array_equal(f(x=X, i=[]), np.zeros(2, f32))


def test_slice_of_S_plus_1_combines_with_S(backend):
    """Found here: (S+1)[1:] had length max(0, S), which did not broadcast with S (dmax did not use that
    dims are never negative), so a shifted sequence next to an S-long tensor failed to build."""
    cycle(lambda a, b: b[1:] - a, lambda n, s: [R(n, 3, seed=s), R(n + 1, 3, seed=s + 1)], [("S", 3), (S + 1, 3)],
          backend=backend)


NEGATIVE_DIMS = {  # ops over a symbolic dim L whose result size (L-2) is negative for L < 2
    "unfold": lambda x: x.unfold(0, 3, 1).sum(-1),
    "pad_crop": lambda x: x.pad((-2, 0)),
    "split_sections": lambda x: x.split([2, x.shape[0] - 2])[1],
}


@pytest.mark.parametrize("name", NEGATIVE_DIMS)
def test_negative_derived_dim_is_a_clear_error(name, backend):
    """Found here: a derived dim negative under the binding (L-2 at L=1, 0) was not checked when binding;
    the backends failed later with internal errors naming neither the op nor the dim."""
    g = lm.Graph()
    f = lm.compile(NEGATIVE_DIMS[name](g.input("x", ("L",))), backend=backend)
    assert f(x=np.arange(5, dtype=f32)).shape == (3,)
    for n in (1, 0):
        with pytest.raises(ValueError, match="L"):
            f(x=np.arange(n, dtype=f32))


def test_unfold_window_larger_than_the_bound_dim(backend):
    """Found here: a window larger than the bound symbolic dim gave an empty result; torch raises."""
    g = lm.Graph()
    f = lm.compile(g.input("x", ("L",)).unfold(0, 3, 1), backend=backend)
    assert f(x=np.arange(4, dtype=f32)).shape == (2, 3)
    with pytest.raises(ValueError, match="unfold"):
        f(x=np.arange(2, dtype=f32))


@pytest.mark.parametrize("reps", [(2, 2, 1), (2, 1, 1)])
def test_amax_over_size_1_axis_of_a_repeated_tensor(backend, reps):
    """Found here: the reference folded a Mul into a SumReduce that read it through a reshaping view and
    contracted the wrong axis (gradient 2, torch's 4, or an IndexError)."""
    cycle(lambda x: x.repeat(*reps).amax(2), lambda n, s: [R(4, n, 1, seed=s)], [(4, "B", 1)],
          torch_op=lambda t: t.repeat(*reps).amax(2), backend=backend, sizes=(2, 1, 3))

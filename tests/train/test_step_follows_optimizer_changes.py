"""A compiled train step follows changes to its optimizer's structure made after ``compile_step``, as torch's
next ``optimizer.step()`` does: an option or term switched on or off in ``param_groups`` (weight decay,
momentum, nesterov), a layer frozen or unfrozen (``requires_grad_``), a param group added. Before, the
compiled update went on computing the old one, silently; now the step is built and compiled again."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import nn, train

RNG = np.random.default_rng(0)
W0, V0 = RNG.normal(size=(3, 4)).astype(np.float32), RNG.normal(size=(2, 3)).astype(np.float32)
X, Y = RNG.normal(size=(8, 4)).astype(np.float32), RNG.normal(size=(8, 2)).astype(np.float32)


def _torch_loss(tw, tv):
    return ((torch.from_numpy(X) @ tw.T @ tv.T - torch.from_numpy(Y)) ** 2).mean()


def _both(topt, tw, tv, step) -> None:
    """One torch update and one call of the luminal step, on the same batch."""
    topt.zero_grad()
    _torch_loss(tw, tv).backward()
    topt.step()
    step(x=X, y=Y)


def _same(*pairs) -> None:
    for t, p in pairs:
        np.testing.assert_allclose(p.data, t.detach().numpy(), rtol=1e-5, atol=1e-6)


def _pair(name: str, kw: dict):
    tw, tv = torch.nn.Parameter(torch.from_numpy(W0.copy())), torch.nn.Parameter(torch.from_numpy(V0.copy()))
    lw, lv = nn.Parameter(W0.copy()), nn.Parameter(V0.copy())
    g = lm.Graph()
    x, y = g.input("x", (8, 4)), g.input("y", (8, 2))
    loss = (((x @ lw.on(g).T) @ lv.on(g).T) - y).pow(2).mean()
    return (tw, tv), (lw, lv), loss, getattr(torch.optim, name), getattr(train, name)


@pytest.mark.parametrize("name,kw,change", [
    ("Adam", dict(lr=0.1, weight_decay=0.1), {"weight_decay": 0.0}),
    ("Adam", dict(lr=0.1), {"weight_decay": 0.1}),
    ("AdamW", dict(lr=0.1, weight_decay=0.0), {"weight_decay": 0.1}),
    ("SGD", dict(lr=0.1, momentum=0.9), {"weight_decay": 0.1}),
    ("SGD", dict(lr=0.1, momentum=0.9), {"nesterov": True}),
    ("SGD", dict(lr=0.1, momentum=0.9), {"momentum": 0.0}),
    ("SGD", dict(lr=0.1), {"momentum": 0.9}),
    ("AdamW", dict(lr=0.1, weight_decay=0.1), {"weight_decay": 0.5, "lr": 0.05}),  # numbers only: no rebuild
], ids=lambda v: str(v))
def test_an_option_switched_in_param_groups_after_compile(name, kw, change):
    (tw, tv), (lw, lv), loss, topt_cls, lopt_cls = _pair(name, kw)
    topt, lopt = topt_cls([tw, tv], **kw), lopt_cls([lw, lv], **kw)
    step = train.compile_step(loss, lopt, backend="cpu")
    first = step._update
    for i in range(4):
        if i == 2:
            for opt in (topt, lopt):
                opt.param_groups[0].update(change)
        _both(topt, tw, tv, step)
    _same((tw, lw), (tv, lv))
    assert (step._update is first) == (change == {"weight_decay": 0.5, "lr": 0.05})  # (new numbers: no rebuild)
    assert step.calls == 4


def test_freezing_unfreezing_and_a_new_group_after_compile():
    """Staged fine-tuning: a frozen layer unfrozen after two steps trains from then on; one frozen stops; a
    param group added later is updated (with its own lr) from the next step, as in torch."""
    (tw, tv), (lw, lv), loss, *_ = _pair("SGD", {})
    tw.requires_grad_(False)
    lw.requires_grad_(False)
    topt, lopt = torch.optim.SGD([tv], lr=0.1), train.SGD([lv], lr=0.1)
    step = train.compile_step(loss, lopt, backend="cpu")

    _both(topt, tw, tv, step)
    for opt in (topt, lopt):  # a new group for the frozen layer, with its own lr
        opt.add_param_group({"params": [tw if opt is topt else lw], "lr": 0.05})
    _both(topt, tw, tv, step)
    np.testing.assert_array_equal(lw.data, W0)  # still frozen: added, but requires_grad is False
    tw.requires_grad_(True)
    lw.requires_grad_(True)
    _both(topt, tw, tv, step)
    _both(topt, tw, tv, step)
    assert not np.allclose(lw.data, W0)
    tv.requires_grad_(False)
    lv.requires_grad_(False)
    frozen = lv.data.copy()
    _both(topt, tw, tv, step)
    np.testing.assert_array_equal(lv.data, frozen)
    _same((tw, lw), (tv, lv))


def test_a_change_in_the_middle_of_an_accumulation_is_refused():
    (_, _), (lw, lv), loss, *_ = _pair("SGD", {})
    opt = train.SGD([lw, lv], lr=0.1)
    step = train.compile_step(loss, opt, backend="cpu", accumulate=2)
    step(x=X, y=Y)
    opt.param_groups[0]["momentum"] = 0.9
    with pytest.raises(ValueError, match=r"changed in the middle of a gradient accumulation \(micro-step 1 of 2\)"):
        step(x=X, y=Y)
    opt.param_groups[0]["momentum"] = 0.0
    step(x=X, y=Y)  # put back: the step goes on
    opt.param_groups[0]["momentum"] = 0.9
    step(x=X, y=Y)  # between updates: rebuilt
    assert step.micro_step == 1


def test_freezing_every_parameter_is_an_error_at_the_next_step():
    (_, _), (lw, lv), loss, *_ = _pair("SGD", {})
    step = train.compile_step(loss, train.SGD([lw, lv], lr=0.1), backend="cpu")
    step(x=X, y=Y)
    lw.requires_grad_(False)
    lv.requires_grad_(False)
    with pytest.raises(ValueError, match=r"every parameter of the optimizer is frozen \(requires_grad=False"):
        step(x=X, y=Y)


def test_a_failed_rebuild_leaves_the_step_as_it_was():
    """Every parameter frozen: the rebuild is refused, naming the change, and the step keeps its call count,
    last gradient norm and lock; unfrozen again, it goes on."""
    (_, _), (lw, lv), loss, *_ = _pair("SGD", {})
    step = train.compile_step(loss, train.SGD([lw, lv], lr=0.1), backend="cpu", clip_grad_norm=1.0)
    for _ in range(3):
        step(x=X, y=Y)
    norm, lock, update = step.last_grad_norm, step._lock, step._update
    lw.requires_grad_(False)
    lv.requires_grad_(False)
    with pytest.raises(ValueError, match="options changed since compile_step, and the step cannot be built"):
        step(x=X, y=Y)
    assert (step.calls, step.last_grad_norm, step._lock, step._update) == (3, norm, lock, update)
    lw.requires_grad_(True)
    lv.requires_grad_(True)
    step(x=X, y=Y)
    assert step.calls == 4 and step._lock is lock


def test_a_numpy_bool_option_and_an_in_place_change_of_the_loss_handle():
    """A group flag set to np.True_ counts as the option on (update() reads it so); the step rebuilds from
    the loss it was given, not from the caller's handle rebound by an in-place method since."""
    (tw, tv), (lw, lv), loss, *_ = _pair("SGD", {})
    topt, lopt = torch.optim.SGD([tw, tv], lr=0.1, momentum=0.9), train.SGD([lw, lv], lr=0.1, momentum=0.9)
    step = train.compile_step(loss, lopt, backend="cpu")
    loss.mul_(100.0)  # (the caller's handle only)
    for i in range(3):
        if i == 1:
            topt.param_groups[0]["nesterov"] = True
            lopt.param_groups[0]["nesterov"] = np.True_
        _both(topt, tw, tv, step)
    _same((tw, lw), (tv, lv))


@pytest.mark.parametrize("name,kw", [("Adam", dict(lr=0.01)), ("AdamW", dict(lr=0.01, weight_decay=0.1)),
                                     ("Adagrad", dict(lr=0.1, lr_decay=0.5)),
                                     ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.5))])
def test_a_layer_unfrozen_later_counts_its_own_steps(name, kw, tmp_path):
    """torch keeps a step count per parameter: a layer unfrozen at step 3 starts Adam's bias corrections
    (Adagrad's lr_decay, SGD's first momentum step) at its own step 1. The global count made its first
    updates about 3x larger for Adam. The counts survive a checkpoint."""
    (tw, tv), (lw, lv), loss, topt_cls, lopt_cls = _pair(name, kw)
    tw.requires_grad_(False)
    lw.requires_grad_(False)
    topt, lopt = topt_cls([tw, tv], **kw), lopt_cls([lw, lv], **kw)
    step = train.compile_step(loss, lopt, backend="cpu")

    for _ in range(3):
        _both(topt, tw, tv, step)
    tw.requires_grad_(True)
    lw.requires_grad_(True)
    _both(topt, tw, tv, step)
    train.save_checkpoint(tmp_path / "c.safetensors", optimizer=lopt)
    fresh = lopt_cls([lw, lv], **kw)
    step = train.compile_step(loss, fresh, backend="cpu")  # (compiled before the load: built again after it)
    train.load_checkpoint(tmp_path / "c.safetensors", optimizer=fresh)
    assert fresh.first_steps == {id(lw): 3, id(lv): 0}
    for _ in range(2):
        _both(topt, tw, tv, step)
    _same((tw, lw), (tv, lv))


@pytest.mark.parametrize("name,kw", [("Adam", dict(lr=0.01)), ("AdamW", dict(lr=0.01, weight_decay=0.1)),
                                     ("Adagrad", dict(lr=0.1, lr_decay=0.5)),
                                     ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.5))])
def test_a_layer_frozen_for_a_while_goes_on_from_its_own_step_count(name, kw, tmp_path):
    """torch skips a frozen parameter, its step count too: a layer trained 2 steps, frozen 3, unfrozen,
    takes its 3rd step next. Before, it counted the 3 it sat out (Adam's bias corrections of step 6); the
    count survives a checkpoint taken while it is frozen."""
    (tw, tv), (lw, lv), loss, topt_cls, lopt_cls = _pair(name, kw)
    topt, lopt = topt_cls([tw, tv], **kw), lopt_cls([lw, lv], **kw)
    step = train.compile_step(loss, lopt, backend="cpu")
    for _ in range(2):
        _both(topt, tw, tv, step)
    tw.requires_grad_(False)
    lw.requires_grad_(False)
    for _ in range(3):
        _both(topt, tw, tv, step)
    assert lopt.steps - lopt.first_steps[id(lw)] == 2 and lopt.steps - lopt.first_steps[id(lv)] == 5
    train.save_checkpoint(tmp_path / "c.safetensors", optimizer=lopt)
    fresh = lopt_cls([lw, lv], **kw)
    step = train.compile_step(loss, fresh, backend="cpu")
    train.load_checkpoint(tmp_path / "c.safetensors", optimizer=fresh)
    tw.requires_grad_(True)
    lw.requires_grad_(True)
    for _ in range(3):
        _both(topt, tw, tv, step)
    _same((tw, lw), (tv, lv))
    if name != "SGD":  # (torch's SGD keeps no step count)
        assert [topt.state[t]["step"].item() for t in (tw, tv)] == [fresh.steps - fresh.first_steps[id(p)]
                                                                    for p in (lw, lv)] == [5, 8]


@pytest.mark.parametrize("name,kw", [("AdamW", dict(lr=0.1, weight_decay=0.1)), ("SGD", dict(lr=0.1, momentum=0.9))])
def test_a_parameter_the_loss_does_not_reach_is_left_alone(name, kw):
    """A parameter read by the loss's graph only through ``detach()`` (a target network, another head's
    input) has no gradient in torch, so its optimizer skips it: no weight decay, no momentum. Before, it got
    a zero gradient and AdamW decayed it every step."""
    (tw, tv), (lw, lv), _, topt_cls, lopt_cls = _pair(name, kw)
    g = lm.Graph()
    x, y = g.input("x", (8, 4)), g.input("y", (8, 2))
    loss = (((x @ lw.on(g).T) @ lv.on(g).detach().T) - y).pow(2).mean()
    topt, lopt = topt_cls([tw, tv], **kw), lopt_cls([lw, lv], **kw)
    step = train.compile_step(loss, lopt, backend="cpu")
    for _ in range(3):
        topt.zero_grad()
        ((torch.from_numpy(X) @ tw.T @ tv.detach().T - torch.from_numpy(Y)) ** 2).mean().backward()
        topt.step()
        step(x=X, y=Y)
    _same((tw, lw), (tv, lv))
    np.testing.assert_array_equal(lv.data, V0)


def test_a_refused_batch_is_not_a_call_of_the_step():
    """``step.calls`` counted batches refused before any work (a wrong dtype, a missing input): after one
    step and three refusals it read 4 while the optimizer had taken 1 step."""
    (_, _), (lw, lv), loss, *_ = _pair("SGD", {})
    step = train.compile_step(loss, train.SGD([lw, lv], lr=0.1), backend="cpu")
    step(x=X, y=Y)
    for bad in (dict(x=X.astype(np.float64), y=Y), dict(x=X), dict(x=X[:3], y=Y)):
        with pytest.raises((TypeError, ValueError)):
            step(**bad)
    assert step.calls == 1 == step.optimizer.steps


@pytest.mark.parametrize("op", ["floor", "ceil", "trunc", "sign", "round"])
def test_a_parameter_read_through_an_op_with_a_zero_gradient_still_trains(op):
    """torch's gradient through floor, ceil, trunc, sign or round is a zero tensor, not None: AdamW still
    decays the parameter and counts its step. (Only the user's detach() makes torch's gradient None; the
    first version of the skip took these ops' own zero-gradient marks for one, and left such a parameter
    alone.)"""
    (tw, tv), (lw, lv), _, topt_cls, lopt_cls = _pair("AdamW", {})
    g = lm.Graph()
    x, y = g.input("x", (8, 4)), g.input("y", (8, 2))
    loss = (((x @ getattr(lw.on(g), op)().T) @ lv.on(g).T) - y).pow(2).mean()
    topt, lopt = topt_cls([tw, tv], lr=0.1, weight_decay=0.5), lopt_cls([lw, lv], lr=0.1, weight_decay=0.5)
    step = train.compile_step(loss, lopt, backend="cpu")
    for _ in range(3):
        topt.zero_grad()
        ((torch.from_numpy(X) @ getattr(tw, op)().T @ tv.T - torch.from_numpy(Y)) ** 2).mean().backward()
        topt.step()
        step(x=X, y=Y)
    _same((tw, lw), (tv, lv))
    assert not np.array_equal(lw.data, W0)


# v (2, 3) read only through an int or bool result of an op the user called: torch's gradient is None
NO_GRAD_READS = {
    "gt": lambda v, ns: (v > 0).float(),
    "eq": lambda v, ns: v.eq(v.max()).float(),
    "int_cast": lambda v, ns: (v * 3).int().float(),
    "isnan": lambda v, ns: ns.isnan(v).float() + 1,
    "argmax": lambda v, ns: ns.zeros((2, 3)) + v.argmax().float(),
    "bool_sum": lambda v, ns: ns.zeros((2, 3)) + (v < 0.5).sum().float(),
}


@pytest.mark.parametrize("compute_dtype", [None, "bfloat16"])
@pytest.mark.parametrize("how", sorted(NO_GRAD_READS))
def test_a_parameter_read_only_through_comparisons_or_int_results_is_left_alone(how, compute_dtype):
    """torch: a comparison's, an int cast's or argmax's result never requires grad, so a parameter read
    only through one has gradient None and AdamW skips it (no weight decay, no step count). It got a zero
    gradient here and was decayed every step. With ``compute_dtype`` too: the 16-bit rewrite of the
    graph dropped the marks (the user's ``detach()`` as well: test below)."""
    (tw, tv), (lw, lv), _, topt_cls, lopt_cls = _pair("AdamW", {})
    read = NO_GRAD_READS[how]
    g = lm.Graph()
    x, y = g.input("x", (8, 4)), g.input("y", (8, 2))
    loss = (((x @ lw.on(g).T) @ (read(lv.on(g), lm) * 0.5).T) - y).pow(2).mean()
    topt, lopt = topt_cls([tw, tv], lr=0.1, weight_decay=0.5), lopt_cls([lw, lv], lr=0.1, weight_decay=0.5)
    kw = {} if compute_dtype is None else {"compute_dtype": getattr(lm, compute_dtype)}
    step = train.compile_step(loss, lopt, backend="cpu", **kw)
    for _ in range(2):
        topt.zero_grad()
        ((torch.from_numpy(X) @ tw.T @ (read(tv, torch) * 0.5).T - torch.from_numpy(Y)) ** 2).mean().backward()
        assert tv.grad is None
        topt.step()
        step(x=X, y=Y)
    np.testing.assert_array_equal(lv.data, V0)
    assert id(lv) not in lopt.first_steps
    if compute_dtype is None:
        _same((tw, lw), (tv, lv))
    else:  # (a 16-bit forward: lw moved, by about torch's step)
        np.testing.assert_allclose(lw.data, tw.detach().numpy(), rtol=0.05, atol=0.05)


@pytest.mark.parametrize("compute_dtype", ["float16", "bfloat16"])
def test_a_detached_parameter_is_left_alone_with_a_compute_dtype(compute_dtype):
    """The 16-bit rewrite (``train.amp.autocast``) rebuilt the user's ``detach()`` as a new node without
    its mark, so a target network read through it was decayed by AdamW every step (torch skips it)."""
    lm.manual_seed(0)
    g = lm.Graph()
    a, b = nn.Linear(4, 1), nn.Linear(4, 1)
    x = g.input("x", (8, 4))
    loss = ((a(x) - b(x).detach()) ** 2).mean()
    opt = train.AdamW([*a.parameters(), *b.parameters()], lr=0.1, weight_decay=0.5)
    step = train.compile_step(loss, opt, compute_dtype=getattr(lm, compute_dtype), backend="cpu")
    w0, a0 = b.weight.data.copy(), a.weight.data.copy()
    step(x=X)
    np.testing.assert_array_equal(b.weight.data, w0)
    assert not np.array_equal(a.weight.data, a0)


def test_a_straight_through_estimator_over_a_comparison_trains_as_torchs():
    """A binarised weight with a straight-through gradient (``Graph.custom_vjp`` over the user's own
    ``v > 0``; torch: an autograd.Function) reaches the loss only through a comparison along its chain,
    but its rule's input has a gradient: the first version of the no-gradient skip stopped at the
    comparison and never trained it (silently)."""
    (tw, tv), (lw, lv), _, _, _ = _pair("SGD", {})
    g = lm.Graph()
    x, y = g.input("x", (8, 4)), g.input("y", (8, 2))
    v = lv.on(g)
    b = g.custom_vjp((v > 0).float() * 2 - 1, [v], lambda out, adj, inp: [adj])
    loss = (((x @ lw.on(g).T) @ b.T) - y).pow(2).mean()
    step = train.compile_step(loss, train.SGD([lw, lv], lr=0.1), backend="cpu")

    class _Ste(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return (t > 0).float() * 2 - 1

        @staticmethod
        def backward(ctx, a):
            return a

    topt = torch.optim.SGD([tw, tv], lr=0.1)
    for _ in range(3):
        topt.zero_grad()
        ((torch.from_numpy(X) @ tw.T @ _Ste.apply(tv).T - torch.from_numpy(Y)) ** 2).mean().backward()
        topt.step()
        step(x=X, y=Y)
    assert not np.array_equal(lv.data, V0)
    _same((tw, lw), (tv, lv))


def test_sign_still_trains_beside_the_users_own_comparison():
    """``sign``'s inner comparisons are not the user's: a parameter read through ``sign`` has a zero
    gradient (torch's), not None, also when the user compares it alike elsewhere in the graph."""
    (tw, tv), (lw, lv), _, topt_cls, lopt_cls = _pair("AdamW", {})
    g = lm.Graph()
    x, y = g.input("x", (8, 4)), g.input("y", (8, 2))
    v = lv.on(g)
    mask = (v > 0).float()
    loss = (((x @ lw.on(g).T) @ (v.sign() + mask).T) - y).pow(2).mean()
    topt, lopt = topt_cls([tw, tv], lr=0.1, weight_decay=0.5), lopt_cls([lw, lv], lr=0.1, weight_decay=0.5)
    step = train.compile_step(loss, lopt, backend="cpu")
    for _ in range(2):
        topt.zero_grad()
        ((torch.from_numpy(X) @ tw.T @ (tv.sign() + (tv > 0).float()).T - torch.from_numpy(Y)) ** 2).mean().backward()
        topt.step()
        step(x=X, y=Y)
    _same((tw, lw), (tv, lv))
    assert not np.array_equal(lv.data, V0)


def test_two_steps_sharing_an_optimizer_count_each_parameters_own_steps():
    """Two tasks, one Adam, their compiled steps alternating (A, B, B, A, B): torch counts each parameter's
    own steps. A step's cohorts were fixed when it was compiled, so a head sitting out the other task's updates
    took bias corrections of the global count (0.02-0.04 off torch). Each call now reads its cohorts' first
    steps, and a cohort another step split (it trained the encoder and not this head) builds again."""
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal(s).astype(np.float32) for s in ((4, 3), (1, 4), (1, 4))]
    xs = [rng.standard_normal((5, 3)).astype(np.float32) for _ in range(2)]
    enc, ha, hb = (nn.Linear(*s, bias=False) for s in ((3, 4), (4, 1), (4, 1)))
    for m, w in zip((enc, ha, hb), ws):
        m.weight.set(w)
    opt = train.Adam([*enc.parameters(), *ha.parameters(), *hb.parameters()], lr=0.1, weight_decay=0.1)
    steps = []
    for head in (ha, hb):
        g = lm.Graph()
        x = g.input("x", (5, 3))
        steps.append(train.compile_step((head(enc(x)) ** 2).mean(), opt, backend="cpu"))
    te, tha, thb = (torch.tensor(w, requires_grad=True) for w in ws)
    topt = torch.optim.Adam([te, tha, thb], lr=0.1, weight_decay=0.1)
    for k in (0, 1, 1, 0, 1):
        steps[k](x=xs[k])
        topt.zero_grad(set_to_none=True)
        ((torch.from_numpy(xs[k]) @ te.T @ (tha, thb)[k].T) ** 2).mean().backward()
        topt.step()
    for m, t in ((enc, te), (ha, tha), (hb, thb)):
        np.testing.assert_allclose(m.weight.data, t.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert [opt.steps - opt.first_steps[id(m.weight)] for m in (enc, ha, hb)] == [5, 2, 3]

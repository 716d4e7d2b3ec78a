"""train.compile_step against torch: an MLP's loss curve, schedulers without recompiling, gradient
clipping and accumulation, and exact checkpoint resume."""

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import nn, train
from luminal.frontend.seed import manual_seed


class MLP(nn.Module):
    def __init__(self, sizes=(12, 16, 5), dropout=0.0):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(sizes[0], sizes[1]), nn.Linear(sizes[1], sizes[2])
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.fc2(self.drop(self.fc1(x).relu()))


def torch_mlp(model):
    t = torch.nn.Sequential(torch.nn.Linear(*model.fc1.weight.shape[::-1]), torch.nn.ReLU(),
                            torch.nn.Linear(*model.fc2.weight.shape[::-1]))
    sd = model.state_dict()
    t.load_state_dict({"0.weight": torch.tensor(sd["fc1.weight"]), "0.bias": torch.tensor(sd["fc1.bias"]),
                       "2.weight": torch.tensor(sd["fc2.weight"]), "2.bias": torch.tensor(sd["fc2.bias"])})
    return t


def data(steps, batch=8, n_in=12, n_out=5, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((batch, n_in)).astype(np.float32),
             rng.integers(0, n_out, batch).astype(np.int32)) for _ in range(steps)]


def build(model, opt_cls, backend, **opt_kw):
    g = lm.Graph()
    x, y = g.input("x", ("B", 12)), g.input("y", ("B",), dtype=lm.int32)
    loss = train.cross_entropy(model(x), y)
    opt = getattr(train, opt_cls)(model.parameters(), **opt_kw)
    return g, loss, opt


@pytest.mark.parametrize("opt_cls,kw", [("AdamW", dict(lr=1e-2)), ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
                                        ("Adam", dict(lr=1e-2, weight_decay=0.1, amsgrad=True)),
                                        ("RMSprop", dict(lr=1e-3, centered=True)), ("Adagrad", dict(lr=0.1))])
def test_mlp_loss_curve_tracks_torch(backend, opt_cls, kw):
    """20 steps from identical weights on identical data: luminal's losses and final weights track
    torch's (relative 1e-4 on the losses, 1e-4 on the weights: float32 rounding compounds)."""
    manual_seed(0)
    model = MLP()
    tm = torch_mlp(model)
    _, loss, opt = build(model, opt_cls, backend, **kw)
    step = train.compile_step(loss, opt, backend=backend)
    topt = getattr(torch.optim, opt_cls)(tm.parameters(), foreach=False, **kw)
    ours, theirs = [], []
    for xb, yb in data(20):
        ours.append(step(x=xb, y=yb))
        topt.zero_grad()
        tl = torch.nn.functional.cross_entropy(tm(torch.tensor(xb)), torch.tensor(yb).long())
        tl.backward()
        topt.step()
        theirs.append(tl.item())
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-6)
    assert ours[-1] < ours[0]
    np.testing.assert_allclose(model.state_dict()["fc1.weight"], tm[0].weight.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_scheduler_changes_lr_without_recompiling(backend):
    manual_seed(1)
    model = MLP()
    tm = torch_mlp(model)
    _, loss, opt = build(model, "SGD", backend, lr=0.5, momentum=0.5)
    sched = train.StepLR(opt, step_size=2, gamma=0.3)
    step = train.compile_step(loss, opt, backend=backend)
    program = step._update
    topt = torch.optim.SGD(tm.parameters(), lr=0.5, momentum=0.5, foreach=False)
    tsched = torch.optim.lr_scheduler.StepLR(topt, step_size=2, gamma=0.3)
    for xb, yb in data(6):
        step(x=xb, y=yb)
        sched.step()
        topt.zero_grad()
        torch.nn.functional.cross_entropy(tm(torch.tensor(xb)), torch.tensor(yb).long()).backward()
        topt.step()
        tsched.step()
    assert step._update is program
    np.testing.assert_allclose(model.state_dict()["fc2.weight"], tm[2].weight.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("clip", [dict(clip_grad_norm=0.05), dict(clip_grad_value=0.01)])
def test_gradient_clipping_matches_torch(backend, clip):
    manual_seed(2)
    model = MLP()
    tm = torch_mlp(model)
    _, loss, opt = build(model, "SGD", backend, lr=0.5)
    step = train.compile_step(loss, opt, backend=backend, **clip)
    topt = torch.optim.SGD(tm.parameters(), lr=0.5, foreach=False)
    for xb, yb in data(3):
        step(x=xb, y=yb)
        topt.zero_grad()
        torch.nn.functional.cross_entropy(tm(torch.tensor(xb)), torch.tensor(yb).long()).backward()
        if "clip_grad_norm" in clip:
            norm = torch.nn.utils.clip_grad_norm_(tm.parameters(), clip["clip_grad_norm"])
            assert step.last_grad_norm == pytest.approx(norm.item(), rel=1e-5)
        else:
            torch.nn.utils.clip_grad_value_(tm.parameters(), clip["clip_grad_value"])
        topt.step()
    np.testing.assert_allclose(model.state_dict()["fc1.weight"], tm[0].weight.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_gradient_accumulation_is_the_mean_gradient(backend):
    """accumulate=3: three calls make one update with the mean gradient (torch: loss / 3, backward
    three times, step)."""
    manual_seed(3)
    model = MLP()
    tm = torch_mlp(model)
    _, loss, opt = build(model, "Adam", backend, lr=1e-2)
    step = train.compile_step(loss, opt, backend=backend, accumulate=3)
    topt = torch.optim.Adam(tm.parameters(), lr=1e-2, foreach=False)
    batches = data(6)
    for i, (xb, yb) in enumerate(batches):
        step(x=xb, y=yb)
        (torch.nn.functional.cross_entropy(tm(torch.tensor(xb)), torch.tensor(yb).long()) / 3).backward()
        if i % 3 == 2:
            topt.step()
            topt.zero_grad()
            np.testing.assert_allclose(model.state_dict()["fc1.weight"], tm[0].weight.detach().numpy(),
                                       rtol=1e-5, atol=1e-6)
    assert opt.steps == 2 and step.micro_step == 0


def _run(steps_before, steps_total, path, backend):
    """Train with dropout + a scheduler + accumulation; optionally stop after ``steps_before`` calls,
    checkpoint, rebuild everything from scratch, resume. Returns the final weights and losses."""
    batches = data(steps_total, seed=7)
    losses = []

    def make():
        manual_seed(11)
        model = MLP(dropout=0.3)
        _, loss, opt = build(model, "AdamW", backend, lr=1e-2)
        sched = train.ExponentialLR(opt, gamma=0.9)
        return model, opt, sched, train.compile_step(loss, opt, backend=backend, accumulate=2)

    model, opt, sched, step = make()
    start = 0
    if steps_before is not None:
        for xb, yb in batches[:steps_before]:
            losses.append(step(x=xb, y=yb))
            if step.micro_step == 0:
                sched.step()
        train.save_checkpoint(path, model=model, optimizer=opt, scheduler=sched, step=step,
                              extra={"calls": steps_before})
        model, opt, sched, step = make()  # a fresh process would do this
        start = train.load_checkpoint(path, model=model, optimizer=opt, scheduler=sched, step=step)["calls"]
    for xb, yb in batches[start:]:
        losses.append(step(x=xb, y=yb))
        if step.micro_step == 0:
            sched.step()
    return model.state_dict(), losses


def test_checkpoint_resume_is_exact(tmp_path, backend):
    straight, l1 = _run(None, 9, None, backend)
    resumed, l2 = _run(5, 9, tmp_path / "ckpt.safetensors", backend)  # stops mid-accumulation
    assert l1 == l2
    for k in straight:
        np.testing.assert_array_equal(straight[k], resumed[k])


def test_compile_step_needs_the_parameters_in_the_graph():
    model, other = MLP(), MLP()
    g = lm.Graph()
    loss = other(g.input("x", (2, 12))).sum()
    with pytest.raises(ValueError, match="reads none of the optimizer's parameters"):
        train.compile_step(loss, train.SGD(model.parameters(), lr=0.1), backend="reference")


def test_compile_step_needs_a_loss_that_depends_on_the_parameters():
    """A graph that reads the parameters for something else, with a loss that does not (or only
    through an argmax), would train nothing, silently; torch raises at backward."""
    model = MLP()
    g = lm.Graph()
    x = g.input("x", (2, 12))
    out = model(x)
    for loss in ((x * 2).sum(), out.argmax(-1).float().sum()):
        with pytest.raises(ValueError, match="loss depends on none of the optimizer's parameters") as e:
            train.compile_step(loss, train.SGD(model.parameters(), lr=0.1), backend="reference")
        assert "test_train_step.py" in str(e.value)
    train.compile_step(out.sum() + (x * 2).sum(), train.SGD(model.parameters(), lr=0.1), backend="reference")


def test_batchnorm_running_stats_update_during_training(backend):
    manual_seed(4)
    bn = nn.BatchNorm1d(12)
    g = lm.Graph()
    x = g.input("x", ("B", 12))
    step = train.compile_step(bn(x).square().mean(), train.SGD(bn.parameters(), lr=0.1), backend=backend)
    tb = torch.nn.BatchNorm1d(12)
    for xb, _ in data(3):
        step(x=xb)
        tb(torch.tensor(xb))
    np.testing.assert_allclose(bn.running_mean.data, tb.running_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var.data, tb.running_var.numpy(), rtol=1e-5, atol=1e-6)


def test_call_errors_name_the_inputs_and_the_users_line():
    """A batch given positionally is refused naming the inputs; a data error names the call that made
    it (the user's line), not where the step was compiled."""
    import inspect

    g = lm.Graph()
    x, y = g.input("x", ("B", 4)), g.input("y", ("B",), dtype=lm.int32)
    m = nn.Linear(4, 3)
    step = train.compile_step(train.cross_entropy(m(x), y), train.SGD(m.parameters(), lr=0.1))
    with pytest.raises(TypeError, match=r"give the batch by name, as step\(x=\.\.\., y=\.\.\.\); got 2 positional"):
        step(np.ones((2, 4), np.float32), np.zeros(2, np.int32))
    with pytest.raises(ValueError, match=r"input 'x': dim 1 should be 4") as e:
        line = inspect.currentframe().f_lineno + 1
        step(x=np.ones((2, 5), np.float32), y=np.zeros(2, np.int32))
    assert f"called at {__file__}:{line}: step(x=np.ones((2, 5)" in str(e.value)

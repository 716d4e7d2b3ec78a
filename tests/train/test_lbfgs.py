"""train.LBFGS against torch.optim.LBFGS: the host-driven step over a compiled loss-and-gradient
program (Rosenbrock, a linear regression), both line-search modes, the history, the stopping tests,
the state dict and what it refuses."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import nn, train
from luminal.nn.parameter import Parameter

X0 = np.array([-1.5, 2.0])


def rosenbrock(v):
    return (1 - v[0]) ** 2 + 100 * (v[1] - v[0] ** 2) ** 2


def _pair(kwargs, dtype=np.float64, x0=X0):
    """luminal's and torch's LBFGS on Rosenbrock from ``x0``: (parameter, optimizer, closure) each."""
    p = Parameter(x0.astype(dtype), name="xy")
    g = lm.Graph()
    opt = train.LBFGS([p], **kwargs)
    f = opt.loss_and_grads(rosenbrock(g.state(p)), backend="reference")
    tp = torch.tensor(x0.astype(dtype), requires_grad=True)
    topt = torch.optim.LBFGS([tp], **kwargs)

    def tclosure():
        topt.zero_grad()
        loss = rosenbrock(tp)
        loss.backward()
        return loss

    return (p, opt, f), (tp, topt, tclosure)


KWARGS = [
    {"lr": 0.1, "max_iter": 10},
    {"lr": 1, "max_iter": 10, "history_size": 3, "line_search_fn": "strong_wolfe"},
    {"lr": 0.5, "max_iter": 7, "max_eval": 9, "history_size": 2},
    {"lr": 1, "line_search_fn": "strong_wolfe"},
]


@pytest.mark.parametrize("kwargs", KWARGS)
def test_rosenbrock_compiled_closure_follows_torch(kwargs):
    """Three steps with the loss and gradient compiled: the losses returned, the parameters and the
    evaluation counts as torch's (float64, to 1e-6: the loss programs differ from torch's in their last
    bits, which Rosenbrock's valley amplifies from step to step)."""
    (p, opt, f), (tp, topt, tclosure) = _pair(kwargs)
    for i in range(3):
        ours, theirs = opt.step(f), topt.step(tclosure).item()
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, err_msg=f"loss of step {i + 1}")
        np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-6, atol=1e-8, err_msg=f"step {i + 1}")
        st = topt.state[tp]
        assert (opt.lbfgs_state["func_evals"], opt.lbfgs_state["n_iter"]) == (st["func_evals"], st["n_iter"])


def _rosenbrock_np(v):
    """Rosenbrock's value and gradient in numpy (float64), for both optimizers alike."""
    v = np.asarray(v, np.float64)
    grad = [-2 * (1 - v[0]) - 400 * v[0] * (v[1] - v[0] ** 2), 200 * (v[1] - v[0] ** 2)]
    return float(rosenbrock(v)), np.array(grad)


@pytest.mark.parametrize("kwargs", KWARGS)
def test_rosenbrock_algorithm_float64_on_the_same_gradients(kwargs):
    """Six steps with both optimizers reading numpy's loss and gradient of the parameters each holds:
    the algorithm alone, history, line search and stopping tests, as torch's to 1e-7."""
    p, tp = Parameter(X0.copy()), torch.tensor(X0, requires_grad=True)
    opt, topt = train.LBFGS([p], **kwargs), torch.optim.LBFGS([tp], **kwargs)

    def closure():
        loss, gv = _rosenbrock_np(p.data)
        return loss, [gv]

    def tclosure():
        loss, gv = _rosenbrock_np(tp.detach().numpy())
        tp.grad = torch.tensor(gv)
        return torch.tensor(loss, dtype=torch.float64)

    for i in range(6):
        np.testing.assert_allclose(opt.step(closure), topt.step(tclosure).item(), rtol=1e-7, atol=1e-8)
        np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-7, atol=1e-8, err_msg=f"step {i + 1}")
        st = topt.state[tp]
        assert (opt.lbfgs_state["func_evals"], opt.lbfgs_state["n_iter"]) == (st["func_evals"], st["n_iter"])
    assert len(opt.lbfgs_state["old_dirs"]) == len(st["old_dirs"]) <= kwargs.get("history_size", 100)
    np.testing.assert_allclose(opt.lbfgs_state["H_diag"], st["H_diag"].item(), rtol=1e-4)


def _least_squares(n=20, k=4, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, k)).astype(np.float32)
    return a, (a @ rng.standard_normal(k) + 0.1 * rng.standard_normal(n)).astype(np.float32)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_algorithm_in_float32_matches_torch_on_the_same_gradients(line_search_fn):
    """The algorithm alone, in float32 (its vectors' dtype, as torch's): both optimizers read the same
    loss and gradients (numpy's, of the parameters each holds), so only their own arithmetic differs."""
    a, b = _least_squares()

    def objective(w):
        r = a @ w - b
        return float(np.float32(0.5) * r @ r), a.T @ r

    p, tp = Parameter(np.zeros(4, np.float32)), torch.zeros(4, requires_grad=True)
    kw = dict(lr=0.5 if line_search_fn is None else 1, max_iter=6, history_size=3, line_search_fn=line_search_fn)
    opt, topt = train.LBFGS([p], **kw), torch.optim.LBFGS([tp], **kw)

    def closure():
        loss, gw = objective(p.data)
        return loss, [gw]

    def tclosure():
        loss, gw = objective(tp.detach().numpy())
        tp.grad = torch.tensor(gw)
        return torch.tensor(loss)

    for i in range(4):
        np.testing.assert_allclose(opt.step(closure), topt.step(tclosure).item(), rtol=1e-5, err_msg=f"step {i}")
        np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=f"step {i + 1}")
    assert p.data.dtype == np.float32 and opt.lbfgs_state["d"].dtype == np.float32


def test_linear_regression_through_a_model_float32():
    """A Linear layer fit by mean squared error with a compiled closure of inputs: three steps follow
    torch's, and reach its loss."""
    a, b = _least_squares(seed=1)
    lm.manual_seed(0)
    model = nn.Linear(4, 1)
    tmodel = torch.nn.Linear(4, 1)
    tmodel.load_state_dict({k: torch.tensor(v) for k, v in model.state_dict().items()})
    g = lm.Graph()
    x, y = g.input("x", (20, 4)), g.input("y", (20, 1))
    opt = train.LBFGS(model.parameters(), history_size=10, max_iter=5, line_search_fn="strong_wolfe")
    f = opt.loss_and_grads(train.mse_loss(model(x), y), backend="reference")
    topt = torch.optim.LBFGS(tmodel.parameters(), history_size=10, max_iter=5, line_search_fn="strong_wolfe")

    def tclosure():
        topt.zero_grad()
        loss = torch.nn.functional.mse_loss(tmodel(torch.tensor(a)), torch.tensor(b[:, None]))
        loss.backward()
        return loss

    for i in range(3):
        np.testing.assert_allclose(opt.step(lambda: f(x=a, y=b[:, None])), topt.step(tclosure).item(), rtol=1e-4)
        for k, v in tmodel.state_dict().items():
            np.testing.assert_allclose(model.state_dict()[k], v.numpy(), rtol=1e-4, atol=1e-5, err_msg=f"{k} {i}")


def test_stops_at_once_where_the_gradient_is_below_tolerance_grad():
    """At the minimum (1, 1) the gradient is 0: one evaluation, no step, as torch's."""
    (p, opt, f), (tp, topt, tclosure) = _pair({"max_iter": 10}, x0=np.array([1.0, 1.0]))
    assert opt.step(f) == topt.step(tclosure).item() == 0.0
    assert opt.lbfgs_state["func_evals"] == topt.state[tp]["func_evals"] == 1
    np.testing.assert_array_equal(p.data, [1.0, 1.0])


def test_state_dict_resumes_and_checkpoints(tmp_path):
    """Saved after 2 steps and loaded into a fresh optimizer (directly and through a checkpoint file),
    the next 2 steps continue as the uninterrupted run (history, direction and step size kept)."""
    kwargs = {"lr": 1, "max_iter": 4, "history_size": 3, "line_search_fn": "strong_wolfe"}
    (p, opt, f), _ = _pair(kwargs)
    for _ in range(2):
        opt.step(f)
    sd, saved_p = opt.state_dict(), p.data.copy()
    assert {"state.0.d", "state.0.old_dirs", "state.0.old_stps", "state.0.ro", "state.0.prev_flat_grad"} <= set(
        sd["arrays"]) and set(sd["lbfgs"]) == {"func_evals", "n_iter", "t", "H_diag", "prev_loss"}
    train.save_checkpoint(tmp_path / "ck.safetensors", optimizer=opt)
    for _ in range(2):
        opt.step(f)
    for load in ("direct", "file"):
        (p2, opt2, f2), _ = _pair(kwargs, x0=saved_p)
        if load == "direct":
            opt2.load_state_dict(sd)
        else:
            train.load_checkpoint(tmp_path / "ck.safetensors", optimizer=opt2)
        for _ in range(2):
            opt2.step(f2)
        np.testing.assert_allclose(p2.data, p.data, rtol=1e-12, err_msg=load)
        assert opt2.lbfgs_state["n_iter"] == opt.lbfgs_state["n_iter"]


def test_refusals_name_the_problem():
    w = Parameter(np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="LBFGS doesn't support per-parameter options"):
        train.LBFGS([{"params": [w]}, {"params": [Parameter(np.zeros(2, np.float32))]}])
    with pytest.raises(ValueError, match="LBFGS: line_search_fn must be None or 'strong_wolfe', got 'armijo'"):
        train.LBFGS([w], line_search_fn="armijo")
    with pytest.raises(ValueError, match="LBFGS: history_size must be at least 1"):
        train.LBFGS([w], history_size=0)
    with pytest.raises(TypeError, match="LBFGS: all parameters must have one dtype"):
        train.LBFGS([w, Parameter(np.zeros(2, np.float64))])
    assert train.LBFGS([w], max_iter=8).defaults["max_eval"] == 10  # (torch's max_iter * 5 // 4)
    opt = train.LBFGS([w])
    with pytest.raises(TypeError, match=r"LBFGS.step: the closure must return \(loss, grads\)"):
        opt.step(lambda: 1.0)  # (torch's closure returns the loss and leaves the gradients in .grad)
    with pytest.raises(ValueError, match="LBFGS.step: gradient 0 has shape"):
        opt.step(lambda: (1.0, [np.zeros(3, np.float32)]))
    g = lm.Graph()
    loss = (g.state(w) * g.state(w)).sum()
    with pytest.raises(TypeError, match=r"LBFGS: its step evaluates the loss .* opt.step\(closure\)"):
        train.compile_step(loss, opt, backend="reference")

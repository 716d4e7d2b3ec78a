"""An optimizer's update graph against torch.optim's single-tensor CPU path, shared by the optimizer
tests: ``UpdateStep`` compiles ``opt.update`` for every parameter with the gradients as inputs (the
train-step runner without a model or autograd), and ``run_both`` feeds luminal's and torch's optimizer
the same values and gradients and compares every parameter and state after each step."""

from __future__ import annotations

import numpy as np
import torch

import luminal as lm
from luminal.nn.parameter import Parameter

SHAPES = [(3, 4), (5,)]
RTOL, ATOL = 1e-5, 1e-6  # atol: float32 rounding (torch uses FMA) of O(1) terms that cancel


class UpdateStep:
    """One compiled program applying ``opt.update`` to every parameter, the gradients as inputs ``g0,
    g1, ...``; each call is one optimizer step (the runtime scalars set for it, the count moved on)."""

    def __init__(self, opt, backend: str = "reference"):
        self.opt = opt
        graph = lm.Graph()
        outs, updates, k = [], {}, 0
        for gi, group in enumerate(opt.param_groups):
            s = {n: graph.state(st) for n, st in opt.scalar_states(gi, opt.steps + 1).items()}
            for p in group["params"]:
                states = opt.state_for(p)
                new_p, new_states = opt.update(graph.state(p), graph.input(f"g{k}", p.shape, dtype=p.dtype),
                                               {n: graph.state(st) for n, st in states.items()}, s, group)
                assert set(new_states) == set(states)
                updates[p] = new_p
                updates.update({states[n]: new_states[n] for n in states})
                outs.append(new_p)
                k += 1
        self.fn = lm.compile(outs, backend=backend, updates=updates)

    def __call__(self, grads):
        t = self.opt.steps + 1
        for gi in range(len(self.opt.param_groups)):
            self.opt.scalar_states(gi, t)
        self.fn(**{f"g{k}": g for k, g in enumerate(grads)})
        self.opt.count_update({id(p) for _, p in self.opt.params()})  # (as the train step counts an update)


def groups(params, group_opts):
    """One param group per parameter with its options, or the plain list without any."""
    return [{"params": [p], **o} for p, o in zip(params, group_opts)] if group_opts else params


def run_both(ours_cls, theirs_cls, kwargs, steps=1, group_opts=None, seed=0, schedulers=None,
             every_state=True, dtype=np.float32, shapes=None, rtol=RTOL, atol=ATOL):
    """``steps`` updates of luminal's ``ours_cls`` and torch's ``theirs_cls`` on identical values and
    gradients, the parameters and states compared after each step (``every_state``: each of luminal's
    states must be one torch keeps too; else a state torch lacks is skipped: SGD's unused momentum
    buffer of a group without momentum). ``schedulers(opt, topt)`` makes schedulers (after the step is
    compiled), stepped after every step. ``dtype``: of the parameters and gradients; ``shapes``: the
    parameters' (default ``SHAPES``). Returns both optimizers."""
    rng = np.random.default_rng(seed)
    shapes = SHAPES if shapes is None else shapes
    inits = [rng.standard_normal(s).astype(dtype) for s in shapes]
    ours = [Parameter(x, name=f"p{i}") for i, x in enumerate(inits)]
    theirs = [torch.tensor(x, requires_grad=True) for x in inits]
    opt = ours_cls(groups(ours, group_opts), **kwargs)
    topt = theirs_cls(groups(theirs, group_opts), **kwargs, foreach=False)
    step = UpdateStep(opt)
    scheds = schedulers(opt, topt) if schedulers else []
    what = f"{ours_cls.__name__} {kwargs}"
    for t in range(steps):
        grads = [rng.standard_normal(s).astype(dtype) for s in shapes]
        step(grads)
        for tp, g in zip(theirs, grads):
            tp.grad = torch.tensor(g)
        topt.step()
        for p, tp in zip(ours, theirs):
            np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=rtol, atol=atol,
                                       err_msg=f"{what} param after step {t + 1}")
            for n, st in opt.state_for(p).items():
                want = topt.state[tp][n] if every_state else topt.state[tp].get(n)
                if want is not None:
                    np.testing.assert_allclose(st.data, want.numpy(), rtol=rtol, atol=atol,
                                               err_msg=f"{what} state {n} after step {t + 1}")
        for sch in scheds:
            sch.step()
    return opt, topt

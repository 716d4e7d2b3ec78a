"""train.LAMB against a direct numpy implementation of the paper's update (torch has no LAMB), and
LAMB inside compile_step."""

from __future__ import annotations

import numpy as np
import pytest
from optimizer_parity import UpdateStep

import luminal as lm
from luminal import nn, train
from luminal.nn.parameter import Parameter

SHAPES = [(3, 4), (5,), (2, 3, 2)]


def lamb_reference(x, g, m, v, t, lr, beta1, beta2, eps, wd, bias_correction=True, max_trust=None):
    """You et al. 2019, Algorithm 2 (phi = identity), in float64."""
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    mh, vh = (m / (1 - beta1**t), v / (1 - beta2**t)) if bias_correction else (m, v)
    r = mh / (np.sqrt(vh) + eps) + wd * x
    wn, rn = np.linalg.norm(x), np.linalg.norm(r)
    trust = wn / rn if wn > 0 and rn > 0 else 1.0
    if max_trust is not None:
        trust = min(trust, max_trust)
    return x - lr * trust * r, m, v


@pytest.mark.parametrize("kw", [
    dict(),
    dict(lr=1e-2, weight_decay=0.1),
    dict(lr=5e-3, betas=(0.8, 0.99), eps=1e-4, weight_decay=0.01, bias_correction=False),
    dict(lr=1e-2, max_trust_ratio=0.5),
])
def test_lamb_matches_numpy_reference(kw):
    rng = np.random.default_rng(0)
    inits = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    inits[1][:] = 0.0  # a zero tensor: ||x|| = 0, trust ratio 1
    params = [Parameter(x.copy(), name=f"p{i}") for i, x in enumerate(inits)]
    opt = train.LAMB(params, **kw)
    step = UpdateStep(opt, backend="cpu")
    h = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, bias_correction=True, max_trust_ratio=None)
    h.update(kw)
    ref = [(x.astype(np.float64), np.zeros(x.shape), np.zeros(x.shape)) for x in inits]
    for t in range(1, 6):
        grads = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
        step(grads)
        ref = [lamb_reference(x, g.astype(np.float64), m, v, t, h["lr"], *h["betas"], h["eps"], h["weight_decay"],
                              h["bias_correction"], h["max_trust_ratio"]) for (x, m, v), g in zip(ref, grads)]
        for p, (x, m, v) in zip(params, ref):
            np.testing.assert_allclose(p.data, x, rtol=1e-5, atol=1e-6, err_msg=f"{kw} step {t}")
            st = opt.state_for(p)
            np.testing.assert_allclose(st["exp_avg"].data, m, rtol=1e-5, atol=1e-7)
            np.testing.assert_allclose(st["exp_avg_sq"].data, v, rtol=1e-5, atol=1e-8)


def test_lamb_trust_ratio_scales_step_with_weight_norm():
    """The update's size follows ||x||: the same gradients move a 10x larger tensor 10x as far."""
    g = np.random.default_rng(1).standard_normal((4, 4)).astype(np.float32)
    base = np.random.default_rng(2).standard_normal((4, 4)).astype(np.float32)
    moved = []
    for scale in (1.0, 10.0):
        p = Parameter(base * scale, name="w")
        opt = train.LAMB([p], lr=1e-2)
        UpdateStep(opt, backend="cpu")([g])
        moved.append(np.linalg.norm(p.data - base * scale))
    np.testing.assert_allclose(moved[1] / moved[0], 10.0, rtol=1e-4)


def test_lamb_validation_and_state_dict():
    p = Parameter(np.ones(3, np.float32))
    for bad in (dict(lr=-1), dict(betas=(1.0, 0.9)), dict(eps=-1e-6), dict(max_trust_ratio=0), dict(betas=0.9)):
        with pytest.raises((ValueError, TypeError)):
            train.LAMB([p], **bad)
    opt = train.LAMB([p], lr=1e-2)
    UpdateStep(opt, backend="cpu")([np.ones(3, np.float32)])
    sd = opt.state_dict()
    assert sd["optimizer"] == "LAMB" and sd["steps"] == 1
    fresh = train.LAMB([Parameter(np.ones(3, np.float32))], lr=1e-2)
    fresh.load_state_dict(sd)
    assert fresh.steps == 1
    np.testing.assert_array_equal(fresh.state_for(fresh.param_groups[0]["params"][0])["exp_avg"].data,
                                  opt.state_for(p)["exp_avg"].data)


def test_lamb_in_compile_step_lowers_loss():
    lm.manual_seed(0)
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((64, 8)).astype(np.float32)
    ys = (xs @ rng.standard_normal((8, 1))).astype(np.float32)
    model = nn.Linear(8, 1)
    g = lm.Graph()
    x, y = g.input("x", ("B", 8)), g.input("y", ("B", 1))
    step = train.compile_step(train.mse_loss(model(x), y), train.LAMB(model.parameters(), lr=0.05))
    losses = [step(x=xs, y=ys) for _ in range(60)]
    assert losses[-1] < 0.1 * losses[0]

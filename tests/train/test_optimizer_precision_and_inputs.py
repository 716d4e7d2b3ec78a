"""The optimizers' audit against torch (found by it, fixed): float64 parameters updated with float32
hyperparameters and norms; the second moment's ``g * g`` overflowing where torch's ``addcmul_`` does
not; RAdam's plain steps dividing 0 by 0 in float16; ``clip_grad_norm``'s ``norm_type`` beyond 2 and
inf; a torch state dict, a duplicated parameter, named parameters and an all-frozen model given to the
optimizer or the step. Every case runs ``train.compile_step`` beside torch's optimizer."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import nn, train

W0 = np.array([1.0, -2.0, 3.0])
X = np.array([0.123456789012345, 0.25, -1.0])


def _pair(name, kw, dtype=np.float64, w0=W0, square=True):
    """luminal's and torch's ``name`` over one parameter ``w0`` (``dtype``), with the step of the loss
    ``(w * x).sum() ** 2 * s`` (``square=False``: ``(w * x).sum() * s``): ``(p, step, tp, topt,
    torch_step)``, each step called with arrays ``x`` and ``s``."""
    ldt = {np.float16: lm.float16, np.float32: lm.float32, np.float64: lm.float64}[dtype]
    p = nn.Parameter(w0.astype(dtype), name="w")
    g = lm.Graph()
    x, s = g.input("x", (len(w0),), dtype=ldt), g.input("s", (), dtype=ldt)
    lin = (p.on(g) * x).sum()
    opt = getattr(train, name)([p], **kw)
    step = train.compile_step((lin * lin if square else lin) * s, opt, backend="cpu")
    tp = torch.nn.Parameter(torch.tensor(w0.astype(dtype)))
    topt = getattr(torch.optim, name)([tp], **kw, foreach=False)

    def torch_step(x, s):
        topt.zero_grad()
        tlin = (tp * torch.tensor(x)).sum()
        ((tlin * tlin if square else tlin) * torch.tensor(s)).backward()
        topt.step()

    return p, step, opt, tp, torch_step


FLOAT64_CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("Adam", dict(lr=0.1)),
    ("Adam", dict(lr=0.1, amsgrad=True, weight_decay=0.1)),
    ("AdamW", dict(lr=0.1, betas=(0.8, 0.9))),
    ("NAdam", dict(lr=0.1)),
    ("RAdam", dict(lr=0.1, betas=(0.9, 0.9))),  # rectified from step 3
    ("Adamax", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5, weight_decay=0.1)),
]


@pytest.mark.parametrize("name,kw", FLOAT64_CASES, ids=[f"{n}-{k}" for n, k in FLOAT64_CASES])
def test_float64_parameters_match_torch_to_float64_rounding(name, kw):
    """Before: the hyperparameters and bias corrections reached a float64 update as float32 scalars,
    agreeing with torch to 1e-7..1e-10 (SGD's lr=0.1 is 0.100000001)."""
    p, step, opt, tp, torch_step = _pair(name, kw)
    for i in range(6):
        x = X * (1 + 0.1 * i)
        step(x=x, s=np.float64(1.0))
        torch_step(x, np.float64(1.0))
    np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-13, atol=0)
    assert {v.dtype for holders in opt.param_groups[0]["_scalars"].values() for v in holders.values()} \
        == {lm.float64}


@pytest.mark.parametrize("name", ["Adam", "Adagrad", "RMSprop", "NAdam", "RAdam"])
def test_float64_eps_below_float32_range_keeps_a_zero_gradient_finite(name):
    """eps=1e-50 was 0 in float32: a zero gradient's update was 0 / 0 = NaN; torch's is finite."""
    kw = dict(lr=0.01, eps=1e-50) if name != "RAdam" else dict(lr=0.01, eps=1e-50, betas=(0.9, 0.9))
    p, step, _, tp, torch_step = _pair(name, kw, square=False)
    x = np.array([0.5, 0.25, 0.0])
    for _ in range(4):  # (RAdam: rectified from step 3)
        step(x=x, s=np.float64(1.0))
        torch_step(x, np.float64(1.0))
    assert np.isfinite(p.data).all()
    np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-14)


def test_a_group_of_float32_and_float64_parameters_reads_scalars_of_each_dtype():
    """One scalar set per dtype: the float64 parameter's update reads float64 values, the float32
    one's the float32 scalars it read before (its update graph is unchanged)."""
    a = nn.Parameter(W0.astype(np.float32), name="a")
    b = nn.Parameter(W0.copy(), name="b")
    g = lm.Graph()
    x = g.input("x", (3,), dtype=lm.float64)
    loss = (a.on(g).double() * x).sum() ** 2 + (b.on(g) * x).sum() ** 2  # (b's update not from a's rounding)
    opt = train.SGD([a, b], lr=0.1, momentum=0.9)
    step = train.compile_step(loss, opt, backend="cpu")
    ta = torch.nn.Parameter(torch.tensor(W0.astype(np.float32)))
    tb = torch.nn.Parameter(torch.tensor(W0.copy()))
    topt = torch.optim.SGD([ta, tb], lr=0.1, momentum=0.9, foreach=False)
    for i in range(4):
        xi = X * (1 + 0.1 * i)
        step(x=xi)
        topt.zero_grad()
        ((ta.double() * torch.tensor(xi)).sum() ** 2 + (tb * torch.tensor(xi)).sum() ** 2).backward()
        topt.step()
    np.testing.assert_allclose(b.data, tb.detach().numpy(), rtol=1e-13)
    np.testing.assert_allclose(a.data, ta.detach().numpy(), rtol=1e-6)
    dtypes = {key: {v.dtype for v in holders.values()} for key, holders in opt.param_groups[0]["_scalars"].items()}
    assert dtypes == {(0, "float32"): {lm.float32}, (0, "float64"): {lm.float64}}


def test_float64_gradient_norm_is_float64():
    """clip_grad_norm's norm was taken in float32 (g.float()): 1.6e-8 off torch's, and so the step."""
    p = nn.Parameter(W0.copy(), name="w")
    tp = torch.nn.Parameter(torch.tensor(W0.copy()))
    g = lm.Graph()
    x = g.input("x", (3,), dtype=lm.float64)
    step = train.compile_step((p.on(g) * x).sum() * 10.0, train.SGD([p], lr=0.5), backend="cpu", clip_grad_norm=1.0)
    step(x=X)
    topt = torch.optim.SGD([tp], lr=0.5)
    ((tp * torch.tensor(X)).sum() * 10.0).backward()
    norm = torch.nn.utils.clip_grad_norm_([tp], 1.0)
    topt.step()
    assert step.last_grad_norm == pytest.approx(norm.item(), rel=1e-15)
    np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-15)


def test_lamb_float64_matches_its_float64_reference():
    """LAMB's trust-ratio norms were float32 for a float64 parameter."""
    from test_lamb import lamb_reference

    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3))
    p = nn.Parameter(w.copy(), name="w")
    g = lm.Graph()
    x = g.input("x", (4, 3), dtype=lm.float64)
    h = dict(lr=0.01, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01)
    step = train.compile_step((p.on(g) * x).sum(), train.LAMB([p], **h), backend="cpu")
    ref, m, v = w.copy(), np.zeros_like(w), np.zeros_like(w)
    for t in range(1, 5):
        xt = rng.standard_normal((4, 3))
        step(x=xt)
        ref, m, v = lamb_reference(ref, xt, m, v, t, h["lr"], *h["betas"], h["eps"], h["weight_decay"])
    np.testing.assert_allclose(p.data, ref, rtol=1e-13)


# gradients near float32's largest values ------------------------------------------------------------
LARGE_CASES = [("Adam", dict(lr=0.1)), ("Adam", dict(lr=0.1, amsgrad=True)), ("AdamW", dict(lr=0.1)),
               ("NAdam", dict(lr=0.1)), ("RAdam", dict(lr=0.1, betas=(0.9, 0.9))), ("RMSprop", dict(lr=0.1)),
               ("RMSprop", dict(lr=0.1, centered=True)), ("RMSprop", dict(lr=0.1, centered=True, momentum=0.5)),
               ("SGD", dict(lr=0.1, momentum=0.9)), ("Adamax", dict(lr=0.1)), ("Adagrad", dict(lr=0.1))]


@pytest.mark.parametrize("scale", [1e20, 1e38], ids=["1e20", "1e38"])
@pytest.mark.parametrize("name,kw", LARGE_CASES, ids=[f"{n}-{k}" for n, k in LARGE_CASES])
def test_huge_float32_gradients_match_torch(name, kw, scale):
    """|g| ~ 5e19: ``g * g * (1 - beta2)`` was inf where torch's ``addcmul_(g, g, value=1 - beta2)``
    (``((1 - beta2) * g) * g``) is finite, so Adam, RMSprop & co. took no step (torch's moves the
    parameter); at 1e38, centered RMSprop gave inf - inf = NaN where torch's fused ``addcmul`` keeps the
    parameter as it was."""
    p, step, _, tp, torch_step = _pair(name, kw, dtype=np.float32, square=False)
    for i in range(7):
        x = (np.array([0.5, 0.25, -1.0]) * (1 + 0.1 * i)).astype(np.float32)
        step(x=x, s=np.float32(scale))
        torch_step(x, np.float32(scale))
    a, b = p.data, tp.detach().numpy()
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_lamb_second_moment_of_a_huge_gradient_is_finite():
    p = nn.Parameter(np.array([1.0, -2.0], np.float32), name="w")
    g = lm.Graph()
    x = g.input("x", (2,))
    opt = train.LAMB([p], lr=0.1)
    train.compile_step((p.on(g) * x).sum() * 1e20, opt, backend="cpu")(x=np.array([0.5, -0.25], np.float32))
    v = opt.state_for(p)["exp_avg_sq"].data
    np.testing.assert_allclose(v, [2.5e36, 6.25e35], rtol=1e-6)
    assert np.isfinite(p.data).all() and not np.array_equal(p.data, [1.0, -2.0])


# RAdam's plain steps --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float16, np.float32], ids=["float16", "float32"])
def test_radam_plain_steps_leave_a_zero_gradient_element_as_torch(dtype):
    """float16: eps=1e-8 rounds to 0, so the single formula's ``adaptive / (sqrt(v) + eps)`` was 0 / 0 = NaN
    at a zero gradient in the first 5 (plain, unrectified) steps; torch's plain steps never divide."""
    w0 = np.array([1.0, -2.0, 3.0])
    p, step, _, tp, torch_step = _pair("RAdam", dict(lr=0.01), dtype=dtype, w0=w0, square=False)
    x = np.array([0.5, 0.25, 0.0], dtype)
    for _ in range(5):
        step(x=x, s=dtype(1.0))
        torch_step(x, dtype(1.0))
        np.testing.assert_array_equal(p.data, tp.detach().numpy())
    assert p.data[2] == 3.0


# clip_grad_norm's norm_type -------------------------------------------------------------------------
@pytest.mark.parametrize("norm_type", [2.0, 1, 3, 0.5, "inf", math.inf, "-inf", -math.inf, 0, 0.0, -1.0, -2.5, "2"],
                         ids=repr)
def test_clip_norm_types_match_torch(norm_type):
    """torch's clip_grad_norm_ takes float(norm_type): 'inf' was a TypeError, 0 a ZeroDivisionError, and
    -inf the largest magnitude (1.0, where torch's is the smallest, 0.25). 0 is torch's nested count: of
    the gradients with a nonzero element."""
    inits = [np.array([1.0, -2.0, 3.0], np.float32), np.array([0.5, 0.5], np.float32), np.array([2.0], np.float32)]
    xs = [np.array([0.5, 0.25, -1.0], np.float32), np.array([0.0, 0.0], np.float32), np.array([3.0], np.float32)]
    ps = [nn.Parameter(w.copy(), name=f"w{i}") for i, w in enumerate(inits)]
    g = lm.Graph()
    ins = [g.input(f"x{i}", x.shape) for i, x in enumerate(xs)]
    loss = sum((p.on(g) * x).sum() for p, x in zip(ps, ins))
    step = train.compile_step(loss, train.SGD(ps, lr=1.0), backend="cpu", clip_grad_norm=0.1, norm_type=norm_type)
    step(**{f"x{i}": x for i, x in enumerate(xs)})
    tps = [torch.nn.Parameter(torch.tensor(w)) for w in inits]
    sum((tp * torch.tensor(x)).sum() for tp, x in zip(tps, xs)).backward()
    norm = torch.nn.utils.clip_grad_norm_(tps, 0.1, norm_type=norm_type, foreach=False)
    torch.optim.SGD(tps, lr=1.0).step()
    assert step.last_grad_norm == pytest.approx(norm.item(), rel=1e-6)
    for p, tp in zip(ps, tps):
        np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-6)


@pytest.mark.parametrize("bad,kind,match", [
    ("fro", ValueError, r"norm_type 'fro' is not a number"),
    (None, TypeError, r"norm_type must be a number .* got NoneType None"),
    (True, TypeError, r"norm_type must be a number .* got bool True"),
    (float("nan"), ValueError, r"norm_type must not be NaN"),
    ([2], TypeError, r"norm_type must be a number"),
])
def test_clip_norm_type_refused_at_compile_step(bad, kind, match):
    p = nn.Parameter(np.ones(3, np.float32), name="w")
    g = lm.Graph()
    loss = (p.on(g) * g.input("x", (3,))).sum()
    with pytest.raises(kind, match="^compile_step: " + match):
        train.compile_step(loss, train.SGD([p], lr=0.1), backend="cpu", clip_grad_norm=1.0, norm_type=bad)


# what the optimizer is given ------------------------------------------------------------------------
def test_torch_state_dict_is_refused_naming_the_layouts():
    """Before: a bare KeyError: 'steps'."""
    tp = torch.nn.Parameter(torch.ones(3))
    topt = torch.optim.Adam([tp], lr=0.1)
    tp.grad = torch.ones(3)
    topt.step()
    p = nn.Parameter(np.ones(3, np.float32), name="w")
    opt = train.Adam([p], lr=0.1)
    with pytest.raises(ValueError, match=r"^Adam.load_state_dict: this is torch.optim's state_dict layout .*keys "
                                         r"'arrays', 'steps', 'param_groups'"):
        opt.load_state_dict(topt.state_dict())
    assert opt.steps == 0
    with pytest.raises(ValueError, match=r"^Adam.load_state_dict: the state has no 'arrays', 'steps'; expected a "
                                         r"dict from Optimizer.state_dict\(\)"):
        opt.load_state_dict({"param_groups": []})
    with pytest.raises(TypeError, match=r"^Adam.load_state_dict: expected a dict from Optimizer.state_dict\(\), "
                                        r"got list"):
        opt.load_state_dict([])


def test_a_parameter_twice_in_a_group_is_refused():
    """torch warns ("will cause an error" in future) and applies its update twice; luminal applied it
    once, silently, and saved param_count 2."""
    w, b = nn.Parameter(np.ones(3, np.float32), name="w"), nn.Parameter(np.ones(1, np.float32), name="b")
    with pytest.raises(ValueError, match=r"^SGD: param group 0 holds Parameter w \(3,\) float32 twice \(at 0 and 2\)"):
        train.SGD([w, b, w], lr=0.1)
    opt = train.Adam([b], lr=0.1)
    with pytest.raises(ValueError, match=r"^Adam: param group 1 holds Parameter w .* twice \(at 0 and 1\)"):
        opt.add_param_group({"params": [w, w]})
    assert len(opt.param_groups) == 1


def test_named_parameters_as_torch():
    """torch 2.13 takes model.named_parameters(): (name, parameter) pairs, the names kept as the group's
    param_names (in the state dict too)."""
    torch.manual_seed(0)
    tm = torch.nn.Linear(3, 2)
    m = nn.Linear(3, 2)
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    opt = train.AdamW(m.named_parameters(), lr=0.1)
    topt = torch.optim.AdamW(tm.named_parameters(), lr=0.1)
    assert opt.param_groups[0]["param_names"] == topt.param_groups[0]["param_names"] == ["weight", "bias"]
    assert opt.param_groups[0]["params"] == [m.weight, m.bias]
    g = lm.Graph()
    x = g.input("x", (4, 3))
    step = train.compile_step(m(x).pow(2).sum(), opt, backend="cpu")
    xb = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    for _ in range(3):
        step(x=xb)
        topt.zero_grad()
        tm(torch.tensor(xb)).pow(2).sum().backward()
        topt.step()
    np.testing.assert_allclose(m.weight.data, tm.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    sd = opt.state_dict()
    assert sd["param_groups"][0]["param_names"] == ["weight", "bias"]
    opt2 = train.AdamW(nn.Linear(3, 2).named_parameters(), lr=0.1)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["param_names"] == ["weight", "bias"]
    assert opt2.steps == 3


def test_named_parameters_all_or_none():
    a, b = nn.Parameter(np.ones(2, np.float32)), nn.Parameter(np.ones(2, np.float32))
    with pytest.raises(ValueError, match=r"^SGD: param group 0 mixes \(name, parameter\) pairs and bare parameters"):
        train.SGD([("a", a), b], lr=0.1)
    with pytest.raises(TypeError, match=r"^SGD: a named parameter is a \(name, parameter\) pair with a str name"):
        train.SGD([(1, a)], lr=0.1)
    opt = train.SGD([("a", a)], lr=0.1)
    with pytest.raises(ValueError, match=r"^SGD: param group 1 is not named, and group 0 is named; give every group"):
        opt.add_param_group({"params": [b]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.add_param_group({"params": [("b", b)]})
    assert opt.param_groups[1]["param_names"] == ["b"]


def test_all_frozen_parameters_are_named_as_the_reason():
    """Before: "the loss's graph reads none of the optimizer's parameters (was the model called on a tensor
    of this graph?)", though it did read them."""
    m = nn.Linear(3, 2).requires_grad_(False)
    g = lm.Graph()
    loss = m(g.input("x", (5, 3))).sum()
    with pytest.raises(ValueError, match=r"^compile_step: every parameter of the optimizer is frozen "
                                         r"\(requires_grad=False, all 2 of them\)"):
        train.compile_step(loss, train.SGD(m.parameters(), lr=0.1), backend="cpu")


def test_clip_by_norm_itself_names_itself_for_a_bad_norm_type():
    g = lm.Graph()
    grads = [g.input("a", (3,))]
    with pytest.raises(ValueError, match=r"^clip_by_norm: norm_type 'fro' is not a number"):
        train.clip_by_norm(grads, 1.0, "fro")
    clipped, total = train.clip_by_norm(grads, 1.0, "-inf")
    out = lm.compile([total, *clipped], backend="cpu")(a=np.array([0.5, -0.25, 2.0], np.float32))
    assert out[0] == 0.25

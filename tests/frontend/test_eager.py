"""Eager-PyTorch habits (``loss.backward()``, ``x.item()``, ``x.numpy()``, ``opt.zero_grad()``,
``opt.step()``, ``torch.no_grad()``, ``torch.inference_mode()``, ``torch.autocast(...)``, ``model.cuda()``,
``nn.utils.clip_grad_norm_``) fail with an EagerOnlyError naming
luminal's lazy equivalent, in the format of every op error (the op, the operands, the user's line),
instead of an AttributeError or a silent no-op; and the equivalents named do the job."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import nn, train
from luminal.frontend.eager import EagerOnlyError


def here() -> int:
    return sys._getframe(1).f_lineno


def _msg(e, op: str, called: int, *has: str) -> str:
    msg = str(e.value)
    assert msg.startswith(f"{op}: "), msg
    assert f"called at {__file__}:{called}:" in msg, msg
    for text in has:
        assert text in msg, msg
    return msg


def test_tensor_habits_name_compile_and_grad():
    g = lm.Graph()
    x = g.input("x", (2, 3)); lx = here()
    loss = (x * x).sum()
    with pytest.raises(EagerOnlyError) as e:
        lc = here(); loss.backward()
    _msg(e, "backward", lc, "train.grad(loss, params)", "train.compile_step(loss, optimizer)", "operand 0: () float32")
    for name, extra in [("item", "a.item()"), ("numpy", "lm.compile([t])"), ("tolist", "a.tolist()")]:
        with pytest.raises(EagerOnlyError) as e:
            lc = here(); getattr(x, name)()
        msg = _msg(e, name, lc, "is lazy", "lm.compile([t])", extra, "operand 0: (2, 3) float32")
        assert f"made at {__file__}:{lx}:" in msg
    assert isinstance(e.value, TypeError)  # as other misuses of a lazy tensor (``if t:``)


def test_what_the_messages_name_works():
    """``lm.compile([t])`` reads values; ``train.grad`` gives the gradient ``backward`` would have."""
    g = lm.Graph()
    x = g.input("x", (2, 3))
    loss = (x * x).sum()
    xs = np.arange(6, dtype=np.float32).reshape(2, 3)
    (a,) = lm.compile([loss], backend="reference")(x=xs)
    (gx,) = lm.compile([train.grad(loss, x)], backend="reference")(x=xs)
    tx = torch.from_numpy(xs).requires_grad_(True)
    (tx * tx).sum().backward()
    assert a.item() == pytest.approx(float((xs * xs).sum()))
    np.testing.assert_allclose(gx, tx.grad.numpy())


@pytest.mark.parametrize("opt", [train.SGD, train.Adam, train.AdamW])
def test_optimizer_step_and_zero_grad_name_compile_step(opt):
    o = opt(nn.Linear(2, 2).parameters(), lr=0.1)
    with pytest.raises(EagerOnlyError) as e:
        lc = here(); o.zero_grad()
    _msg(e, f"{opt.__name__}.zero_grad", lc, "nothing to zero", "train.compile_step(loss, optimizer)")
    with pytest.raises(EagerOnlyError) as e:
        lc = here(); o.step()
    _msg(e, f"{opt.__name__}.step", lc, "part of the compiled train step", "step(**batch)")


def test_module_zero_grad_stays_accepted():
    """``Module.zero_grad`` was accepted as a no-op before (nothing is stored on parameters) and stays so."""
    assert nn.Linear(2, 2).zero_grad() is None


def test_no_grad_names_detach_and_compile():
    lc = here() + 2  # the ``with`` line
    with pytest.raises(EagerOnlyError) as e:
        with lm.no_grad():
            pass
    _msg(e, "no_grad", lc, "x.detach()", "lm.compile(outputs)", "train.grad(loss, params)")
    with pytest.raises(EagerOnlyError, match="^no_grad: "):
        lm.no_grad()(lambda: None)  # the decorator form fails the same way


def test_clip_grad_names_compile_step_options():
    ps = list(nn.Linear(2, 2).parameters())
    with pytest.raises(EagerOnlyError) as e:
        lc = here(); nn.utils.clip_grad_norm_(ps, 0.5, norm_type=1.0)
    _msg(e, "clip_grad_norm_", lc, "clip_grad_norm=0.5, norm_type=1.0", "train.compile_step(loss, optimizer",
         "train.clip_by_norm(grads, max_norm, norm_type)", "step.last_grad_norm")
    with pytest.raises(EagerOnlyError) as e:
        lc = here(); nn.utils.clip_grad_value_(ps, 2.0)
    _msg(e, "clip_grad_value_", lc, "clip_grad_value=2.0", "train.clip_by_value(grads, clip_value)")


def test_clip_by_norm_named_there_matches_torch():
    """The function the message names clips as ``torch.nn.utils.clip_grad_norm_`` does."""
    rng = np.random.default_rng(0)
    gs = [rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (4,)]]
    g = lm.Graph()
    ts = [g.input(f"g{i}", a.shape) for i, a in enumerate(gs)]
    clipped, total = train.clip_by_norm(ts, 0.5)
    out = lm.compile([*clipped, total], backend="reference")(**{f"g{i}": a for i, a in enumerate(gs)})
    ps = [torch.zeros(a.shape, requires_grad=True) for a in gs]
    for p, a in zip(ps, gs):
        p.grad = torch.from_numpy(a.copy())
    want = torch.nn.utils.clip_grad_norm_(ps, 0.5)
    np.testing.assert_allclose(out[-1], want.numpy(), rtol=1e-6)
    for got, p in zip(out[:-1], ps):
        np.testing.assert_allclose(got, p.grad.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["inference_mode", "autocast"])
def test_inference_mode_and_autocast_name_what_luminal_does(name):
    """Both as ``with`` blocks and as decorators, and ``autocast`` by torch.amp's path (``lm.amp``)."""
    has = {"inference_mode": ("lm.compile(outputs)", "x.detach()"),
           "autocast": ("compute_dtype=lm.float16", "scaler=train.GradScaler()", "train.autocast(outputs")}[name]
    lc = here() + 2
    with pytest.raises(EagerOnlyError) as e:
        with getattr(lm, name)():
            pass
    _msg(e, name, lc, *has)
    with pytest.raises(EagerOnlyError, match=f"^{name}: "):
        getattr(lm, name)()(lambda: None)
    if name == "autocast":
        with pytest.raises(EagerOnlyError) as e:
            lc = here(); lm.amp.autocast("cuda", dtype=lm.float16)
        _msg(e, name, lc, *has)
        with pytest.raises(EagerOnlyError, match="^autocast: "):
            lm.autocast(device_type="cpu", dtype=lm.bfloat16, enabled=False)


DEVICE_CALLS = [  # (module.to's arguments, or None for module.cuda(); the call the error names)
    (None, "cuda()"), ((("cuda",), {}), "to('cuda')"), ((("cuda:1", lm.float16), {}), "to('cuda:1')"),
    (((), {"device": "cuda"}), "to('cuda')"), (((0,), {}), "to('cuda:0')"),
]


@pytest.mark.parametrize("to,named", DEVICE_CALLS, ids=[c[1] for c in DEVICE_CALLS])
def test_moving_a_module_to_a_device_names_the_backend(to, named):
    m = nn.Linear(2, 2)
    with pytest.raises(EagerOnlyError) as e:
        lc = here(); m.cuda() if to is None else m.to(*to[0], **to[1])
    _msg(e, f"Linear.{named}", lc, "has no device", "lm.compile(outputs, backend='cuda')",
         "train.compile_step(loss, optimizer, backend='cuda')", "registered: ", "module.to('cpu')")
    assert m.weight.dtype is lm.float32  # nothing converted


def test_the_cpu_stays_accepted_by_a_module():
    m = nn.Linear(2, 2)
    assert m.cpu() is m and m.to("cpu") is m and m.to(torch.device("cpu")) is m
    assert m.to("cpu", lm.float64) is m and m.weight.dtype is lm.float64
    assert m.to(device="cpu", dtype="float32").weight.dtype is lm.float32

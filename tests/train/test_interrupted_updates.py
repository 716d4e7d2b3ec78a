"""Ctrl-C never leaves a half-applied update: a real SIGINT delivered between two of a train step's
writes (or of a load's) is raised as KeyboardInterrupt only once every write is done, so the
parameters, the optimizer's moments and its step count are all at step k + 1 (as in a twin run that
was not interrupted), and a load leaves every value loaded. Saving after catching the interrupt
then writes one consistent state."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

import luminal as lm
from luminal import nn, train

X = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
Y = np.array([0, 1, 2, 1, 0, 2, 2, 1], np.int32)
STEPS = 2  # completed steps before the interrupted one


def _trainer(backend: str, seed: int = 0):
    lm.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
    g = lm.Graph()
    x, y = g.input("x", (8, 4)), g.input("y", (8,), dtype=lm.int32)
    opt = train.AdamW(model.parameters(), lr=1e-2)
    step = train.compile_step(train.cross_entropy(model(x), y), opt, backend=backend)
    return model, opt, step


def _everything(model, opt) -> dict:
    sd = opt.state_dict()
    out = {f"model.{k}": np.array(v) for k, v in model.state_dict().items()}
    out.update({f"optim.{k}": np.array(v) for k, v in sd["arrays"].items()})
    out["optim.steps"] = np.array(sd["steps"])
    return out


def _assert_same(got: dict, want: dict):
    assert got.keys() == want.keys()
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-7, err_msg=k)


def _interrupt_after_first_write_to(arrays, monkeypatch) -> list:
    """From now on, the first ``np.copyto`` into one of ``arrays`` sends this process a real SIGINT
    right after it wrote: the other arrays are still to be written. Returns a list that records it."""
    sent, copyto = [], np.copyto
    ids = {id(a) for a in arrays}

    def hook(dst, src, *args, **kwargs):
        copyto(dst, src, *args, **kwargs)
        if id(dst) in ids and not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(np, "copyto", hook)
    return sent


def _interrupt_after_first_device_write_to(states, monkeypatch) -> list:
    """The resident path (cuda-emulated): the program writes the States' device copies, and the host
    learns of it State by State (``Mirrored.written_on_device``); a real SIGINT right after the first
    of ``states`` is marked, the others still to be. Returns a list that records it."""
    from luminal.core.residency import Mirrored

    sent, mark = [], Mirrored.written_on_device
    ids = {id(s) for s in states}

    def hook(self):
        mark(self)
        if id(self) in ids and not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(Mirrored, "written_on_device", hook)
    return sent


@pytest.mark.parametrize("backend", ["cpu", "cuda-emulated"])
@pytest.mark.parametrize("moment", ["between two parameter writes", "after the program, before the count"])
def test_an_interrupted_step_is_applied_entirely(backend, moment, monkeypatch):
    model, opt, step = _trainer(backend)
    twin, twin_opt, twin_step = _trainer(backend)
    for _ in range(STEPS + 1):
        twin_step(x=X, y=Y)
    for _ in range(STEPS):
        step(x=X, y=Y)
    if moment == "between two parameter writes" and backend == "cuda-emulated":
        sent = _interrupt_after_first_device_write_to(model.parameters(), monkeypatch)
    elif moment == "between two parameter writes":
        sent = _interrupt_after_first_write_to([p.data for p in model.parameters()], monkeypatch)
    else:  # the program has written every State; the optimizer's step count is still to be counted
        sent, program = [], step._update

        def run_then_interrupt(**batch):
            out = program(**batch)
            sent.append(True)
            os.kill(os.getpid(), signal.SIGINT)
            return out

        monkeypatch.setattr(step, "_update", run_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        step(x=X, y=Y)
    monkeypatch.undo()
    assert sent
    assert opt.steps == STEPS + 1
    _assert_same(_everything(model, opt), _everything(twin, twin_opt))
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Ctrl-C acts at once again
    assert step(x=X, y=Y) == pytest.approx(twin_step(x=X, y=Y), rel=1e-6)  # and training goes on alike


def test_a_step_that_fails_is_not_held_back_and_the_interrupt_still_comes():
    """An error inside the deferred block is not lost: the interrupt is raised with it as context."""
    _, opt, step = _trainer("cpu")

    def fail(**batch):
        os.kill(os.getpid(), signal.SIGINT)
        raise RuntimeError("program failed")

    step._update = fail
    with pytest.raises(KeyboardInterrupt) as e:
        step(x=X, y=Y)
    assert isinstance(e.value.__context__, RuntimeError)
    assert opt.steps == 0


def test_an_interrupted_module_load_loads_every_tensor(monkeypatch):
    model, _, _ = _trainer("cpu", seed=0)
    other, _, _ = _trainer("cpu", seed=1)
    sent = _interrupt_after_first_write_to([p.data for p in model.parameters()], monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        model.load_state_dict(other.state_dict())
    monkeypatch.undo()
    assert sent
    _assert_same({k: np.array(v) for k, v in model.state_dict().items()},
                 {k: np.array(v) for k, v in other.state_dict().items()})


def test_an_interrupted_optimizer_load_loads_all_of_it(monkeypatch):
    model, opt, step = _trainer("cpu", seed=0)
    step(x=X, y=Y)
    saved = {**opt.state_dict(), "arrays": {k: np.array(v) for k, v in opt.state_dict()["arrays"].items()}}
    step(x=X, y=Y)
    moments = [st.data for p in model.parameters() for st in opt.state_for(p).values()]
    sent = _interrupt_after_first_write_to(moments, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        opt.load_state_dict(saved)
    monkeypatch.undo()
    assert sent and opt.steps == 1
    for k, v in saved["arrays"].items():
        np.testing.assert_array_equal(opt.state_dict()["arrays"][k], v, err_msg=k)


def test_an_interrupted_checkpoint_load_restores_all_of_it(tmp_path, monkeypatch):
    model, opt, step = _trainer("cpu", seed=0)
    sched = train.ExponentialLR(opt, gamma=0.5)
    for _ in range(STEPS):
        step(x=X, y=Y)
        sched.step()
    train.save_checkpoint(tmp_path / "ck.safetensors", model=model, optimizer=opt, scheduler=sched, step=step,
                          extra={"epoch": 2})
    want = _everything(model, opt)
    model2, opt2, step2 = _trainer("cpu", seed=1)
    sched2 = train.ExponentialLR(opt2, gamma=0.5)
    sent = _interrupt_after_first_write_to([p.data for p in model2.parameters()], monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        train.load_checkpoint(tmp_path / "ck.safetensors", model=model2, optimizer=opt2, scheduler=sched2,
                              step=step2)
    monkeypatch.undo()
    assert sent
    _assert_same(_everything(model2, opt2), want)
    assert sched2.last_epoch == sched.last_epoch and opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]


def test_a_ctrl_c_during_the_first_calls_code_generation_acts_at_once(monkeypatch):
    """A step's first call generates the code of its binding (seconds for a deep model): a Ctrl-C there
    is raised at once, before anything is written, instead of after the whole step; the next call
    compiles and trains as if it had never happened."""
    from luminal.backends.cpu import compiled

    model, opt, step = _trainer("cpu")
    twin, twin_opt, twin_step = _trainer("cpu")
    before = _everything(model, opt)
    reached, binding = [], compiled.Binding

    def interrupted_binding(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        reached.append("the layout went on after the signal")
        return binding(*args, **kwargs)

    monkeypatch.setattr(compiled, "Binding", interrupted_binding)
    with pytest.raises(KeyboardInterrupt):
        step(x=X, y=Y)
    monkeypatch.undo()
    assert reached == []
    _assert_same(_everything(model, opt), before)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert step(x=X, y=Y) == pytest.approx(twin_step(x=X, y=Y), rel=1e-6)
    _assert_same(_everything(model, opt), _everything(twin, twin_opt))

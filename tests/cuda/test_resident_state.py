"""States stay on the device between calls (``backends/cuda/runtime.py``): one device copy per State,
shared by every program that reads it; a host write reaches the device at the next call, and reading
``.data`` (state_dict, checkpoints, safetensors) sees what the device wrote. On the simulated device,
which runs the same runtime as a GPU."""

import gc
import re

import numpy as np
import pytest

import luminal as lm
from luminal import nn, train
from luminal.backends.cuda import runtime as rt
from luminal.frontend.state import State


def _counter(start=0.0):
    """A State ``s`` and a program that returns ``x * s`` and adds 1 to ``s``."""
    s = State(np.full(4, start, np.float32), name="s")
    g = lm.Graph()
    x = g.input("x", (4,))
    t = g.state(s)
    g.assign(s, t + 1.0)
    return s, lm.compile([x * t], backend="cuda-emulated")


def test_updates_stay_on_the_device_until_read():
    s, f = _counter()
    x = np.ones(4, np.float32)
    for k in range(3):
        (y,) = f(x=x)
        np.testing.assert_array_equal(y, np.full(4, k, np.float32))  # each call reads the last one's update
        assert s.device_current and not s._host_current  # nothing came back to the host
    np.testing.assert_array_equal(s.data, np.full(4, 3, np.float32))  # read: downloaded once


def test_host_writes_reach_the_device():
    s, f = _counter()
    x = np.ones(4, np.float32)
    f(x=x)
    s.set(np.full(4, 10, np.float32))  # a whole write: no download first
    np.testing.assert_array_equal(f(x=x)[0], np.full(4, 10, np.float32))
    s.data[0] = -5  # in place, through .data: downloaded, then written, uploaded at the next call
    np.testing.assert_array_equal(f(x=x)[0], [-5, 11, 11, 11])
    np.testing.assert_array_equal(s.data, [-4, 12, 12, 12])


def test_two_programs_share_one_device_copy():
    s, bump = _counter()
    g = lm.Graph()
    read = lm.compile([g.state(s) * 2.0], backend="cuda-emulated")
    x = np.ones(4, np.float32)
    bump(x=x)
    copy = s.device_copy
    np.testing.assert_array_equal(read()[0], np.full(4, 2, np.float32))  # the bump's update, on the device
    bump(x=x)
    np.testing.assert_array_equal(read()[0], np.full(4, 4, np.float32))
    assert s.device_copy is copy and not s._host_current  # one copy; the host never saw the values


def _trained(backend, steps=3):
    lm.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    g = lm.Graph()
    x, y = g.input("x", (5, 6)), g.input("y", (5,), dtype=lm.int32)
    opt = train.AdamW(model.parameters(), lr=1e-2)
    step = train.compile_step(train.cross_entropy(model(x), y), opt, backend=backend)
    rng = np.random.default_rng(0)
    xb, yb = rng.standard_normal((5, 6)).astype(np.float32), rng.integers(0, 3, 5).astype(np.int32)
    losses = [float(step(x=xb, y=yb)) for _ in range(steps)]
    return model, opt, losses


def test_state_dict_checkpoints_and_safetensors_see_device_values(tmp_path):
    model, opt, losses = _trained("cuda-emulated")
    twin, twin_opt, twin_losses = _trained("reference")
    np.testing.assert_allclose(losses, twin_losses, rtol=1e-5, atol=1e-6)
    assert any(not p._host_current for p in model.parameters())  # the device holds the latest values
    for k, v in twin.state_dict().items():
        np.testing.assert_allclose(model.state_dict()[k], v, rtol=1e-5, atol=1e-6, err_msg=k)
    for k, v in twin_opt.state_dict()["arrays"].items():
        np.testing.assert_allclose(opt.state_dict()["arrays"][k], v, rtol=1e-5, atol=1e-6, err_msg=k)
    model, _, _ = _trained("cuda-emulated")
    model.save_safetensors(tmp_path / "m.safetensors")
    twin.save_safetensors(tmp_path / "t.safetensors")
    fresh = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    fresh.load_safetensors(tmp_path / "m.safetensors")
    for k, v in twin.state_dict().items():
        np.testing.assert_allclose(fresh.state_dict()[k], v, rtol=1e-5, atol=1e-6, err_msg=k)


def test_a_bfloat16_state_round_trips_through_its_device_bits():
    s = State(np.array([1.5, -2.25, 3.0], np.float32), dtype=lm.bfloat16, name="h")
    g = lm.Graph()
    t = g.state(s)
    g.assign(s, t * 2.0)
    f = lm.compile([t + 0.0], backend="cuda-emulated")
    f()
    np.testing.assert_array_equal(f()[0], [3.0, -4.5, 6.0])
    np.testing.assert_array_equal(s.data, [6.0, -9.0, 12.0])


@pytest.mark.parametrize("sync", [False, True], ids=["graphs", "LUMINAL_CUDA_SYNC"])
def test_an_index_error_commits_nothing(sync, monkeypatch):
    """The flags are read before the commit (with graphs: once per call; synchronized: after each
    launch), so a bad index leaves every State as it was."""
    if sync:
        monkeypatch.setenv("LUMINAL_CUDA_SYNC", "1")
    s = State(np.zeros(3, np.float32), name="s")
    g = lm.Graph()
    x, i = g.input("x", (4,)), g.input("i", (2,), dtype=lm.int32)
    t = g.state(s)
    g.assign(s, t + 1.0)
    f = lm.compile([lm.gather(x, 0, i)], backend="cuda-emulated")
    x_ = np.arange(4, dtype=np.float32)
    f(x=x_, i=np.array([0, 1], np.int32))
    for _ in range(2):  # launch by launch, then replayed
        with pytest.raises(IndexError, match=r"gather: index 7 is out of range for a dim of size 4 \(made at ") as e:
            f(x=x_, i=np.array([0, 7], np.int32))
        # (the call names the user's op and line; the device's own error, the cause, names its kernel)
        assert re.match(r"gather: index 7 is out of range for a dim of size 4 \(kernel \w+", str(e.value.__cause__))
    np.testing.assert_array_equal(s.data, np.ones(3, np.float32))


def test_a_collected_program_and_state_free_their_device_memory():
    dev = rt.simulated().device
    gc.collect()
    before = dev.allocated_bytes()
    s, f = _counter()
    for _ in range(3):
        f(x=np.ones(4, np.float32))
    assert dev.allocated_bytes() > before
    del s, f
    gc.collect()
    rt.simulated().flush()
    assert dev.allocated_bytes() == before


def test_a_small_state_the_host_sets_every_call_goes_up_inside_the_replayed_graph(monkeypatch):
    """A learning rate set before every step reaches the device through the run's pinned slot, captured
    in its graph: each replay sees the new value, and no upload of its own is made."""
    lr = State(np.float32(0.5), name="lr")
    g = lm.Graph()
    x = g.input("x", (3,))
    f = lm.compile([x * g.state(lr)], backend="cuda-emulated")
    uploads = []
    upload = rt.DeviceState.upload
    monkeypatch.setattr(rt.DeviceState, "upload", lambda self, host: (uploads.append(1), upload(self, host))[1])
    dev = rt.simulated().device
    replays = dev.replays
    for k in range(5):
        lr.set(np.float32(k))
        np.testing.assert_array_equal(f(x=np.ones(3, np.float32))[0], np.full(3, k, np.float32))
    assert uploads == [] and dev.replays - replays == 4  # calls 2 to 5: one run graph each

"""The simulated device keeps the driver's rules, so a runtime that passes on it does not break them on
a GPU: no allocation, free or synchronize while capturing, captured host copies only from pinned
memory, every pointer inside a live allocation; a launch runs the real kernel over the bytes its
pointers address, and a replayed graph runs its launches and copies again."""

import numpy as np
import pytest

from luminal.backends.cuda.device import ArgBlock, DeviceError
from luminal.backends.cuda.simulated import SimulatedDevice
from luminal.codegen import ir
from luminal.core import dtype as dt

F32 = dt.float32


def _double(n: int = 10):
    """out[i] = 2 * x[i] for i < n, over blocks of 32 threads."""
    i = ir.add(ir.mul(ir.block(0), 32), ir.thread(0))
    body = (ir.If(i < ir.param("n"), (ir.Store("out", i, ir.alu("Mul", ir.load("x", F32, i), ir.const(2.0, F32))),)),)
    k = ir.Kernel("double", (ir.Buf("x", F32), ir.Buf("out", F32, "w")), ("n",),
                  (ir.div(ir.add(ir.param("n"), 31), 32),), body, block=(32,))
    return k, n


def _launch(dev, k, x_ptr, out_ptr, n):
    args = ArgBlock.pack(k, [x_ptr, out_ptr], [4 * n] * 2, {"n": n})
    dev.launch(dev.function(k), ((n + 31) // 32, 1, 1), (32, 1, 1), args)


def test_a_launch_runs_the_kernel_over_the_bytes_its_pointers_address():
    dev = SimulatedDevice()
    k, n = _double()
    arena = dev.alloc(1024)
    x = np.arange(n, dtype=np.float32)
    dev.upload(arena + 256, x)
    _launch(dev, k, arena + 256, arena + 512, n)
    out = np.empty(n, np.float32)
    dev.download(out, arena + 512)
    dev.synchronize()
    np.testing.assert_array_equal(out, 2 * x)


def test_pointers_must_lie_inside_a_live_allocation():
    dev = SimulatedDevice()
    k, n = _double()
    a = dev.alloc(40)
    with pytest.raises(DeviceError, match="not inside a live allocation"):
        _launch(dev, k, a, a + 8, n)  # out's 40 bytes run past the end of the allocation
    with pytest.raises(DeviceError, match="not inside a live allocation"):
        dev.upload(a + 36, np.zeros(2, np.float32))
    dev.free(a)
    with pytest.raises(DeviceError, match="not inside a live allocation"):
        dev.memset(a, 0, 4)
    with pytest.raises(DeviceError, match="not the address of a live allocation"):
        dev.free(a)


def test_no_allocation_free_or_synchronize_while_capturing():
    dev = SimulatedDevice()
    a = dev.alloc(64)
    dev.begin_capture()
    for call in (lambda: dev.alloc(8), lambda: dev.free(a), dev.synchronize, lambda: dev.alloc_pinned(8),
                 dev.begin_capture):
        with pytest.raises(DeviceError, match="while capturing"):
            call()
    dev.end_capture()
    dev.free(a)


def test_captured_host_copies_only_from_pinned_memory():
    dev = SimulatedDevice()
    a = dev.alloc(64)
    pageable, pinned = np.ones(16, np.uint8), dev.alloc_pinned(16)
    dev.upload(a, pageable)  # outside a capture: any host memory
    dev.begin_capture()
    with pytest.raises(DeviceError, match="pinned"):
        dev.upload(a, pageable)
    with pytest.raises(DeviceError, match="pinned"):
        dev.download(pageable, a)
    dev.upload(a, pinned[4:8])  # a part of a pinned allocation is pinned
    dev.download(pinned.view(np.uint32), a)
    dev.end_capture()


def test_replay_reruns_the_captured_copies_and_launches_reading_pinned_memory_at_replay():
    dev = SimulatedDevice()
    k, n = _double()
    arena = dev.alloc(512)
    staging_in, staging_out = dev.alloc_pinned(4 * n), dev.alloc_pinned(4 * n)
    dev.begin_capture()
    dev.upload(arena, staging_in)
    _launch(dev, k, arena, arena + 256, n)
    dev.download(staging_out, arena + 256)
    graph = dev.end_capture()
    assert dev.launches == 0  # captured, not run
    for step in range(3):
        staging_in.view(np.float32)[...] = np.arange(n) + step
        dev.replay(graph)
        dev.synchronize()
        np.testing.assert_array_equal(staging_out.view(np.float32), 2 * (np.arange(n) + step))
    assert dev.launches == 3 and dev.replays == 3
    dev.free(arena)
    with pytest.raises(DeviceError, match="freed memory"):
        dev.replay(graph)


def test_fresh_device_memory_is_not_zero_and_memset_fills_it():
    dev = SimulatedDevice()
    a = dev.alloc(16)
    got = np.empty(16, np.uint8)
    dev.download(got, a)
    assert (got != 0).all()
    dev.memset(a, 0, 16)
    dev.download(got, a)
    assert (got == 0).all()


def test_the_stream_runs_at_synchronize_as_late_as_a_gpu_may():
    """A download into pinned memory lands only at synchronize, and a pinned upload's source is read
    then too, so a runtime that reads or rewrites staging memory too early fails here as on a GPU; a
    copy from pageable memory takes its bytes at once and one into pageable memory returns finished,
    as the driver does."""
    dev = SimulatedDevice()
    a = dev.alloc(16)
    pinned = dev.alloc_pinned(16)
    pinned[...] = 1
    dev.upload(a, pinned)
    pinned[...] = 2  # rewritten before the stream ran: the device gets 2s
    got = dev.alloc_pinned(16)
    dev.download(got, a)
    assert (got == 0).all()  # not there yet
    dev.synchronize()
    assert (got == 2).all()
    pageable = np.full(16, 3, np.uint8)
    dev.upload(a, pageable)
    pageable[...] = 4  # too late: the bytes were taken when enqueued
    out = np.zeros(16, np.uint8)
    dev.download(out, a)  # pageable: returns finished
    assert (out == 3).all()


def test_one_launch_through_the_layer_matches_numpy_and_writes_back_in_place():
    """``oneshot.launch_once`` (the path of the one-kernel GPU tests) on the simulated device: float16
    and bfloat16 results back in the caller's arrays (bfloat16 as float32), the masked tail untouched."""
    from test_render import elementwise

    from luminal.backends.cuda.oneshot import launch_once

    rng = np.random.default_rng(0)
    n = 100
    x = rng.standard_normal(n).astype(np.float16)
    y = dt.round_bf16(rng.standard_normal(n).astype(np.float32))
    o, ob = np.full(n + 24, 7, np.float16), np.full(n + 24, 7, np.float32)
    launch_once(SimulatedDevice(), elementwise(), {"x": x, "y": y, "o": o, "ob": ob}, {"n": n})
    s = x.astype(np.float32) + y
    np.testing.assert_array_equal(o[:n], (s * s).astype(np.float16))
    np.testing.assert_array_equal(ob[:n], dt.round_bf16(dt.round_bf16(x.astype(np.float32)) + y))
    assert (o[n:] == 7).all() and (ob[n:] == 7).all()

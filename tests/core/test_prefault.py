"""``core/prefault.py``: an array's pages mapped on another thread, its bytes never touched."""

from __future__ import annotations

import os
import resource
import select
import signal
import sys

import numpy as np
import pytest

import luminal as lm
from luminal import nn, train
from luminal.core import prefault
from luminal.frontend.state import zeros_state

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise(MADV_POPULATE_WRITE) is Linux's")


def _mapped_by_prefault() -> bool:
    """Whether this kernel has the call (5.14 and later): after a wait, a failure has switched it off."""
    prefault.prefault(np.zeros(prefault.MIN_BYTES, np.uint8))
    prefault.wait()
    return prefault._libc_madvise() is not None


@linux
def test_values_written_before_and_while_it_maps_are_kept():
    a = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32)  # 4 MB, every page written
    want = a.copy()
    prefault.prefault(a)
    b = np.zeros(1 << 20, np.float32)
    prefault.prefault(b)
    b[::1024] = np.arange(1024)  # written while the thread may be mapping it
    prefault.wait()
    np.testing.assert_array_equal(a, want)
    np.testing.assert_array_equal(b[::1024], np.arange(1024))
    assert not np.any(np.delete(b, np.arange(0, b.size, 1024)))


@linux
def test_its_pages_are_mapped_before_the_first_write():
    if not _mapped_by_prefault():
        pytest.skip("this kernel has no MADV_POPULATE_WRITE (Linux 5.14 and later)")
    a = np.zeros(2 << 20, np.uint8)  # under numpy's 4 MB huge-page threshold: 512 pages of 4 KB
    prefault.prefault(a)
    prefault.wait()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    a[::4096] = 1
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    assert faults < 64, f"{faults} page faults writing 512 pages the prefault thread had mapped"


def test_small_or_strided_arrays_are_left_alone():
    small = np.zeros(prefault.MIN_BYTES // 8 - 1)
    strided = np.zeros((2 * prefault.MIN_BYTES,), np.uint8)[::2]
    prefault.prefault(small)
    prefault.prefault(strided)  # (not C-contiguous: its pages are not one range)
    prefault.wait()
    assert not small.any() and not strided.any()


@linux
def test_a_forked_child_maps_on_a_thread_of_its_own():
    prefault.prefault(np.zeros(prefault.MIN_BYTES, np.uint8))  # the parent's thread is running
    prefault.wait()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no thread survived the fork; waiting must not hang on the parent's queue
        try:
            a = np.ones(1 << 18, np.float32)
            prefault.prefault(a)
            prefault.wait()
            os.write(w, b"ok" if a.min() == 1 and prefault._thread[0].is_alive() else b"bad")
        finally:
            os._exit(0)
    os.close(w)
    ready, _, _ = select.select([r], [], [], 60)  # (a child stuck after the fork fails the test, not the run)
    got = os.read(r, 8) if ready else b"no answer in 60 s"
    if not ready:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.close(r)
    assert got == b"ok"


def test_moments_are_zero_and_a_training_step_matches_the_closed_form():
    """AdamW's first step from zero moments: each parameter moves by lr * sign(grad) (bias-corrected m / sqrt(v))."""
    st = zeros_state((512, 256), lm.float32, "m")
    prefault.wait()
    assert st.data.shape == (512, 256) and st.data.dtype == np.float32 and not st.data.any()
    lm.manual_seed(0)
    model = nn.Linear(256, 512)
    w0 = np.array(model.weight.data)
    g = lm.Graph()
    x = g.input("x", (4, 256))
    loss = model(x).sum()
    step = train.compile_step(loss, train.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0), backend="cpu")
    xs = np.random.default_rng(1).standard_normal((4, 256), dtype=np.float32)
    step(x=xs)
    grad = np.broadcast_to(xs.sum(0), w0.shape)
    np.testing.assert_allclose(np.array(model.weight.data), w0 - 1e-2 * np.sign(grad), rtol=0, atol=1e-6)


@linux
def test_zeros_are_zero_writable_and_never_written_by_the_caller():
    big = np.ones(40 << 20, np.uint8)  # freed: glibc now serves arrays of up to 40 MB from its heap
    del big
    used = [np.ones(1 << 19, np.float32) for _ in range(16)]  # heap blocks written and freed: np.zeros of
    del used  # these sizes now clears reused blocks by writing them (523 faults here, on this thread)
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    made = [prefault.zeros((512, 1024), np.float32, populate=i % 2 == 0) for i in range(16)]  # 2 MB each
    faults = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before
    assert faults < 64, f"{faults} page faults on the calling thread making 32 MB of zeros"
    a = made[0]
    assert a.shape == (512, 1024) and a.dtype == np.float32 and a.flags.c_contiguous and a.flags.writeable
    prefault.wait()
    assert not any(m.any() for m in made)
    a[3, 5] = 7.0
    assert a.sum() == 7.0
    small = prefault.zeros(3, np.int64)  # under MIN_BYTES: numpy's own
    assert small.shape == (3,) and small.dtype == np.int64 and not small.any()


@pytest.mark.parametrize("shape", [(), 0, (0, 300_000), 300_000, np.int64(300_000), [512, 1024], np.array([512, 1024]),
                                   range(512, 514)])
@pytest.mark.parametrize("dtype", [np.float32, np.bool_, np.float16, object])
def test_zeros_takes_what_np_zeros_takes(shape, dtype):
    want = np.zeros(shape, dtype)
    got = prefault.zeros(shape, dtype)
    assert got.shape == want.shape and got.dtype == want.dtype and got.flags.c_contiguous
    assert np.array_equal(got, want)


@linux
def test_a_read_only_array_does_not_switch_prefaulting_off():
    if not _mapped_by_prefault():
        pytest.skip("this kernel has no MADV_POPULATE_WRITE (Linux 5.14 and later)")
    import mmap
    ro = np.frombuffer(mmap.mmap(-1, 1 << 20, prot=mmap.PROT_READ), np.uint8)  # (madvise for writing would fail)
    assert not ro.flags.writeable
    prefault.prefault(ro)
    prefault.wait()
    assert prefault._libc_madvise() is not None

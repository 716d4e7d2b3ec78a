"""The Llama example's prefill on threads of the backend's own (``parallel.py``, ``native_team.py``).

Why: on two threads the small Llama's prefill (``bench/llama_cpu.py``) ran 1.34 times torch's time
(and slower than on one thread) while its steps on one thread took no longer than torch's: its 32
native splits each waited for the worker thread, and on a machine busy with other work the worker's
core is often someone else's for a scheduler's time slice. A part the worker has not claimed is now
run by the driver itself. Checked here: the prefill, with its kernels and products cut over two
threads, matches torch; and it still does, every part run by the driver, when the team's worker
never runs at all (before, the driver waited for it forever).
"""

from __future__ import annotations

import ctypes
import faulthandler
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from luminal.backends.cpu import driver, native_team, parallel, plan

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "llama"))
sys.path.insert(0, str(ROOT / "tests" / "examples"))
from llama_reference import TorchLlama  # noqa: E402
from model import Llama, LlamaConfig, Session  # noqa: E402

pytestmark = [pytest.mark.skipif(not native_team.available(), reason="the native team runs on Linux x86-64 only"),
              pytest.mark.usefixtures("one_torch_thread")]

THREADS = 2
WATCHDOG_S = 120
CONFIG = dict(vocab_size=96, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64)
PROMPT = list(range(3, 40))


@pytest.fixture(autouse=True)
def split_everything(monkeypatch):
    """Every kernel and run worth cutting, over ``THREADS`` threads (as tests/cpu/test_parallel.py),
    and a watchdog: a split waiting forever in native code cannot be interrupted, so past
    ``WATCHDOG_S`` the process dumps its threads' stacks and exits."""
    monkeypatch.setattr(parallel, "MIN_RUN_NS", 0)
    monkeypatch.setattr(parallel, "MIN_CALL_NS", 0)
    monkeypatch.setattr(plan, "SPLIT_NS", 0)
    monkeypatch.setattr(plan, "OWN_THREADS_NS", 0)
    monkeypatch.setenv("LUMINAL_NUM_THREADS", str(THREADS))
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def _models():
    cfg = LlamaConfig(**CONFIG)
    rng = np.random.default_rng(0)
    model = Llama(cfg)
    for name, p in model.named_parameters():
        p.data[...] = 1.0 if name.endswith("norm.weight") else rng.uniform(-0.2, 0.2, p.data.shape)
    sd = {name: torch.from_numpy(p.data) for name, p in model.named_parameters()}  # shared, not copied
    return model, TorchLlama(cfg=cfg.to_dict(), sd=sd)


def _want(ref) -> np.ndarray:
    with torch.inference_mode():
        return ref.forward(torch.tensor([PROMPT]))[0, -1].numpy()


def _split_entries(binding) -> list:
    """``(table, word index)`` of every split entry of the binding's driver tables."""
    found = []
    for t in binding._keep:
        if isinstance(t, ctypes.Array) and t._type_ is ctypes.c_int64 and len(t) % driver.WORDS == 0:
            found += [(t, i) for i in range(0, len(t), driver.WORDS) if t[i] == driver.SPLIT]
    return found


def _prefill_binding(session):
    (b,) = session.prefill.runner.program._bindings.values()
    return b


def test_prefill_cut_over_two_threads_matches_torch():
    model, ref = _models()
    session = Session(model, capacity=48)
    got = session.start(PROMPT)
    b = _prefill_binding(session)
    assert b.schedule.threaded and _split_entries(b), "the prefill's splits should run in the driver"
    np.testing.assert_allclose(got, _want(ref), rtol=1e-4, atol=1e-4)
    for _ in range(20):  # posts, claims and joins back to back
        np.testing.assert_array_equal(session.start(PROMPT), got)


class _IdleTeam:
    """A team's memory that says one worker is live while none runs: every part posted to it waits
    for a worker that never comes (a worker whose core another process holds, taken to the limit)."""

    def __init__(self):
        self._raw = ctypes.create_string_buffer(native_team.HEADER + native_team.SLOT + 64)
        self.address = -(-ctypes.addressof(self._raw) // 64) * 64
        word = lambda at: ctypes.c_int64.from_address(self.address + at)  # noqa: E731
        word(native_team.LIVE).value = 1
        word(native_team.SYSCALL).value = ctypes.cast(ctypes.CDLL(None).syscall, ctypes.c_void_p).value
        word(native_team.SPINS).value = native_team.SPIN

    def slot(self, offset: int) -> int:
        return ctypes.c_int32.from_address(self.address + native_team.HEADER + offset).value


def test_a_part_the_worker_never_starts_is_run_by_the_driver():
    model, ref = _models()
    session = Session(model, capacity=48)
    first = session.start(PROMPT)
    b = _prefill_binding(session)
    entries = _split_entries(b)
    idle = _IdleTeam()
    for table, i in entries:
        table[i + driver.SPLIT_WORDS.index("team")] = idle.address
    got = session.start(PROMPT)
    # every part was the driver's: each post's generation claimed and marked done by it
    assert idle.slot(native_team.GEN) == len(entries)
    assert idle.slot(native_team.CLAIM) == idle.slot(native_team.DONE) == len(entries)
    np.testing.assert_allclose(got, _want(ref), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, first, rtol=1e-5, atol=1e-6)


"""Worker processes compile many LLVM objects at once (``codegen/llvm_workers.py``): the same object
code as this process makes, and the same result when a worker is gone."""

from __future__ import annotations

import numpy as np
import pytest

from luminal.codegen import ir, llvm, llvm_workers
from luminal.core import dtype as dt


def _compile(texts: list, done=None) -> list:
    """The objects of ``texts`` through a :class:`llvm_workers.Batch`."""
    batch = llvm_workers.Batch(llvm.compile_text_to_object, done)
    for text in texts:
        batch.submit(text)
    return batch.results()


def _adds(prefix: str, n: int, start: float = 0.0, size: int = 8) -> list:
    """``n`` different small kernels named ``prefix0, prefix1, ...``: kernel ``k`` over ``size`` items
    is ``y[i] = x[i] + start + k``."""
    out = []
    for k in range(n):
        x = ir.load("x", dt.float32, ir.item(0))
        value = ir.alu("Add", x, ir.const(start + k, dt.float32))
        out.append(ir.Kernel(f"{prefix}{k}", (ir.Buf("x", dt.float32), ir.Buf("y", dt.float32, "w")), (),
                             (ir.const(size),), (ir.Store("y", ir.item(0), value),)))
    return out


def _texts(n: int) -> list:
    """Module texts of ``n`` different small kernels."""
    return [llvm._named_by_content(k, False, None)[1] for k in _adds("scale", n, 0.5, 64)]


@pytest.fixture
def two_workers(monkeypatch):
    monkeypatch.setenv("LUMINAL_COMPILE_WORKERS", "3")  # this process and two workers
    yield
    llvm_workers._stop()


def test_workers_make_the_same_objects(two_workers):
    texts = _texts(6)
    done = []
    got = _compile(texts, lambda: done.append(1))
    assert len(llvm_workers._workers) == 2 and len(done) == len(texts)
    assert got == [llvm.compile_text_to_object(t) for t in texts]


def test_a_worker_gone_leaves_its_texts_to_this_process(two_workers):
    texts = _texts(5)
    _compile(texts[:3])  # starts the workers
    for w in llvm_workers._workers:
        w.proc.kill()
        w.proc.wait()
    got = _compile(texts)
    assert got == [llvm.compile_text_to_object(t) for t in texts]
    assert not llvm_workers._workers  # (dropped; new ones start at the next call)


def test_objects_from_workers_run(two_workers, monkeypatch):
    """Through ``compile_kernels`` with the threshold lowered: the functions compute."""
    monkeypatch.setattr(llvm, "PARALLEL_MIN", 2)
    monkeypatch.setenv("LUMINAL_CACHE", "0")
    llvm.forget()
    before = llvm.STATS["compiled"]
    mod = llvm.compile_kernels(_adds("add", 4, 1.0))
    assert llvm.STATS["compiled"] - before == 4
    x = np.arange(8, dtype=np.float32)
    for k in range(4):
        y = np.zeros(8, np.float32)
        mod.run(f"add{k}", [x, y], (), 0, 8)
        np.testing.assert_array_equal(y, x + (k + 1))


def test_bad_worker_count(monkeypatch):
    monkeypatch.setenv("LUMINAL_COMPILE_WORKERS", "many")
    with pytest.raises(ValueError, match="LUMINAL_COMPILE_WORKERS"):
        llvm_workers.worker_count()


def test_a_large_compile_that_misses_the_cache_starts_the_workers_ahead(two_workers, monkeypatch, tmp_path):
    """``Cpu.expect_code``: a program of ``PRESTART_NODES`` graph nodes or more starts the workers when its
    compile misses the cache (their start-up then runs beside the pipeline); a small one, or one from
    the cache, does not."""
    import luminal as lm
    from luminal.backends import cpu

    llvm_workers._stop()
    monkeypatch.setenv("LUMINAL_CACHE", "0")
    g = lm.Graph()
    x = g.input("x", (4,))
    lm.compile([x * 2 + 1])
    assert not llvm_workers._workers
    monkeypatch.setattr(cpu, "PRESTART_NODES", 3)
    lm.compile([x * 3 + 1])
    assert len(llvm_workers._workers) == 2
    assert all(w.proc.poll() is None for w in llvm_workers._workers)  # started, not waited for
    monkeypatch.setenv("LUMINAL_CACHE", "1")
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    lm.compile([x * 4 + 1])  # stored in the compile cache
    llvm_workers._stop()
    assert lm.compile([x * 4 + 1]).report(show=False).cache.get("hit")
    assert not llvm_workers._workers


def test_a_worker_compiles_texts_vectorised_by_hand():
    """A text submitted ``vectorised`` is optimised so on the worker too: the same object as here."""
    from luminal.backends.cpu import generated_gemm

    text = generated_gemm.module(np.float32).text
    w = llvm_workers._Worker()
    try:
        assert w.compile(text, True) == llvm.compile_text_to_object(text, True)
        assert w.compile(_texts(1)[0]) == llvm.compile_text_to_object(_texts(1)[0])
    finally:
        w.close()


def test_companion_modules_are_compiled_with_the_kernels(two_workers, monkeypatch, tmp_path):
    """``compile_kernels(also=...)``: a module the caller compiles next (the generated GEMM, vectorised
    by hand) is compiled in the kernels' batch, into the caches, so its ``compile_text`` compiles
    nothing; with nothing of the kernels' to compile, it is left for later."""
    from luminal.backends.cpu import generated_gemm

    monkeypatch.setattr(llvm, "PARALLEL_MIN", 2)
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LUMINAL_CACHE", "1")
    llvm.forget()
    generated = generated_gemm.module(np.float32)
    kernels = _adds("c", 3, 0.5)
    before = llvm.STATS["compiled"]
    llvm.compile_kernels(kernels[:2], also=[(generated, True)])
    assert llvm.STATS["compiled"] - before == 3
    llvm.forget()  # (from the disk cache now)
    mod = llvm.compile_text(generated, [generated.name], vectorised=True)
    assert llvm.STATS["compiled"] - before == 3 and mod.address(generated.name)
    llvm.compile_kernels(kernels[:2], also=[("; not even a module\n", False)])  # (every kernel indexed)
    assert llvm.STATS["compiled"] - before == 3


def test_a_few_objects_go_to_workers_already_running(two_workers, monkeypatch):
    """Under ``PARALLEL_MIN`` objects, the workers take a batch only when they are running already
    (started ahead for a train step's graph): ``PARALLEL_RUNNING`` objects then share them."""
    monkeypatch.setenv("LUMINAL_CACHE", "0")
    batches = []
    real = llvm_workers.Batch

    def recording(*a, **kw):
        batches.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(llvm_workers, "Batch", recording)

    llvm_workers._stop()
    llvm.forget()
    llvm.compile_kernels(_adds("few", llvm.PARALLEL_RUNNING, 0.25))
    assert not batches and llvm_workers.running() == 0
    llvm_workers.prestart()
    assert llvm_workers.running() == 2
    mod = llvm.compile_kernels(_adds("few", llvm.PARALLEL_RUNNING, 0.5))
    assert batches == [1]
    x, y = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    mod.run("few3", [x, y], (), 0, 8)
    np.testing.assert_array_equal(y, x + 3.5)


def test_an_interrupted_compile_leaves_no_thread_waiting_for_texts(two_workers, monkeypatch):
    """A compile whose text building fails (an interrupt, an error) after some texts went to the batch:
    its threads finish what they were given and stop, none is left waiting for texts."""
    import threading

    monkeypatch.setattr(llvm, "PARALLEL_MIN", 2)
    monkeypatch.setenv("LUMINAL_CACHE", "0")
    llvm.forget()
    real, built = llvm._named_by_content, []

    def failing(*a, **kw):
        if len(built) == 2:
            raise KeyboardInterrupt
        built.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(llvm, "_named_by_content", failing)
    with pytest.raises(KeyboardInterrupt):
        llvm.compile_kernels(_adds("cut", 5, 0.75))
    batch = [t for t in threading.enumerate() if t.name == llvm_workers.THREAD_NAME]
    for t in batch:
        t.join(timeout=60)
    assert built == [1, 1] and not any(t.is_alive() for t in batch)

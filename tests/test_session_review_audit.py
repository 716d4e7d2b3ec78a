"""A review of the session's new code as a torch user would meet it (lm.save/lm.load, lm.optim,
distributions' rsample/transforms/KL, autograd, indexed Parameters): each test is a problem found and
fixed, checked against torch or against the values written out."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import luminal as lm
import luminal.distributions as D
from luminal import train
from luminal.distributions.gamma import standard_gamma_grad


@pytest.mark.parametrize("dtype", [lm.float16, lm.bfloat16], ids=lambda d: d.name)
def test_standard_gamma_grad_of_half_dtypes_is_torchs(dtype):
    """torch computes _standard_gamma_grad in float for half dtypes (accscalar_t); in float16 the saddle
    point branch (alpha > 8, x within 10% of alpha) overflowed to NaN, and bfloat16 lost its cancellations."""
    x, a = np.meshgrid([0.3, 1.5, 9.0, 10.0, 11.0, 20.0], [0.5, 2.5, 10.0, 30.0])
    x, a = lm.core.dtype.to_storage(x, dtype), lm.core.dtype.to_storage(a, dtype)
    g = lm.Graph()
    (got,) = lm.compile([standard_gamma_grad(g.input("x", x.shape, dtype=dtype), g.input("a", x.shape, dtype=dtype))],
                        backend="cpu")(x=x, a=a)
    want = torch._standard_gamma_grad(torch.from_numpy(a.astype(np.float64)), torch.from_numpy(x.astype(np.float64)))
    np.testing.assert_allclose(got.astype(np.float64), want.numpy(), rtol=1e-2)


def test_gamma_rsample_gradient_of_float16_is_finite():
    """d E[X] / d c = 1 per draw: the sum over 2000 draws is about 2000 for every concentration."""
    lm.manual_seed(0)
    g = lm.Graph()
    c = g.input("c", (3,), dtype=lm.float16)
    x = D.Gamma(c, 1.0).rsample((2000,))
    (dc,) = lm.compile([train.grad(x.sum(), c)], backend="cpu")(c=np.array([2.0, 10.0, 30.0], np.float16))
    np.testing.assert_allclose(dc.astype(np.float64), 2000, rtol=0.1)


def test_lognormal_log_prob_outside_its_support_names_its_support():
    """torch checks TransformedDistribution's value against its support before the base sees
    t.inv(value); the base's check of log(-1) = NaN ('Normal ... Real()') was reported instead, now and
    when the program runs."""
    bad = lm.frontend.host.host_graph().constant(np.array([-1.0, 2.0], np.float32))
    with pytest.raises(ValueError, match=r"LogNormal\(.*GreaterThan\(lower_bound=0.0\)"):
        D.LogNormal(0.0, 1.0).log_prob(bad)
    g = lm.Graph()
    v = g.input("v", (2,))
    for method in ("log_prob", "cdf"):
        f = lm.compile([getattr(D.LogNormal(0.0, 1.0), method)(v)], backend="cpu")
        with pytest.raises(ValueError, match=r"LogNormal\(.*GreaterThan\(lower_bound=0.0\).*1 of them"):
            f(v=np.array([-1.0, 2.0], np.float32))
    want = torch.distributions.LogNormal(0.0, 1.0).log_prob(torch.tensor([1.0, 2.0])).numpy()
    np.testing.assert_allclose(lm.compile([D.LogNormal(0.0, 1.0).log_prob(v)], backend="cpu")(
        v=np.array([1.0, 2.0], np.float32))[0], want, rtol=1e-6)


def test_transformed_distribution_checks_its_parameters_before_the_value():
    """A bad scale and a bad value in one run: the parameter's check comes first, as torch's (at
    construction)."""
    g = lm.Graph()
    v, s = g.input("v", (2,)), g.input("s", ())
    f = lm.compile([D.LogNormal(0.0, s).log_prob(v)], backend="cpu")
    with pytest.raises(ValueError, match="parameter scale"):
        f(v=np.array([-1.0, 2.0], np.float32), s=np.float32(-1.0))


def test_save_of_an_int_past_pythons_digit_limit_names_its_place(tmp_path):
    """json.dumps raised 'Exceeds the limit (4300 digits) for integer string conversion', naming neither
    lm.save nor the entry; ints below the limit round trip exactly."""
    with pytest.raises(ValueError, match=r"lm.save: obj\['step'\]\[1\] is an int of about 5000 digits"):
        lm.save({"step": [1, 10**5000]}, tmp_path / "a.lm")
    assert not (tmp_path / "a.lm").exists()
    lm.save({"step": [-(10**4000), 2**80]}, tmp_path / "b.lm")
    assert lm.load(tmp_path / "b.lm") == {"step": [-(10**4000), 2**80]}


def test_lr_scheduler_has_torchs_deprecated_base_name():
    """Older torch scripts subclass torch.optim.lr_scheduler._LRScheduler (still in torch 2.x)."""
    class Warmup(lm.optim.lr_scheduler._LRScheduler):
        def __init__(self, optimizer, n):
            self.n = n
            super().__init__(optimizer)

        def get_lr(self):
            return [b * min(1.0, (self.last_epoch + 1) / self.n) for b in self.base_lrs]

    opt = lm.optim.SGD(lm.nn.Linear(2, 2).parameters(), lr=1.0)
    sched, lrs = Warmup(opt, 4), []
    for _ in range(5):
        lrs.append(opt.param_groups[0]["lr"])
        sched.step()
    assert lrs == [0.25, 0.5, 0.75, 1.0, 1.0]


def _texts(n: int, tag: str) -> list:
    return [f"define i32 @{tag}{i}() {{\n  ret i32 {i * 7919}\n}}\n" for i in range(n)]


def test_an_llvm_worker_used_by_two_threads_answers_each_its_own_text():
    """The workers are shared by every Batch: two threads feeding one worker interleaved their requests
    and reads, and took each other's objects (54 of 60 wrong)."""
    import threading

    from luminal.codegen import llvm_workers

    w = llvm_workers._Worker()
    try:
        texts = _texts(60, "f")
        want = [w.compile(t) for t in texts]
        got, errors = {}, []

        def feed(indexes):
            try:
                for i in indexes:
                    got[i] = w.compile(texts[i])
            except Exception as e:  # (reported below)
                errors.append(e)

        threads = [threading.Thread(target=feed, args=(range(k, 60, 4),)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors and [got[i] for i in range(60)] == want
    finally:
        w.close()


def test_a_batch_after_an_interrupted_one_gets_its_own_objects(monkeypatch):
    """A compile interrupted after submitting texts (compile_kernels' finally closes its Batch) left its
    threads feeding the shared workers while the next compile's Batch used them: that batch's objects
    were other texts' (276 of 1000), to be linked and cached under its keys."""
    from luminal.codegen import llvm, llvm_workers

    monkeypatch.setenv("LUMINAL_COMPILE_WORKERS", "2")
    first, second = _texts(2000, "a"), _texts(1000, "b")
    interrupted = llvm_workers.Batch(llvm.compile_text_to_object)
    for t in first:
        interrupted.submit(t)
    interrupted.close()
    batch = llvm_workers.Batch(llvm.compile_text_to_object)
    for t in second:
        batch.submit(t)
    got = batch.results()
    assert got == [llvm.compile_text_to_object(t) for t in second]


def test_gamma_rsample_is_at_least_the_smallest_normal_after_the_rate():
    """torch clamps Gamma.rsample's value (after dividing by the rate) at finfo.tiny, leaving its gradient;
    the clamp here came before the division: Gamma(0.02, 1e6) gave subnormal draws (a quarter of them)."""
    lm.manual_seed(0)
    g = lm.Graph()
    r = g.input("r", (), dtype=lm.float32)
    x = D.Gamma(0.02, r).rsample((4000,))
    xv, dr = lm.compile([x, train.grad(x.sum(), r)], backend="cpu")(r=np.float32(1e6))
    tiny = np.finfo(np.float32).tiny
    assert (xv >= tiny).all() and (xv == tiny).any()
    np.testing.assert_allclose(dr, -(xv[xv > tiny] / np.float32(1e6)).sum(), rtol=1e-4)  # (d x / d rate = -x / rate)

"""Review of the session's new nn features against torch: the problems found, each checked here.

- A module under the older ``nn.utils.weight_norm`` / ``nn.utils.spectral_norm`` did not pickle (its
  class is made at registration, which pickle cannot find by name; the spectral norm's load pre-hook was
  a closure), while torch's pickles (``torch.save(model)`` of a GAN): it pickles now, and the copy
  computes the same weights and outputs. A parametrized module is still refused, as torch's is; once
  ``parametrizations.weight_norm`` is removed the module pickles (its load pre-hook was a closure; torch's
  is one too, and fails there).
- ``AdaptiveLogSoftmaxWithLoss(div_value=0)`` was a bare ZeroDivisionError; it names the argument now.
- A lazy norm with affine=False and track_running_stats=False failed its first call (StopIteration).
- Load pre-hooks of a module shared by two paths ran for the first path only (torch: once per path).
- F.upsample_bilinear/upsample_nearest errors were reported under interpolate's name.
- ``model.to(dtype)`` / ``.half()`` / ``.double()`` of a model holding lazy modules raised before the first
  call (``Module.to`` read the uninitialized parameters' values); torch's converts them.
"""

import pickle
import warnings

import numpy as np
import pytest
import torch
from parity import TORCH_DTYPE

import luminal as lm
from luminal import nn
from luminal.nn import utils
from luminal.nn.module import StateDictError
from luminal.nn.utils import parametrize

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def run(m, x):
    g = lm.Graph()
    return lm.compile(m(g.input("x", x.shape)))(x=x)


def test_old_weight_norm_and_spectral_norm_modules_pickle_as_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        m = nn.Sequential(utils.weight_norm(nn.Linear(3, 4)), nn.Tanh(), utils.spectral_norm(nn.Linear(4, 2)))
        tm = torch.nn.Sequential(torch.nn.utils.weight_norm(torch.nn.Linear(3, 4)), torch.nn.Tanh(),
                                 torch.nn.utils.spectral_norm(torch.nn.Linear(4, 2)))
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    m.eval()
    tm.eval()
    x = randn(5, 3)
    want = run(m, x)  # (called once: the module has built a graph before it is pickled)
    np.testing.assert_allclose(want, tm(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    c = pickle.loads(pickle.dumps(m))
    assert [type(s).__name__ for s in c] == ["Linear", "Tanh", "Linear"]  # torch's names (no Parametrized*)
    assert list(c.state_dict()) == list(tm.state_dict())
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(c.state_dict()[k], v, err_msg=k)
    np.testing.assert_allclose(run(c, x), want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.asarray(c[0].weight), np.asarray(m[0].weight), rtol=1e-6)
    c[0].weight_g.set(np.full((4, 1), 2.0, np.float32))  # the copy's weight is computed from its own g and v
    np.testing.assert_allclose(np.linalg.norm(np.asarray(c[0].weight), axis=1), 2.0, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(m[0].weight), tm[0].weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(StateDictError, match="before torch 1.0"):  # the copy keeps its load pre-hook
        c[2].load_state_dict({"weight": np.zeros((2, 4), np.float32), "weight_orig": np.zeros((2, 4), np.float32),
                              "bias": np.zeros(2, np.float32), "weight_u": np.zeros(2, np.float32)})
    utils.remove_weight_norm(c[0])
    utils.remove_spectral_norm(c[2])
    assert list(c.state_dict()) == ["0.bias", "0.weight", "2.bias", "2.weight"]


def test_a_parametrized_module_still_refuses_pickle_as_torch():
    m = utils.parametrizations.weight_norm(nn.Linear(3, 4))
    with pytest.raises(RuntimeError, match="only supported through state_dict"):
        pickle.dumps(m)
    tm = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(3, 4))
    with pytest.raises(RuntimeError, match="only supported through state_dict"):
        pickle.dumps(tm)
    parametrize.remove_parametrizations(m, "weight")
    assert type(pickle.loads(pickle.dumps(m))) is nn.Linear


@pytest.mark.parametrize("convert, dtype", [("double", lm.float64), ("half", lm.float16), ("bfloat16", lm.bfloat16)])
def test_lazy_modules_convert_dtype_before_their_first_call_as_torch(convert, dtype):
    """``module.to(dtype)`` / ``.double()`` ... of a model holding lazy modules (before its first call, as
    torch users convert a model right after building it) raised reading the uninitialized parameters'
    values; torch's converts them, and the first call materialises them in that dtype."""
    m = getattr(nn.Sequential(nn.LazyLinear(3), nn.LazyBatchNorm1d(), nn.LazyConv1d(2, 1)), convert)()
    tm = torch.nn.Sequential(torch.nn.LazyLinear(3), torch.nn.LazyBatchNorm1d(), torch.nn.LazyConv1d(2, 1))
    tm.to(TORCH_DTYPE[dtype])  # (torch's lazy parameters refuse .bfloat16() but take .to(torch.bfloat16))
    x = randn(2, 3, 4)
    tout = tm(torch.from_numpy(x).to(tm[0].weight.dtype))
    assert [type(s).__name__ for s in m] == ["LazyLinear", "LazyBatchNorm1d", "LazyConv1d"]
    m.load_state_dict({k: v.detach().float().numpy() for k, v in tm.state_dict().items()})
    m.eval()
    tm.eval()
    g = lm.Graph()
    out = m(g.input("x", x.shape, dtype))
    assert out.dtype is dtype
    assert {s.dtype for s in (*m.parameters(), *m.buffers()) if s.dtype.is_float} == {dtype}
    assert m[1].num_batches_tracked.dtype is lm.int32
    got = lm.compile(out)(x=lm.core.dtype.to_storage(x, dtype))
    tol = 1e-6 if dtype is lm.float64 else 2e-2
    want = tm(torch.from_numpy(x).to(tout.dtype)).detach().double().numpy()
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("div_value", [0, 0.0, -4.0, float("nan")])
def test_adaptive_softmax_refuses_a_div_value_that_is_not_positive(div_value):
    """div_value 0 was a bare ZeroDivisionError naming nothing (torch's too), a negative one a Linear of
    negative size: both are refused naming the module and the argument."""
    with pytest.raises(ValueError, match=r"AdaptiveLogSoftmaxWithLoss: div_value must be positive .* got"):
        nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], div_value=div_value)
    assert nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], div_value=0.5).tail[0][0].out_features == 16  # as torch's
    assert torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], div_value=0.5).tail[0][0].out_features == 16


@pytest.mark.parametrize("lazy, torch_lazy", [(nn.LazyBatchNorm1d, torch.nn.LazyBatchNorm1d),
                                              (nn.LazyInstanceNorm1d, torch.nn.LazyInstanceNorm1d)])
def test_lazy_norm_without_parameters_or_statistics_as_torch(lazy, torch_lazy):
    """A lazy norm with affine=False and track_running_stats=False has nothing to materialise: its first
    call raised a bare StopIteration; it normalises as torch's now (num_features is the input's channels,
    where torch's stays 0, unused)."""
    x = randn(4, 3, 5)
    m = lazy(affine=False, track_running_stats=False)
    tm = torch_lazy(affine=False, track_running_stats=False)
    g = lm.Graph()
    out = m(g.input("x", x.shape))
    assert type(m) is lazy.cls_to_become and m.num_features == 3 and not list(m.state_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (torch's instance norm: "does not match num_features")
        want = tm(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(lm.compile(out)(x=x), want, rtol=1e-5, atol=1e-5)


def test_load_pre_hooks_of_a_shared_module_run_for_each_path_as_torch():
    """A module registered under two names (tied layers) has its entries saved under both; its load
    pre-hooks ran for the first path only, so an old weight_norm checkpoint (weight_g / weight_v) loaded
    half of it. torch's recursive load calls them once per path."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        tl = torch.nn.utils.weight_norm(torch.nn.Linear(2, 3))
    old = {k: v.detach().numpy() for k, v in torch.nn.Sequential(tl, tl).state_dict().items()}
    layer = utils.parametrizations.weight_norm(nn.Linear(2, 3))
    assert nn.Sequential(layer, layer).load_state_dict(old) is not None
    np.testing.assert_allclose(np.asarray(layer.weight), tl.weight.detach().numpy(), rtol=1e-6, atol=1e-7)
    seen = []
    child = nn.Linear(2, 2)
    child.register_load_state_dict_pre_hook(lambda module, sd, prefix, *rest: seen.append(prefix))
    model = nn.Sequential(child, nn.Sequential(child))
    model.load_state_dict(model.state_dict())
    tchild = torch.nn.Linear(2, 2)
    tseen = []
    tchild.register_load_state_dict_pre_hook(lambda module, sd, prefix, *rest: tseen.append(prefix))
    tmodel = torch.nn.Sequential(tchild, torch.nn.Sequential(tchild))
    tmodel.load_state_dict(tmodel.state_dict())
    assert seen == tseen == ["0.", "1.0."]


@pytest.mark.parametrize("fn", ["upsample_bilinear", "upsample_nearest"])
def test_deprecated_upsample_errors_name_the_function_called(fn):
    """A bad input to F.upsample_bilinear / F.upsample_nearest was reported as interpolate's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.raises(ValueError, match=rf"^{fn}: .*\(1, 2\)"):
            getattr(nn.functional, fn)(lm.Graph().input("x", (1, 2)), scale_factor=2)

"""The convolution layers as a user porting a torch model drives them, beyond test_layer_options.py and
test_api_nn.py: ``padding_mode`` 'reflect'/'replicate'/'circular' (values and the gradients of the input,
weight and bias, with int, tuple and 'same' paddings, unbatched, a symbolic batch, float64, a torch
module's state_dict loaded), the refusals torch makes of a transposed layer's other modes and of an
unknown mode, ``output_size``'s length rule, and clear errors for a transposed convolution's string
padding and for an output size below one."""

import numpy as np
import pytest
import torch
from parity import TORCH_DTYPE

import luminal as lm
from luminal import train
from luminal.nn import functional as F
from luminal.nn import layers as L

pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")]

TOL = {lm.float32: (1e-4, 1e-5), lm.float64: (1e-10, 1e-12)}  # (rtol, atol)


def randn(*shape, seed=0, dtype=lm.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype.np)


def module_parity(name, args, kwargs, shape, *, dtype=lm.float32, symbolic_batch=False, batches=(2,)):
    """torch's layer (its own initialisation, loaded into ours through its state_dict) against ours:
    the values, and the gradients of the summed output with respect to the input and every parameter,
    for each batch size in ``batches`` (one compiled program when ``symbolic_batch``)."""
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(*args, dtype=TORCH_DTYPE[dtype], **kwargs)
    m = getattr(L, name)(*args, dtype=dtype, **kwargs)
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    g = lm.Graph()
    x = g.input("x", (("B",) if symbolic_batch else (batches[0],)) + shape, dtype=dtype)
    y = m(x)
    names = [n for n, _ in m.named_parameters()]
    grads = train.grad(y.sum(), [x, *m.parameters()])
    f = lm.compile([y, *grads])
    rtol, atol = TOL[dtype]
    for b in batches:
        a = randn(b, *shape, seed=b, dtype=dtype)
        got = f(x=a)
        tx = torch.from_numpy(a.copy()).requires_grad_(True)
        tm.zero_grad()
        ty = tm(tx)
        ty.sum().backward()
        want = [ty, tx.grad, *(dict(tm.named_parameters())[n].grad for n in names)]
        for label, u, w in zip(["output", "d input", *(f"d {n}" for n in names)], got, want, strict=True):
            w = w.detach().numpy()
            assert u.shape == w.shape, f"{label}: {u.shape} vs torch's {w.shape}"
            np.testing.assert_allclose(u, w, rtol=rtol, atol=atol, err_msg=f"{name} batch {b}: {label}")


PADDING_MODES = {
    "c1_reflect": ("Conv1d", (2, 3, 3), dict(padding=2, padding_mode="reflect"), (2, 6)),
    "c1_replicate_stride_dil": ("Conv1d", (2, 4, 3), dict(padding=3, stride=2, dilation=2, groups=2,
                                                        padding_mode="replicate"), (2, 7)),
    "c1_circular_nobias": ("Conv1d", (3, 6, 2), dict(padding=1, groups=3, bias=False, padding_mode="circular"),
                           (3, 5)),
    "c1_same_even_reflect": ("Conv1d", (2, 3, 4), dict(padding="same", padding_mode="reflect"), (2, 7)),
    "c2_reflect_tuple": ("Conv2d", (2, 3, (3, 2)), dict(padding=(2, 1), padding_mode="reflect"), (2, 5, 4)),
    "c2_replicate_depthwise": ("Conv2d", (3, 3, 3), dict(padding=1, stride=2, groups=3, padding_mode="replicate"),
                               (3, 5, 6)),
    "c2_circular_same": ("Conv2d", (2, 2, (2, 3)), dict(padding="same", dilation=(2, 1), padding_mode="circular"),
                         (2, 4, 5)),
    "c3_reflect": ("Conv3d", (2, 2, 2), dict(padding=1, padding_mode="reflect"), (2, 3, 3, 4)),
    "c3_circular_valid": ("Conv3d", (2, 2, 2), dict(padding="valid", padding_mode="circular"), (2, 3, 3, 3)),
    "c3_replicate": ("Conv3d", (2, 4, (1, 2, 3)), dict(padding=(0, 1, 2), groups=2, padding_mode="replicate"),
                     (2, 3, 3, 4)),
}


@pytest.mark.parametrize("case", list(PADDING_MODES))
def test_padding_modes_match_torch(case):
    name, args, kwargs, shape = PADDING_MODES[case]
    module_parity(name, args, kwargs, shape)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_padding_modes_unbatched_symbolic_batch_float64(mode):
    # unbatched: torch pads the (C, L) input itself; a symbolic batch: one program for two batch sizes
    torch.manual_seed(0)
    tm = torch.nn.Conv1d(2, 3, 3, padding=2, padding_mode=mode)
    m = L.Conv1d(2, 3, 3, padding=2, padding_mode=mode)
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    g = lm.Graph()
    a = randn(2, 5)
    got = lm.compile(m(g.input("x", (2, 5))))(x=a)
    np.testing.assert_allclose(got, tm(torch.from_numpy(a)).detach().numpy(), rtol=1e-5, atol=1e-6)
    module_parity("Conv2d", (2, 3, 3), dict(padding=1, padding_mode=mode), (2, 4, 4), symbolic_batch=True,
                  batches=(1, 3))
    module_parity("Conv2d", (2, 2, 3), dict(padding=(1, 2), padding_mode=mode), (2, 3, 4), dtype=lm.float64)


def test_padding_mode_repr_and_state_dict():
    m = L.Conv2d(2, 3, 3, padding=1, padding_mode="reflect")
    assert "padding_mode='reflect'" in repr(m)
    assert list(m.state_dict()) == ["weight", "bias"]


def test_padding_mode_refusals():
    with pytest.raises(ValueError, match=r"^Conv2d: padding_mode must be one of .*got 'reflection'"):
        L.Conv2d(2, 2, 3, padding_mode="reflection")
    for cls in ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"):
        with pytest.raises(ValueError, match=rf"^{cls}: only padding_mode='zeros' .* got 'circular'"):
            getattr(L, cls)(2, 2, 3, padding_mode="circular")
    # reflect needs each amount below the dim's size, as torch's F.pad
    g = lm.Graph()
    with pytest.raises(ValueError, match="reflect"):
        L.Conv1d(2, 2, 3, padding=3, padding_mode="reflect")(g.input("x", (1, 2, 3)))


def test_conv_transpose_output_size_length_rule():
    # torch: (N, C, L) takes 1 or 3 entries, (C, L) 1 or 2; before, any length was cut to its last entries
    g = lm.Graph()
    m = L.ConvTranspose1d(2, 3, 3, stride=2)
    x, xu = g.input("x", (1, 2, 4)), g.input("xu", (2, 4))
    assert m(x, output_size=[1, 3, 10]).shape == (1, 3, 10)
    assert m(xu, output_size=[3, 10]).shape == (3, 10)
    with pytest.raises(ValueError, match=r"for a 3-d input, output_size must have 1 or 3 elements, got \(5, 9\)"):
        m(x, output_size=[5, 9])
    with pytest.raises(ValueError, match=r"for a 3-d input, output_size must have 1 or 3 elements"):
        m(x, output_size=[1, 2, 3, 9])
    with pytest.raises(ValueError, match=r"for a 2-d input, output_size must have 1 or 2 elements"):
        m(xu, output_size=[1, 3, 10])


def test_conv_transpose_string_padding_is_refused_clearly():
    g = lm.Graph()
    x, w = g.input("x", (1, 2, 4)), g.input("w", (2, 2, 3))
    with pytest.raises(TypeError, match=r"^conv_transpose1d: padding must be an int or 1 ints, got 'same'"):
        F.conv_transpose1d(x, w, padding="same")
    with pytest.raises(TypeError, match=r"^ConvTranspose2d: padding must be an int or 2 ints, got 'valid'"):
        L.ConvTranspose2d(2, 2, 3, padding="valid")


def test_conv_transpose_output_below_one_is_named():
    # torch: "Output size is too small"; before, a confusing "padded input size (-1,)" of a (1, 2, -1) tensor
    g = lm.Graph()
    x, w = g.input("x", (1, 2, 1)), g.input("w", (2, 2, 1))
    with pytest.raises(ValueError, match=r"^conv_transpose1d: output size \(-1,\) is too small for input "
                                         r"\(1, 2, 1\)"):
        F.conv_transpose1d(x, w, padding=1)

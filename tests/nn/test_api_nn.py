"""The nn side of the PyTorch API: ``luminal.nn.functional`` (torch's F names and signatures), the
layers added for it, and Module's torch methods. Every functional and layer is compared with torch:
forward values, dtype, shape, and the gradients of the input(s) and of every parameter (the torch
module gets the same weights through its state_dict, loaded by name)."""

import gc
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from parity import check, rand

import luminal as lm
import luminal.nn.functional as F
from luminal import nn, train
from luminal.core.dtype import as_dtype

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def module_parity(make, inputs, backend, *, call=None, tcall=None, train_mode=False, rtol=1e-4, atol=1e-5):
    """``make(ns)`` builds the same layer from ``luminal.nn`` and ``torch.nn``; the torch weights
    (perturbed, so biases and norm weights are not trivial) are loaded into ours by name. Compares
    the outputs and the gradients of sum(outputs) w.r.t. the float inputs and every parameter."""
    call = call or (lambda m, *xs: m(*xs))
    tcall = tcall or call
    torch.manual_seed(0)
    tm, m = make(torch.nn).train(train_mode), make(nn).train(train_mode)
    with torch.no_grad():
        for p in tm.parameters():
            p.add_(torch.from_numpy(randn(*p.shape, seed=p.numel())) * 0.1)
    tsd = {k: v.detach().numpy().astype(np.int32) if v.dtype == torch.int64 else v.detach().numpy()
           for k, v in tm.state_dict().items()}
    assert list(m.state_dict()) == list(tsd), "state_dict names/order differ from torch's"
    m.load_state_dict(tsd)
    g = lm.Graph()
    xs = [g.input(f"x{i}", a.shape, dtype=as_dtype(a.dtype)) for i, a in enumerate(inputs)]
    out = call(m, *xs)
    outs = [o for o in (out if isinstance(out, tuple) else (out,)) if o is not None]
    loss = None
    for o in outs:
        loss = o.sum() if loss is None else loss + o.sum()
    fl = [i for i, a in enumerate(inputs) if a.dtype.kind == "f"]
    names = [n for n, _ in m.named_parameters()]
    grads = train.grad(loss, [xs[i] for i in fl] + list(m.parameters()), allow_unused=True)
    got = lm.compile(outs + list(grads), backend=backend)(**{f"x{i}": a for i, a in enumerate(inputs)})
    got = got if isinstance(got, tuple) else (got,)

    ts = [torch.from_numpy(a.copy()) if a.dtype.kind == "f" else torch.from_numpy(a.astype(np.int64))
          for a in inputs]
    for i in fl:
        ts[i].requires_grad_(True)
    tout = tcall(tm, *ts)
    touts = [o for o in (tout if isinstance(tout, tuple) else (tout,)) if o is not None]
    assert len(touts) == len(outs)
    sum(o.sum() for o in touts).backward()
    for k, (a, b) in enumerate(zip(got, touts)):
        np.testing.assert_allclose(a, b.detach().numpy(), rtol=rtol, atol=atol, err_msg=f"output {k}")
    tparams = dict(tm.named_parameters())
    want = [ts[i].grad for i in fl] + [tparams[n].grad for n in names]
    labels = [f"input {i}" for i in fl] + names
    for label, a, w in zip(labels, got[len(outs):], want, strict=True):
        w = np.zeros(a.shape) if w is None else w.numpy()
        np.testing.assert_allclose(a, w, rtol=rtol, atol=atol, err_msg=f"d sum / d {label}")
    return m, tm


# functional forms --------------------------------------------------------------------------------

ACTIVATIONS = {  # name: (luminal op, torch op, input range)
    "relu": (F.relu, TF.relu, (-2, 2)),
    "relu6": (F.relu6, TF.relu6, (-2, 8)),
    "hardtanh": (lambda x: F.hardtanh(x, -0.5, 1.5), lambda x: TF.hardtanh(x, -0.5, 1.5), (-2, 2)),
    "hardswish": (F.hardswish, TF.hardswish, (-5, 5)),
    "hardsigmoid": (F.hardsigmoid, TF.hardsigmoid, (-5, 5)),
    "logsigmoid": (F.logsigmoid, TF.logsigmoid, (-30, 30)),
    "glu": (lambda x: F.glu(x, 1), lambda x: TF.glu(x, 1), (-3, 3)),
    "selu": (F.selu, TF.selu, (-3, 3)),
    "celu": (lambda x: F.celu(x, 0.7), lambda x: TF.celu(x, 0.7), (-3, 3)),
    "softsign": (F.softsign, TF.softsign, (-3, 3)),
    "mish": (F.mish, TF.mish, (-3, 3)),
    "gelu": (F.gelu, TF.gelu, (-3, 3)),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), lambda x: TF.gelu(x, approximate="tanh"), (-3, 3)),
    "silu": (F.silu, TF.silu, (-3, 3)),
    "elu": (lambda x: F.elu(x, 0.5), lambda x: TF.elu(x, 0.5), (-3, 3)),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), lambda x: TF.leaky_relu(x, 0.2), (-3, 3)),
    "softplus": (lambda x: F.softplus(x, 2.0, 3.0), lambda x: TF.softplus(x, 2.0, 3.0), (-3, 3)),
    "sigmoid": (F.sigmoid, TF.sigmoid, (-3, 3)),
    "tanh": (F.tanh, TF.tanh, (-3, 3)),
    "softmax": (lambda x: F.softmax(x, dim=1), lambda x: TF.softmax(x, dim=1), (-3, 3)),
    "log_softmax": (lambda x: F.log_softmax(x, 0), lambda x: TF.log_softmax(x, 0), (-3, 3)),
    "softmax_dtype": (lambda x: F.softmax(x, -1, dtype=lm.float64),
                      lambda x: TF.softmax(x, -1, dtype=torch.float64), (-3, 3)),
}


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_functional_activations(backend, name):
    op, top, (lo, hi) = ACTIVATIONS[name]
    check(op, [rand((3, 4, 2), low=lo, high=hi, seed=1)], torch_op=top, backend=backend)


def test_functional_prelu(backend):
    check(F.prelu, [rand((2, 3, 4)), rand((3,), seed=2, low=0, high=1)], torch_op=TF.prelu, backend=backend)
    check(F.prelu, [rand((5, 3)), np.array([0.3], np.float32)], torch_op=TF.prelu, backend=backend)


FUNCTIONALS = {  # name: (luminal op, torch op, inputs)
    "linear": (F.linear, TF.linear, [rand((2, 3, 4)), rand((5, 4), seed=1), rand((5,), seed=2)]),
    "bilinear": (F.bilinear, TF.bilinear, [rand((3, 4)), rand((3, 2), seed=1), rand((5, 4, 2), seed=2),
                                           rand((5,), seed=3)]),
    "conv1d": (lambda x, w: F.conv1d(x, w, stride=2, padding=1), lambda x, w: TF.conv1d(x, w, stride=2, padding=1),
               [rand((2, 3, 7)), rand((4, 3, 3), seed=1)]),
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, 1, 1, 1, 2), lambda x, w, b: TF.conv2d(x, w, b, 1, 1, 1, 2),
               [rand((1, 4, 5, 5)), rand((2, 2, 3, 3), seed=1), rand((2,), seed=2)]),
    "conv3d": (F.conv3d, TF.conv3d, [rand((1, 2, 4, 4, 3)), rand((3, 2, 2, 2, 2), seed=1)]),
    "conv_transpose1d": (lambda x, w, b: F.conv_transpose1d(x, w, b, stride=2, padding=1, output_padding=1,
                                                            groups=2, dilation=2),
                         lambda x, w, b: TF.conv_transpose1d(x, w, b, stride=2, padding=1, output_padding=1,
                                                             groups=2, dilation=2),
                         [rand((2, 4, 5)), rand((4, 3, 3), seed=1), rand((6,), seed=2)]),
    "conv_transpose2d": (lambda x, w: F.conv_transpose2d(x, w, stride=(2, 1), padding=(1, 0), output_padding=(1, 0)),
                         lambda x, w: TF.conv_transpose2d(x, w, stride=(2, 1), padding=(1, 0), output_padding=(1, 0)),
                         [rand((2, 3, 4, 3)), rand((3, 2, 3, 2), seed=1)]),
    "conv_transpose2d_crop": (lambda x, w: F.conv_transpose2d(x, w, stride=3, padding=2),
                              lambda x, w: TF.conv_transpose2d(x, w, stride=3, padding=2),
                              [rand((3, 4, 3)), rand((3, 2, 2, 2), seed=1)]),
    "max_pool1d": (lambda x: F.max_pool1d(x, 3, 2, 1), lambda x: TF.max_pool1d(x, 3, 2, 1), [rand((2, 3, 9))]),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2, ceil_mode=True), lambda x: TF.max_pool2d(x, 2, ceil_mode=True),
                   [rand((2, 2, 5, 4))]),
    "max_pool3d": (lambda x: F.max_pool3d(x, 2, 1), lambda x: TF.max_pool3d(x, 2, 1), [rand((1, 2, 3, 4, 3))]),
    "avg_pool1d": (lambda x: F.avg_pool1d(x, 3, 2, 1, count_include_pad=False),
                   lambda x: TF.avg_pool1d(x, 3, 2, 1, count_include_pad=False), [rand((2, 3, 8))]),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 3, 2, 1, divisor_override=4),
                   lambda x: TF.avg_pool2d(x, 3, 2, 1, divisor_override=4), [rand((1, 2, 6, 5))]),
    "avg_pool3d": (lambda x: F.avg_pool3d(x, 2, (1, 2, 2), 1), lambda x: TF.avg_pool3d(x, 2, (1, 2, 2), 1),
                   [rand((1, 2, 3, 4, 4))]),
    "adaptive_avg_pool1d": (lambda x: F.adaptive_avg_pool1d(x, 3), lambda x: TF.adaptive_avg_pool1d(x, 3),
                            [rand((2, 3, 7))]),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (2, 3)), lambda x: TF.adaptive_avg_pool2d(x, (2, 3)),
                            [rand((1, 2, 5, 7))]),
    "adaptive_max_pool1d": (lambda x: F.adaptive_max_pool1d(x, 3), lambda x: TF.adaptive_max_pool1d(x, 3),
                            [rand((2, 3, 7))]),
    "adaptive_max_pool2d": (lambda x: F.adaptive_max_pool2d(x, (2, None)),
                            lambda x: TF.adaptive_max_pool2d(x, (2, None)), [rand((2, 5, 3))]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (3, 4), w, b), lambda x, w, b: TF.layer_norm(x, (3, 4), w, b),
                   [rand((2, 3, 4)), rand((3, 4), seed=1), rand((3, 4), seed=2)]),
    "layer_norm_plain": (lambda x: F.layer_norm(x, [4]), lambda x: TF.layer_norm(x, [4]), [rand((2, 3, 4))]),
    "group_norm": (lambda x, w, b: F.group_norm(x, 2, w, b), lambda x, w, b: TF.group_norm(x, 2, w, b),
                   [rand((2, 4, 3, 2)), rand((4,), seed=1), rand((4,), seed=2)]),
    "rms_norm": (lambda x, w: F.rms_norm(x, (4,), w, 1e-6), lambda x, w: TF.rms_norm(x, (4,), w, 1e-6),
                 [rand((2, 3, 4)), rand((4,), seed=1)]),
    "batch_norm_eval": (lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b),
                        lambda x, m, v, w, b: TF.batch_norm(x, m.detach(), v.detach(), w, b),
                        [rand((3, 2, 4)), rand((2,), seed=1), rand((2,), seed=2, low=0.5, high=2),
                         rand((2,), seed=3), rand((2,), seed=4)]),
    "batch_norm_batch_stats": (lambda x: F.batch_norm(x, None, None, training=True),
                               lambda x: TF.batch_norm(x, None, None, training=True), [rand((3, 2, 2, 2))]),
    "normalize": (lambda x: F.normalize(x, dim=-1), lambda x: TF.normalize(x, dim=-1), [rand((3, 4))]),
    "normalize_p1": (lambda x: F.normalize(x, p=1.0, dim=0), lambda x: TF.normalize(x, p=1.0, dim=0),
                     [rand((3, 4))]),
    "cosine_similarity": (F.cosine_similarity, TF.cosine_similarity, [rand((3, 4)), rand((3, 4), seed=1)]),
    "cosine_similarity_bcast": (lambda a, b: F.cosine_similarity(a, b, dim=-1),
                                lambda a, b: TF.cosine_similarity(a, b, dim=-1),
                                [rand((2, 3, 4)), rand((1, 4), seed=1)]),
    "pairwise_distance": (F.pairwise_distance, TF.pairwise_distance, [rand((3, 4)), rand((3, 4), seed=1)]),
    "pixel_shuffle": (lambda x: F.pixel_shuffle(x, 2), lambda x: TF.pixel_shuffle(x, 2), [rand((2, 8, 2, 3))]),
    "pixel_unshuffle": (lambda x: F.pixel_unshuffle(x, 2), lambda x: TF.pixel_unshuffle(x, 2), [rand((1, 2, 4, 6))]),
    "pad_constant": (lambda x: F.pad(x, (1, 2, 0, 1), value=0.5), lambda x: TF.pad(x, (1, 2, 0, 1), value=0.5),
                     [rand((2, 3, 4))]),
    "pad_crop": (lambda x: F.pad(x, (-1, 2)), lambda x: TF.pad(x, (-1, 2)), [rand((2, 3, 4))]),
    "pad_reflect": (lambda x: F.pad(x, (2, 1, 1, 2), mode="reflect"),
                    lambda x: TF.pad(x, (2, 1, 1, 2), mode="reflect"), [rand((1, 2, 4, 3))]),
    "pad_replicate": (lambda x: F.pad(x, (2, 3), mode="replicate"), lambda x: TF.pad(x, (2, 3), mode="replicate"),
                      [rand((2, 3, 4))]),
    "pad_circular": (lambda x: F.pad(x, (1, 2, 2, 0), mode="circular"),
                     lambda x: TF.pad(x, (1, 2, 2, 0), mode="circular"), [rand((1, 2, 3, 4))]),
    "sdpa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
             lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=True),
             [rand((2, 3, 4)), rand((2, 3, 4), seed=1), rand((2, 3, 4), seed=2)]),
    "dropout_eval": (lambda x: F.dropout(x, 0.5, training=False), lambda x: TF.dropout(x, 0.5, training=False),
                     [rand((3, 4))]),
    "dropout2d_eval": (lambda x: F.dropout2d(x, 0.5, training=False),
                       lambda x: TF.dropout2d(x, 0.5, training=False), [rand((2, 3, 2, 2))]),
}

INTERPOLATE = {  # kwargs for interpolate, input shape
    "nearest_size": (dict(size=(5, 3)), (1, 2, 3, 4)),
    "nearest_scale": (dict(scale_factor=2), (2, 1, 3, 2)),
    "nearest_frac": (dict(scale_factor=1.7), (1, 1, 4, 3)),
    "nearest_exact": (dict(size=(7, 2), mode="nearest-exact"), (1, 1, 3, 5)),
    "nearest_1d": (dict(size=7), (2, 2, 3)),
    "linear": (dict(size=7, mode="linear"), (2, 2, 4)),
    "bilinear": (dict(size=(5, 7), mode="bilinear"), (1, 2, 3, 4)),
    "bilinear_down": (dict(size=(2, 3), mode="bilinear"), (1, 2, 5, 7)),
    "bilinear_ac": (dict(size=(5, 7), mode="bilinear", align_corners=True), (1, 2, 3, 4)),
    "bilinear_scale": (dict(scale_factor=(1.5, 2.5), mode="bilinear"), (1, 1, 4, 3)),
    "bilinear_scale_recompute": (dict(scale_factor=1.5, mode="bilinear", recompute_scale_factor=True), (1, 1, 3, 3)),
    "trilinear_ac": (dict(size=(3, 2, 4), mode="trilinear", align_corners=True), (1, 1, 2, 3, 2)),
}


@pytest.mark.parametrize("name", list(FUNCTIONALS))
def test_functional_parity(backend, name):
    op, top, inputs = FUNCTIONALS[name]
    check(op, inputs, torch_op=top, backend=backend)


@pytest.mark.parametrize("name", list(INTERPOLATE))
def test_interpolate(backend, name):
    kw, shape = INTERPOLATE[name]
    check(lambda x: F.interpolate(x, **kw), [rand(shape)], torch_op=lambda x: TF.interpolate(x, **kw),
          backend=backend)


def test_functional_embedding_and_one_hot(backend):
    idx = np.array([[0, 2, 4], [4, 1, 2]], np.int32)
    check(lambda i, w: F.embedding(i, w, padding_idx=2), [idx, rand((5, 3))],
          torch_op=lambda i, w: TF.embedding(i.long(), w, padding_idx=2), backend=backend)
    check(lambda i: F.one_hot(i, 6), [idx], torch_op=lambda i: TF.one_hot(i.long(), 6), backend=backend)


def test_functional_batch_norm_updates_buffers(backend):
    """Training-mode batch_norm with a module's Buffers updates them as torch updates its tensors."""
    bn = nn.BatchNorm1d(3)
    x = rand((4, 3, 2))
    g = lm.Graph()
    y = F.batch_norm(g.input("x", x.shape), bn.running_mean, bn.running_var, training=True, momentum=0.3)
    got = lm.compile(y, backend=backend)(x=x)
    rm, rv = torch.zeros(3), torch.ones(3)
    want = TF.batch_norm(torch.from_numpy(x), rm, rv, training=True, momentum=0.3)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(bn.running_mean.data, rm.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var.data, rv.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="batch_norm: training=True updates running_mean"):
        F.batch_norm(g.input("z", (2, 3)), g.input("m", (3,)), None, training=True)


def test_functional_losses_are_train_losses(backend):
    """The losses are luminal.train's under torch's F names."""
    for name in ("cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
                 "binary_cross_entropy", "binary_cross_entropy_with_logits"):
        assert getattr(F, name) is getattr(train, name)
        assert name in F.__all__
    check(lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), [rand((4, 5)), np.array([0, 3, 1, 4], np.int32)],
          torch_op=lambda x, t: TF.cross_entropy(x, t.long(), label_smoothing=0.1), backend=backend)
    check(F.mse_loss, [rand((3, 2)), rand((3, 2), seed=1)], torch_op=TF.mse_loss, backend=backend)
    with pytest.raises(AttributeError):
        F.not_a_function  # noqa: B018


def test_functional_namespace_is_torchs():
    """Every name the brief lists exists, with torch's parameter names (ours may add none before them)."""
    import inspect

    for name in F.__all__:
        fn, tfn = getattr(F, name), getattr(TF, name, None)
        assert fn.__doc__ or name in F._LOSSES, f"F.{name} has no docstring"  # the losses are train's
        if tfn is None or name in ("scaled_dot_product_attention",):
            continue
        try:
            sig = inspect.signature(tfn)
        except (TypeError, ValueError):
            continue  # a builtin without a signature
        if any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values()):
            continue  # torch's boolean dispatch (return_indices): (*args, **kwargs)
        tparams = list(sig.parameters)
        ours = list(inspect.signature(fn).parameters)
        if name in F._LOSSES:  # torch's keep the deprecated size_average/reduce before reduction
            assert set(ours) <= set(tparams), f"F.{name}{ours} vs torch's {tparams}"
        else:
            assert ours[:len(tparams)] == tparams[:len(ours)], f"F.{name}{ours} vs torch's {tparams}"


def test_functional_errors_name_the_op():
    g = lm.Graph()
    x = g.input("x", (2, 5))
    with pytest.raises(ValueError, match=r"glu: halving dimension -1 must have an even size.*\(2, 5\)"):
        F.glu(x)
    with pytest.raises(ValueError, match="interpolate: mode 'bilinear' expects a 4-d input"):
        F.interpolate(g.input("y", (1, 2, 3)), size=4, mode="bilinear")
    with pytest.raises(ValueError, match="pixel_shuffle: expected an input .*channels divisible"):
        F.pixel_shuffle(g.input("z", (1, 3, 2, 2)), 2)
    with pytest.raises(ValueError, match="pad: padding \\(4, 0\\) is invalid for dim 1 of size 4 in mode 'reflect'"):
        F.pad(g.input("w", (2, 4)), (4, 0), mode="reflect")
    with pytest.raises(ValueError, match=r"linear: .*\(2, 5\) and \(3, 4\)"):
        F.linear(x, g.input("wt", (3, 4)))
    with pytest.raises(ValueError, match="group_norm: expected input of shape"):
        F.group_norm(g.input("gn", (2, 5, 3)), 2)


def test_channel_dropout_masks_whole_channels():
    g = lm.Graph()
    x = np.ones((8, 6, 5), np.float32)
    y = F.dropout1d(g.input("x", x.shape), 0.5)
    out = lm.compile(y, backend="cpu")(x=x)
    per_channel = out.reshape(48, 5)
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert (per_channel.min(1) == per_channel.max(1)).all()  # each channel all dropped or all kept
    assert 0 < (per_channel[:, 0] == 0).sum() < 48
    m = nn.Dropout2d(0.25).eval()
    assert m(g.input("z", (2, 3, 4, 4))).shape == (2, 3, 4, 4)


# layers ------------------------------------------------------------------------------------------

LAYERS = {  # name: (make(ns), input shapes)
    "group_norm": (lambda ns: ns.GroupNorm(2, 6), [(2, 6, 3, 2)]),
    "group_norm_noaffine": (lambda ns: ns.GroupNorm(3, 3, affine=False), [(2, 3, 4)]),
    "conv_transpose1d": (lambda ns: ns.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
                         [(2, 4, 5)]),
    "conv_transpose2d": (lambda ns: ns.ConvTranspose2d(3, 2, (3, 2), stride=(2, 1), dilation=(1, 2), bias=False),
                         [(2, 3, 3, 4)]),
    "conv_transpose2d_unbatched": (lambda ns: ns.ConvTranspose2d(2, 3, 3, stride=2, padding=1), [(2, 3, 3)]),
    "upsample_nearest": (lambda ns: ns.Upsample(scale_factor=2), [(1, 2, 3, 2)]),
    "upsample_bilinear": (lambda ns: ns.Upsample(size=(4, 5), mode="bilinear", align_corners=False), [(1, 2, 3, 2)]),
    "upsampling_bilinear2d": (lambda ns: ns.UpsamplingBilinear2d(scale_factor=2), [(1, 1, 3, 2)]),
    "pixel_shuffle": (lambda ns: ns.PixelShuffle(3), [(1, 9, 2, 2)]),
    "pixel_unshuffle": (lambda ns: ns.PixelUnshuffle(2), [(1, 1, 4, 2)]),
    "dropout1d_eval": (lambda ns: ns.Dropout1d(0.3), [(2, 3, 4)]),
    "dropout2d_eval": (lambda ns: ns.Dropout2d(0.3), [(2, 3, 2, 2)]),
    "prelu": (lambda ns: ns.PReLU(), [(2, 3)]),
    "prelu_channels": (lambda ns: ns.PReLU(3, init=0.1), [(2, 3, 4)]),
    "relu6": (lambda ns: ns.ReLU6(), [(3, 4)]),
    "hardtanh": (lambda ns: ns.Hardtanh(-0.5, 0.5), [(3, 4)]),
    "hardswish": (lambda ns: ns.Hardswish(), [(3, 4)]),
    "hardsigmoid": (lambda ns: ns.Hardsigmoid(), [(3, 4)]),
    "logsigmoid": (lambda ns: ns.LogSigmoid(), [(3, 4)]),
    "glu": (lambda ns: ns.GLU(0), [(4, 3)]),
    "selu": (lambda ns: ns.SELU(), [(3, 4)]),
    "celu": (lambda ns: ns.CELU(2.0), [(3, 4)]),
    "softsign": (lambda ns: ns.Softsign(), [(3, 4)]),
    "mish": (lambda ns: ns.Mish(), [(3, 4)]),
    "maxpool3d": (lambda ns: ns.MaxPool3d(2, 1, 1), [(1, 2, 3, 3, 3)]),
    "avgpool3d": (lambda ns: ns.AvgPool3d(2, 2, ceil_mode=True), [(1, 2, 3, 3, 3)]),
    "adaptive_maxpool2d": (lambda ns: ns.AdaptiveMaxPool2d(2), [(1, 2, 5, 3)]),
    "batchnorm3d_eval": (lambda ns: ns.BatchNorm3d(2), [(2, 2, 2, 2, 2)]),
}


@pytest.mark.parametrize("name", list(LAYERS))
def test_layer_parity(backend, name):
    make, shapes = LAYERS[name]
    module_parity(make, [randn(*s, seed=i) * 2 for i, s in enumerate(shapes)], backend)


def test_conv_transpose_output_size(backend):
    m, _ = module_parity(lambda ns: ns.ConvTranspose2d(2, 2, 3, stride=2), [randn(1, 2, 3, 3)], backend,
                         call=lambda m, x: m(x, output_size=(8, 7)))
    g = lm.Graph()
    with pytest.raises(ValueError, match=r"ConvTranspose2d\(2, 2.*output_size \(9, 9\) is not reachable"):
        m(g.input("x", (1, 2, 3, 3)), output_size=(9, 9))


TRANSFORMERS = {  # make, inputs (S, N, E) or batch first, call
    "encoder_post_norm_relu": (lambda ns: ns.TransformerEncoderLayer(8, 2, 16), [(3, 2, 8)]),
    "encoder_pre_norm_gelu_batch_first": (
        lambda ns: ns.TransformerEncoderLayer(8, 4, 12, activation="gelu", batch_first=True, norm_first=True),
        [(2, 3, 8)]),
    "encoder_module_activation": (lambda ns: ns.TransformerEncoderLayer(4, 1, 6, activation=ns.GELU()), [(2, 4)]),
    "encoder_stack_with_norm": (
        lambda ns: ns.TransformerEncoder(ns.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 2, norm=ns.LayerNorm(8),
                                         enable_nested_tensor=False),
        [(3, 2, 8)]),
    "decoder": (lambda ns: ns.TransformerDecoderLayer(8, 2, 16), [(3, 2, 8), (4, 2, 8)]),
    "decoder_pre_norm_batch_first": (
        lambda ns: ns.TransformerDecoderLayer(8, 2, 16, activation="gelu", batch_first=True, norm_first=True),
        [(2, 3, 8), (2, 5, 8)]),
}


@pytest.mark.parametrize("name", list(TRANSFORMERS))
def test_transformer_parity(backend, name):
    make, shapes = TRANSFORMERS[name]
    module_parity(make, [randn(*s, seed=i) for i, s in enumerate(shapes)], backend, rtol=2e-4, atol=2e-5)


def test_transformer_masks(backend):
    causal = torch.nn.Transformer.generate_square_subsequent_mask(3)
    kpm = np.array([[False, False, True], [False, False, False]])

    def call(m, src):
        return m(src, src_mask=src.graph.constant(causal.numpy()), src_key_padding_mask=src.graph.constant(kpm))

    def tcall(m, src):
        return m(src, src_mask=causal, src_key_padding_mask=torch.from_numpy(kpm))

    module_parity(lambda ns: ns.TransformerEncoderLayer(8, 2, 16, batch_first=True), [randn(2, 3, 8)], backend,
                  call=call, tcall=tcall, rtol=2e-4, atol=2e-5)

    def dcall(m, tgt, mem):
        return m(tgt, mem, tgt_mask=tgt.graph.constant(causal.numpy()), tgt_is_causal=True)

    def dtcall(m, tgt, mem):
        return m(tgt, mem, tgt_mask=causal, tgt_is_causal=True)

    module_parity(lambda ns: ns.TransformerDecoderLayer(8, 2, 16), [randn(3, 2, 8), randn(2, 2, 8, seed=1)],
                  backend, call=dcall, tcall=dtcall, rtol=2e-4, atol=2e-5)


def test_transformer_loads_torch_state_dict_and_repr():
    tm = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16), 2, enable_nested_tensor=False)
    m = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 2)
    assert list(m.state_dict()) == list(tm.state_dict())
    assert [tuple(v.shape) for v in m.state_dict().values()] == [tuple(v.shape) for v in tm.state_dict().values()]
    assert repr(m) == repr(tm)
    layers = list(m.layers)
    assert layers[0].linear1.weight is not layers[1].linear1.weight  # clones, not one layer twice
    with pytest.raises(ValueError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")


# containers --------------------------------------------------------------------------------------


def test_module_dict_and_parameter_list():
    def net(ns, plist, s):
        class Net(ns.Module):
            def __init__(self):
                super().__init__()
                self.heads = ns.ModuleDict({"a": ns.Linear(2, 3), "b": ns.Linear(2, 1)})
                self.scales = plist
                self.extra = ns.ParameterDict({"s": s})

        return Net()

    torch.manual_seed(0)
    tp = torch.nn.Parameter
    tm = net(torch.nn, torch.nn.ParameterList([tp(torch.ones(3)), tp(torch.zeros(2, 2))]), tp(torch.ones(2)))
    m = net(nn, nn.ParameterList([np.ones(3, np.float32), nn.Parameter(np.zeros((2, 2), np.float32))]),
            nn.Parameter(np.ones(2, np.float32)))
    assert list(m.state_dict()) == list(tm.state_dict())
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    assert repr(m) == repr(tm)
    assert len(m.heads) == 2 and list(m.heads) == ["a", "b"] and "a" in m.heads
    assert [k for k, _ in m.heads.items()] == ["a", "b"]
    m.heads["c"] = nn.Identity()
    assert list(m.heads.keys()) == ["a", "b", "c"] and isinstance(m.heads.pop("c"), nn.Identity)
    assert len(m.scales) == 2 and m.scales[-1].shape == (2, 2)
    m.scales.append(np.zeros(4, np.float32))
    assert "scales.2" in m.state_dict()
    # a ParameterList's parameters are trained like any other
    g = lm.Graph()
    x = g.input("x", (3,))
    loss = (x * m.scales[0].on(g)).sum()
    (gr,) = train.grad(loss, [m.scales[0]])
    np.testing.assert_allclose(lm.compile(gr, backend="cpu")(x=np.arange(3, dtype=np.float32)), [0, 1, 2])


# Module ------------------------------------------------------------------------------------------


def _small(ns):
    return ns.Sequential(
        ns.Conv2d(3, 4, 3, padding=1), ns.BatchNorm2d(4), ns.ReLU(), ns.Dropout2d(0.1), ns.Flatten(),
        ns.Linear(64, 8), ns.GELU(), ns.LayerNorm(8), ns.Dropout(0.2),
        ns.ModuleList([ns.Linear(8, 8), ns.Linear(8, 8), ns.Linear(8, 8), ns.Linear(8, 4)]),
        ns.Sequential(ns.ELU(), ns.LeakyReLU(0.2), ns.Softplus(), ns.PReLU(), ns.Softmax(dim=-1)),
        ns.ModuleDict({"gn": ns.GroupNorm(2, 4), "up": ns.Upsample(scale_factor=2), "ps": ns.PixelShuffle(2)}),
        ns.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1), ns.Embedding(10, 3, padding_idx=0),
        ns.Hardtanh(), ns.ReLU6(inplace=True), ns.CELU(), ns.GLU(), ns.Identity(), ns.MultiheadAttention(8, 2),
        ns.RMSNorm(4), ns.Conv1d(2, 2, 1, bias=False),
    )


def test_repr_matches_torch():
    assert repr(_small(nn)) == repr(_small(torch.nn))
    assert repr(nn.TransformerDecoderLayer(8, 2, 16)) == repr(torch.nn.TransformerDecoderLayer(8, 2, 16))


def test_traversal_matches_torch():
    m, tm = _small(nn), _small(torch.nn)
    assert [n for n, _ in m.named_modules()] == [n for n, _ in tm.named_modules()]
    assert [type(x).__name__ for x in m.modules()] == [type(x).__name__ for x in tm.modules()]
    assert [n for n, _ in m.named_children()] == [n for n, _ in tm.named_children()]
    assert [type(x).__name__ for x in m.children()] == [type(x).__name__ for x in tm.children()]
    assert m.get_submodule("9.3") is m[9][3]
    assert m.get_submodule("") is m
    assert m.get_parameter("9.3.bias") is m[9][3].bias
    assert m.get_buffer("1.running_var") is m[1].running_var
    with pytest.raises(AttributeError, match="Linear has no attribute `nope`"):
        m.get_submodule("9.3.nope")
    shared = nn.Linear(2, 2)
    both = nn.Sequential(shared, shared)
    assert len(list(both.modules())) == 2
    assert len(list(both.named_modules(remove_duplicate=False))) == 3
    order = []
    m.apply(lambda x: order.append(type(x).__name__))
    torder = []
    tm.apply(lambda x: torder.append(type(x).__name__))
    assert order == torder and order[-1] == "Sequential"


def test_apply_initialises():
    m = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 2))

    def init(x):
        if isinstance(x, nn.Linear):
            nn.init.constant_(x.weight, 0.5)
            nn.init.zeros_(x.bias)

    assert m.apply(init) is m
    assert all((p.data == 0.5).all() for n, p in m.named_parameters() if n.endswith("weight"))


def test_requires_grad_freezes_parameters():
    """A frozen layer gets no update from compile_step; the trainable one is updated exactly as torch's
    SGD updates it with the same layer frozen."""
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    assert m[0].requires_grad_(False) is m[0]
    tm[0].requires_grad_(False)
    assert [p.requires_grad for p in m.parameters()] == [p.requires_grad for p in tm.parameters()]
    frozen = {k: v.copy() for k, v in m[0].state_dict().items()}
    x, y = randn(5, 3), randn(5, 2, seed=1)
    g = lm.Graph()
    loss = train.mse_loss(m(g.input("x", x.shape)), g.input("y", y.shape))
    step = train.compile_step(loss, train.SGD(m.parameters(), lr=0.1), backend="cpu")
    topt = torch.optim.SGD([p for p in tm.parameters() if p.requires_grad], lr=0.1)
    for _ in range(2):
        step(x=x, y=y)
        topt.zero_grad()
        TF.mse_loss(tm(torch.from_numpy(x)), torch.from_numpy(y)).backward()
        topt.step()
    for k, v in m[0].state_dict().items():
        np.testing.assert_array_equal(v, frozen[k])
    np.testing.assert_allclose(m[2].weight.data, tm[2].weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    m.requires_grad_()
    assert all(p.requires_grad for p in m.parameters())


def test_to_dtype():
    m = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    ref = m[0].weight.data.copy()
    assert m.half() is m
    assert {s.dtype for s in m.parameters()} == {lm.float16}
    assert m[1].running_mean.dtype is lm.float16 and m[1].num_batches_tracked.dtype is lm.int32
    np.testing.assert_allclose(m[0].weight.data, ref, rtol=1e-3)
    m.bfloat16()
    assert m[0].weight.dtype is lm.bfloat16
    m.float()
    assert m[0].weight.dtype is lm.float32 and m[0].weight.data.dtype == np.float32
    m.to(lm.float64)
    assert m[0].bias.dtype is lm.float64
    m.to("cpu", dtype=lm.float32)
    assert m[0].bias.dtype is lm.float32
    # a half model computes like torch's half model
    tm = torch.nn.Linear(3, 2)
    lin = nn.Linear(3, 2)
    lin.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    lin.half()
    tm.half()
    x = randn(4, 3)
    g = lm.Graph()
    xi = g.input("x", x.shape, dtype=lm.float16)
    y = lin(xi)
    assert y.dtype is lm.float16
    got = lm.compile(y, backend="cpu")(x=x.astype(np.float16))
    np.testing.assert_allclose(got.astype(np.float32), tm(torch.from_numpy(x).half()).detach().float().numpy(),
                               rtol=2e-3, atol=2e-3)
    with pytest.raises(RuntimeError, match=r"Linear.to\(float32\): 1 graph\(s\) built from this module"):
        lin.float()
    with pytest.raises(TypeError, match="only floating dtypes"):
        lin.to(lm.int32)


def test_mode_change_warns_only_where_a_graph_read_the_mode():
    """Switching to eval after building a train step is the normal pattern (the MNIST example): a graph
    whose ops never read a module's mode (no Dropout, no BatchNorm, no ``self.training`` in a user's
    forward) is the same in both modes, so nothing warns; one that read it does."""
    mlp = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 1))
    g = lm.Graph()
    prog = lm.compile(mlp(g.input("x", (2, 3))), backend="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mlp.eval()
        mlp.train()

    class Scaled(nn.Module):  # a user's module whose forward reads its mode
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            y = self.lin(x)
            return y * 0.5 if self.training else y

    m = Scaled()
    g2 = lm.Graph()
    prog2 = lm.compile(m(g2.input("x", (2, 3))), backend="cpu")
    with pytest.warns(UserWarning, match=r"Scaled: set to eval mode after a graph was built from it in train mode"):
        m.eval()
    del prog, prog2, g, g2


def test_mode_change_after_build_warns():
    m = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))
    g = lm.Graph()
    prog = lm.compile(m(g.input("x", (2, 3))), backend="cpu")
    assert "mode='train'" in repr(prog)
    with pytest.warns(UserWarning, match=r"Sequential .*set to eval mode after a graph was built from it in train "
                                         r"mode"):
        m.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m.eval()  # unchanged: no warning
        g2 = lm.Graph()
        prog2 = lm.compile(m(g2.input("x", (2, 3))), backend="cpu")
    assert "mode='eval'" in repr(prog2) and "mode='train'" in repr(prog)
    x = randn(2, 3)
    np.testing.assert_array_equal(prog2(x=x), prog2(x=x))  # eval: no dropout
    with pytest.warns(UserWarning, match=r"set to train mode after a graph was built from it in eval mode"):
        m.train()
    del prog, prog2, g, g2
    gc.collect()
    with warnings.catch_warnings():  # the graphs are gone: nothing to warn about
        warnings.simplefilter("error")
        m.eval()
        m.train()
    sub = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    g3 = lm.Graph()
    sub(g3.input("x", (4, 2)))
    with pytest.warns(UserWarning, match=r"BatchNorm1d: set to eval mode .* in train mode"):
        sub[1].eval()


@pytest.mark.parametrize("functional", [False, True])
def test_dropout2d_of_a_3d_input_masks_each_sample_channel(functional):
    """torch 2.13 takes a 3-d input to Dropout2d as (N, C, L), one mask per (sample, channel), with a warning;
    luminal took it as unbatched (C, H, W) and zeroed whole (H, W) planes, one mask per first index."""
    g = lm.Graph()
    xi = g.input("x", (16, 6, 5))
    with pytest.warns(UserWarning, match="received a 3-d input, taken as \\(N, C, L\\)"):
        y = F.dropout2d(xi, 0.5) if functional else nn.Dropout2d(0.5)(xi)
    out = lm.compile(y, backend="cpu")(x=np.ones((16, 6, 5), np.float32))
    assert np.all(out == out[:, :, :1])  # one value along L
    assert not np.all(out == out[:, :1, :1])  # (16 * 6 channels at p=0.5: some differ within a sample)


def test_batch_statistics_need_more_than_one_value_in_eval_too():
    """``BatchNorm1d(track_running_stats=False)`` in eval normalises by the batch's statistics, as in training:
    one value per channel is refused as torch refuses it (luminal returned the bias). ``F.batch_norm`` in
    evaluation mode needs the running statistics (torch: 'running_mean must be defined in evaluation mode';
    luminal used the batch's), and running statistics of the wrong size are named (was a reshape error)."""
    g = lm.Graph()
    x = g.input("x", (1, 3))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3, track_running_stats=False).eval()(x)
    y = g.input("y", (2, 3))
    with pytest.raises(ValueError, match="^batch_norm: running_mean and running_var must be given in evaluation mode"):
        F.batch_norm(y, None, None, training=False)
    with pytest.raises(ValueError, match=r"^batch_norm: running_mean: expected input of shape \(3,\), got \(4,\)"):
        F.batch_norm(y, g.constant(np.zeros(4, np.float32)), g.constant(np.ones(3, np.float32)), training=False)
    z = g.input("z", (2, 3, 5))
    with pytest.raises(ValueError, match=r"^instance_norm: running_var: expected input of shape \(3,\), got \(4,\)"):
        F.instance_norm(z, g.constant(np.zeros(3, np.float32)), g.constant(np.ones(4, np.float32)),
                        use_input_stats=False)

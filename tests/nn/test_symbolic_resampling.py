"""Resampling, global pooling and the non-constant padding modes over symbolic spatial dims (a fully
convolutional network run on any image size), against torch: values and input gradients of one
compiled program at several bindings of the dims (``check_sizes``, odd sizes and size 1 where torch
takes them), the same ops on static shapes (``check``), the module forms, the run-time checks that
replace torch's size checks, and the errors for what stays static-only.

Also ``F.pad``'s negative amounts (cropping) in 'reflect', 'replicate' and 'circular' mode, as torch's,
and the hint of ``cat`` when two symbolic sizes differ only by a rounding division (a U-Net's skip)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from frontend.sizes import check_sizes  # tests/frontend (tests/ is on the path)
from parity import check, rand

import luminal as lm
import luminal.nn.functional as F
from luminal import nn

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _f(t):
    return TF if isinstance(t, torch.Tensor) else F


def _nn(t):
    return torch.nn if isinstance(t, torch.Tensor) else nn


def _spatial(nd: int, n: int) -> tuple[int, ...]:
    """Unequal sizes for the spatial dims bound from ``n``: H = n, W = n + 1, D = n + 2."""
    return tuple(n + i for i in range(nd))


_NAMES = ("H", "W", "D")


# interpolate / Upsample ------------------------------------------------------------------------
MODES = [("nearest", 2), ("nearest-exact", 2), ("area", 2), ("bilinear", 2), ("bicubic", 2), ("linear", 1),
         ("trilinear", 3), ("nearest", 1), ("nearest", 3)]


@pytest.mark.parametrize("scale", [2, 3.0, "per-dim"])
@pytest.mark.parametrize("mode,nd", MODES, ids=[f"{m}-{nd}d" for m, nd in MODES])
def test_interpolate_integer_scale_symbolic(mode, nd, scale, backend):
    """An integer scale factor takes symbolic spatial dims: one program serves every size, 1 included."""
    sf = (2, 3, 1)[:nd] if scale == "per-dim" else scale
    check_sizes(lambda t: _f(t).interpolate(t, scale_factor=sf, mode=mode),
                lambda n: [rand((2, 3, *_spatial(nd, n)), seed=n)], [(2, 3, *_NAMES[:nd])],
                sizes=(5, 2, 1), backend=backend)


@pytest.mark.parametrize("mode,nd", MODES, ids=[f"{m}-{nd}d" for m, nd in MODES])
def test_interpolate_integer_scale_static(mode, nd, backend):
    """The same path on static dims (views for nearest, polyphase taps for linear and cubic)."""
    check(lambda t: _f(t).interpolate(t, scale_factor=(3, 2, 2)[:nd], mode=mode, recompute_scale_factor=True),
          [rand((1, 2, *_spatial(nd, 4)))], backend=backend)
    check(lambda t: _f(t).interpolate(t, scale_factor=2.0, mode=mode), [rand((2, 1, *_spatial(nd, 1)))],
          backend=backend)


def test_interpolate_integer_scale_views_half_and_special_values():
    """On a permuted view; in float16 (the taps are summed in float32, rounded once, as torch's); and
    nearest copies inf and NaN where they are, as torch's (no 0 * inf of a resampling matrix)."""
    special = np.array([[[1.0, np.inf, -np.inf, np.nan, 2.0]]], np.float32)
    check(lambda t: (_f(t).interpolate(t, scale_factor=3), _f(t).interpolate(t, scale_factor=2, mode="area")),
          [special], grad=False)
    check(lambda t: _f(t).interpolate(t, scale_factor=2, mode="bicubic"), [rand((3, 2, 1, 4))],
          pre=lambda t: t.permute(2, 1, 0, 3))
    check(lambda t: _f(t).interpolate(t, scale_factor=3, mode="bilinear"), [rand((1, 2, 3, 4), lm.float16)],
          dtypes=[lm.float16])


def test_upsample_modules_symbolic(backend):
    check_sizes(lambda t: (_nn(t).Upsample(scale_factor=2)(t), _nn(t).UpsamplingNearest2d(scale_factor=3)(t),
                           _nn(t).Upsample(scale_factor=(2, 1), mode="bilinear")(t)),
                lambda n: [rand((1, 2, n, n + 2), seed=n)], [(1, 2, "H", "W")], sizes=(3, 1, 4), backend=backend)


def test_interpolate_symbolic_batch_with_static_spatial_dims_keeps_every_mode():
    """Only the spatial dims matter: a symbolic batch takes sizes, fractional scales and align_corners."""
    check_sizes(lambda t: (_f(t).interpolate(t, size=(5, 2), mode="bilinear", align_corners=True),
                           _f(t).interpolate(t, scale_factor=1.5, mode="nearest")),
                lambda n: [rand((n, 2, 3, 4), seed=n)], [("B", 2, 3, 4)], sizes=(3, 1), backend="reference")


def test_interpolate_static_only_cases_say_what_takes_symbolic_dims():
    g = lm.Graph()
    x = g.input("x", (1, 2, "H", 8))
    modes = "integer scale_factor.*'nearest', 'nearest-exact' or 'area'.*align_corners=False"
    with pytest.raises(ValueError, match=r"^interpolate: symbolic spatial dims \(input \(1, 2, H, 8\)\) take only "
                                         rf"an {modes}.*size= needs static spatial dims"):
        F.interpolate(x, size=(4, 4))
    with pytest.raises(ValueError, match=r"^interpolate: symbolic .*this scale_factor needs static spatial dims"):
        F.interpolate(x, scale_factor=1.5)
    with pytest.raises(ValueError, match=r"^interpolate: symbolic .*this scale_factor needs static"):
        F.interpolate(x, scale_factor=0.5, mode="area")
    with pytest.raises(ValueError, match=r"^interpolate: symbolic .*align_corners=True needs static spatial dims"):
        F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)
    with pytest.raises(ValueError, match=r"^interpolate: symbolic .*align_corners=True needs static"):
        nn.UpsamplingBilinear2d(scale_factor=2)(x)  # (torch's align_corners=True)
    # a static dim next to the symbolic one keeps every option
    assert F.interpolate(x, scale_factor=(2, 1.5)).shape[3] == 12


# adaptive pooling to 1 (global pooling) ----------------------------------------------------------
POOLS = [("AdaptiveAvgPool1d", 1), ("AdaptiveAvgPool2d", 2), ("AdaptiveAvgPool3d", 3), ("AdaptiveMaxPool1d", 1),
         ("AdaptiveMaxPool2d", 2), ("AdaptiveMaxPool3d", 3)]


@pytest.mark.parametrize("cls,nd", POOLS, ids=[c for c, _ in POOLS])
def test_global_pooling_symbolic(cls, nd, backend):
    """Output size 1 over symbolic dims: the mean / max of the whole dim; None keeps a dim."""
    keep = (None, 1, 1)[:nd] if nd > 1 else 1
    check_sizes(lambda t: (getattr(_nn(t), cls)(1)(t), getattr(_nn(t), cls)(keep)(t)),
                lambda n: [rand((2, 3, *_spatial(nd, n)), seed=n)], [(2, 3, *_NAMES[:nd])],
                sizes=(4, 1, 3), backend=backend)


def test_global_pooling_functional_unbatched_and_symbolic_batch(backend):
    check_sizes(lambda t: (_f(t).adaptive_avg_pool2d(t, 1), _f(t).adaptive_max_pool2d(t, (1, 1)),
                           _f(t).adaptive_avg_pool1d(t[0], 1), _f(t).adaptive_max_pool1d(t[0], 1),
                           _f(t).adaptive_avg_pool3d(t, (1, 1, 1)), _f(t).adaptive_max_pool3d(t, 1)),
                lambda n: [rand((n, 2, n + 1, 3), seed=n)], [("B", 2, "H", 3)], sizes=(3, 1), backend=backend)


def test_classifier_head_on_any_image_size(backend):
    """Conv, pooling, a global average and a linear head: one program for every image size."""
    lm.manual_seed(0)
    ours = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(4, 5))
    theirs = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                 torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 5))
    theirs.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in ours.state_dict().items()})
    check_sizes(lambda t: (theirs if isinstance(t, torch.Tensor) else ours)(t),
                lambda n: [rand((2, 3, 2 * n, n + 3), seed=n)], [(2, 3, "H", "W")], sizes=(3, 1, 4), backend=backend)


@pytest.mark.parametrize("cls,size", [("AdaptiveAvgPool3d", (2, 3, None)), ("AdaptiveAvgPool3d", 2),
                                      ("AdaptiveMaxPool3d", (3, 1, 2)), ("AdaptiveMaxPool3d", 1)])
def test_adaptive_pool_3d_static(cls, size, backend):
    check(lambda t: getattr(_nn(t), cls)(size)(t), [rand((2, 2, 5, 4, 3))], backend=backend)
    check(lambda t: getattr(_nn(t), cls)(size)(t), [rand((2, 5, 4, 3))], backend=backend)  # unbatched


def test_adaptive_pool_other_sizes_over_symbolic_dims_are_static_only():
    g = lm.Graph()
    x = g.input("x", (1, 2, "H", 6))
    for layer in (nn.AdaptiveAvgPool2d(2), nn.AdaptiveMaxPool2d((3, 1)), nn.AdaptiveAvgPool2d((2, None))):
        with pytest.raises(ValueError, match=r"^Adaptive(Avg|Max)Pool2d\(.*static spatial dims for an output size "
                                             r"[23] \(over a symbolic dim only the output size 1"):
            layer(x)
    assert nn.AdaptiveAvgPool2d((1, 2))(x).shape == (1, 2, 1, 2)  # the static dim pools to any size
    with pytest.raises(ValueError, match=r"^AdaptiveAvgPool3d\(.*\(N, C, D, H, W\) or \(C, D, H, W\)"):
        nn.AdaptiveAvgPool3d(1)(g.input("y", (2, 3)))


# F.pad's reflect / replicate / circular modes ----------------------------------------------------
# (pads, the sizes n the dims are bound from: torch takes them all)
PADS = {
    "reflect": [((2, 1), (5, 3)), ((1, 1, 2, 0), (3, 4)), ((1, -2, 2, -1), (4, 3)), ((-1, -1), (3, 4)),
                ((0, 3, -1, 1), (5, 4)), ((1, 1, 1, 1, 1, 1), (2, 3))],
    "replicate": [((2, 1), (5, 1)), ((1, 1, 2, 0), (3, 1)), ((1, -2, 2, -1), (4, 3)), ((-1, -1), (3, 4)),
                  ((0, 3, -1, 1), (5, 2)), ((2, 1, 1, 2, 1, 1), (1, 2))],
    "circular": [((2, 1), (5, 2)), ((1, 1, 1, 0), (3, 1)), ((1, -2, 2, -1), (6, 5)), ((-1, -1), (3, 2)),
                 ((0, 3, -1, 1), (5, 4)), ((1, 1, 1, 0, 1, 1), (1, 2))],
}
PAD_CASES = [(mode, p, s) for mode, cases in PADS.items() for p, s in cases]


@pytest.mark.parametrize("mode,pads,sizes", PAD_CASES, ids=[f"{m}-{p}" for m, p, _ in PAD_CASES])
def test_pad_modes_symbolic(mode, pads, sizes, backend):
    nd = len(pads) // 2
    check_sizes(lambda t: _f(t).pad(t, pads, mode=mode), lambda n: [rand((2, 2, *_spatial(nd, n)), seed=n)],
                [(2, 2, *_NAMES[:nd])], sizes=sizes, backend=backend)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_modes_negative_static(mode, backend):
    """Negative amounts crop, mixed with positive ones, as torch's: reflect and replicate read the
    padded input's cropped positions, circular wraps what the cropping keeps."""
    for pads, shape in [((1, -2), (2, 6)), ((-2, 3), (1, 2, 6)), ((-1, -1, 2, -3), (1, 2, 5, 6)),
                        ((2, -1, -1, 1, 0, -2), (1, 1, 4, 5, 6))]:
        check(lambda t: _f(t).pad(t, pads, mode=mode), [rand(shape)], backend=backend)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_modes_match_torch_for_every_amount(mode):
    """Every (left, right) in [-6, 6) on a dim of 6, values: where torch pads, the same values (a crop
    reaching into the other side's padding included); where torch refuses, an error."""
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for lo, hi in itertools.product(range(-6, 6), repeat=2):
        kept = 6 - max(-lo, 0) - max(-hi, 0)
        try:
            want = TF.pad(torch.from_numpy(x)[None], (lo, hi), mode=mode)[0].numpy()
            # (torch's circular mode copies from what it has already written when an amount exceeds what
            # the cropping keeps: an error or stale values. Refused here.)
            want = None if mode == "circular" and max(lo, hi) > kept else want
        except RuntimeError:
            want = None
        g = lm.Graph()
        try:
            got = lm.compile(F.pad(g.input("x", (2, 6)), (lo, hi), mode=mode), backend="reference")(x=x)
        except ValueError as e:
            assert want is None, f"({lo}, {hi}): {e}"
            assert str(e).startswith(f"pad: padding ({lo}, {hi}) is invalid for dim 1 of size 6 in mode '{mode}'")
            continue
        assert want is not None, f"({lo}, {hi}): torch refuses, luminal gives {got}"
        np.testing.assert_array_equal(got, want, err_msg=f"({lo}, {hi})")


def test_pad_modes_symbolic_runtime_checks():
    """torch's size checks, made when the program runs for the binding of the symbolic dims."""
    def run(pads, mode, n):
        g = lm.Graph()
        f = lm.compile(F.pad(g.input("x", (2, "n")), pads, mode=mode), backend="reference")
        return f(x=np.ones((2, n), np.float32))

    assert run((2, 2), "reflect", 3).shape == (2, 7)
    with pytest.raises(ValueError, match=r"with n=2: pad: padding \(2, 2\) is invalid for dim 1 of size n in mode "
                                         r"'reflect' \(each amount must be below the dim's size\)"):
        run((2, 2), "reflect", 2)
    with pytest.raises(ValueError, match=r"with n=2: pad: padding \(3, -1\) is invalid .* mode 'circular': it must "
                                         r"wrap around the n-1 positions the cropping keeps at most once"):
        run((3, -1), "circular", 2)
    assert run((3, -1), "circular", 4).shape == (2, 6)
    with pytest.raises(ValueError, match=r"with n=2: pad: padding \(-1, -1\) of dim 1 of size n in mode 'replicate' "
                                         r"leaves n-2 \(< 1\) positions"):
        run((-1, -1), "replicate", 2)
    with pytest.raises(ValueError, match=r"with n=3: pad: padding \(-4, 2\) crops more than dim 1 of size n in mode "
                                         r"'replicate' \(with a symbolic size the cropping must stay within the dim\)"):
        run((-4, 2), "replicate", 3)  # (torch gives [2, 2] for a static 3: the crop reaches into the padding)
    assert run((-4, 2), "replicate", 5).shape == (2, 3)
    with pytest.raises(ValueError, match=r"pad: .*replicate.*leaves"):
        run((-1, 0), "replicate", 1)  # a crop alone: a view, checked by the program reading it


def test_pad_static_errors():
    g = lm.Graph()
    with pytest.raises(ValueError, match=r"^pad: padding \(0, 4\) is invalid for dim 1 of size 4 in mode 'reflect' "
                                         r"\(each amount must be below the dim's size\)"):
        F.pad(g.input("a", (2, 4)), (0, 4), mode="reflect")
    with pytest.raises(ValueError, match=r"^pad: padding \(-2, -2\) is invalid for dim 1 of size 4 in mode "
                                         r"'replicate': the output would have size 0"):
        F.pad(g.input("b", (2, 4)), (-2, -2), mode="replicate")
    with pytest.raises(ValueError, match=r"^pad: padding \(5, 0\) is invalid .* 'circular'.*more than once"):
        F.pad(g.input("c", (2, 4)), (5, 0), mode="circular")
    with pytest.raises(ValueError, match=r"^pad: padding \(3, -2\) is invalid .* 'circular'.*the 2 positions"):
        F.pad(g.input("d", (2, 4)), (3, -2), mode="circular")
    with pytest.raises(TypeError, match=r"^pad: pad \(1.5, 1\) must be ints in mode 'reflect'"):
        F.pad(g.input("e", (2, 4)), (1.5, 1), mode="reflect")
    assert F.pad(g.input("f", (2, 4)), (-2, -2), mode="circular").shape == (2, 0)  # torch's empty result


PAD_LAYERS = [("ReflectionPad1d", (2, -1), 1), ("ReflectionPad2d", 1, 2), ("ReflectionPad3d", (1, 0, -1, 1, 1, 1), 3),
              ("ReplicationPad1d", 3, 1), ("ReplicationPad2d", (1, -1, 2, 0), 2), ("ReplicationPad3d", 1, 3),
              ("CircularPad1d", (1, 2), 1), ("CircularPad2d", (-1, 1, 1, 1), 2), ("CircularPad3d", 1, 3)]


@pytest.mark.parametrize("cls,padding,nd", PAD_LAYERS, ids=[f"{c}-{p}" for c, p, _ in PAD_LAYERS])
def test_padding_layers_symbolic_and_negative(cls, padding, nd, backend):
    ours, theirs = getattr(nn, cls)(padding), getattr(torch.nn, cls)(padding)
    assert ours.padding == theirs.padding and repr(ours) == repr(theirs)
    check_sizes(lambda t: (theirs if isinstance(t, torch.Tensor) else ours)(t),
                lambda n: [rand((2, 2, *_spatial(nd, n)), seed=n)], [("B", 2, *_NAMES[:nd])], sizes=(4, 3),
                backend=backend)
    check(lambda t: (theirs if isinstance(t, torch.Tensor) else ours)(t), [rand((2, *_spatial(nd, 3)))],
          backend=backend)  # unbatched, static


# a U-Net's skip connection -----------------------------------------------------------------------
def _unet(t):
    """Down twice (max pool, strided average), up twice (nearest, bilinear), each joined with its skip,
    a reflection pad, and a global average: parameter-free, so torch runs the same function."""
    f, m = _f(t), (torch if isinstance(t, torch.Tensor) else lm)
    d1 = f.max_pool2d(t, 2)
    d2 = f.avg_pool2d(d1, 2)
    u1 = m.cat([d1, f.interpolate(d2, scale_factor=2, mode="bilinear")], 1)
    u0 = m.cat([t, f.interpolate(u1, scale_factor=2)], 1)
    y = f.pad(u0, (1, 1, 1, 1), mode="reflect")
    return y, f.adaptive_avg_pool2d(y, 1)


def test_unet_on_sizes_declared_as_multiples(backend):
    """H and W declared as multiples of 4 (two halvings): every pooled size divides exactly, and the skips
    join; one program for every size."""
    h, w = lm.sym("h"), lm.sym("w")
    check_sizes(_unet, lambda n: [rand((1, 2, 4 * n, 4 * (n + 1)), seed=n)], [(1, 2, 4 * h, 4 * w)],
                sizes=(2, 1, 3), backend=backend)


def test_cat_of_rounded_sizes_hints_at_multiples():
    g = lm.Graph()
    x = g.input("x", (1, 2, "H", "W"))
    with pytest.raises(ValueError, match=r"^cat: shapes must match except in dim 1, got \(1, 2, H, W\) and \(1, 2, "
                                         r"2\*\(\(H-2\)//2\)\+2, 2\*\(\(W-2\)//2\)\+2\); dim 2 is H in one tensor and "
                                         r"2\*\(\(H-2\)//2\)\+2 in the other, equal only for some values of H \(the "
                                         r"division in 2\*\(\(H-2\)//2\)\+2 rounds down\): declaring the input's size "
                                         r"as a multiple, as 4\*lm.sym\(\"h\"\) in g.input"):
        lm.cat([x, F.interpolate(F.max_pool2d(x, 2), scale_factor=2)], 1)
    with pytest.raises(ValueError, match=r"^cat: .*rounds down\): declaring the input's size as a multiple"):
        _unet(x)
    # no rounding: no hint
    with pytest.raises(ValueError, match=r"^cat: shapes must match except in dim 0, got \(2, S\) and \(2, T\)\n"):
        lm.cat([g.input("a", (2, "S")), g.input("b", (2, "T"))], 0)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("pads", [(2, 1), (2, -1), (-1, 1, 1, 0)])
def test_the_tensor_method_pads_as_f_pad(mode, pads, backend):
    """``x.pad(..., mode=)`` was a Gather over static sizes only, cropping before it padded (torch's F.pad
    pads, then crops, for reflect and replicate); it is now the same function as F.pad."""
    check_sizes(lambda t: t.pad(pads, mode=mode) if not isinstance(t, torch.Tensor) else TF.pad(t, pads, mode=mode),
                lambda n: [rand((2, 3, n), seed=n)], [(2, 3, "L")], sizes=(4, 6), backend=backend)

"""Convolutions as im2col + one matmul: pad, ``unfold`` each spatial dim (a view), gather the windows
into a (C*K, positions) matrix (the one copy), and multiply by the (O, C*K) weight. Groups become a
batch dim of that matmul. The graph stays small, so compiling and differentiating it stay cheap."""

from __future__ import annotations

from luminal.core.errors import check_int, op_error, renamed
from luminal.core.symbolic import is_static, prod, shape_str
from luminal.frontend.checks import check_tensors
from luminal.nn import init
from luminal.nn.layers._util import bad_input, check_float, layer_forward, layer_name, ntuple, param
from luminal.nn.module import Module


def _same_padding(kernel, dilation) -> tuple[tuple[int, int], ...]:
    """torch's 'same': total ``d*(k-1)``, the odd element on the right."""
    out = []
    for k, d in zip(kernel, dilation):
        total = d * (k - 1)
        out.append((total // 2, total - total // 2))
    return tuple(out)


def _pad_pairs(padding, nd: int, kernel, dilation, stride, name: str) -> tuple[tuple[int, int], ...]:
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * nd
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
            return _same_padding(kernel, dilation)
        raise ValueError(f"{name}: invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
    return tuple((p, p) for p in ntuple(padding, nd, f"{name}: padding", 0))


def conv_nd(x, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1, name: str = "conv"):
    """torch's ``F.conv{1,2,3}d`` for an input ``(N, C, *spatial)``, or unbatched ``(C, *spatial)``
    (then so is the result, as torch), and ``weight`` ``(O, C/groups, *kernel)`` (GraphTensors);
    ``padding`` may be an int, a tuple, 'same' or 'valid'."""
    nd = _check_conv_args(name, x, weight, bias, groups, transposed=False)
    with renamed(name):
        if x.ndim == nd + 1:
            return _conv_nd(x.unsqueeze(0), weight, bias, stride, padding, dilation, groups, name).squeeze(0)
        return _conv_nd(x, weight, bias, stride, padding, dilation, groups, name)


# the functional forms' spatial dims, by name: their weight's rank is fixed (a 4-d weight to conv1d is an error,
# not a 2-d convolution of a 3-d input taken as unbatched)
_FUNCTIONAL_DIMS = {"conv1d": 1, "conv2d": 2, "conv3d": 3, "conv_transpose1d": 1, "conv_transpose2d": 2,
                    "conv_transpose3d": 3}


def _check_conv_args(name: str, x, weight, bias, groups, transposed: bool) -> int:
    """The checks of a convolution's arguments as torch makes them, named by ``name``: tensors, the
    weight's rank (for ``F.convNd``), the input's, ``groups`` (an int >= 1 dividing the channels the
    weight holds per group) and ``bias`` ((C_out,)); the number of spatial dims. Before, a bad groups or
    bias failed later in a reshape."""
    check_tensors(name, optional=("bias",), input=x, weight=weight, bias=bias)
    groups = check_int(name, "groups", groups, 1)
    nd = weight.ndim - 2
    want = _FUNCTIONAL_DIMS.get(name)
    if want is not None and nd != want:
        raise op_error(ValueError, name, f"expected a {want + 2}-d weight (C_out, C_in/groups, *kernel), got "
                       f"{shape_str(weight.shape)}", weight)
    if nd < 1 or x.ndim not in (nd + 1, nd + 2):
        raise op_error(ValueError, name, f"expected an input of {nd + 1} (unbatched) or {nd + 2} (batched) "
                       f"dims for a {weight.ndim}-d weight, got {shape_str(x.shape)}", x, weight)
    per_group = weight.shape[0]  # the output channels (C_in for a transposed weight, (C_in, C_out/groups, ...))
    if is_static(per_group) and per_group % groups:
        raise op_error(ValueError, name, f"weight {shape_str(weight.shape)}: dim 0 must be divisible by groups="
                       f"{groups}", weight)
    c_out = weight.shape[1] * groups if transposed else weight.shape[0]
    if bias is not None and tuple(bias.shape) != (c_out,):
        raise op_error(ValueError, name, f"bias must be ({c_out},), one per output channel, got "
                       f"{shape_str(bias.shape)}", bias)
    return nd


def _conv_nd(x, weight, bias, stride, padding, dilation, groups: int, name: str, pads=None):
    """``conv_nd`` of a batched input; ``pads``: (before, after) per spatial dim, in place of
    ``padding`` (a transposed convolution's may differ on the two sides)."""
    nd = weight.ndim - 2
    kernel = tuple(weight.shape[2:])
    stride, dilation = ntuple(stride, nd, f"{name}: stride", 1), ntuple(dilation, nd, f"{name}: dilation", 1)
    if pads is None:
        pads = _pad_pairs(padding, nd, kernel, dilation, stride, name)
    n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
    o = weight.shape[0]
    if c != weight.shape[1] * groups:
        raise op_error(ValueError, name, f"expected input with {weight.shape[1] * groups} channels "
                       f"(dim 1), got {shape_str(x.shape)}", x, weight)
    eff = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(spatial, pads))
    if any(is_static(p) and p < e for p, e in zip(padded, eff)):
        raise op_error(ValueError, name, f"padded input size {shape_str(padded)} is smaller than the "
                       f"(dilated) kernel {eff}", x)
    source = x
    if any(lo or hi for lo, hi in pads):
        x = x.pad([v for lo, hi in reversed(pads) for v in (lo, hi)])
    for i in range(nd):  # (N, C, *out, *eff)
        x = x.unfold(2 + i, eff[i], stride[i])
    for i, (k, d) in enumerate(zip(kernel, dilation)):  # every d-th element of each dilated window
        if d > 1:
            x = x._slice_dim(x.ndim - nd + i, 0, k, d)  # not x[..., ::d]: that makes a symbolic batch max(0, B)
    out = tuple(x.shape[2:2 + nd])
    cg = c // groups
    # (N, G, C/G, *out, *K) -> (N, G, C/G, *K, *out) -> (N, G, C/G*K, P): the im2col matrix
    x = x.reshape(n, groups, cg, *out, *kernel)
    perm = (0, 1, 2) + tuple(3 + nd + i for i in range(nd)) + tuple(3 + i for i in range(nd))
    cols = x.permute(perm).reshape(n, groups, cg * prod(kernel), prod(out))
    w = weight.reshape(groups, o // groups, cg * prod(kernel))
    # w @ cols, written out (as ``matmul`` builds it) for the gradient below
    full = (n, groups, o // groups, cg * prod(kernel), prod(out))
    lhs, rhs = w.unsqueeze(-1).expand(*full), cols.unsqueeze(-3).expand(*full)
    y = (lhs * rhs).sum(-2)
    if set(stride) == {1} and all(lo <= d * (k - 1) and hi <= d * (k - 1)
                                  for (lo, hi), k, d in zip(pads, kernel, dilation)):
        y = _input_gradient_as_convolution(y, lhs, rhs, source, weight, pads, dilation, groups, out, name)
    y = y.reshape(n, o, *out)  # (N, G, O/G, P) is already (N, O, *out) in memory
    if bias is not None:
        y = y + bias.reshape(o, *(1,) * nd)
    return y


def _input_gradient_as_convolution(y, lhs, rhs, x, weight, pads, dilation, groups: int, sizes: tuple, name: str):
    """``y`` (the product ``(lhs * rhs).sum(-2)`` of a stride-1 convolution of ``x``, of output sizes
    ``sizes``) with the gradient with respect to ``x`` computed as the convolution of the output's
    gradient with the weight flipped and its channels swapped (the transposed convolution), padded by
    ``d * (k - 1)`` less the forward's padding on each side; the weight's gradient is autograd's
    (``_sum`` and ``_mul`` of the product written out).

    Why: differentiated, the im2col matrix's gradient is a product of the weight with the output's
    gradient, ``C * K`` rows per position (the MNIST CNN's second convolution: 40 MB per batch), which
    a col2im pass then sums ``K`` times into the input's shape. As a convolution, it is a product over
    ``O * K`` of the output's gradient read through windows: the planner runs it from the padded
    gradient like the forward product (``backends/cpu/gathered.py``, ``direct_conv.py``), and no
    matrix of the input's size times ``K`` is made."""
    nd = weight.ndim - 2
    o, cg, kernel = weight.shape[0], weight.shape[1], tuple(weight.shape[2:])
    spatial = tuple(range(2, 2 + nd))
    # (O, C/G, *K) -> (G, O/G, C/G, *K) -> (G, C/G, O/G, *K) -> (C, O/G, *K), each window reversed
    swapped = weight.reshape(groups, o // groups, cg, *kernel).permute(0, 2, 1, *(3 + i for i in range(nd)))
    transposed = swapped.reshape(groups * cg, o // groups, *kernel).flip(spatial)
    back = tuple((d * (k - 1) - lo, d * (k - 1) - hi) for (lo, hi), k, d in zip(pads, kernel, dilation))

    def rule(_, adjoint, lhs_, x_):
        by_lhs = adjoint.unsqueeze(-2).expand(*lhs_.shape) * rhs
        images = adjoint.reshape(x_.shape[0], o, *sizes)
        by_x = _conv_nd(images, transposed, None, 1, 0, dilation, groups, name, pads=back)
        # (each in its input's dtype, as the casts the rule stands in for would give it: an f16
        # operand of an f32 product)
        return [by_lhs.to(lhs_.dtype), by_x.to(x_.dtype)]

    return y.graph.custom_vjp(y, [lhs, x], rule)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):  # noqa: A002
    """torch's ``F.conv1d``: input (N, C_in, L) or (C_in, L), weight (C_out, C_in/groups, *kernel).

    Args:
        input, weight, bias: tensors (bias optional, (C_out,)). stride, padding (ints, or 'same'/'valid'),
        dilation, groups: as torch's.
    """
    return conv_nd(input, weight, bias, stride, padding, dilation, groups, "conv1d")


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):  # noqa: A002
    """torch's ``F.conv2d``: input (N, C_in, H, W) or (C_in, H, W), weight (C_out, C_in/groups, *kernel).

    Args:
        input, weight, bias: tensors (bias optional, (C_out,)). stride, padding (ints, or 'same'/'valid'),
        dilation, groups: as torch's.
    """
    return conv_nd(input, weight, bias, stride, padding, dilation, groups, "conv2d")


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):  # noqa: A002
    """torch's ``F.conv3d``: input (N, C_in, D, H, W) or (C_in, D, H, W), weight (C_out, C_in/groups, *kernel).

    Args:
        input, weight, bias: tensors (bias optional, (C_out,)). stride, padding (ints, or 'same'/'valid'),
        dilation, groups: as torch's.
    """
    return conv_nd(input, weight, bias, stride, padding, dilation, groups, "conv3d")


_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _channels(name: str, in_channels, out_channels, groups, padding_mode: str,
              transposed: bool = False) -> tuple[int, int, int]:
    """A convolution layer's channel counts and groups, checked (both counts divisible by groups), and
    its padding mode: one of torch's four, and only 'zeros' for a transposed convolution (as torch,
    whose transposed layers have no padding step to make in another mode)."""
    in_channels = check_int(name, "in_channels", in_channels, 1)
    out_channels = check_int(name, "out_channels", out_channels, 1)
    groups = check_int(name, "groups", groups)
    if groups <= 0 or in_channels % groups or out_channels % groups:
        raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                         f"divisible by groups ({groups})")
    if padding_mode not in _PADDING_MODES:
        raise ValueError(f"{name}: padding_mode must be one of {_PADDING_MODES}, got {padding_mode!r}")
    if transposed and padding_mode != "zeros":
        raise ValueError(f"{name}: only padding_mode='zeros' is supported for a transposed convolution, got "
                         f"{padding_mode!r}")
    return in_channels, out_channels, groups


class _ConvNd(Module):
    _nd = 0

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__()
        nd, name = self._nd, type(self).__name__
        in_channels, out_channels, groups = _channels(name, in_channels, out_channels, groups, padding_mode)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = ntuple(kernel_size, nd, f"{name}: kernel_size", 1)
        self.stride = ntuple(stride, nd, f"{name}: stride", 1)
        self.dilation = ntuple(dilation, nd, f"{name}: dilation", 1)
        _pad_pairs(padding, nd, self.kernel_size, self.dilation, self.stride, name)  # validate now
        self.padding = padding if isinstance(padding, str) else ntuple(padding, nd, f"{name}: padding", 0)
        self.padding_mode = padding_mode
        self.weight = param((out_channels, in_channels // groups, *self.kernel_size), dtype)
        self.bias = param((out_channels,), dtype) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-initialise as torch does: the weight kaiming-uniform with ``a = sqrt(5)``, the bias U(-b, b)
        with ``b = 1 / sqrt(fan_in)``, ``fan_in = in_channels / groups * prod(kernel_size)``.
        """
        init.kaiming_uniform_(self.weight, a=5 ** 0.5)
        if self.bias is not None:
            fan_in = self.weight.shape[1] * prod(self.kernel_size)
            b = init.bias_bound(fan_in)
            init.uniform_(self.bias, -b, b)

    @layer_forward
    def forward(self, x):
        name = layer_name(self)
        check_float(name, x)
        nd = self._nd
        spatial = {1: "L", 2: "H, W", 3: "D, H, W"}[nd]
        expected = f"(N, {self.in_channels}, {spatial}) or ({self.in_channels}, {spatial})"
        if x.ndim not in (nd + 1, nd + 2) or x.shape[x.ndim - nd - 1] != self.in_channels:
            raise bad_input(name, expected, x)
        g = x.graph  # conv_nd runs an unbatched input as a batch of one
        padding = self.padding
        if self.padding_mode != "zeros":  # torch's two steps: pad in that mode, then convolve unpadded
            pads = _pad_pairs(padding, nd, self.kernel_size, self.dilation, self.stride, name)
            x = x.pad([v for pair in reversed(pads) for v in pair], mode=self.padding_mode)
            padding = 0
        return conv_nd(x, self.weight.on(g), self.bias.on(g) if self.bias is not None else None,
                       self.stride, padding, self.dilation, self.groups, name)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding not in ((0,) * self._nd, "valid"):
            s += f", padding={self.padding!r}"
        if self.dilation != (1,) * self._nd:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode!r}"
        return s + ("" if self.bias is not None else ", bias=False")


class Conv1d(_ConvNd):
    """torch's ``nn.Conv1d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
    bias=True, padding_mode='zeros')``; ``weight`` is (out_channels, in_channels/groups, kernel_size).

    Args:
        in_channels, out_channels, kernel_size, stride, padding (ints, 'same' or 'valid'): as torch's.
        dilation, groups, bias, padding_mode ('zeros', 'reflect', 'replicate', 'circular'), dtype: as torch's.
        device: ignored (arrays live on the host).
    """

    _nd = 1


class Conv2d(_ConvNd):
    """torch's ``nn.Conv2d``; ``weight`` is (out_channels, in_channels/groups, kH, kW).

    Args:
        in_channels, out_channels, kernel_size, stride, padding: as torch's.
        dilation, groups, bias, padding_mode, device (ignored), dtype: as torch's.
    """

    _nd = 2


class Conv3d(_ConvNd):
    """torch's ``nn.Conv3d``; ``weight`` is (out_channels, in_channels/groups, kD, kH, kW).

    Args:
        in_channels, out_channels, kernel_size, stride, padding: as torch's.
        dilation, groups, bias, padding_mode, device (ignored), dtype: as torch's.
    """

    _nd = 3


def conv_transpose_nd(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups: int = 1, dilation=1,
                      name: str = "conv_transpose"):
    """torch's ``F.conv_transpose{1,2,3}d``: the gradient of a convolution with respect to its input.
    ``x`` is (N, C_in, *spatial) or unbatched (C_in, *spatial); ``weight`` is (C_in, C_out/groups,
    *kernel). Computed as a stride-1 convolution of the input dilated by ``stride`` (zeros between
    elements), padded by ``dilation*(k-1) - padding`` (plus ``output_padding`` on the right), with the
    kernel flipped and its in/out channels swapped."""
    nd = _check_conv_args(name, x, weight, bias, groups, transposed=True)
    with renamed(name):
        if x.ndim == nd + 1:
            return conv_transpose_nd(x.unsqueeze(0), weight, bias, stride, padding, output_padding, groups,
                                     dilation, name).squeeze(0)
        return _conv_transpose_nd(x, weight, bias, stride, padding, output_padding, groups, dilation, name)


def _conv_transpose_nd(x, weight, bias, stride, padding, output_padding, groups, dilation, name):
    nd = weight.ndim - 2
    kernel = tuple(weight.shape[2:])
    stride = ntuple(stride, nd, f"{name}: stride", 1)
    dilation = ntuple(dilation, nd, f"{name}: dilation", 1)
    padding = _transposed_padding(padding, nd, name)
    output_padding = ntuple(output_padding, nd, f"{name}: output_padding", 0)
    if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
        raise op_error(ValueError, name, f"output_padding {output_padding} must be smaller than either stride "
                       f"{stride} or dilation {dilation}", x)
    c_in = weight.shape[0]
    if x.shape[1] != c_in or c_in % groups:
        raise op_error(ValueError, name, f"expected input with {c_in} channels (dim 1, divisible by groups="
                       f"{groups}), got {shape_str(x.shape)}", x, weight)
    spatial = x.shape[2:]
    sizes = tuple((n - 1) * s - 2 * p + d * (k - 1) + op + 1
                  for n, s, p, d, k, op in zip(spatial, stride, padding, dilation, kernel, output_padding))
    if any(is_static(n) and n < 1 for n in sizes):
        raise op_error(ValueError, name, f"output size {shape_str(sizes)} is too small for input "
                       f"{shape_str(x.shape)}: each must be (in - 1) * stride - 2 * padding + dilation * "
                       f"(kernel - 1) + output_padding + 1 >= 1 (stride {stride}, padding {padding}, dilation "
                       f"{dilation}, kernel {kernel}, output_padding {output_padding})", x, weight)
    for i, s in enumerate(stride):  # zeros between the elements of each spatial dim
        if s > 1:
            dim, n = 2 + i, spatial[i]
            x = x.unsqueeze(dim + 1).pad([0, 0] * (nd - 1 - i) + [0, s - 1])  # (..., n, s, ...)
            x = x.reshape(*x.shape[:dim], n * s, *x.shape[dim + 2:])
            x = x._slice_dim(dim, 0, (n - 1) * s + 1, 1)
    pads = []
    for k, d, p, op in zip(kernel, dilation, padding, output_padding):
        lo = d * (k - 1) - p
        pads.append((lo, lo + op))
    if any(lo < 0 or hi < 0 for lo, hi in pads):  # padding larger than the dilated kernel: crop
        for i, (lo, hi) in enumerate(pads):
            dim, n = 2 + i, x.shape[2 + i]
            x = x._slice_dim(dim, max(0, -lo), n - max(0, -lo) - max(0, -hi), 1)
        pads = [(max(0, lo), max(0, hi)) for lo, hi in pads]
    c_out_g = weight.shape[1]
    # (C_in, C_out/G, *K) -> (G, C_in/G, C_out/G, *K) -> (G, C_out/G, C_in/G, *K) -> (C_out, C_in/G, *K), flipped
    w = weight.reshape(groups, c_in // groups, c_out_g, *kernel).transpose(1, 2)
    w = w.reshape(groups * c_out_g, c_in // groups, *kernel).flip(*range(2, 2 + nd))
    padded = x.pad([v for lo, hi in reversed(pads) for v in (lo, hi)]) if any(lo or hi for lo, hi in pads) else x
    return _conv_nd(padded, w, bias, 1, 0, dilation, groups, name)


def _transposed_padding(padding, nd: int, name: str) -> tuple[int, ...]:
    """A transposed convolution's padding: ints only. 'same'/'valid' name the input a convolution
    reads, which a transposed one does not have; torch refuses them too (before, ``int('same')``
    failed with no op named)."""
    if isinstance(padding, str):
        raise TypeError(f"{name}: padding must be an int or {nd} ints, got {padding!r} (a transposed "
                        f"convolution takes no 'same'/'valid' padding)")
    return ntuple(padding, nd, f"{name}: padding", 0)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups: int = 1,  # noqa: A002
                     dilation=1):
    """torch's ``F.conv_transpose1d``: input (N, C_in, L) or (C_in, L), weight (C_in, C_out/groups, K).

    Args:
        input, weight, bias: tensors (bias optional, (C_out,)). stride, padding, output_padding,
        groups, dilation: as torch's.
    """
    return conv_transpose_nd(input, weight, bias, stride, padding, output_padding, groups, dilation,
                             "conv_transpose1d")


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups: int = 1,  # noqa: A002
                     dilation=1):
    """torch's ``F.conv_transpose2d``: input (N, C_in, H, W) or (C_in, H, W), weight (C_in, C_out/groups, kH, kW).

    Args:
        input, weight, bias: tensors (bias optional, (C_out,)). stride, padding, output_padding,
        groups, dilation: ints or pairs, as torch's.
    """
    return conv_transpose_nd(input, weight, bias, stride, padding, output_padding, groups, dilation,
                             "conv_transpose2d")


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups: int = 1,  # noqa: A002
                     dilation=1):
    """torch's ``F.conv_transpose3d``: input (N, C_in, D, H, W) or unbatched, weight (C_in, C_out/groups, *K).

    Args:
        input, weight, bias: tensors (bias optional). stride, padding, output_padding, groups,
        dilation: ints or triples, as torch's.
    """
    return conv_transpose_nd(input, weight, bias, stride, padding, output_padding, groups, dilation,
                             "conv_transpose3d")


class _ConvTransposeNd(Module):
    _nd = 0

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__()
        nd, name = self._nd, type(self).__name__
        in_channels, out_channels, groups = _channels(name, in_channels, out_channels, groups, padding_mode,
                                                     transposed=True)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = ntuple(kernel_size, nd, f"{name}: kernel_size", 1)
        self.stride = ntuple(stride, nd, f"{name}: stride", 1)
        self.padding = _transposed_padding(padding, nd, name)
        self.output_padding = ntuple(output_padding, nd, f"{name}: output_padding", 0)
        self.dilation = ntuple(dilation, nd, f"{name}: dilation", 1)
        self.padding_mode = padding_mode
        self.weight = param((in_channels, out_channels // groups, *self.kernel_size), dtype)
        self.bias = param((out_channels,), dtype) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch's: kaiming_uniform_(a=sqrt(5)) weight, bias uniform in +-1/sqrt(fan_in) (fan_in from dim 1)."""
        init.kaiming_uniform_(self.weight, a=5 ** 0.5)
        if self.bias is not None:
            b = init.bias_bound(self.weight.shape[1] * prod(self.kernel_size))
            init.uniform_(self.bias, -b, b)

    def _output_padding(self, x, output_size):
        """torch's ``_output_padding``: the extra right padding that gives ``output_size``."""
        if output_size is None:
            return self.output_padding
        nd = self._nd
        lead = x.ndim - nd  # torch drops the (N, C) or (C,) entries of a full size, and takes nothing else
        want = tuple(output_size)
        if len(want) not in (nd, nd + lead):
            raise ValueError(f"{layer_name(self)}: for a {x.ndim}-d input, output_size must have {nd} or "
                             f"{nd + lead} elements, got {want}")
        want = want[len(want) - nd:]
        spatial = x.shape[x.ndim - nd:]
        out = []
        for n, w, s, p, k, d in zip(spatial, want, self.stride, self.padding, self.kernel_size, self.dilation):
            lo = (n - 1) * s - 2 * p + d * (k - 1) + 1
            if not lo <= w < lo + s:
                raise ValueError(f"{layer_name(self)}: requested output_size {tuple(output_size)} is not "
                                 f"reachable: each spatial size must be in [{lo}, {lo + s - 1}]")
            out.append(w - lo)
        return tuple(out)

    @layer_forward
    def forward(self, x, output_size=None):
        name = layer_name(self)
        check_float(name, x)
        nd = self._nd
        spatial = {1: "L", 2: "H, W", 3: "D, H, W"}[nd]
        expected = f"(N, {self.in_channels}, {spatial}) or ({self.in_channels}, {spatial})"
        if x.ndim not in (nd + 1, nd + 2) or x.shape[x.ndim - nd - 1] != self.in_channels:
            raise bad_input(name, expected, x)
        g = x.graph
        return conv_transpose_nd(x, self.weight.on(g), self.bias.on(g) if self.bias is not None else None,
                                 self.stride, self.padding, self._output_padding(x, output_size), self.groups,
                                 self.dilation, name)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self._nd:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self._nd:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self._nd:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + ("" if self.bias is not None else ", bias=False")


class ConvTranspose1d(_ConvTransposeNd):
    """torch's ``nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride=1, padding=0,
    output_padding=0, groups=1, bias=True, dilation=1, padding_mode='zeros')``; ``weight`` is
    (in_channels, out_channels/groups, kernel_size). ``forward(input, output_size=None)``.

    Args:
        in_channels, out_channels, kernel_size, stride, padding, output_padding: as torch's.
        groups, bias, dilation, padding_mode ('zeros' only), device (ignored), dtype: as torch's.
    """

    _nd = 1


class ConvTranspose2d(_ConvTransposeNd):
    """torch's ``nn.ConvTranspose2d``; ``weight`` is (in_channels, out_channels/groups, kH, kW).

    Args:
        in_channels, out_channels, kernel_size, stride, padding, output_padding: as torch's.
        groups, bias, dilation, padding_mode ('zeros' only), device (ignored), dtype: as torch's.
    """

    _nd = 2


class ConvTranspose3d(_ConvTransposeNd):
    """torch's ``nn.ConvTranspose3d``; ``weight`` is (in_channels, out_channels/groups, kD, kH, kW).

    Args:
        in_channels, out_channels, kernel_size, stride, padding, output_padding: as torch's.
        groups, bias, dilation, padding_mode ('zeros' only), device (ignored), dtype: as torch's.
    """

    _nd = 3

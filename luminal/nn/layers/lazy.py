"""torch's lazy modules: ``LazyLinear``, ``LazyConv1d/2d/3d``, ``LazyConvTranspose1d/2d/3d``,
``LazyBatchNorm1d/2d/3d`` and ``LazyInstanceNorm1d/2d/3d``, whose ``in_features`` / ``in_channels`` /
``num_features`` come from the first input they are called on, and ``UninitializedParameter`` /
``UninitializedBuffer``, what they hold until then.

As torch's: the first call (here: when a graph is built from the module, the input's shape being known
then) materialises the parameters and buffers with that size and the initialisation of the module the
lazy one becomes (``cls_to_become``: Linear's kaiming-uniform, BatchNorm's ones and zeros), and the
module then *is* that module (its class changes). The Parameter objects stay the same objects (their
class changes to Parameter), so an optimizer made over ``parameters()`` before the first call trains
them, as torch's does; its state is made when the training step is built, after the forward that
materialises them. ``load_state_dict`` into an uninitialised module materialises each parameter with
the checkpoint's shape (a load pre-hook, as torch's ``_lazy_load_hook``).

Before the first call an uninitialised parameter has no shape or values: reading ``.data``, ``.shape``
or using it in a graph raises, naming what to do (torch's raise too). So ``state_dict()`` of an
uninitialised module raises here, where torch's returns the UninitializedParameter objects (whose
every use raises): luminal's state_dict holds arrays. ``state_dict(keep_vars=True)`` gives the objects,
as torch's.
"""

from __future__ import annotations

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import op_error
from luminal.core.symbolic import is_static, shape_str
from luminal.nn.layers._util import buffer
from luminal.nn.layers.conv import (
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
)
from luminal.nn.layers.instance_norm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from luminal.nn.layers.linear import Linear
from luminal.nn.layers.norm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from luminal.nn.parameter import Buffer, Parameter


class _Uninitialized:
    """What UninitializedParameter and UninitializedBuffer share: a dtype and no shape or values yet;
    ``materialize(shape)`` gives them (zeros) and makes the object a Parameter / Buffer."""

    cls_to_become: type = Parameter

    def _refuse(self, what: str):
        return ValueError(f"{self.describe()}: cannot {what} an uninitialized parameter or buffer of a lazy module "
                          f"(nn.LazyLinear, ...): it has no shape or values until the module is first called on an "
                          f"input, which sets its size; call the module on a graph tensor of the input's shape first")

    def materialize(self, shape, device=None, dtype=None) -> None:
        """torch's: give the parameter ``shape`` (zero-filled; the module's ``reset_parameters`` fills it)
        and make it a Parameter (a Buffer), the same object.

        Args:
            shape: the shape. device: ignored (arrays live on the host). dtype: its dtype (default the one
                given when it was made).
        """
        d = self.dtype if dtype is None else dt.as_dtype(dtype)
        self._replace(np.zeros(tuple(int(s) for s in shape), d.np), d)
        self.__class__ = self.cls_to_become

    def describe(self) -> str:
        """A short description for messages: the class, the name, "(uninitialized)" and the dtype."""
        return f"{type(self).__name__} {self.name or '(unnamed)'} (uninitialized) {self.dtype.name}"

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name!r} dtype={self.dtype.name}>"

    def _refused(what: str, prop: bool = False):  # (a class-body helper, deleted below)
        def refuse(self, *args, **kwargs):
            raise self._refuse(what)

        refuse.__doc__ = f"Refused (a ValueError) until the module's first call gives it a shape: cannot {what} it."
        return property(refuse, refuse, doc=refuse.__doc__) if prop else refuse

    data = _refused("read or assign the values (.data, state_dict) of", prop=True)
    shape = _refused("take the shape of", prop=True)
    ndim = _refused("take the shape of", prop=True)
    numel = _refused("count the elements of")
    size = _refused("take the size of")
    dim = _refused("take the shape of")
    set = _refused("set")
    prepared = _refused("load a value into")
    __array__ = _refused("read the values of")
    on = _refused("use in a graph")
    del _refused


class UninitializedParameter(_Uninitialized, Parameter):
    """torch's ``nn.UninitializedParameter(requires_grad=True, device=None, dtype=None)``: a parameter of
    a lazy module before its first call, with a dtype but no shape or values (see the module docstring).

    Args:
        requires_grad: whether it trains. device: ignored. dtype: its dtype (float32 by default).
    """

    cls_to_become = Parameter

    def __init__(self, requires_grad: bool = True, device=None, dtype=None):
        d = dt.as_dtype(dtype or dt.float32)
        super().__init__(np.zeros((0,), d.np), d, requires_grad)


class UninitializedBuffer(_Uninitialized, Buffer):
    """torch's ``nn.UninitializedBuffer(requires_grad=False, device=None, dtype=None, persistent=True)``:
    a buffer of a lazy module (BatchNorm's running statistics) before its first call.

    Args:
        requires_grad: must be False (buffers do not train). device: ignored. dtype: its dtype.
        persistent: whether ``state_dict`` saves it.
    """

    cls_to_become = Buffer

    def __init__(self, requires_grad: bool = False, device=None, dtype=None, persistent: bool = True):
        if requires_grad:
            raise ValueError("UninitializedBuffer: requires_grad=True is not supported (luminal's buffers do not "
                             "train; make it an UninitializedParameter)")
        d = dt.as_dtype(dtype or dt.float32)
        super().__init__(np.zeros((0,), d.np), d, persistent)


def _is_lazy(st) -> bool:
    return isinstance(st, _Uninitialized)


class LazyModuleMixin:
    """torch's ``nn.modules.lazy.LazyModuleMixin``: a module whose parameters are materialised by its
    first call (a forward pre-hook running ``initialize_parameters(*args)``), which then becomes
    ``cls_to_become``; a load pre-hook materialises them with a checkpoint's shapes."""

    cls_to_become: type | None = None

    def _lazy_setup(self) -> None:
        """Register the hooks, kept by their ids (which copies share; a handle's weak reference is not
        copied with the module, nor pickled)."""
        self._lazy_hooks = (self.register_forward_pre_hook(_infer_parameters, with_kwargs=True).id,
                            self._register_load_state_dict_pre_hook(_lazy_load_hook, with_module=True).id)

    def has_uninitialized_params(self) -> bool:
        """Whether any of this module's own parameters or buffers is still uninitialized."""
        return any(_is_lazy(s) for s in (*self._parameters.values(), *self._buffers.values()))

    def initialize_parameters(self, *args, **kwargs) -> None:
        """Materialise the parameters from the first call's arguments (each lazy module defines it)."""
        raise NotImplementedError(f"{type(self).__name__}: initialize_parameters is not defined")

    def _lazy_size(self, x, dim: int, what: str) -> int:
        """``x.shape[dim]``, the size the parameters take: it must be known when the graph is built."""
        n = x.shape[dim]
        if not is_static(n):
            raise op_error(ValueError, type(self).__name__, f"infers {what} from the first input's dim {dim}, which "
                           f"must be a fixed size, got {shape_str(x.shape)}", x)
        return int(n)

    def _reset_if_ready(self, count: int) -> None:
        """torch's lazy ``reset_parameters``: nothing while a parameter is uninitialized or the size is
        still 0 (materialised by a load: the load's values are kept); else the layer's own."""
        if "_lazy_hooks" in self.__dict__ and not self.has_uninitialized_params() and count != 0:
            self.cls_to_become.reset_parameters(self)


def _infer_parameters(module, args, kwargs):
    """The forward pre-hook: materialise, then stop being lazy (the hooks removed, the class changed)."""
    module.initialize_parameters(*args, **kwargs)
    if module.has_uninitialized_params():
        raise RuntimeError(f"module {type(module).__name__} has not been fully initialized")
    pre, load = module._lazy_hooks
    module._forward_pre_hooks.pop(pre, None)
    module._load_state_dict_pre_hooks.pop(load, None)
    del module._lazy_hooks
    if module.cls_to_become is not None:
        module.__class__ = module.cls_to_become


def _lazy_load_hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
    """torch's ``_lazy_load_hook``: an uninitialized parameter or buffer the checkpoint has takes the
    checkpoint's shape (zeros, which the load then overwrites)."""
    for name, st in (*module._parameters.items(), *module._buffers.items()):
        key = prefix + name
        if key in state_dict and _is_lazy(st):
            st.materialize(np.shape(state_dict[key]))


def _not_lazy(module, x, size: int, what: str) -> None:
    """After a load materialised the parameters (the size still 0), the input must fit them."""
    if size != getattr(module, what):
        raise op_error(ValueError, type(module).__name__, f"the {what} inferred from the input ({size}) is not the "
                       f"{what} of the loaded parameters ({getattr(module, what)}), got {shape_str(x.shape)}", x)


class LazyLinear(LazyModuleMixin, Linear):
    """torch's ``nn.LazyLinear(out_features, bias=True, device=None, dtype=None)``: a Linear whose
    ``in_features`` is the first input's last dim; it becomes a Linear then.

    Args:
        out_features: the output size. bias: learn a bias. device: ignored. dtype: the parameters' dtype.
    """

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__(0, out_features, False, device, dtype)
        self.weight = UninitializedParameter(dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)
        self._lazy_setup()

    def reset_parameters(self) -> None:
        """torch's: Linear's initialisation once the parameters are materialised, else nothing."""
        self._reset_if_ready(self.in_features)

    def initialize_parameters(self, input) -> None:  # noqa: A002
        """Take ``in_features`` from the input's last dim and materialise the parameters (torch's init).

        Args:
            input: the first input, (*, in_features).
        """
        if input.ndim == 0:
            raise op_error(ValueError, "LazyLinear", "expected an input (*, in_features), got a 0-d tensor", input)
        n = self._lazy_size(input, -1, "in_features")
        if self.has_uninitialized_params():
            self.in_features = n
            self.weight.materialize((self.out_features, n))
            if self.bias is not None:
                self.bias.materialize((self.out_features,))
            self.reset_parameters()
        elif self.in_features == 0:  # (materialised by a load)
            self.in_features = self.weight.shape[-1]
            _not_lazy(self, input, n, "in_features")


class _LazyConvMixin(LazyModuleMixin):
    """torch's ``_LazyConvXdMixin``: ``in_channels`` from the first input, (N, C, *spatial) or
    unbatched (C, *spatial)."""

    _transposed = False

    def _lazy_conv_init(self, bias: bool, dtype) -> None:
        self.in_channels = 0
        self.weight = UninitializedParameter(dtype=dtype)
        self.bias = UninitializedParameter(dtype=dtype) if bias else None
        self._lazy_setup()

    def reset_parameters(self) -> None:
        """torch's: the convolution's initialisation once the parameters are materialised, else nothing."""
        self._reset_if_ready(self.in_channels)

    def _weight_shape(self, c: int) -> tuple[int, ...]:
        if self._transposed:
            return (c, self.out_channels // self.groups, *self.kernel_size)
        return (self.out_channels, c // self.groups, *self.kernel_size)

    def initialize_parameters(self, input, *args, **kwargs) -> None:  # noqa: A002
        """Take ``in_channels`` from the input and materialise the parameters (torch's init).

        Args:
            input: the first input, (N, C, *spatial) or (C, *spatial).
        """
        name, nd = type(self).__name__, self._nd
        if input.ndim not in (nd + 1, nd + 2):
            raise op_error(ValueError, name, f"expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input, got "
                           f"{shape_str(input.shape)}", input)
        c = self._lazy_size(input, input.ndim - nd - 1, "in_channels")
        if self.has_uninitialized_params():
            if c % self.groups:
                raise op_error(ValueError, name, f"in_channels must be divisible by groups: the input has {c} "
                               f"channels and groups={self.groups}", input)
            self.in_channels = c
            self.weight.materialize(self._weight_shape(c))
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()
        elif self.in_channels == 0:  # (materialised by a load)
            w = self.weight.shape
            self.in_channels = w[0] if self._transposed else w[1] * self.groups
            _not_lazy(self, input, c, "in_channels")


def _lazy_conv(base: type, transposed: bool) -> type:
    """The lazy form of the convolution layer ``base``: torch's signature without ``in_channels``."""

    if transposed:
        def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0, groups: int = 1,
                     bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None, dtype=None):
            base.__init__(self, groups, out_channels, kernel_size, stride, padding, output_padding, groups, False,
                          dilation, padding_mode, device, dtype)
            self._lazy_conv_init(bias, dtype)
        sig = ("out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True, dilation=1, "
               "padding_mode='zeros', device=None, dtype=None")
    else:
        def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1,
                     bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None):
            base.__init__(self, groups, out_channels, kernel_size, stride, padding, dilation, groups, False,
                          padding_mode, device, dtype)
            self._lazy_conv_init(bias, dtype)
        sig = ("out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True, "
               "padding_mode='zeros', device=None, dtype=None")
    name = f"Lazy{base.__name__}"
    doc = (f"torch's ``nn.{name}({sig})``: a {base.__name__} whose ``in_channels`` is the first input's channel "
           f"count; it becomes a {base.__name__} then.\n\n    Args:\n        out_channels, kernel_size, ...: as "
           f"{base.__name__}'s (device ignored).\n    ")
    __init__.__doc__ = doc
    return type(name, (_LazyConvMixin, base), {"__init__": __init__, "__doc__": doc, "cls_to_become": base,
                                               "_transposed": transposed, "__module__": __name__,
                                               "__qualname__": name})


LazyConv1d = _lazy_conv(Conv1d, False)
LazyConv2d = _lazy_conv(Conv2d, False)
LazyConv3d = _lazy_conv(Conv3d, False)
LazyConvTranspose1d = _lazy_conv(ConvTranspose1d, True)
LazyConvTranspose2d = _lazy_conv(ConvTranspose2d, True)
LazyConvTranspose3d = _lazy_conv(ConvTranspose3d, True)


class _LazyNormMixin(LazyModuleMixin):
    """torch's ``_LazyNormBase``: ``num_features`` from the first input's channels, and torch's lazy
    defaults (``affine=True, track_running_stats=True``, for the instance norms too)."""

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True):
        self.cls_to_become.__init__(self, 1, eps, momentum, False, False, dtype=dtype, bias=False)
        self.num_features, self.affine, self.track_running_stats = 0, affine, track_running_stats
        if affine:
            self.weight = UninitializedParameter(dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(dtype=dtype)
            self.running_var = UninitializedBuffer(dtype=dtype)
            self.num_batches_tracked = buffer(0, dt.int32)
        self._lazy_setup()

    def reset_parameters(self) -> None:
        """torch's: the norm's initialisation once materialised (running statistics 0 and 1, weight 1,
        bias 0), else nothing."""
        self._reset_if_ready(self.num_features)

    def initialize_parameters(self, input) -> None:  # noqa: A002
        """Take ``num_features`` from the input's channels and materialise the parameters and buffers.

        Args:
            input: the first input, of one of the layer's ranks (an unbatched instance-norm input's
                channels are its dim 0; torch's take dim 1 there, which fails).
        """
        name = type(self).__name__
        if input.ndim not in self._ranks:
            raise op_error(ValueError, name, f"expected an input {self._layout.format(C='C')}, got "
                           f"{shape_str(input.shape)}", input)
        unbatched = issubclass(self.cls_to_become, _INSTANCE) and input.ndim == self._ranks[0]
        c = self._lazy_size(input, 0 if unbatched else 1, "num_features")
        if self.has_uninitialized_params():
            self.num_features = c
            for st in (self.weight, self.bias, self.running_mean, self.running_var):
                if st is not None:
                    st.materialize((c,))
            self.reset_parameters()
        elif self.num_features == 0:  # materialised by a load, or nothing to materialise
            loaded = [s for s in (self.weight, self.running_mean) if s is not None]
            # (affine=False, track_running_stats=False: torch's keeps num_features 0, which luminal's
            # BatchNorm would check the input's channels against)
            self.num_features = loaded[0].shape[0] if loaded else c
            _not_lazy(self, input, c, "num_features")


_INSTANCE = (InstanceNorm1d, InstanceNorm2d, InstanceNorm3d)


def _lazy_norm(base: type) -> type:
    name = f"Lazy{base.__name__}"
    doc = (f"torch's ``nn.{name}(eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, "
           f"dtype=None, *, bias=True)``: a {base.__name__} whose ``num_features`` is the first input's channel "
           f"count; it becomes a {base.__name__} then.\n\n    Args:\n        eps, momentum, affine, "
           f"track_running_stats, dtype, bias: as {base.__name__}'s (torch's lazy defaults). device: ignored.\n    ")
    return type(name, (_LazyNormMixin, base), {"__doc__": doc, "cls_to_become": base, "__module__": __name__,
                                               "__qualname__": name})


LazyBatchNorm1d = _lazy_norm(BatchNorm1d)
LazyBatchNorm2d = _lazy_norm(BatchNorm2d)
LazyBatchNorm3d = _lazy_norm(BatchNorm3d)
LazyInstanceNorm1d = _lazy_norm(InstanceNorm1d)
LazyInstanceNorm2d = _lazy_norm(InstanceNorm2d)
LazyInstanceNorm3d = _lazy_norm(InstanceNorm3d)

"""torch's in-place tensor methods (``x.add_(y)``, ``x.clamp_(0, 1)``, ``x.zero_()``) on lazy handles.

A GraphTensor is a handle on a graph value, not storage, so an in-place method cannot overwrite
anything: it builds the out-of-place op's result and rebinds the handle to it, as ``x[i] = v`` does
(``indexing.setitem``), and returns the handle, so ``x.mul_(2).add_(1)`` chains and ``y = x.add_(1)``
is ``x``. Other handles keep what they named: a view taken before (``v = x[0]``) keeps the old values,
and an in-place op on a view (``x[0].add_(1)``) rebinds only that temporary handle, never ``x``
(``docs/porting.md``); but a Parameter or Buffer is storage: outside any graph its basic-indexed view
(``state_tensor.StateView``: ``emb.weight[pad].zero_()``) writes its result into it, as torch's view
does. Gradients are those of the out-of-place op, which are torch's for its in-place
op (torch differentiates ``x.clone().mul_(2)`` as ``x * 2``).

As in torch, the result keeps the tensor's dtype and shape: a result of a higher kind (bool < int <
float: ``int_x.mul_(1.5)``) is refused, as torch's "result type Float can't be cast to the desired
output type Int"; a lower or narrower one is cast back (``half_x.add_(float_y)`` stays float16); a
result broadcast to another shape is refused. ``fill_``, ``zero_`` and ``copy_`` convert their value
to the tensor's dtype, as torch's do.

One mechanism serves every method: ``INPLACE`` names the out-of-place op each writes back, ``RANDOM``
the random fill (``x.normal_()``: ``random.py``). A
Parameter or Buffer (a State, host values) takes the same methods from :func:`install`: outside any
graph (``__init__``, a script: torch's ``with torch.no_grad(): w.mul_(0.5)``) they change its values
now; inside a graph, where a State is only read, they are refused with the way to do it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import check_number, op_error, renamed
from luminal.core.symbolic import shape_str
from luminal.frontend import join
from luminal.frontend.checks import check_tensors
from luminal.frontend.eager import eager_only
from luminal.frontend.host import value as host_value
from luminal.frontend.ops import random
from luminal.frontend.ops.core import cast, check_fill
from luminal.frontend.state import State
from luminal.frontend.state_tensor import StateView
from luminal.frontend.tensor import GraphTensor


def _fill(x: GraphTensor, value) -> GraphTensor:
    """``value`` (a number, or a 0-d tensor, which receives the gradient) at every position"""
    if isinstance(value, GraphTensor):
        check_tensors("fill_", input=x, value=value)
        if value.ndim != 0:
            raise op_error(ValueError, "fill_", f"value must be a number or a 0-d tensor, got shape "
                           f"{shape_str(value.shape)}", x, value)
        v = value
    else:
        check_fill("fill_", check_number("fill_", "value", value, x), x.dtype, x)
        v = x.graph.constant(value)
    return cast(v, x.dtype).expand(*x.shape)


def _zero(x: GraphTensor) -> GraphTensor:
    """zeros"""
    return _fill(x, 0)


def _copy(x: GraphTensor, src, non_blocking: bool = False) -> GraphTensor:
    """``src`` (a tensor, which receives the gradient, or a numpy array) broadcast to the tensor's shape"""
    if isinstance(src, np.ndarray):
        src = x.graph.constant(src)
    if not isinstance(src, GraphTensor):
        raise op_error(TypeError, "copy_", f"src must be a tensor or a numpy array, got {type(src).__name__}", x)
    check_tensors("copy_", input=x, src=src)
    try:
        return cast(src, x.dtype).expand(*x.shape)
    except ValueError:
        raise op_error(ValueError, "copy_", f"src of shape {shape_str(src.shape)} does not broadcast to the tensor's "
                       f"shape {shape_str(x.shape)}", x, src) from None


# in-place method -> the out-of-place op it writes back (a GraphTensor method's name, or a function above)
INPLACE: dict[str, str | Callable[..., GraphTensor]] = {
    "add_": "add", "sub_": "sub", "subtract_": "sub", "mul_": "mul", "multiply_": "mul", "div_": "div",
    "divide_": "div", "true_divide_": "div", "pow_": "pow", "fmod_": "fmod", "remainder_": "remainder",
    "floor_divide_": "floor_divide", "neg_": "neg", "negative_": "neg", "abs_": "abs", "absolute_": "abs",
    "square_": "square", "reciprocal_": "reciprocal", "sign_": "sign", "clamp_": "clamp", "clip_": "clamp",
    "clamp_min_": "clamp_min", "clamp_max_": "clamp_max", "lerp_": "lerp", "addcmul_": "addcmul",
    "addcdiv_": "addcdiv", "hypot_": "hypot", "copysign_": "copysign", "xlogy_": "xlogy", "atan2_": "atan2",
    "arctan2_": "atan2", "nan_to_num_": "nan_to_num",
    "exp_": "exp", "exp2_": "exp2", "expm1_": "expm1", "log_": "log", "log2_": "log2", "log10_": "log10",
    "log1p_": "log1p", "sqrt_": "sqrt", "rsqrt_": "rsqrt", "sin_": "sin", "cos_": "cos", "tan_": "tan",
    "sinh_": "sinh", "cosh_": "cosh", "asin_": "asin", "acos_": "acos", "atan_": "atan", "asinh_": "asinh",
    "acosh_": "acosh", "atanh_": "atanh", "arcsin_": "asin", "arccos_": "acos", "arctan_": "atan",
    "floor_": "floor", "ceil_": "ceil", "round_": "round", "trunc_": "trunc", "fix_": "trunc", "erf_": "erf",
    "erfc_": "erfc", "logit_": "logit", "deg2rad_": "deg2rad", "rad2deg_": "rad2deg", "relu_": "relu",
    "sigmoid_": "sigmoid", "tanh_": "tanh",
    "eq_": "eq", "ne_": "ne", "lt_": "lt", "le_": "le", "gt_": "gt", "ge_": "ge", "logical_and_": "logical_and",
    "logical_or_": "logical_or", "logical_xor_": "logical_xor", "logical_not_": "logical_not",
    "bitwise_and_": "bitwise_and", "bitwise_or_": "bitwise_or", "bitwise_xor_": "bitwise_xor",
    "bitwise_not_": "bitwise_not", "bitwise_left_shift_": "bitwise_left_shift",
    "bitwise_right_shift_": "bitwise_right_shift",
    "tril_": "tril", "triu_": "triu", "masked_fill_": "masked_fill", "scatter_": "scatter",
    "scatter_add_": "scatter_add", "scatter_reduce_": "scatter_reduce", "index_add_": "index_add",
    "index_copy_": "index_copy", "index_put_": "index_put", "index_fill_": "index_fill",
    "index_reduce_": "index_reduce", "masked_scatter_": "masked_scatter", "put_": "put", "cumsum_": "cumsum",
    "cumprod_": "cumprod",
    "detach_": "detach", "fill_": _fill, "zero_": _zero, "copy_": _copy,
    # views: the handle takes the new shape (the only in-place methods that change it)
    "squeeze_": "squeeze", "unsqueeze_": "unsqueeze", "t_": "t", "transpose_": "transpose", "swapaxes_": "transpose",
}
RESHAPING = frozenset({"squeeze_", "unsqueeze_", "t_", "transpose_", "swapaxes_"})
# torch's in-place random fills (random.py): the tensor takes fresh noise of its shape and dtype, drawn on
# every call of a compiled program; they write back as the methods above (a separate table: they have no
# out-of-place op, no values or gradients to compare with torch's, and a dtype rule of their own)
RANDOM: dict[str, Callable[..., GraphTensor]] = {
    "normal_": random.normal_fill, "uniform_": random.uniform_fill, "exponential_": random.exponential_fill,
    "bernoulli_": random.bernoulli_fill, "random_": random.random_fill, "geometric_": random.geometric_fill,
    "cauchy_": random.cauchy_fill, "log_normal_": random.log_normal_fill,
}


def _written_back(x: GraphTensor, new: GraphTensor, name: str) -> GraphTensor:
    """``new`` as the value ``x`` may take: torch's in-place dtype rule (module docstring) and shape."""
    if new.dtype is not x.dtype:
        if dt.kind_rank(new.dtype) > dt.kind_rank(x.dtype):
            raise op_error(TypeError, name, f"result type {new.dtype.name} can't be cast to the tensor's dtype "
                           f"{x.dtype.name}: an in-place op keeps the tensor's dtype, as torch's; cast first "
                           f"(x = x.to(lm.{new.dtype.name})) or use the out-of-place op", x)
        new = cast(new, x.dtype)
    if name not in RESHAPING and tuple(new.shape) != tuple(x.shape):
        raise op_error(ValueError, name, f"the result has shape {shape_str(new.shape)}, the tensor "
                       f"{shape_str(x.shape)}: an in-place op cannot change the tensor's shape (as torch's: "
                       f"the other operands must broadcast to it)", x)
    return new


def _tensor_method(name: str, op: Callable[..., GraphTensor]):
    rename = renamed(name)

    def method(self: GraphTensor, *args, **kwargs) -> GraphTensor:
        with rename:
            new = _written_back(self, op(self, *args, **kwargs), name)
            if isinstance(self, StateView):  # (torch's view of a Parameter: its storage)
                if name in RESHAPING:
                    self.index = host_value(self.follow(INPLACE[name], args, kwargs), name)
                else:
                    self.write(host_value(new, name))
        self.graph, self.node, self.layout = new.graph, new.node, new.layout
        return self

    base = {**INPLACE, **RANDOM}[name]
    what = (f"``self.{base}(...)`` in the tensor's dtype (a result of a higher kind is refused, as torch's)"
            if isinstance(base, str) else f"{op.__doc__} in the tensor's dtype")
    method.__name__ = method.__qualname__ = name
    method.__doc__ = (f"torch ``Tensor.{name}`` on a lazy handle: this handle is rebound to {what}, and "
                      f"returned, so calls chain. Other handles, views taken before included, keep the old "
                      f"value, as after ``x[i] = v`` (``frontend/ops/inplace.py``).")
    try:
        sig = inspect.signature(op)
        method.__signature__ = sig.replace(return_annotation="GraphTensor")  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        pass
    return method


def _state_method(name: str):
    def method(self: State, *args, **kwargs) -> State:
        g = join.target(name, (self, *args), kwargs, host_ok=True)
        if not g.host:
            base = INPLACE.get(name, name)
            instead = (f"use the out-of-place op (w.{base if isinstance(base, str) else name}(...))" if name in INPLACE
                       else "draw noise of its shape (lm.randn_like(w), lm.randint_like(w, n), w.bernoulli(p))")
            raise eager_only(name, f"{self.describe()} is read into a graph here, and a graph cannot change a "
                             f"Parameter or Buffer: its values change between runs (train.compile_step updates "
                             f"Parameters; graph.assign(buffer, value) writes a Buffer after each run, as "
                             f"BatchNorm's running statistics). For a new value in this graph {instead}; outside "
                             f"any graph (__init__, a script) w.{name}(...) changes the values now")
        if name in RESHAPING:  # (graphs, optimizer moments and checkpoints hold its shape)
            raise op_error(ValueError, name, f"{self.describe()}: a Parameter's or Buffer's shape is fixed; use "
                           f"the view w.{INPLACE[name]}(...) where it is used")
        t = join.into(self, g)
        getattr(GraphTensor, name)(t, *args, **kwargs)
        self.set(host_value(t, name))
        return self

    method.__name__ = method.__qualname__ = name
    method.__doc__ = (f"torch ``Tensor.{name}`` on a Parameter or Buffer outside any graph: its values are "
                      f"changed now, in place (torch's ``with torch.no_grad(): w.{name}(...)``); returns it. "
                      f"Inside a graph, where a State is only read, an EagerOnlyError names the way.")
    return method


def install() -> None:
    """Give GraphTensor and State every method of ``INPLACE`` (after GraphTensor has the out-of-place
    ones, before ``state_tensor.install`` gives State the rest: a State's own in-place methods change
    its values, where GraphTensor's would rebind a temporary handle and leave the State as it was)."""
    for name, op in {**INPLACE, **RANDOM}.items():
        fn = getattr(GraphTensor, op) if isinstance(op, str) else join.joins(op, name)  # (methods join already)
        setattr(GraphTensor, name, _tensor_method(name, fn))
        setattr(State, name, _state_method(name))

"""torch's in-place tensor methods (``frontend/ops/inplace.py``): every one matches torch's values and
gradients (torch differentiating ``x.clone().op_(...)``, the same code run on both sides), keeps the
tensor's dtype and shape as torch's does (refusing what torch refuses), and rebinds only the handle it
is called on, as ``x[i] = v`` does; on a Parameter or Buffer outside any graph it changes the values
now, and inside a graph it is refused naming the way."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from parity import check, rand

import luminal as lm
from luminal import nn
from luminal.frontend.eager import EagerOnlyError
from luminal.frontend.ops.inplace import INPLACE

F32, I32 = lm.float32, lm.int32


def pos(shape, seed=0):
    return rand(shape, seed=seed, low=0.2, high=2.0)


def unit(shape, seed=0):
    return rand(shape, seed=seed, low=-0.9, high=0.9)


def ints(shape, seed=0, low=-8, high=8):
    return rand(shape, I32, seed=seed, low=low, high=high)


def idx(*rows):
    return np.array(rows, np.int32)


X, Y = (2, 3), (2, 3)
# in-place method -> (the same code for luminal and torch, on a clone of the first input; the inputs)
CASES = {
    "add_": (lambda x, y: x.clone().add_(y, alpha=2), [rand(X), rand(Y, seed=1)]),
    "sub_": (lambda x, y: x.clone().sub_(y), [rand(X), rand((3,), seed=1)]),
    "subtract_": (lambda x: x.clone().subtract_(1.5), [rand(X)]),
    "mul_": (lambda x, y: x.clone().mul_(y), [rand(X), rand(Y, seed=1)]),
    "multiply_": (lambda x: x.clone().multiply_(3), [rand(X)]),
    "div_": (lambda x, y: x.clone().div_(y), [rand(X), pos(Y, 1)]),
    "divide_": (lambda x: x.clone().divide_(4.0), [rand(X)]),
    "true_divide_": (lambda x, y: x.clone().true_divide_(y), [rand(X), pos(Y, 1)]),
    "pow_": (lambda x, y: x.clone().pow_(y), [pos(X), rand(Y, seed=1)]),
    "fmod_": (lambda x: x.clone().fmod_(0.7), [rand(X)]),
    "remainder_": (lambda x: x.clone().remainder_(0.7), [rand(X)]),
    "floor_divide_": (lambda x, y: x.clone().floor_divide_(y), [ints(X), ints(Y, 1, 1, 4)]),
    "neg_": (lambda x: x.clone().neg_(), [rand(X)]),
    "negative_": (lambda x: x.clone().negative_(), [ints(X)]),
    "abs_": (lambda x: x.clone().abs_(), [rand(X)]),
    "absolute_": (lambda x: x.clone().absolute_(), [rand(X)]),
    "square_": (lambda x: x.clone().square_(), [rand(X)]),
    "reciprocal_": (lambda x: x.clone().reciprocal_(), [pos(X)]),
    "sign_": (lambda x: x.clone().sign_(), [rand(X)]),
    "clamp_": (lambda x: x.clone().clamp_(-0.5, 0.7), [rand(X)]),
    "clip_": (lambda x: x.clone().clip_(min=-0.5), [rand(X)]),
    "clamp_min_": (lambda x: x.clone().clamp_min_(0.1), [rand(X)]),
    "clamp_max_": (lambda x: x.clone().clamp_max_(0.1), [rand(X)]),
    "lerp_": (lambda x, y, w: x.clone().lerp_(y, w), [rand(X), rand(Y, seed=1), unit(Y, 2)]),
    "addcmul_": (lambda x, a, b: x.clone().addcmul_(a, b, value=0.5), [rand(X), rand(Y, seed=1), rand(Y, seed=2)]),
    "addcdiv_": (lambda x, a, b: x.clone().addcdiv_(a, b, value=0.5), [rand(X), rand(Y, seed=1), pos(Y, 2)]),
    "hypot_": (lambda x, y: x.clone().hypot_(y), [rand(X), rand(Y, seed=1)]),
    "copysign_": (lambda x, y: x.clone().copysign_(y), [rand(X), rand(Y, seed=1)]),
    "xlogy_": (lambda x, y: x.clone().xlogy_(y), [rand(X), pos(Y, 1)]),
    "atan2_": (lambda x, y: x.clone().atan2_(y), [rand(X), pos(Y, 1)]),
    "arctan2_": (lambda x, y: x.clone().arctan2_(y), [rand(X), pos(Y, 1)]),
    "nan_to_num_": (lambda x: x.clone().nan_to_num_(nan=0.5), [rand(X)]),
    "exp_": (lambda x: x.clone().exp_(), [rand(X)]),
    "exp2_": (lambda x: x.clone().exp2_(), [rand(X)]),
    "expm1_": (lambda x: x.clone().expm1_(), [rand(X)]),
    "log_": (lambda x: x.clone().log_(), [pos(X)]),
    "log2_": (lambda x: x.clone().log2_(), [pos(X)]),
    "log10_": (lambda x: x.clone().log10_(), [pos(X)]),
    "log1p_": (lambda x: x.clone().log1p_(), [pos(X)]),
    "sqrt_": (lambda x: x.clone().sqrt_(), [pos(X)]),
    "rsqrt_": (lambda x: x.clone().rsqrt_(), [pos(X)]),
    "sin_": (lambda x: x.clone().sin_(), [rand(X)]),
    "cos_": (lambda x: x.clone().cos_(), [rand(X)]),
    "tan_": (lambda x: x.clone().tan_(), [unit(X)]),
    "sinh_": (lambda x: x.clone().sinh_(), [rand(X)]),
    "cosh_": (lambda x: x.clone().cosh_(), [rand(X)]),
    "asin_": (lambda x: x.clone().asin_(), [unit(X)]),
    "acos_": (lambda x: x.clone().acos_(), [unit(X)]),
    "atan_": (lambda x: x.clone().atan_(), [rand(X)]),
    "asinh_": (lambda x: x.clone().asinh_(), [rand(X)]),
    "acosh_": (lambda x: x.clone().acosh_(), [pos(X) + 1]),
    "atanh_": (lambda x: x.clone().atanh_(), [unit(X)]),
    "arcsin_": (lambda x: x.clone().arcsin_(), [unit(X)]),
    "arccos_": (lambda x: x.clone().arccos_(), [unit(X)]),
    "arctan_": (lambda x: x.clone().arctan_(), [rand(X)]),
    "floor_": (lambda x: x.clone().floor_(), [rand(X)]),
    "ceil_": (lambda x: x.clone().ceil_(), [rand(X)]),
    "round_": (lambda x: x.clone().round_(), [rand(X)]),
    "trunc_": (lambda x: x.clone().trunc_(), [rand(X)]),
    "fix_": (lambda x: x.clone().fix_(), [rand(X)]),
    "erf_": (lambda x: x.clone().erf_(), [rand(X)]),
    "erfc_": (lambda x: x.clone().erfc_(), [rand(X)]),
    "logit_": (lambda x: x.clone().logit_(), [rand(X, low=0.1, high=0.9)]),
    "deg2rad_": (lambda x: x.clone().deg2rad_(), [rand(X)]),
    "rad2deg_": (lambda x: x.clone().rad2deg_(), [rand(X)]),
    "relu_": (lambda x: x.clone().relu_(), [rand(X)]),
    "sigmoid_": (lambda x: x.clone().sigmoid_(), [rand(X)]),
    "tanh_": (lambda x: x.clone().tanh_(), [rand(X)]),
    "eq_": (lambda x, y: x.clone().eq_(y), [ints(X, 0, -1, 1), ints(Y, 1, -1, 1)]),
    "ne_": (lambda x: x.clone().ne_(0), [ints(X, 0, -1, 1)]),
    "lt_": (lambda x, y: x.clone().lt_(y), [rand(X), rand(Y, seed=1)]),
    "le_": (lambda x: x.clone().le_(0.0), [rand(X)]),
    "gt_": (lambda x, y: x.clone().gt_(y), [ints(X), ints(Y, 1)]),
    "ge_": (lambda x: x.clone().ge_(0.5), [rand(X)]),
    "logical_and_": (lambda x, y: x.clone().logical_and_(y), [ints(X, 0, -1, 1), ints(Y, 1, -1, 1)]),
    "logical_or_": (lambda x, y: x.clone().logical_or_(y), [ints(X, 0, -1, 1), ints(Y, 1, -1, 1)]),
    "logical_xor_": (lambda x, y: x.clone().logical_xor_(y), [rand(X, dtype=lm.bool), rand(Y, lm.bool, 1)]),
    "logical_not_": (lambda x: x.clone().logical_not_(), [ints(X, 0, -1, 1)]),
    "bitwise_and_": (lambda x, y: x.clone().bitwise_and_(y), [ints(X), ints(Y, 1)]),
    "bitwise_or_": (lambda x, y: x.clone().bitwise_or_(y), [ints(X), ints(Y, 1)]),
    "bitwise_xor_": (lambda x, y: x.clone().bitwise_xor_(y), [rand(X, lm.bool), rand(Y, lm.bool, 1)]),
    "bitwise_not_": (lambda x: x.clone().bitwise_not_(), [ints(X)]),
    "bitwise_left_shift_": (lambda x: x.clone().bitwise_left_shift_(2), [ints(X)]),
    "bitwise_right_shift_": (lambda x: x.clone().bitwise_right_shift_(1), [ints(X)]),
    "tril_": (lambda x: x.clone().tril_(), [rand((3, 3))]),
    "triu_": (lambda x: x.clone().triu_(1), [rand((3, 3))]),
    "masked_fill_": (lambda x, m: x.clone().masked_fill_(m, -1.5), [rand(X), rand(X, lm.bool, 1)]),
    "scatter_": (lambda x, i, s: x.clone().scatter_(0, i.long(), s), [rand((3, 2)), idx([2, 0], [0, 1]),
                                                                      rand((2, 2), seed=1)]),
    "scatter_add_": (lambda x, i, s: x.clone().scatter_add_(0, i.long(), s), [rand((3, 2)), idx([2, 0], [2, 0]),
                                                                              rand((2, 2), seed=1)]),
    "scatter_reduce_": (lambda x, i, s: x.clone().scatter_reduce_(0, i.long(), s, "sum"),
                        [rand((3, 2)), idx([2, 0], [2, 2]), rand((2, 2), seed=1)]),
    "index_add_": (lambda x, i, s: x.clone().index_add_(0, i.long(), s, alpha=2),
                   [rand((3, 2)), idx(2, 0, 2), rand((3, 2), seed=1)]),
    "index_copy_": (lambda x, i, s: x.clone().index_copy_(0, i.long(), s), [rand((3, 2)), idx(2, 0),
                                                                            rand((2, 2), seed=1)]),
    "index_put_": (lambda x, i, v: x.clone().index_put_((i.long(),), v), [rand((3, 2)), idx(2, 0),
                                                                          rand((2, 2), seed=1)]),
    "index_fill_": (lambda x, i: x.clone().index_fill_(1, i.long(), -0.5), [rand((3, 2)), idx(1)]),
    "index_reduce_": (lambda x, i, s: x.clone().index_reduce_(0, i.long(), s, "amax"),
                      [rand((3, 2)), idx(2, 0, 2), rand((3, 2), seed=1)]),
    "masked_scatter_": (lambda x, m, s: x.clone().masked_scatter_(m, s), [rand(X), rand((3,), lm.bool, 1),
                                                                         rand((7,), seed=2)]),
    "put_": (lambda x, i, s: x.clone().put_(i.long(), s, accumulate=True), [rand(X), idx(5, -1, 0),
                                                                             rand((3,), seed=1)]),
    "cumsum_": (lambda x: x.clone().cumsum_(1), [rand(X)]),
    "cumprod_": (lambda x: x.clone().cumprod_(0), [pos(X)]),
    "detach_": (lambda x: x.clone().detach_() * 2, [rand(X)]),
    "fill_": (lambda x, v: x.clone().fill_(v), [rand(X), np.array(1.25, np.float32)]),
    "zero_": (lambda x: x.clone().zero_(), [rand(X)]),
    "copy_": (lambda x, s: x.clone().copy_(s), [rand(X), rand((3,), seed=1)]),
    "squeeze_": (lambda x: x.clone().squeeze_(1), [rand((2, 1, 3))]),
    "unsqueeze_": (lambda x: x.clone().unsqueeze_(-1), [rand(X)]),
    "t_": (lambda x: x.clone().t_(), [rand(X)]),
    "transpose_": (lambda x: x.clone().transpose_(0, 2), [rand((2, 3, 4))]),
    "swapaxes_": (lambda x: x.clone().swapaxes_(0, 1), [rand(X)]),
}


def test_every_in_place_method_is_torchs_and_has_a_parity_case():
    """No invented names: each is a torch.Tensor method over an existing out-of-place one, and is tested."""
    assert sorted(CASES) == sorted(INPLACE)
    for name, op in INPLACE.items():
        assert hasattr(torch.Tensor, name), name
        assert callable(op) or hasattr(lm.GraphTensor, op), name


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_match_torch(name):
    op, inputs = CASES[name]
    check(op, inputs)


def test_the_method_is_the_out_of_place_op_written_back():
    """``x.op_(...)`` computes what ``x.op(...)`` does (here, on a view: a permuted, sliced input)."""
    a = rand((4, 3))
    check(lambda x: x.t()[1:].clone().mul_(2.0).add_(x.t()[:-1], alpha=-1).relu_(), [a],
          torch_op=lambda x: (x.t()[1:] * 2.0 - x.t()[:-1]).relu())


def _run(outs, **inputs):
    return lm.compile(list(outs), backend="reference")(**inputs)


def test_the_handle_is_rebound_returned_and_chains():
    g = lm.Graph()
    x = g.input("x", (3,))
    y = x.clone()
    r = y.mul_(2).add_(1)
    assert r is y
    a = np.array([1, 2, 3], np.float32)
    _, got = _run([x, y], x=a)
    np.testing.assert_array_equal(got, a * 2 + 1)


def test_other_handles_keep_the_old_value_and_views_do_not_write_through():
    """As setitem documents: a view taken before keeps the old values; an in-place op on a view (a
    new handle) rebinds that handle only, never its base (torch would write through)."""
    g = lm.Graph()
    x = g.input("x", (2, 3))
    base = x.clone()
    alias = base  # the same handle: it sees the change
    row = base[0]  # a view taken before: it does not
    flat = base.view(6)
    base.mul_(10)
    view = base[1]
    view.add_(1)  # rebinds ``view``; ``base`` keeps its values
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = _run([base, alias, row, flat, view], x=a)
    np.testing.assert_array_equal(got[0], a * 10)
    np.testing.assert_array_equal(got[1], a * 10)
    np.testing.assert_array_equal(got[2], a[0])
    np.testing.assert_array_equal(got[3], a.reshape(6))
    np.testing.assert_array_equal(got[4], a[1] * 10 + 1)


def test_an_input_handle_rebound_computes_from_the_input():
    """``x.mul_(2)`` on a graph input: ``x`` names ``2 * input``; the input is still fed by name."""
    g = lm.Graph()
    x = g.input("x", ("B", 3))
    keep = x
    x = x.view(x.shape)  # a handle of its own, so ``keep`` names the input
    x.mul_(2).sub_(keep)
    for n in (2, 5):
        a = rand((n, 3), seed=n)
        (got,) = _run([x], x=a)
        np.testing.assert_allclose(got, a)


def test_symbolic_shapes_broadcast_into_the_tensor():
    g = lm.Graph()
    x = g.input("x", ("B", 3))
    y = x.clone().add_(g.input("b", (3,))).clamp_(max=1.0)
    for n in (1, 4):
        a, b = rand((n, 3), seed=n), rand((3,), seed=9)
        (got,) = _run([y], x=a, b=b)
        np.testing.assert_allclose(got, np.minimum(a + b, 1.0), rtol=1e-6)


# dtype rule: the result keeps the tensor's dtype; a result of a higher kind is refused, as by torch
REFUSED = [
    ("mul_", (1.5,), I32, "float32", "int32"),
    ("div_", (2,), I32, "float32", "int32"),
    ("sqrt_", (), I32, "float32", "int32"),
    ("clamp_", (0.5, 2), I32, "float32", "int32"),
    ("sigmoid_", (), I32, "float32", "int32"),
    ("add_", (1,), lm.bool, "int32", "bool"),
]


@pytest.mark.parametrize("name,args,dtype,result,kept", REFUSED, ids=[r[0] for r in REFUSED])
def test_a_result_the_dtype_cannot_hold_is_refused_as_torch_does(name, args, dtype, result, kept):
    t = torch.zeros(3, dtype=torch.int32 if dtype is I32 else torch.bool)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        getattr(t, name)(*args)
    g = lm.Graph()
    x = g.input("x", (3,), dtype=dtype)
    line = sys._getframe().f_lineno + 2
    with pytest.raises(TypeError) as e:
        getattr(x, name)(*args)
    msg = str(e.value)
    assert msg.startswith(f"{name}: result type {result} can't be cast to the tensor's dtype {kept}"), msg
    assert "an in-place op keeps the tensor's dtype" in msg and f"{__file__}:{line}" in msg, msg
    assert x.dtype is dtype and x.node.op == "Input"  # unchanged


KEPT = [  # (code run on both sides, input dtype): the result is cast back to the tensor's dtype
    (lambda x: x.clone().add_(2), I32),
    (lambda x: x.clone().mul_(3).floor_divide_(2), I32),
    (lambda x: x.clone().eq_(0), I32),
    (lambda x: x.clone().gt_(0.5), F32),
    (lambda x: x.clone().fill_(1.5), I32),  # fill_ and copy_ convert, truncating, as torch's
    (lambda x: x.clone().masked_fill_(x > 0, 2.7), I32),
    (lambda x: x.clone().add_(x.double()), lm.float16),
    (lambda x: x.clone().mul_(True), lm.bool),
]


@pytest.mark.parametrize("case", range(len(KEPT)))
def test_a_lower_kind_result_is_cast_back_as_torch_does(case):
    op, dtype = KEPT[case]
    check(op, [rand((2, 3), dtype, seed=case)], dtypes=[dtype])


def test_copy_converts_and_broadcasts_as_torch():
    check(lambda x, s: x.clone().copy_(s), [ints((2, 3)), rand((3,), seed=1, low=-3, high=3)])
    g = lm.Graph()
    x = g.input("x", (2, 3))
    (got,) = _run([x.clone().copy_(np.array([1, 2, 3], np.int32))], x=rand((2, 3)))
    np.testing.assert_array_equal(got, np.array([[1, 2, 3]] * 2, np.float32))
    with pytest.raises(ValueError, match=r"^copy_: src of shape \(4,\) does not broadcast to the tensor's shape"):
        x.copy_(g.input("s", (4,)))
    with pytest.raises(TypeError, match=r"^copy_: src must be a tensor or a numpy array, got float"):
        x.copy_(1.0)


def test_a_result_of_another_shape_is_refused_as_torch_does():
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        torch.zeros(3).add_(torch.ones(2, 3))
    g = lm.Graph()
    x = g.input("x", (3,))
    with pytest.raises(ValueError, match=r"^add_: the result has shape \(2, 3\), the tensor \(3,\): an in-place op "
                                         r"cannot change the tensor's shape"):
        x.add_(g.input("y", (2, 3)))
    with pytest.raises(ValueError, match=r"^fill_: value must be a number or a 0-d tensor"):
        x.fill_(g.input("v", (3,)))


def test_an_inner_ops_error_is_named_under_the_in_place_method():
    g = lm.Graph()
    x = g.input("x", (3,))
    with pytest.raises(TypeError, match=r"^masked_fill_: masked_fill: mask must be a bool tensor"):
        x.masked_fill_(x, 1.0)


def test_the_type_checking_declarations_list_every_in_place_method():
    text = (Path(lm.__file__).parent / "frontend" / "tensor.py").read_text()
    assert sorted(re.findall(r"(\w+_): _InPlace\b", text)) == sorted(INPLACE)


# Parameters and Buffers ------------------------------------------------------------------------------------
def test_a_parameter_changes_now_outside_any_graph_as_under_torch_no_grad():
    w = nn.Parameter(np.array([1.0, -2.0, 3.0], np.float32))
    data = w.data
    tw = torch.nn.Parameter(torch.tensor([1.0, -2.0, 3.0]))
    with torch.no_grad():
        tw.mul_(0.5).add_(torch.ones(3)).clamp_(max=2.0)
    assert w.mul_(0.5).add_(lm.ones(3)).clamp_(max=2.0) is w
    np.testing.assert_array_equal(w.data, tw.detach().numpy())
    assert w.data is data  # written in place: references to the array stay valid
    b = nn.Buffer(np.arange(4, dtype=np.int32))
    b.zero_()
    np.testing.assert_array_equal(b.data, 0)
    with pytest.raises(TypeError, match="^mul_: result type float32 can't be cast to the tensor's dtype int32"):
        b.mul_(1.5)
    with pytest.raises(ValueError, match=r"^t_: Parameter \(unnamed\) \(3,\) float32: a Parameter's or Buffer's "
                                         r"shape is fixed; use the view w\.t\(\.\.\.\)"):
        w.t_()


def test_a_compiled_graph_reads_the_parameter_changed_in_place():
    lin = nn.Linear(2, 1, bias=False)
    g = lm.Graph()
    x = g.input("x", (1, 2))
    f = lm.compile([lin(x)], backend="reference")
    lin.weight.fill_(2.0)
    (out,) = f(x=np.array([[1.0, 3.0]], np.float32))
    np.testing.assert_array_equal(out, [[8.0]])


class Scales(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(np.ones(3, np.float32))

    def forward(self, x):
        self.w.mul_(2)
        return x * self.w


def test_a_parameter_in_a_graph_is_refused_naming_the_way():
    w = nn.Parameter(np.ones(3, np.float32), name="w")
    g = lm.Graph()
    x = g.input("x", (3,))
    with pytest.raises(EagerOnlyError) as e:
        w.add_(x)
    msg = str(e.value)
    assert msg.startswith("add_: Parameter w (3,) float32 is read into a graph here"), msg
    for text in ("train.compile_step", "graph.assign(buffer, value)", "w.add(...)", "outside any graph"):
        assert text in msg, msg
    with pytest.raises(EagerOnlyError, match=r"^mul_: Parameter .* is read into a graph here"):
        Scales()(x)
    np.testing.assert_array_equal(w.data, 1.0)


@pytest.mark.parametrize("make", [lambda x: lm.cat([x]), lambda x: lm.hstack([x]), lambda x: x.pow(1), lambda x: x ** 1,
                                  lambda x: x.roll(0, 0), lambda x: x.clone()],
                         ids=["cat-one", "hstack-one", "pow-1", "pow-op-1", "roll-0", "clone"])
def test_an_op_that_changes_nothing_gives_a_handle_of_its_own(make):
    """torch's cat of one tensor, x ** 1, roll by 0 give new tensors: an in-place method on the result
    leaves the input as it was. These returned the input's own handle, which the method then rebound."""
    g = lm.Graph()
    x = g.input("x", (3,))
    y = make(x)
    y.add_(100.0)
    a = np.array([1.0, 2.0, 3.0], np.float32)
    got_x, got_y = lm.compile([x * 1, y])(x=a)
    np.testing.assert_array_equal(got_x, a)
    np.testing.assert_array_equal(got_y, a + 100)


def test_an_assigned_value_is_the_value_at_the_assign():
    """graph.assign(buf, v) then v.add_(100): torch's buf.copy_(v) took v's value at that line."""
    g = lm.Graph()
    x = g.input("x", (3,))
    buf = nn.Buffer(np.zeros(3, np.float32))
    v = x * 2.0
    g.assign(buf, v)
    v.add_(100.0)
    lm.compile([v.sum()])(x=np.array([1.0, 2.0, 3.0], np.float32))
    np.testing.assert_array_equal(buf.data, [2.0, 4.0, 6.0])

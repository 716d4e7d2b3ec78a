"""``lm.autograd.functional`` against ``torch.autograd.functional``: values (compiled on "cpu") and the
return structures (a tensor or tuples, as torch's, by whether inputs and outputs are tuples), the
zeros/errors of ``strict`` for an unused input, refusals, and the jacobian graph's size."""

import numpy as np
import pytest
import torch
import torch.autograd.functional as TF
from parity import TORCH_DTYPE, rand

import luminal as lm
from luminal.autograd import functional as F

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TOL = {lm.float32: dict(rtol=1e-4, atol=1e-5), lm.float64: dict(rtol=1e-9, atol=1e-10)}


def _flat(x):
    """Tensors of a (nested) result structure, in order, and the structure with None in their place."""
    if isinstance(x, tuple):
        parts = [_flat(e) for e in x]
        return [t for p in parts for t in p[0]], tuple(p[1] for p in parts)
    return [x], None


def compare(ours, theirs, inputs, dtype):
    """``ours`` (lazy, any nesting) compiled for cpu and run on ``inputs`` equals torch's ``theirs``,
    structure included."""
    mine, shape_a = _flat(ours)
    want, shape_b = _flat(theirs)
    assert shape_a == shape_b
    got = lm.compile(mine, backend="cpu")(**inputs)
    got = got if isinstance(got, tuple) else (got,)
    for a, b in zip(got, want):
        b = b.detach().numpy()
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, **TOL[dtype])


def graph_inputs(dtype, **shapes):
    g = lm.Graph()
    ts = {k: g.input(k, s, dtype) for k, s in shapes.items()}
    arrays = {k: rand(s, dtype, seed=i, low=-1.0, high=1.0) for i, (k, s) in enumerate(shapes.items())}
    return g, ts, arrays


def T(a, dtype):
    return torch.tensor(a, dtype=TORCH_DTYPE[dtype])


def mlp(x, w, lib):
    """Matmul, broadcasting (a bias row), tanh, softplus and exp, reduced over the last dim."""
    sp = lm.nn.functional.softplus if lib is lm else torch.nn.functional.softplus
    h = (x @ w).tanh() + 0.5 * x[..., :1]
    return sp(h).exp().sum(-1)


DTYPES = [lm.float32, lm.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_vjp_and_jvp_single_and_tuple(dtype):
    g, t, a = graph_inputs(dtype, x=(4, 3), w=(3, 5), u=(4,), v=(4, 3))
    tx, tw, tu, tv = (T(a[k], dtype) for k in "xwuv")
    ours, theirs = [], []
    # single input, single output: tensors
    ours.append(F.vjp(lambda x: mlp(x, t["w"], lm), t["x"], t["u"]))
    theirs.append(TF.vjp(lambda x: mlp(x, tw, torch), tx, tu))
    # tuple of inputs, tuple of outputs
    two = (lambda x, w, lib: (mlp(x, w, lib), (x * x).sum()))
    ours.append(F.vjp(lambda x, w: two(x, w, lm), (t["x"], t["w"]), (t["u"], t["u"][0])))
    theirs.append(TF.vjp(lambda x, w: two(x, w, torch), (tx, tw), (tu, tu[0])))
    # jvp: single, and a tuple in, tuple out
    ours.append(F.jvp(lambda x: mlp(x, t["w"], lm), t["x"], t["v"]))
    theirs.append(TF.jvp(lambda x: mlp(x, tw, torch), tx, tv))
    ours.append(F.jvp(lambda x, w: two(x, w, lm), (t["x"], t["w"]), (t["v"], t["w"] * 0.5)))
    theirs.append(TF.jvp(lambda x, w: two(x, w, torch), (tx, tw), (tv, tw * 0.5)))
    compare(tuple(ours), tuple(theirs), a, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_jacobian_structures(dtype):
    g, t, a = graph_inputs(dtype, x=(2, 3), w=(3, 2))
    tx, tw = T(a["x"], dtype), T(a["w"], dtype)
    one = (lambda x, w, lib: mlp(x, w, lib))
    two = (lambda x, w, lib: (mlp(x, w, lib), (x @ w).exp()))
    ours = (F.jacobian(lambda x: one(x, t["w"], lm), t["x"]),  # a tensor (2,) + (2, 3)
            F.jacobian(lambda x, w: one(x, w, lm), (t["x"], t["w"])),  # a tuple over the inputs
            F.jacobian(lambda x: two(x, t["w"], lm), t["x"]),  # a tuple over the outputs
            F.jacobian(lambda x, w: two(x, w, lm), (t["x"], t["w"])))  # tuples of tuples
    theirs = (TF.jacobian(lambda x: one(x, tw, torch), tx),
              TF.jacobian(lambda x, w: one(x, w, torch), (tx, tw)),
              TF.jacobian(lambda x: two(x, tw, torch), tx),
              TF.jacobian(lambda x, w: two(x, w, torch), (tx, tw)))
    assert tuple(ours[0].shape) == (2, 2, 3) and tuple(ours[3][1][1].shape) == (2, 2, 3, 2)
    compare(ours, theirs, a, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_hessian_of_a_3x2_input_and_hvp_vhp(dtype):
    g, t, a = graph_inputs(dtype, x=(3, 2), y=(2,), v=(3, 2))
    tx, ty, tv = (T(a[k], dtype) for k in "xyv")

    def f(x, lib):
        sp = lm.nn.functional.softplus if lib is lm else torch.nn.functional.softplus
        return (sp(x).sum(0) * x[0].tanh()).sum() + (x @ x.T).exp().mean()

    def f2(x, y, lib):
        return f(x, lib) * (y * y).sum() + (x.sum(0) * y).sum()

    h = F.hessian(lambda x: f(x, lm), t["x"])
    assert tuple(h.shape) == (3, 2, 3, 2)
    ours = (h, F.hessian(lambda x, y: f2(x, y, lm), (t["x"], t["y"])),
            F.hvp(lambda x: f(x, lm), t["x"], t["v"]), F.vhp(lambda x: f(x, lm), t["x"], t["v"]),
            F.vhp(lambda x, y: f2(x, y, lm), (t["x"], t["y"]), (t["v"], t["y"])))
    theirs = (TF.hessian(lambda x: f(x, torch), tx), TF.hessian(lambda x, y: f2(x, y, torch), (tx, ty)),
              TF.hvp(lambda x: f(x, torch), tx, tv), TF.vhp(lambda x: f(x, torch), tx, tv),
              TF.vhp(lambda x, y: f2(x, y, torch), (tx, ty), (tv, ty)))
    compare(ours, theirs, a, dtype)


def test_one_element_defaults_for_v():
    """v may be None for a one-element output (vjp) or input (jvp, hvp): ones, as torch's."""
    g, t, a = graph_inputs(lm.float64, x=(1,), y=(3,))
    tx, ty = T(a["x"], lm.float64), T(a["y"], lm.float64)
    ours = (F.vjp(lambda y: (y.exp() * y).sum(), t["y"]), F.jvp(lambda x: x.exp() * t["y"], t["x"]),
            F.hvp(lambda x: (x ** 3).sum(), t["x"]))
    theirs = (TF.vjp(lambda y: (y.exp() * y).sum(), ty), TF.jvp(lambda x: x.exp() * ty, tx),
              TF.hvp(lambda x: (x ** 3).sum(), tx))
    compare(ours, theirs, a, lm.float64)
    with pytest.raises(RuntimeError, match=r"vjp: the vector v can only be None"):
        F.vjp(lambda y: y.exp(), t["y"])
    with pytest.raises(RuntimeError, match=r"jvp: the vector v can only be None"):
        F.jvp(lambda y: y.exp(), t["y"])


def test_unused_input_zeros_or_strict_errors():
    """f(x, y) reads x alone: strict=False gives zeros for y (torch's), strict=True raises as torch's does."""
    g, t, a = graph_inputs(lm.float64, x=(3,), y=(2,))
    tx, ty = T(a["x"], lm.float64), T(a["y"], lm.float64)

    def f(x, y):
        return (x.exp() * x).sum()

    v3 = g.constant(np.ones(3))
    ours = (F.vjp(f, (t["x"], t["y"])), F.jacobian(f, (t["x"], t["y"])), F.hessian(f, (t["x"], t["y"])),
            F.vhp(f, (t["x"], t["y"]), (v3, t["y"])), F.hvp(f, (t["x"], t["y"]), (v3, t["y"])),
            F.jvp(lambda x, y: (x.exp(), y.sum() * 0 + 1.0), (t["x"], t["y"]), (v3, t["y"])))
    tv3 = torch.ones(3, dtype=torch.float64)
    theirs = (TF.vjp(f, (tx, ty)), TF.jacobian(f, (tx, ty)), TF.hessian(f, (tx, ty)),
              TF.vhp(f, (tx, ty), (tv3, ty)), TF.hvp(f, (tx, ty), (tv3, ty)),
              TF.jvp(lambda x, y: (x.exp(), y.sum() * 0 + 1.0), (tx, ty), (tv3, ty)))
    compare(ours, theirs, a, lm.float64)
    for fn, args in [(F.vjp, ()), (F.jacobian, ()), (F.hessian, ()), (F.vhp, ((v3, t["y"]),)),
                     (F.hvp, ((v3, t["y"]),)), (F.jvp, ((v3, t["y"]),))]:
        with pytest.raises(RuntimeError, match="independent of input 1|input 1 .*independent"):
            fn(f, (t["x"], t["y"]), *args, strict=True)
    with pytest.raises(RuntimeError, match="output 1 of the user-provided function does not depend on the inputs"):
        F.vjp(lambda x: (x.exp(), g.constant(np.ones(2))), t["x"], (v3, g.constant(np.ones(2))), strict=True)
    with pytest.raises(RuntimeError, match="jacobian .* with respect to input 0 is independent of the input"):
        F.hessian(lambda x: (2 * x).sum(), t["x"], strict=True)  # linear: torch's strict refuses it too
    _, lin = F.jvp(lambda x: 2 * x, t["x"], v3, strict=True)  # but a linear function's jvp is fine, as torch's
    np.testing.assert_array_equal(lm.compile(lin, backend="cpu")(x=a["x"]), np.full(3, 2.0))


def test_an_input_that_is_an_expression_is_differentiated_alone():
    """torch differentiates by a fresh leaf: with y = 2x, f(y) = y + 2x has Jacobian I by y, though
    the graph builds 2x once (differentiating by its node would count both uses). A view works too."""
    g = lm.Graph()
    x = g.input("x", (3,), lm.float64)
    y = 2 * x
    j = F.jacobian(lambda y: y + 2 * x, y)
    jt = F.jacobian(lambda m: m.sum(0), g.input("m", (2, 3), lm.float64).T)
    got, got_t = lm.compile([j, jt], backend="cpu")(x=np.arange(3.0), m=np.ones((2, 3)))
    np.testing.assert_array_equal(got, np.eye(3))
    np.testing.assert_array_equal(got_t, np.repeat(np.eye(2)[:, None, :], 3, axis=1))  # d(m.T.sum(0))[a] / d(m.T)[i, b]


def test_refusals_and_bad_arguments():
    g = lm.Graph()
    x = g.input("x", (3,))
    f = (lambda x: x.exp())
    with pytest.raises(NotImplementedError, match="vectorize=True"):
        F.jacobian(f, x, vectorize=True)
    with pytest.raises(NotImplementedError, match="strategy='forward-mode'"):
        F.jacobian(f, x, strategy="forward-mode")
    with pytest.raises(NotImplementedError, match="outer_jacobian_strategy='forward-mode'"):
        F.hessian(lambda x: x.sum(), x, outer_jacobian_strategy="forward-mode")
    with pytest.raises(TypeError, match="inputs must be a GraphTensor or a tuple of GraphTensors, got a list"):
        F.jacobian(f, [x])
    with pytest.raises(TypeError, match="only float inputs"):
        F.jacobian(f, g.input("i", (3,), lm.int32))
    with pytest.raises(RuntimeError, match=r"hessian: the tensor returned .* single element; it has shape \(3,\)"):
        F.hessian(f, x)
    with pytest.raises(TypeError, match="vhp: the function given to vhp should return a single GraphTensor"):
        F.vhp(lambda x: (x.sum(),), x, x)
    with pytest.raises(RuntimeError, match=r"vjp: v has invalid size: should be \(3,\) but got \(2,\)"):
        F.vjp(f, x, g.input("w", (2,)))
    with pytest.raises(RuntimeError, match="v is a tuple of invalid length: should be 2 but got 1"):
        F.jvp(lambda a, b: a * b, (x, x), (x,))
    s = g.input("s", ("B", 3))
    with pytest.raises(ValueError, match=r"jacobian: output 0 has the symbolic shape \(B, 3\)"):
        F.jacobian(f, s)
    with pytest.raises(ValueError, match=r"hessian: input 0 has the symbolic shape \(B, 3\)"):
        F.hessian(lambda s: s.sum(), s)
    _, vj = F.vjp(f, s, s)  # a symbolic size is fine for a vjp / jvp
    np.testing.assert_allclose(lm.compile(vj, backend="cpu")(s=np.ones((2, 3), np.float32)),
                               np.full((2, 3), np.e, np.float32), rtol=1e-6)


def test_jacobian_graph_grows_by_one_backward_pass_per_output_element():
    """The cost torch's reverse mode has too: each output element adds one backward pass of the same
    size to the graph (the forward pass is built once)."""
    def size(n):
        g = lm.Graph()
        x = g.input("x", (n,))
        before = len(g.nodes)
        F.jacobian(lambda x: (x.tanh() * x.exp()).cumsum(0), x)
        return len(g.nodes) - before

    s4, s8, s16 = size(4), size(8), size(16)
    per_row = (s16 - s8) / 8
    assert per_row == pytest.approx((s8 - s4) / 4, rel=0.25)  # linear in the output size
    assert per_row < 40  # a backward pass of a few ops, not a copy of everything built before

"""Audit of ``lm.autograd`` (``grad`` and ``functional``) against torch 2.13, argument by argument:
strict mode with a module's Parameters closed over (they make torch's outputs require grad) and with
``create_graph=True`` (a result that does not require grad is an error), ``grad``'s ``grad_outputs``
(shape rules, int seeds cast, seeds read from the inputs), ``allow_unused``/``materialize_grads``,
``is_grads_batched``, tuple vs tensor structures of all six functional APIs in float32/float64 on
batched shapes, integer inputs, refused arguments, and a hessian by two ``grad`` calls."""

import numpy as np
import pytest
import torch
import torch.autograd.functional as TF

import luminal as lm
from luminal.autograd import functional as F

pytestmark = pytest.mark.usefixtures("one_torch_thread")
XV, YV = np.array([0.3, -0.7, 1.2]), np.array([[1.0, -2.0, 0.5], [0.25, 1.5, -1.0]])
W = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]])
OPS = ("vjp", "jvp", "jacobian", "hessian", "hvp", "vhp")


def run(outs, **feeds) -> list:
    res = lm.compile(list(outs), backend="cpu")(**feeds)
    return list(res) if isinstance(res, tuple) else [res]


def flat(x) -> list:
    """The tensors of a nested result, in order (None kept)."""
    return [t for e in x for t in flat(e)] if isinstance(x, tuple) else [x]


def structure(x):
    """A nested result's tuple structure, with each tensor's shape at its place."""
    return tuple(structure(e) for e in x) if isinstance(x, tuple) else tuple(x.shape)


def twins():
    """A float64 graph with x (3,) and y (2, 3), a Linear(3, 2) module, and their torch twins."""
    g = lm.Graph()
    x, y = g.input("x", (3,), lm.float64), g.input("y", (2, 3), lm.float64)
    m = lm.nn.Linear(3, 2, dtype=lm.float64)
    m.weight.set(W)
    m.bias.set(np.array([0.1, -0.2]))
    tm = torch.nn.Linear(3, 2, dtype=torch.float64)
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(W))
        tm.bias.copy_(torch.tensor([0.1, -0.2], dtype=torch.float64))
    return g, x, y, m, tm


def call_op(mod, op, f, x, v, **kw):
    """``op`` of ``mod`` (luminal's or torch's functional) on one input, with ``v`` where it takes one."""
    if op == "vjp":
        return mod.vjp(f, x, v, **kw)
    if op in ("jvp", "hvp", "vhp"):
        return getattr(mod, op)(f, x, v, **kw)
    return getattr(mod, op)(f, x, **kw)


# functions of one (3,) input a, given the module (luminal's or torch's) and y: each exercises strict
# mode's requires-grad reading (a closed-over Parameter, a linear map, a constant hessian)
FUNCS = {
    "only_params": lambda a, m, y: m(y).sum(),
    "linear": lambda a, m, y: (2 * a).sum(),
    "linear_vector": lambda a, m, y: 2 * a,
    "quadratic": lambda a, m, y: (a * a).sum(),
    "cubic": lambda a, m, y: (a ** 3).sum(),
    "module_linear": lambda a, m, y: m(a).sum(),
    "module_vector": lambda a, m, y: m(a),
    "module_quadratic": lambda a, m, y: (m(a) ** 2).sum(),
    "weight_times_a": lambda a, m, y: (a * m.weight)[0].sum(),
    "weight_row_times_a": lambda a, m, y: (m.weight[0] * a).sum(),
    "weight_alone": lambda a, m, y: m.weight.sum() * 2.0,
    "rows_mixed": lambda a, m, y: (a[:1] ** 2).sum() + a,
}


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("name", list(FUNCS))
def test_strict_raises_exactly_where_torch_does(name, create_graph):
    """strict=True reads "requires grad" as torch's: a trainable Parameter the function closes over
    counts (a module's output independent of the input is torch's "independent of input 0", not its
    "does not require grad"), and create_graph=True refuses results that do not require grad (a linear
    function's vjp, a quadratic's hessian), which luminal ignored. Every refusal names the function."""
    g, x, y, m, tm = twins()
    v = g.input("v", (3,), lm.float64)
    tx, ty, tv = torch.tensor(XV), torch.tensor(YV), torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    f = FUNCS[name]
    out_shape = tuple(f(tx, tm, ty).shape)
    vec = out_shape != ()
    for op in OPS[:3] if vec else OPS:  # (the hessian's take scalar functions)
        lv = (g.constant(np.ones(out_shape)) if vec else None) if op == "vjp" else v
        tvv = (torch.ones(f(tx, tm, ty).shape, dtype=torch.float64) if vec else None) if op == "vjp" else tv
        try:
            call_op(TF, op, lambda a: f(a, tm, ty), tx, tvv, strict=True, create_graph=create_graph)
            torch_raised = False
        except RuntimeError:
            torch_raised = True
        if torch_raised:
            with pytest.raises(RuntimeError, match=f"^{op}: .*strict mode"):
                call_op(F, op, lambda a: f(a, m, y), x, lv, strict=True, create_graph=create_graph)
        else:
            call_op(F, op, lambda a: f(a, m, y), x, lv, strict=True, create_graph=create_graph)


def test_strict_vjp_with_an_output_of_the_parameters_alone():
    """torch: the second output requires grad (through the Parameters), and the first reaches the
    input, so strict vjp passes; luminal refused it ("output 1 does not depend on the inputs")."""
    g, x, y, m, tm = twins()
    u = g.input("u", (2,), lm.float64)
    outs, (gx,) = F.vjp(lambda a: (m(a), m(y)[0]), (x,), (u, u), strict=True)
    uv = np.array([1.5, -0.5])
    t_outs, (tgx,) = TF.vjp(lambda a: (tm(a), tm(torch.tensor(YV))[0]), (torch.tensor(XV),),
                            (torch.tensor(uv),) * 2, strict=True)
    for got, want in zip(run([*outs, gx], x=XV, y=YV, u=uv), [*t_outs, tgx]):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-13)
    m.requires_grad_(False)  # frozen: torch's output 1 no longer requires grad, and strict mode refuses it
    tm.requires_grad_(False)
    with pytest.raises(RuntimeError, match="Output 1 of the user-provided function does not require gradients"):
        TF.vjp(lambda a: (tm(a), tm(torch.tensor(YV))[0]), (torch.tensor(XV),), (torch.tensor(uv),) * 2, strict=True)
    with pytest.raises(RuntimeError, match="^vjp: output 1 of the user-provided function does not depend"):
        F.vjp(lambda a: (m(a), m(y)[0]), (x,), (u, u), strict=True)


def test_closed_over_parameter_indexed_in_the_function_is_differentiable():
    """The function is built in the inputs' graph, as a module's forward: ``w[0]`` of a closed-over
    Parameter was read as a constant of its current values (the vjp's gradient by w lost that term)
    and ``w.sum()``, with no tensor operand, had no graph to join. torch differentiates both."""
    g, x, *_ = twins()
    w = lm.nn.Parameter(W)
    tw = torch.tensor(W, requires_grad=True)

    def f(a, w):
        return (w[0] * a.sin()).sum() * w.sum()

    out, gx = F.vjp(lambda a: f(a, w), x)
    (gw,) = lm.autograd.grad(gx.sum(), w)
    H = F.hessian(lambda a: f(a, w) * a.sum(), x)
    t_out, tgx = TF.vjp(lambda a: f(a, tw), torch.tensor(XV), create_graph=True)
    (tgw,) = torch.autograd.grad(tgx.sum(), tw)
    tH = TF.hessian(lambda a: f(a, tw) * a.sum(), torch.tensor(XV))
    for got, want in zip(run([out, gx, gw, H], x=XV), [t_out, tgx, tgw, tH]):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-13)


def test_grad_integer_and_bool_grad_outputs_are_cast_as_torch():
    """torch casts an int or bool grad_outputs to the output's dtype (as the functional API's v);
    luminal's grad refused them."""
    g, x, *_ = twins()
    gi = g.input("gi", (3,), lm.int32)
    gb = g.input("gb", (3,), lm.bool)
    (a,) = lm.autograd.grad(x.sin(), x, gi)
    (b,) = lm.autograd.grad([x.sin(), x.exp()], x, [gi, gb])
    assert a.dtype == b.dtype == lm.float64
    iv, bv = np.array([1, -2, 3], np.int32), np.array([True, False, True])
    tx = torch.tensor(XV, requires_grad=True)
    (ta,) = torch.autograd.grad(tx.sin(), tx, torch.tensor(iv))
    (tb,) = torch.autograd.grad([tx.sin(), tx.exp()], tx, [torch.tensor(iv), torch.tensor(bv)])
    for got, want in zip(run([a, b], x=XV, gi=iv, gb=bv), [ta, tb]):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-13)


def test_grad_of_several_outputs_with_grad_outputs_read_from_the_inputs():
    """grad_outputs are the products' constants: torch does not differentiate them. With several
    outputs luminal summed <output, grad_output> and differentiated that, seeds included (x.cos()
    gave cos(x)^2 - sin(x)^2 for d<sin x, cos x>). Differentiated again, the seeds count, as
    torch's create_graph=True."""
    g, x, *_ = twins()
    (a,) = lm.autograd.grad([x.sin(), (x * x).sum()], x, [x.cos(), None])
    (b,) = lm.autograd.grad([x.sin(), x.exp()], x, [x.cos(), x * 2])
    (bb,) = lm.autograd.grad(b.sum(), x)
    tx = torch.tensor(XV, requires_grad=True)
    (ta,) = torch.autograd.grad([tx.sin(), (tx * tx).sum()], tx, [tx.cos(), None])
    (tb,) = torch.autograd.grad([tx.sin(), tx.exp()], tx, [tx.cos(), tx * 2], create_graph=True)
    (tbb,) = torch.autograd.grad(tb.sum(), tx)
    for got, want in zip(run([a, b, bb], x=XV), [ta, tb, tbb]):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-13)


def _bad_grad_calls(g, x, y, xi):
    """(luminal call, torch call, what luminal's message must name) for calls torch refuses."""
    tx = torch.tensor(XV, requires_grad=True)
    ty = torch.tensor(YV, requires_grad=True)
    one = g.constant(np.ones((1,)))
    return [
        (lambda: lm.autograd.grad(x.sin(), x, g.constant(np.ones(()))),
         lambda: torch.autograd.grad(tx.sin(), tx, torch.ones(())), r"grad_outputs\[0\] has shape \(\)"),
        (lambda: lm.autograd.grad(x.sin(), x, one),  # (no broadcasting of grad_outputs, as torch's)
         lambda: torch.autograd.grad(tx.sin(), tx, torch.ones(1, dtype=torch.float64)), r"grad_outputs\[0\]"),
        (lambda: lm.autograd.grad(x.sum(), x, one),
         lambda: torch.autograd.grad(tx.sum(), tx, torch.ones(1, dtype=torch.float64)), r"grad_outputs\[0\]"),
        (lambda: lm.autograd.grad(x.sin(), x), lambda: torch.autograd.grad(tx.sin(), tx), r"outputs\[0\]"),
        (lambda: lm.autograd.grad(x.sum(), [x, y]), lambda: torch.autograd.grad(tx.sum(), [tx, ty]), "input 1"),
        (lambda: lm.autograd.grad(x.detach().sum() + y.sum(), x),
         lambda: torch.autograd.grad(tx.detach().sum() + ty.sum(), tx), "input 0"),
        (lambda: lm.autograd.grad(x.sum(), [x, y], allow_unused=False, materialize_grads=True),
         lambda: torch.autograd.grad(tx.sum(), [tx, ty], allow_unused=False, materialize_grads=True),
         "materialize_grads"),
        (lambda: lm.autograd.grad(xi.sum(), x), lambda: torch.autograd.grad(torch.ones(3, dtype=torch.int32).sum(), tx),
         r"outputs\[0\] has dtype int32"),
        (lambda: lm.autograd.grad(x.sum(), xi), lambda: torch.autograd.grad(tx.sum(), torch.ones(3, dtype=torch.int32)),
         "int32"),
        (lambda: lm.autograd.grad(x.sum(), []), lambda: torch.autograd.grad(tx.sum(), []), "inputs is empty"),
        (lambda: lm.autograd.grad([x.sin(), x.cos()], x, g.constant(np.ones(3))),
         lambda: torch.autograd.grad([tx.sin(), tx.cos()], tx, torch.ones(3, dtype=torch.float64)), "grad_outputs"),
        (lambda: lm.autograd.grad(x.sin(), x, g.constant(np.ones((4, 1))), is_grads_batched=True),
         lambda: torch.autograd.grad(tx.sin(), tx, torch.ones((4, 1), dtype=torch.float64), is_grads_batched=True),
         r"grad_outputs\[0\] has shape \(4, 1\).*is_grads_batched"),
        (lambda: lm.autograd.grad(x.sum(), x, None, is_grads_batched=True),
         lambda: torch.autograd.grad(tx.sum(), tx, None, is_grads_batched=True),
         r"is_grads_batched.*grad_outputs\[0\]"),
    ]


def test_grad_refuses_what_torch_refuses_naming_the_argument():
    g, x, *_ = twins()
    y = g.input("y2", (2,), lm.float64)
    xi = g.input("xi", (3,), lm.int32)
    for ours, theirs, names in _bad_grad_calls(g, x, y, xi):
        with pytest.raises((RuntimeError, ValueError, AssertionError)):
            theirs()
        with pytest.raises((RuntimeError, ValueError, TypeError), match=f"^grad: .*{names}"):
            ours()


def test_grad_allow_unused_materialize_grads_and_batched_values():
    """None (allow_unused) or zeros of the input's shape and dtype (materialize_grads) for an unused
    input, a one-element non-scalar output without grad_outputs, a float32 grad_outputs cast to a
    float64 output, and is_grads_batched over two outputs, all as torch's."""
    g, x, y, m, tm = twins()
    z = g.input("z", (2,), lm.float32)
    tx, ty, tz = (torch.tensor(a, requires_grad=True) for a in (XV, YV, np.zeros(2, np.float32)))
    a = lm.autograd.grad((x ** 3).sum(), [x, z], allow_unused=True, retain_graph=True, create_graph=True,
                         only_inputs=True)
    b = lm.autograd.grad((x ** 3).sum(), [x, z], materialize_grads=True)
    (c,) = lm.autograd.grad((x * y).sum().reshape((1, 1)), y)
    s = g.input("s", (4, 3), lm.float64)
    t = g.input("t", (4, 2, 3), lm.float32)
    gx, gy = lm.autograd.grad([x.exp() * x, (y * x).tanh()], [x, y], [s, t], is_grads_batched=True)
    ta = torch.autograd.grad((tx ** 3).sum(), [tx, tz], allow_unused=True)
    tb = torch.autograd.grad((tx ** 3).sum(), [tx, tz], materialize_grads=True)
    (tc,) = torch.autograd.grad((tx * ty).sum().reshape(1, 1), ty)
    sv = np.arange(12.0).reshape(4, 3) / 7
    tv = (np.arange(24.0).reshape(4, 2, 3) / 11 - 1).astype(np.float32)
    tgx, tgy = torch.autograd.grad([tx.exp() * tx, (ty * tx).tanh()], [tx, ty],
                                   [torch.tensor(sv), torch.tensor(tv)], is_grads_batched=True)
    assert a[1] is None and ta[1] is None
    assert tuple(b[1].shape) == (2,) and b[1].dtype == lm.float32 and tb[1].dtype == torch.float32
    assert tuple(gx.shape) == (4, 3) and tuple(gy.shape) == (4, 2, 3) and gy.dtype == lm.float64
    got = run([a[0], b[0], b[1], c, gx, gy], x=XV, y=YV, s=sv, t=tv)
    for o, w in zip(got, [ta[0], tb[0], tb[1], tc, tgx, tgy]):
        assert o.dtype == w.numpy().dtype
        np.testing.assert_allclose(o, w.numpy(), rtol=1e-12)


FUNCTIONAL_CASES = {  # (function of tuple inputs, shapes of the inputs, whether they are passed as a tuple)
    "tensor_to_tensor": (lambda a: (a.sin() * a).sum(-1), [(2, 3)], False),
    "tensor_to_scalar": (lambda a: (a.exp() * a.cos()).sum(), [(2, 3)], False),
    "tuple_to_tensor": (lambda a, b: a * b.tanh() + a ** 2, [(2, 3), (2, 3)], True),
    "one_tuple_to_scalar": (lambda a: (a ** 3).sum(), [(2, 3)], True),
    "tuple_to_scalar": (lambda a, b: (a.sin() * b).sum() + (b ** 2).sum(), [(2, 3), (3,)], True),
}


@pytest.mark.parametrize("dtype", [lm.float32, lm.float64])
@pytest.mark.parametrize("case", list(FUNCTIONAL_CASES))
def test_functional_structures_and_values_as_torch(case, dtype):
    """All six (vjp, jvp, jacobian; hessian, hvp, vhp where the output is a scalar) with tuple and
    tensor inputs and outputs on (2, 3) shapes: the nested tuple structure, every shape and dtype, and
    the values match torch's, also for a tuple output with one entry."""
    f, shapes, as_tuple = FUNCTIONAL_CASES[case]
    td = torch.float32 if dtype is lm.float32 else torch.float64
    g = lm.Graph()
    rng = np.random.default_rng(3)
    feeds = {f"i{k}": rng.uniform(-1, 1, s).astype(dtype.np) for k, s in enumerate(shapes)}
    feeds.update({f"v{k}": rng.uniform(-1, 1, s).astype(dtype.np) for k, s in enumerate(shapes)})
    ins = tuple(g.input(f"i{k}", s, dtype) for k, s in enumerate(shapes))
    vs = tuple(g.input(f"v{k}", s, dtype) for k, s in enumerate(shapes))
    tins = tuple(torch.tensor(feeds[f"i{k}"]) for k in range(len(shapes)))
    tvs = tuple(torch.tensor(feeds[f"v{k}"]) for k in range(len(shapes)))
    pick = (lambda t: t) if as_tuple else (lambda t: t[0])
    out_shape = tuple(f(*ins).shape)
    feeds["u"] = rng.uniform(-1, 1, out_shape).astype(dtype.np)
    u = g.input("u", out_shape, dtype)
    ours = {"vjp": F.vjp(f, pick(ins), u), "jvp": F.jvp(f, pick(ins), pick(vs)), "jacobian": F.jacobian(f, pick(ins)),
            "tuple_out_vjp": F.vjp(lambda *a: (f(*a),), pick(ins), (u,))}
    theirs = {"vjp": TF.vjp(f, pick(tins), torch.tensor(feeds["u"])), "jvp": TF.jvp(f, pick(tins), pick(tvs)),
              "jacobian": TF.jacobian(f, pick(tins)),
              "tuple_out_vjp": TF.vjp(lambda *a: (f(*a),), pick(tins), (torch.tensor(feeds["u"]),))}
    if out_shape == ():
        ours.update(hessian=F.hessian(f, pick(ins)), hvp=F.hvp(f, pick(ins), pick(vs)),
                    vhp=F.vhp(f, pick(ins), pick(vs)))
        theirs.update(hessian=TF.hessian(f, pick(tins)), hvp=TF.hvp(f, pick(tins), pick(tvs)),
                      vhp=TF.vhp(f, pick(tins), pick(tvs)))
    for k in ours:
        assert structure(ours[k]) == structure(theirs[k]), k
    mine, want = [t for k in ours for t in flat(ours[k])], [t for k in ours for t in flat(theirs[k])]
    tol = dict(rtol=2e-5, atol=1e-5) if dtype is lm.float32 else dict(rtol=1e-12, atol=1e-13)
    for got, w in zip(run(mine, **feeds), want):
        assert w.dtype == td and got.dtype == dtype.np
        np.testing.assert_allclose(got, w.detach().numpy(), **tol)


def test_hessian_by_two_grads_equals_functional_hessian():
    """A hessian built row by row from grad of grad (torch's create_graph=True) equals
    functional.hessian, and both equal torch's."""
    g = lm.Graph()
    x = g.input("x", (2, 3), lm.float64)

    def f(a):
        return (a.sin() * a.exp()).sum() * (a ** 2).sum() + (a[0] * a[1].cos()).sum()

    (d1,) = lm.autograd.grad(f(x), x)
    flat1 = d1.reshape(-1)
    rows = [lm.autograd.grad(flat1[k], x, create_graph=True)[0] for k in range(6)]
    H = F.hessian(f, x)
    xv = YV
    tH = TF.hessian(f, torch.tensor(xv))
    got = run([*rows, H], x=xv)
    np.testing.assert_allclose(np.stack(got[:6]).reshape(2, 3, 2, 3), tH.numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(got[6], tH.numpy(), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("op", OPS)
def test_integer_inputs_are_refused_naming_the_function(op):
    """torch: "only Tensors of floating point dtype can require gradients"."""
    g = lm.Graph()
    xi = g.input("xi", (3,), lm.int32)
    with pytest.raises(RuntimeError):
        call_op(TF, op, lambda a: (a * 1.5).sum(), torch.ones(3, dtype=torch.int32), torch.ones(3, dtype=torch.int32))
    with pytest.raises(TypeError, match=f"^{op}: input 0 has dtype int32"):
        call_op(F, op, lambda a: (a * 1.5).sum(), xi, xi)


def test_functional_v_rules_and_unused_inputs_as_torch():
    """v=None only for a single one-element output (vjp) or input (jvp, hvp, vhp); a v of the wrong
    shape or count is refused naming the function and v; an unused input gets zeros (functional) where
    grad gives None (allow_unused), as torch's."""
    g, x, y, *_ = twins()
    tx = torch.tensor(XV)
    bad = [("vjp", lambda mod, a, v: mod.vjp(lambda t: t.sin(), a, None), "v can only be None"),
           ("jvp", lambda mod, a, v: mod.jvp(lambda t: t.sin(), a, None), "v can only be None"),
           ("hvp", lambda mod, a, v: mod.hvp(lambda t: (t ** 3).sum(), a, None), "v can only be None"),
           ("vjp", lambda mod, a, v: mod.vjp(lambda t: t.sin(), a, v[:2]), "v has invalid size"),
           ("vhp", lambda mod, a, v: mod.vhp(lambda t: (t ** 3).sum(), a, (v, v)), "v should contain a single"),
           ("jvp", lambda mod, a, v: mod.jvp(lambda t, s: t * s, (a, a), (v,)), "v is a tuple of invalid length")]
    for op, call, msg in bad:
        with pytest.raises(RuntimeError):
            call(TF, tx, tx)
        with pytest.raises(RuntimeError, match=f"^{op}: .*{msg}"):
            call(F, x, x)
    _, (ga, gb) = F.vjp(lambda a, b: (a ** 2).sum(), (x, y))
    (gx, gy) = lm.autograd.grad((x ** 2).sum(), [x, y], allow_unused=True)
    assert gy is None and tuple(gb.shape) == (2, 3)
    got = run([ga, gb, gx], x=XV, y=YV)
    np.testing.assert_allclose(got[0], 2 * XV, rtol=1e-15)
    np.testing.assert_array_equal(got[1], np.zeros((2, 3)))
    np.testing.assert_allclose(got[2], 2 * XV, rtol=1e-15)


def test_refused_strategies_name_the_function_and_argument():
    """luminal has neither vmap nor forward-mode AD: vectorize=True and the forward-mode strategies
    are refused by name (the default reverse mode gives torch's values); an unknown strategy is an
    error naming it, as torch's."""
    g, x, *_ = twins()
    with pytest.raises(NotImplementedError, match="^jacobian: vectorize=True"):
        F.jacobian(lambda a: a.sin(), x, vectorize=True)
    with pytest.raises(NotImplementedError, match="^jacobian: strategy='forward-mode'"):
        F.jacobian(lambda a: a.sin(), x, strategy="forward-mode", vectorize=True)
    with pytest.raises(NotImplementedError, match="^hessian: outer_jacobian_strategy='forward-mode'"):
        F.hessian(lambda a: a.sin().sum(), x, outer_jacobian_strategy="forward-mode", vectorize=True)
    with pytest.raises(NotImplementedError, match="^hessian: vectorize=True"):
        F.hessian(lambda a: a.sin().sum(), x, vectorize=True)
    with pytest.raises(ValueError, match="^jacobian: strategy must be 'reverse-mode' or 'forward-mode', got 'fwd'"):
        F.jacobian(lambda a: a.sin(), x, strategy="fwd")
    with pytest.raises(AssertionError):
        TF.jacobian(lambda a: a.sin(), torch.tensor(XV), strategy="fwd")

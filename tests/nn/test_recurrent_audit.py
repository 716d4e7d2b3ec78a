"""The recurrent layers as a torch user drives them, beyond tests/nn/test_recurrent.py: LSTM's
``proj_size`` (values, gradients of input, states and every parameter, a symbolic batch, state_dict
names, init, repr, an SGD step, dropout between projected layers, the states' shapes checked), float64
layers and cells against torch's float64, and the constructor's refusals (torch's ``input_size > 0``)."""

import numpy as np
import pytest
import torch
from parity import TORCH_DTYPE

import luminal as lm
from luminal import train
from luminal.nn.layers.recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell

pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              # torch's own note that its oneDNN path has no projections (it falls back to its default one)
              pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")]

LAYERS = {"RNN": RNN, "LSTM": LSTM, "GRU": GRU, "RNNCell": RNNCell, "LSTMCell": LSTMCell, "GRUCell": GRUCell}
TOL = {lm.float32: (1e-4, 1e-5), lm.float64: (1e-10, 1e-12)}  # (rtol, atol)


def randn(*shape, seed=0, scale=1.0, dtype=lm.float32):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype.np)


def pair(name, *args, dtype=lm.float32, **kwargs):
    """The luminal layer and torch's (its own initialisation, loaded into ours through its state_dict)."""
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(*args, dtype=TORCH_DTYPE[dtype], **kwargs)
    m = LAYERS[name](*args, dtype=dtype, **kwargs)
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    return m, tm


def flat(out):
    """A cell's h' or (h', c'), or a layer's (output, h_n) or (output, (h_n, c_n)), as a flat list."""
    if isinstance(out, tuple):
        return [t for o in out for t in flat(o)]
    return [out]


def close(got, want, what, dtype=lm.float32):
    want = want.detach().numpy()
    assert (got.shape, got.dtype) == (want.shape, want.dtype), f"{what}: {got.shape} {got.dtype} vs torch's"
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


def compare(name, layer_args, kw, arrays, *, dtype=lm.float32, grads=True):
    """Run luminal's and torch's layer on ``arrays`` ("x", and "h"/"c" when given: the states), compare
    every output and (``grads``) the gradients of a weighted sum of them w.r.t. the arrays and every
    parameter. Returns the luminal module."""
    m, tm = pair(name, *layer_args, dtype=dtype, **kw)
    g = lm.Graph()
    ins = {k: g.input(k, a.shape, dtype=dtype) for k, a in arrays.items()}
    tins = {k: torch.from_numpy(a.copy()).requires_grad_(grads) for k, a in arrays.items()}

    def state(d):
        if "h" not in d:
            return None
        return (d["h"], d["c"]) if "c" in d else d["h"]

    outs, touts = flat(m(ins["x"], state(ins))), flat(tm(tins["x"], state(tins)))
    fetch = list(outs)
    if grads:
        weights = [randn(*o.shape, seed=50 + i, dtype=dtype) for i, o in enumerate(touts)]
        fetch += train.grad(sum((o * g.constant(w)).sum() for o, w in zip(outs, weights)),
                            [ins[k] for k in arrays] + list(m.parameters()))
        sum((o * torch.from_numpy(w)).sum() for o, w in zip(touts, weights)).backward()
    got = lm.compile(fetch)(**arrays)
    want = touts
    labels = [f"output {i}" for i in range(len(touts))]
    if grads:
        assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]
        want = want + [tins[k].grad for k in arrays] + [p.grad for p in tm.parameters()]
        labels += [f"d/d {k}" for k in arrays] + [f"d/d {n}" for n, _ in m.named_parameters()]
    for label, a, b in zip(labels, got, want, strict=True):
        close(a, b, f"{name}{layer_args}{kw} {label}", dtype)
    return m


def states(kw, hidden, batch, *, c=True, dtype=lm.float32):
    """Initial states for an LSTM's ``kw``: h_0 with proj_size (or hidden) features, c_0 with hidden."""
    n = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    lead = (n,) if batch is None else (n, batch)
    out = {"h": randn(*lead, kw.get("proj_size") or hidden, seed=1, scale=0.5, dtype=dtype)}
    if c:
        out["c"] = randn(*lead, hidden, seed=2, scale=0.5, dtype=dtype)
    return out


# LSTM with projections -----------------------------------------------------------------------------------------

PROJ = [
    ({"proj_size": 2}, 2, True),
    ({"proj_size": 2}, 2, False),
    ({"proj_size": 3, "num_layers": 2, "bidirectional": True, "batch_first": True}, 2, True),
    ({"proj_size": 2, "bidirectional": True}, None, True),
    ({"proj_size": 1, "bias": False, "num_layers": 2}, 2, False),
]


@pytest.mark.parametrize("kw,batch,given", PROJ, ids=[f"{'-'.join(f'{k}={v}' for k, v in kw.items())}-batch={b}-"
                                                       f"{'given' if g else 'zeros'}" for kw, b, g in PROJ])
def test_lstm_proj_size(kw, batch, given):
    """h_t = W_hr (o_t * tanh(c_t)): outputs, h_n (proj_size features), c_n (hidden_size features) and the
    gradients of input, h_0, c_0 and every parameter (weight_hr_l{k} included), as torch's."""
    bf = kw.get("batch_first", False)
    shape = (4, 3) if batch is None else (batch, 4, 3) if bf else (4, batch, 3)
    arrays = {"x": randn(*shape), **(states(kw, 5, batch) if given else {})}
    compare("LSTM", (3, 5), kw, arrays)


def test_lstm_proj_size_float64_and_symbolic_batch():
    """float64 parameters and inputs, a symbolic batch B for the input and both states: one program runs
    two batch sizes, each as torch's float64 LSTM."""
    kw = {"proj_size": 2, "num_layers": 2, "batch_first": True}
    m, tm = pair("LSTM", 3, 5, dtype=lm.float64, **kw)
    g = lm.Graph()
    x = g.input("x", ("B", 4, 3), dtype=lm.float64)
    h, c = g.input("h", (2, "B", 2), dtype=lm.float64), g.input("c", (2, "B", 5), dtype=lm.float64)
    f = lm.compile(flat(m(x, (h, c))))
    for b in (1, 3):
        arrays = {"x": randn(b, 4, 3, dtype=lm.float64), **states(kw, 5, b, dtype=lm.float64)}
        t = {k: torch.from_numpy(a) for k, a in arrays.items()}
        for i, (a, w) in enumerate(zip(f(**arrays), flat(tm(t["x"], (t["h"], t["c"]))), strict=True)):
            close(a, w, f"batch {b}, output {i}", lm.float64)


def test_lstm_proj_size_parameters():
    """torch's state_dict names, order and shapes (weight_hr_l{k}: (proj_size, hidden_size); the recurrent
    and upper layers' input weights sized by proj_size), all_weights, repr, and every parameter drawn
    from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) (not proj_size's bound)."""
    kw = {"proj_size": 3, "num_layers": 2, "bidirectional": True}
    torch.manual_seed(0)
    tm = torch.nn.LSTM(5, 16, **kw)
    lm.manual_seed(0)
    m = LSTM(5, 16, **kw)
    assert [(k, v.shape) for k, v in m.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in tm.state_dict().items()]
    assert [[tuple(w.shape) for w in ws] for ws in m.all_weights] == \
        [[tuple(w.shape) for w in ws] for ws in tm.all_weights]
    assert repr(m) == repr(tm) == "LSTM(5, 16, proj_size=3, num_layers=2, bidirectional=True)"
    bound = 1 / np.sqrt(16)
    for name, p in m.named_parameters():
        assert np.abs(p.data).max() <= bound, name
    values = np.concatenate([p.data.ravel() for p in m.parameters()])
    assert np.abs(values).max() > 0.95 * bound
    assert abs(values.std() - bound / np.sqrt(3)) < 0.1 * bound
    assert list(LSTM(5, 16, proj_size=3, bias=False).state_dict()) == ["weight_ih_l0", "weight_hh_l0", "weight_hr_l0"]


def test_lstm_proj_size_sgd_step_and_dropout():
    """One SGD step through a projected two-layer LSTM (train.compile_step) leaves torch's parameters;
    eval mode has no dropout, and dropout p=1 in training mode (deterministic: layer 1 sees zeros) is
    torch's."""
    m, tm = pair("LSTM", 3, 5, proj_size=2, num_layers=2, dropout=1.0)
    xs = randn(4, 2, 3)
    tm.train()
    tout, (th, tc) = tm(torch.from_numpy(xs))
    g = lm.Graph()
    x = g.input("x", (4, 2, 3))
    out, (h, c) = m(x)  # (training mode: the default)
    for i, (a, w) in enumerate(zip(lm.compile([out, h, c])(x=xs), [tout, th, tc], strict=True)):
        close(a, w, f"dropout=1, output {i}")

    m, tm = pair("LSTM", 3, 5, proj_size=2, num_layers=2, dropout=1.0)
    m.eval()
    tm.eval()
    g = lm.Graph()
    x = g.input("x", (4, 2, 3))
    out, (h, c) = m(x)
    step = train.compile_step((out * out).sum() + h.sum() + c.sum(), train.SGD(m.parameters(), lr=0.1))
    tout, (th, tc) = tm(torch.from_numpy(xs))
    tloss = (tout * tout).sum() + th.sum() + tc.sum()
    tloss.backward()
    torch.optim.SGD(tm.parameters(), lr=0.1).step()
    np.testing.assert_allclose(step(x=xs), tloss.item(), rtol=1e-5)
    for (k, v), (tk, tv) in zip(m.state_dict().items(), tm.state_dict().items(), strict=True):
        assert k == tk
        np.testing.assert_allclose(v, tv.detach().numpy(), rtol=1e-4, atol=1e-6, err_msg=k)


def test_lstm_proj_size_state_shapes_checked():
    """h_0 has proj_size features, c_0 hidden_size: each wrong one is named with the shape expected."""
    g = lm.Graph()
    x = g.input("x", (4, 2, 3))
    m = LSTM(3, 5, proj_size=2)
    with pytest.raises(ValueError, match=r"LSTM\(3, 5, proj_size=2\): expected h_0 of shape \(1, 2, 2\) "
                                         r"\(num_layers \* num_directions, N, proj_size\), got \(1, 2, 5\)"):
        m(x, (g.input("h5", (1, 2, 5)), g.input("c5", (1, 2, 5))))
    with pytest.raises(ValueError, match=r"expected c_0 of shape \(1, 2, 5\) \(num_layers \* num_directions, N, "
                                         r"hidden_size\), got \(1, 2, 2\)"):
        m(x, (g.input("h2", (1, 2, 2)), g.input("c2", (1, 2, 2))))
    with pytest.raises(ValueError, match=r"for an unbatched 2-d input, h_0 should also be 2-d \(1, 2\)"):
        m(g.input("u", (4, 3)), (g.input("hu", (1, 1, 2)), g.input("cu", (1, 5))))


@pytest.mark.parametrize("proj", [5, 6])
def test_proj_size_not_below_hidden_size_refused(proj):
    with pytest.raises(ValueError, match=rf"LSTM: proj_size has to be smaller than hidden_size, got proj_size={proj} "
                                         r"and hidden_size=5"):
        LSTM(3, 5, proj_size=proj)
    for layer in (RNN, GRU):
        with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM"):
            layer(3, 5, proj_size=2)


# float64 ---------------------------------------------------------------------------------------------------------

F64 = [("RNN", {"nonlinearity": "relu", "num_layers": 2, "bidirectional": True}), ("LSTM", {"batch_first": True}),
       ("GRU", {"num_layers": 2, "bias": False})]


@pytest.mark.parametrize("name,kw", F64, ids=[n for n, _ in F64])
def test_float64_layers(name, kw):
    """dtype=float64 layers: values and gradients to float64 precision (torch's float64 as reference)."""
    bf = kw.get("batch_first", False)
    n = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    arrays = {"x": randn(*((2, 5, 3) if bf else (5, 2, 3)), dtype=lm.float64),
              "h": randn(n, 2, 4, seed=1, scale=0.5, dtype=lm.float64)}
    if name == "LSTM":
        arrays["c"] = randn(n, 2, 4, seed=2, scale=0.5, dtype=lm.float64)
    compare(name, (3, 4), kw, arrays, dtype=lm.float64)


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_float64_cells(name):
    arrays = {"x": randn(2, 3, dtype=lm.float64), "h": randn(2, 4, seed=1, scale=0.5, dtype=lm.float64)}
    if name == "LSTMCell":
        arrays["c"] = randn(2, 4, seed=2, scale=0.5, dtype=lm.float64)
    compare(name, (3, 4), {}, arrays, dtype=lm.float64)


# constructor and input checks ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_input_size_zero_refused_as_torch(name):
    """torch's RNN, LSTM and GRU require input_size > 0 (its cells accept 0, and so do ours)."""
    with pytest.raises(ValueError):
        getattr(torch.nn, name)(0, 4)
    with pytest.raises(ValueError, match=rf"{name}: input_size must be at least 1, got 0"):
        LAYERS[name](0, 4)
    torch.nn.RNNCell(0, 4)
    LAYERS[name + "Cell"](0, 4)


def test_wrong_inputs_name_the_shapes():
    """Wrong feature size, rank and state shape: the layer, the layout expected and the shape given."""
    g = lm.Graph()
    with pytest.raises(ValueError, match=r"GRU\(3, 4, batch_first=True\): expected input of shape \(N, L, 3\) or "
                                         r"\(L, 3\), got \(2, 5, 4\)"):
        GRU(3, 4, batch_first=True)(g.input("x", (2, 5, 4)))
    with pytest.raises(ValueError, match=r"RNN\(3, 4\): expected input of shape .* got \(3,\)"):
        RNN(3, 4)(g.input("x1", (3,)))
    with pytest.raises(ValueError, match=r"LSTM\(3, 4\): expected h_0 of shape \(1, 2, 4\) .* got \(1, 4\)"):
        LSTM(3, 4)(g.input("x2", (5, 2, 3)), (g.input("h2", (1, 4)), g.input("c2", (1, 2, 4))))
    with pytest.raises(ValueError, match=r"LSTMCell\(3, 4\): expected c of shape \(2, 4\), got \(2, 5\)"):
        LSTMCell(3, 4)(g.input("x3", (2, 3)), (g.input("h3", (2, 4)), g.input("c3", (2, 5))))
    with pytest.raises(ValueError, match=r"RNNCell\(3, 4\): expected hx of shape \(4,\), got \(1, 4\)"):
        RNNCell(3, 4)(g.input("x4", (3,)), g.input("h4", (1, 4)))
    with pytest.raises(TypeError, match=r"GRU\(3, 4\): hx must have the input's dtype float32, got float64"):
        GRU(3, 4)(g.input("x5", (5, 2, 3)), g.input("h5", (1, 2, 4), dtype=lm.float64))

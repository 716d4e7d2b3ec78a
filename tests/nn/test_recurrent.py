"""RNN, LSTM, GRU and their cells against torch's, with torch's weights loaded by name: forward outputs
and final states (layers, directions, layouts, given and zero initial states, unbatched inputs),
gradients with respect to the input, the initial states and every parameter, a few SGD steps of a
sequence classifier, dropout between layers, and the options refused."""

import warnings

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import train
from luminal.nn.layers.linear import Linear
from luminal.nn.layers.recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from luminal.nn.module import Module

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LAYERS = {"RNN": RNN, "LSTM": LSTM, "GRU": GRU, "RNNCell": RNNCell, "LSTMCell": LSTMCell, "GRUCell": GRUCell}
RTOL, ATOL = 1e-4, 1e-5


def randn(*shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def pair(name, *args, **kwargs):
    """The luminal layer and torch's, with torch's parameters (its own initialisation) loaded into ours."""
    torch.manual_seed(len(args) + 7 * len(kwargs))
    tm = getattr(torch.nn, name)(*args, **kwargs)
    m = LAYERS[name](*args, **kwargs)
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    return m, tm


def flat(out):
    """(output, h_n) or (output, (h_n, c_n)) as a flat list."""
    y, st = out
    return [y, *st] if isinstance(st, tuple) else [y, st]


def close(got, want, what=""):
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else want
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs torch's {want.shape}"
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=what)


def state_shape(name, kw, batch):
    n = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    return (n, kw["hidden"]) if batch is None else (n, batch, kw["hidden"])


def run_sequence(name, kw, *, batch=3, seq=4, feat=5, given=False, backend="cpu", grads=False, seed=0):
    """Build the layer in luminal and torch, run it on the same input (and initial states when ``given``),
    and compare outputs (and, with ``grads``, the gradients of a weighted sum of every output with
    respect to the input, the given states and every parameter)."""
    kw = dict(kw)
    hidden = kw.pop("hidden", 4)
    m, tm = pair(name, feat, hidden, **kw)
    kw["hidden"] = hidden
    bf = kw.get("batch_first", False)
    shape = (seq, feat) if batch is None else (batch, seq, feat) if bf else (seq, batch, feat)
    sym = shape if batch is None else ("B", seq, feat) if bf else (seq, "B", feat)
    arrays = {"x": randn(*shape, seed=seed)}
    if given:
        arrays["h0"] = randn(*state_shape(name, kw, batch), seed=seed + 1, scale=0.5)
        if name == "LSTM":
            arrays["c0"] = randn(*state_shape(name, kw, batch), seed=seed + 2, scale=0.5)
    g = lm.Graph()
    if grads:  # (the loss weights are constants of the arrays' shapes: a static batch)
        ins = {k: g.input(k, a.shape) for k, a in arrays.items()}
    else:  # a symbolic batch "B"
        ins = {k: g.input(k, sym if k == "x" else tuple("B" if d == batch and i == 1 else d
                                                         for i, d in enumerate(a.shape)))
               for k, a in arrays.items()}
    hx = None if not given else (ins["h0"], ins["c0"]) if name == "LSTM" else ins["h0"]
    outs = flat(m(ins["x"], hx))
    tins = {k: torch.from_numpy(a.copy()).requires_grad_(grads) for k, a in arrays.items()}
    thx = None if not given else (tins["h0"], tins["c0"]) if name == "LSTM" else tins["h0"]
    touts = flat(tm(tins["x"], thx))
    names = ["output", "h_n", "c_n"][:len(outs)]
    fetch = list(outs)
    if grads:
        weights = [randn(*o.shape, seed=50 + i) for i, o in enumerate(touts)]
        loss = sum((o * g.constant(w)).sum() for o, w in zip(outs, weights))
        wrt = [ins[k] for k in arrays] + list(m.parameters())
        fetch += train.grad(loss, wrt)
        sum((o * torch.from_numpy(w)).sum() for o, w in zip(touts, weights)).backward()
    got = lm.compile(fetch, backend=backend)(**arrays)
    for what, a, b in zip(names, got, touts):
        close(a, b, f"{name}{kw}: {what}")
    if grads:
        want = [tins[k].grad for k in arrays] + [p.grad for p in tm.parameters()]
        labels = [f"d/d {k}" for k in arrays] + [f"d/d {n}" for n, _ in m.named_parameters()]
        assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]
        for label, a, b in zip(labels, got[len(outs):], want, strict=True):
            close(a, b, f"{name}{kw}: {label}")


# forward -------------------------------------------------------------------------------------------

FORWARD = [
    ("RNN", {}),
    ("RNN", {"nonlinearity": "relu", "num_layers": 2, "batch_first": True}),
    ("RNN", {"bidirectional": True, "bias": False}),
    ("LSTM", {}),
    ("LSTM", {"batch_first": True, "bias": False}),
    ("LSTM", {"num_layers": 2, "bidirectional": True}),
    ("LSTM", {"num_layers": 2, "bidirectional": True, "batch_first": True}),
    ("GRU", {}),
    ("GRU", {"batch_first": True, "num_layers": 2}),
    ("GRU", {"bidirectional": True, "bias": False, "batch_first": True}),
]


@pytest.mark.parametrize("given", [False, True], ids=["zeros", "given"])
@pytest.mark.parametrize("name,kw", FORWARD, ids=[f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'default'}"
                                                   for n, kw in FORWARD])
def test_sequence_forward(name, kw, given):
    run_sequence(name, kw, given=given)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("given", [False, True], ids=["zeros", "given"])
def test_unbatched_input(name, given):
    """A 2-d (L, H_in) input (batch_first has no say in it), states (D*num_layers, H): as torch."""
    run_sequence(name, {"num_layers": 2, "bidirectional": True, "batch_first": True}, batch=None, given=given)


def test_one_step_and_symbolic_batch():
    """A sequence of one step; the batch is symbolic, so one compiled program runs several batch sizes."""
    m, tm = pair("LSTM", 3, 4, batch_first=True)
    g = lm.Graph()
    x = g.input("x", ("B", 1, 3))
    f = lm.compile(flat(m(x)))
    for b in (1, 5):
        xs = randn(b, 1, 3, seed=b)
        for a, w in zip(f(x=xs), flat(tm(torch.from_numpy(xs)))):
            close(a, w)


# gradients -------------------------------------------------------------------------------------------

GRADS = [
    ("RNN", {"num_layers": 2}),
    ("RNN", {"nonlinearity": "relu", "bidirectional": True, "batch_first": True}),
    ("LSTM", {}),
    ("LSTM", {"num_layers": 2, "bidirectional": True, "batch_first": True}),
    ("GRU", {"bias": False}),
    ("GRU", {"num_layers": 2, "bidirectional": True}),
]


@pytest.mark.parametrize("name,kw", GRADS, ids=[f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'default'}"
                                                 for n, kw in GRADS])
def test_sequence_grads(backend, name, kw):
    """d(weighted sum of output, h_n, c_n) / d(input, h_0, c_0, every parameter), as torch's autograd."""
    run_sequence(name, kw, batch=2, seq=3, feat=3, given=True, grads=True, backend=backend)


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_sequence_grads_zero_state(backend, name):
    """Without initial states (zeros): the recurrent weights still get their gradient from every step."""
    run_sequence(name, {"batch_first": True}, batch=2, seq=3, feat=3, grads=True, backend=backend)


# cells ---------------------------------------------------------------------------------------------------

CELLS = [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu", "bias": False}), ("LSTMCell", {}),
         ("LSTMCell", {"bias": False}), ("GRUCell", {}), ("GRUCell", {"bias": False})]


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize("given", [False, True], ids=["zeros", "given"])
@pytest.mark.parametrize("name,kw", CELLS, ids=[f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'default'}"
                                                 for n, kw in CELLS])
def test_cells(backend, name, kw, given, batched):
    """One step of each cell, its output(s) and the gradients w.r.t. input, state(s) and parameters."""
    m, tm = pair(name, 3, 4, **kw)
    lead = (2,) if batched else ()
    arrays = {"x": randn(*lead, 3, seed=1)}
    if given:
        arrays["h"] = randn(*lead, 4, seed=2, scale=0.5)
        if name == "LSTMCell":
            arrays["c"] = randn(*lead, 4, seed=3, scale=0.5)
    g = lm.Graph()
    ins = {k: g.input(k, a.shape) for k, a in arrays.items()}
    tins = {k: torch.from_numpy(a.copy()).requires_grad_(True) for k, a in arrays.items()}
    lstm = name == "LSTMCell"
    if not given:
        out, tout = m(ins["x"]), tm(tins["x"])
    elif lstm:
        out, tout = m(ins["x"], (ins["h"], ins["c"])), tm(tins["x"], (tins["h"], tins["c"]))
    else:
        out, tout = m(ins["x"], ins["h"]), tm(tins["x"], tins["h"])
    outs, touts = (list(out), list(tout)) if lstm else ([out], [tout])
    weights = [randn(*o.shape, seed=10 + i) for i, o in enumerate(touts)]
    loss = sum((o * g.constant(w)).sum() for o, w in zip(outs, weights))
    grads = train.grad(loss, [ins[k] for k in arrays] + list(m.parameters()))
    got = lm.compile(outs + list(grads), backend=backend)(**arrays)
    sum((o * torch.from_numpy(w)).sum() for o, w in zip(touts, weights)).backward()
    for a, b in zip(got, touts):
        close(a, b, f"{name} output")
    want = [tins[k].grad for k in arrays] + [p.grad for p in tm.parameters()]
    labels = list(arrays) + [n for n, _ in m.named_parameters()]
    for label, a, b in zip(labels, got[len(outs):], want, strict=True):
        close(a, b, f"{name} d/d {label}")


def test_cell_loop_matches_lstm():
    """LSTMCell applied step by step computes what LSTM does with the same weights."""
    cell, seq = LSTMCell(3, 4), LSTM(3, 4)
    seq.load_state_dict({f"{k}_l0": v for k, v in cell.state_dict().items()})
    g = lm.Graph()
    x = g.input("x", (5, "B", 3))
    out, (h, c) = seq(x)
    hc = None
    for t in range(5):
        hc = cell(x[t], hc)
    got = lm.compile([out[-1], h[0], c[0], hc[0], hc[1]])(x=randn(5, 2, 3))
    np.testing.assert_allclose(got[0], got[1], rtol=1e-6)  # the last output is h_n
    np.testing.assert_allclose(got[3], got[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[4], got[2], rtol=1e-5, atol=1e-6)


# training ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_sgd_steps_match_torch(name):
    """A tiny sequence classifier (the recurrent layer, a Linear on the last step's output): the losses of
    a few SGD steps and the parameters after them, as torch's."""

    class Classifier(Module):
        def __init__(self):
            super().__init__()
            self.rnn = LAYERS[name](3, 5, num_layers=2, batch_first=True)
            self.head = Linear(5, 2)

        def forward(self, x):
            out, _ = self.rnn(x)
            return self.head(out[:, -1])

    class TClassifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = getattr(torch.nn, name)(3, 5, num_layers=2, batch_first=True)
            self.head = torch.nn.Linear(5, 2)

        def forward(self, x):
            out, _ = self.rnn(x)
            return self.head(out[:, -1])

    torch.manual_seed(0)
    tm, m = TClassifier(), Classifier()
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    g = lm.Graph()
    x, y = g.input("x", ("B", 4, 3)), g.input("y", ("B",), dtype=lm.int32)
    step = train.compile_step(train.cross_entropy(m(x), y), train.SGD(m.parameters(), lr=0.5))
    topt = torch.optim.SGD(tm.parameters(), lr=0.5)
    losses, tlosses = [], []
    for i in range(4):
        xs, ys = randn(6, 4, 3, seed=i), np.random.default_rng(i).integers(0, 2, 6).astype(np.int32)
        losses.append(step(x=xs, y=ys))
        topt.zero_grad()
        loss = torch.nn.functional.cross_entropy(tm(torch.from_numpy(xs)), torch.from_numpy(ys).long())
        loss.backward()
        topt.step()
        tlosses.append(loss.item())
    np.testing.assert_allclose(losses, tlosses, rtol=RTOL, atol=ATOL)
    assert losses[-1] != losses[0]
    for (k, v), (tk, tv) in zip(m.state_dict().items(), tm.state_dict().items()):
        assert k == tk
        np.testing.assert_allclose(v, tv.detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=k)


# dropout between layers ---------------------------------------------------------------------------------------

def _outputs(m, x_arr, runs=1):
    g = lm.Graph()
    x = g.input("x", x_arr.shape)
    f = lm.compile(flat(m(x)))
    return [f(x=x_arr) for _ in range(runs)]


def test_dropout_between_layers():
    """In training mode, dropout on every layer's output but the last one's (and not on h_n); in eval mode
    none: the outputs are torch's eval-mode outputs. With p=1 the training-mode result is deterministic
    (layer 1 sees zeros) and is torch's."""
    m, tm = pair("GRU", 3, 4, num_layers=2, dropout=0.5)
    x = randn(5, 2, 3)
    tm.eval()
    want = [t.detach().numpy() for t in flat(tm(torch.from_numpy(x)))]
    m.eval()
    (ev,) = _outputs(m, x)
    for a, b in zip(ev, want):
        close(a, b, "eval mode")
    m.train()
    first, second = _outputs(m, x, runs=2)
    assert not np.allclose(first[0], want[0])  # layer 1's input was dropped out
    assert not np.allclose(first[0], second[0])  # a fresh mask on every run
    np.testing.assert_allclose(first[1][0], want[1][0], rtol=RTOL, atol=ATOL)  # layer 0's h_n: no dropout
    assert not np.allclose(first[1][1], want[1][1])

    m1, tm1 = pair("LSTM", 3, 4, num_layers=3, dropout=1.0, bidirectional=True)
    tm1.train()
    want = flat(tm1(torch.from_numpy(x)))
    m1.train()
    (got,) = _outputs(m1, x)
    for what, a, b in zip(["output", "h_n", "c_n"], got, want):
        close(a, b, f"dropout=1: {what}")


def test_dropout_with_one_layer_warns_as_torch():
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        LSTM(3, 4, dropout=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        LSTM(3, 4, num_layers=2, dropout=0.2)


# parameters, initialisation, repr --------------------------------------------------------------------------------

@pytest.mark.parametrize("name,args,kw", [
    ("RNN", (3, 4), {"num_layers": 3, "bidirectional": True}),
    ("LSTM", (3, 4), {"num_layers": 2, "bias": False}),
    ("GRU", (3, 4), {"num_layers": 2, "bidirectional": True, "batch_first": True, "dropout": 0.5}),
    ("RNN", (3, 4, 2, "relu", False, True, 0.25, True), {}),
    ("RNNCell", (3, 4), {"nonlinearity": "relu", "bias": False}),
    ("LSTMCell", (3, 4), {}),
    ("GRUCell", (3, 4), {}),
])
def test_names_shapes_init_and_repr(name, args, kw):
    """torch's state_dict names, order and shapes, its repr, and its initialisation distribution
    (U(-1/sqrt(hidden), 1/sqrt(hidden)) for every parameter)."""
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(*args, **kw)
    lm.manual_seed(0)
    m = LAYERS[name](*args, **kw)
    assert [(k, v.shape) for k, v in m.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in tm.state_dict().items()]
    assert repr(m) == repr(tm)
    bound = 1 / np.sqrt(4)
    values = np.concatenate([p.data.ravel() for p in m.parameters()])
    assert np.abs(values).max() <= bound and np.abs(values).max() > 0.8 * bound
    assert abs(values.std() - bound / np.sqrt(3)) < 0.25 * bound
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})


def test_all_weights_and_flatten_parameters():
    m = LSTM(3, 4, num_layers=2, bidirectional=True)
    m.flatten_parameters()
    assert len(m.all_weights) == 4 and all(len(w) == 4 for w in m.all_weights)
    assert m.all_weights[1][0] is m.weight_ih_l0_reverse
    assert [len(w) for w in GRU(3, 4, bias=False).all_weights] == [2]


# compile time over a long sequence ---------------------------------------------------------------------------------

def test_long_sequence_rolls_into_loops():
    """A T=64 LSTM, forward and backward: the steps are rolled into loops (one body called once per step),
    so the program compiles quickly; and it computes torch's values."""
    m, tm = pair("LSTM", 3, 4)
    g = lm.Graph()
    x = g.input("x", (64, "B", 3))
    out, (h, c) = m(x)
    grads = train.grad((out * out).sum() + h.sum(), [x, *m.parameters()])
    f = lm.compile([out, *grads])
    xs = randn(64, 2, 3)
    got = f(x=xs)
    tx = torch.from_numpy(xs).requires_grad_(True)
    tout, (th, _) = tm(tx)
    ((tout * tout).sum() + th.sum()).backward()
    close(got[0], tout, "output")
    for a, b in zip(got[1:], [tx.grad] + [p.grad for p in tm.parameters()]):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-3, atol=1e-4)
    trips = [loop["trips"] for loop in f.report(show=False).loops]
    assert sum(t >= 60 for t in trips) >= 2, trips  # the forward steps and the backward steps


# refused options and wrong inputs -------------------------------------------------------------------------------

def test_refused_options():
    with pytest.raises(ValueError, match="LSTM: proj_size has to be smaller than hidden_size"):
        LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="GRU: proj_size argument is only supported for LSTM"):
        GRU(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="RNN: dropout should be a number in range"):
        RNN(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="RNN: unknown nonlinearity"):
        RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="RNNCell: unknown nonlinearity"):
        RNNCell(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="hidden_size must be at least 1"):
        GRU(3, 0)
    with pytest.raises(TypeError, match="num_layers must be an int"):
        LSTM(3, 4, num_layers=1.5)


def test_torch_packed_sequence_refused():
    """torch's PackedSequence is refused naming luminal's (tests/nn/test_rnn_utils.py runs those)."""
    packed = torch.nn.utils.rnn.pack_padded_sequence(torch.zeros(4, 2, 3), [4, 2])
    with pytest.raises(TypeError, match=r"LSTM\(3, 4\): got a torch.*luminal.nn.utils.rnn.pack_padded_sequence"):
        LSTM(3, 4)(packed)


def test_symbolic_sequence_length_refused():
    g = lm.Graph()
    x = g.input("x", ("T", 2, 3))
    with pytest.raises(NotImplementedError, match=r"GRU\(3, 4\).*sequence length must be static"):
        GRU(3, 4)(x)
    xb = g.input("xb", (2, "T", 3))
    with pytest.raises(NotImplementedError, match="sequence length must be static"):
        LSTM(3, 4, batch_first=True)(xb)


def test_bad_inputs_name_the_layer():
    g = lm.Graph()
    x = g.input("x", (5, 2, 3))
    with pytest.raises(ValueError, match=r"LSTM\(4, 4\).*expected input of shape \(L, N, 4\)"):
        LSTM(4, 4)(x)
    with pytest.raises(ValueError, match=r"RNN\(3, 4\).*expected input of shape"):
        RNN(3, 4)(g.input("x4", (5, 2, 2, 3)))
    with pytest.raises(ValueError, match=r"GRU\(3, 4, num_layers=2\).*expected hx of shape \(2, 2, 4\)"):
        GRU(3, 4, num_layers=2)(x, g.input("h", (1, 2, 4)))
    with pytest.raises(TypeError, match=r"LSTM\(3, 4\).*hx must be a tuple \(h_0, c_0\)"):
        LSTM(3, 4)(x, g.input("h1", (1, 2, 4)))
    with pytest.raises(ValueError, match=r"for an unbatched 2-d input, hx should also be 2-d"):
        RNN(3, 4)(g.input("u", (5, 3)), g.input("hu", (1, 1, 4)))
    with pytest.raises(TypeError, match=r"LSTM\(3, 4\).*expected a float input"):
        LSTM(3, 4)(g.input("i", (5, 2, 3), dtype=lm.int32))
    with pytest.raises(TypeError, match=r"GRU\(3, 4\).*expected a GraphTensor|GRU\(3, 4\).*input"):
        GRU(3, 4)(np.zeros((5, 2, 3), np.float32))
    with pytest.raises(ValueError, match=r"LSTMCell\(3, 4\).*expected input of shape \(N, 3\) or \(3,\)"):
        LSTMCell(3, 4)(g.input("c3", (2, 2, 3)))
    with pytest.raises(ValueError, match=r"GRUCell\(3, 4\).*expected hx of shape \(2, 4\)"):
        GRUCell(3, 4)(x[0], g.input("hc", (3, 4)))


def test_errors_about_an_unbatched_input_show_it_as_given():
    """The operands listed were the input after its batch dim was added: (5, 1, 3) for a (5, 3) input."""
    g = lm.Graph()
    with pytest.raises(ValueError, match=r"operand 0: \(5, 3\) float32") as e:
        RNN(3, 4)(g.input("u", (5, 3)), g.input("h", (1, 1, 4)))
    assert "(5, 1, 3)" not in str(e.value)
    with pytest.raises(ValueError, match=r"operand 0: \(3,\) float32"):
        RNNCell(3, 4)(g.input("c", (3,)), g.input("hc", (1, 4)))

"""``nn.utils.rnn`` against torch's: pad_sequence, pack_padded_sequence / pad_packed_sequence (batch_sizes,
sorted and unsorted indices, padding_value, total_length), pack_sequence, unpad_sequence and
unpack_sequence, and the recurrent layers run on a packed batch: outputs, h_n / c_n and the gradients
of the input, the initial states and every parameter, with lengths as host data and as a graph input.
The edge cases are in test_rnn_utils_audit.py."""

import numpy as np
import pytest
import torch
import torch.nn.utils.rnn as trnn

import luminal as lm
from luminal import nn, train
from luminal.nn.layers.recurrent import GRU, LSTM, RNN
from luminal.nn.utils.rnn import (
    PackedSequence,
    pack_padded_sequence,
    pack_sequence,
    pad_packed_sequence,
    pad_sequence,
    unpack_sequence,
    unpad_sequence,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LAYERS = {"RNN": RNN, "LSTM": LSTM, "GRU": GRU}
TOL = {lm.float32: (1e-4, 1e-5), lm.float64: (1e-10, 1e-12)}  # (rtol, atol)
NP = {lm.float32: np.float32, lm.float64: np.float64}
TORCH = {lm.float32: torch.float32, lm.float64: torch.float64}


def randn(*shape, seed=0, scale=1.0, dtype=lm.float32):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(NP[dtype])


def close(got, want, what, dtype=lm.float32):
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs torch's {want.shape}"
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


def run_packed(name, kw, lengths, *, steps=None, graph_lengths=False, given=False, enforce_sorted=False,
               padding_value=0.0, total_length=None, feat=3, hidden=4, dtype=lm.float32, seed=0):
    """One layer of torch's ``name`` with ``kw`` (its weights loaded into luminal's) on a batch packed with
    ``lengths`` (as a graph int32 input when ``graph_lengths``), initial states when ``given``; compares the
    padded output (pad_packed_sequence with ``padding_value`` and ``total_length``), h_n (and c_n), and the
    gradients of a weighted sum of them with respect to the input, the states and every parameter."""
    kw = dict(kw)
    torch.manual_seed(seed)
    tm = getattr(torch.nn, name)(feat, hidden, dtype=TORCH[dtype], **kw)
    m = LAYERS[name](feat, hidden, dtype=dtype, **kw)
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    bf = kw.get("batch_first", False)
    batch, steps = len(lengths), steps or max(lengths)
    arrays = {"x": randn(*((batch, steps) if bf else (steps, batch)), feat, seed=seed, dtype=dtype)}
    if given:
        n = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
        arrays["h0"] = randn(n, batch, kw.get("proj_size") or hidden, seed=seed + 1, scale=0.5, dtype=dtype)
        if name == "LSTM":
            arrays["c0"] = randn(n, batch, hidden, seed=seed + 2, scale=0.5, dtype=dtype)
    g = lm.Graph()
    ins = {k: g.input(k, a.shape, dtype=dtype) for k, a in arrays.items()}
    feeds = dict(arrays)
    if graph_lengths:
        lens = g.input("lengths", (batch,), dtype=lm.int32)
        feeds["lengths"] = np.array(lengths, np.int32)
    else:
        lens = lengths
    tins = {k: torch.from_numpy(a.copy()).requires_grad_() for k, a in arrays.items()}

    def state(d):
        if "h0" not in d:
            return None
        return (d["h0"], d["c0"]) if name == "LSTM" else d["h0"]

    def run(lib, x, hx, lens, layer):
        packed = lib.pack_padded_sequence(x, lens, batch_first=bf, enforce_sorted=enforce_sorted)
        out, st = layer(packed, hx)
        padded, _ = lib.pad_packed_sequence(out, batch_first=bf, padding_value=padding_value,
                                            total_length=total_length)
        return [padded, *(st if isinstance(st, tuple) else (st,))]

    outs = run(nn.utils.rnn, ins["x"], state(ins), lens, m)
    touts = run(trnn, tins["x"], state(tins), torch.tensor(lengths), tm)
    weights = [randn(*o.shape, seed=50 + i, dtype=dtype) for i, o in enumerate(touts)]
    loss = sum((o * g.constant(w)).sum() for o, w in zip(outs, weights))
    wrt = [ins[k] for k in arrays] + list(m.parameters())
    got = lm.compile(outs + train.grad(loss, wrt))(**feeds)
    sum((o * torch.from_numpy(w)).sum() for o, w in zip(touts, weights)).backward()
    labels = ["output", "h_n", "c_n"][:len(outs)] + [f"d/d {k}" for k in arrays] + \
        [f"d/d {n}" for n, _ in m.named_parameters()]
    want = touts + [tins[k].grad for k in arrays] + [p.grad for p in tm.parameters()]
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]
    for label, a, b in zip(labels, got, want, strict=True):
        close(a, b, f"{name}{kw} lengths={lengths}: {label}", dtype)


# the layers on packed batches -----------------------------------------------------------------------

LAYER_CASES = [
    ("RNN", {}),
    ("RNN", {"nonlinearity": "relu", "bidirectional": True}),
    ("LSTM", {"num_layers": 2, "bidirectional": True}),
    ("LSTM", {"batch_first": True}),
    ("GRU", {"num_layers": 2, "batch_first": True}),
    ("GRU", {"bidirectional": True, "bias": False}),
]


@pytest.mark.parametrize("name,kw", LAYER_CASES, ids=[f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'default'}"
                                                      for n, kw in LAYER_CASES])
def test_layer_on_packed_host_lengths(name, kw):
    """Unsorted host lengths, given initial states: outputs zero past each end (padded with -1 by
    pad_packed_sequence), h_n / c_n at each sequence's own last step, every gradient as torch's."""
    run_packed(name, kw, [3, 5, 1, 4], given=True, padding_value=-1.0)


@pytest.mark.parametrize("name,kw", [("RNN", {"bidirectional": True}), ("LSTM", {"num_layers": 2}),
                                     ("GRU", {"bidirectional": True, "batch_first": True})],
                         ids=["RNN-bidirectional", "LSTM-2layers", "GRU-bidirectional-batch_first"])
def test_layer_on_packed_graph_lengths(name, kw):
    """Lengths as a graph int32 input, shorter than the padded length: the output keeps the padded length
    unless total_length (here torch's padded length) says otherwise; zero initial states."""
    run_packed(name, kw, [2, 4, 3], steps=5, graph_lengths=True, total_length=5)


def test_lstm_proj_size_packed():
    """LSTM with projections: h has proj_size features, c hidden_size; both at each sequence's end."""
    run_packed("LSTM", {"proj_size": 2, "bidirectional": True}, [4, 2, 3], given=True)


# pad_sequence ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence_graph_and_numpy(batch_first, padding_side):
    """Graph tensors (values and gradients) and numpy arrays (a numpy batch), as torch's."""
    arrays = [randn(n, 2, seed=n) for n in (3, 1, 4)]
    want = trnn.pad_sequence([torch.from_numpy(a).requires_grad_() for a in arrays], batch_first=batch_first,
                             padding_value=7.0, padding_side=padding_side)
    g = lm.Graph()
    xs = [g.input(f"x{i}", a.shape) for i, a in enumerate(arrays)]
    out = pad_sequence(xs, batch_first=batch_first, padding_value=7.0, padding_side=padding_side)
    w = randn(*want.shape, seed=9)
    got = lm.compile([out, *train.grad((out * g.constant(w)).sum(), xs)])(
        **{f"x{i}": a for i, a in enumerate(arrays)})
    close(got[0], want, "padded")
    for i, a in enumerate(arrays):  # the gradient of x_i is its slice of w
        n = a.shape[0]
        sl = slice(0, n) if padding_side == "right" else slice(want.shape[1 if batch_first else 0] - n, None)
        close(got[1 + i], w[i, sl] if batch_first else w[sl, i], f"d/d x{i}")
    npout = pad_sequence(arrays, batch_first=batch_first, padding_value=7.0, padding_side=padding_side)
    assert isinstance(npout, np.ndarray) and npout.dtype == np.float32
    close(npout, want, "numpy padded")


# pack / pad round trips -------------------------------------------------------------------------------

@pytest.mark.parametrize("enforce_sorted,lengths", [(True, [4, 4, 2, 1]), (False, [2, 4, 1, 3])])
@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_pad_round_trip(enforce_sorted, lengths, batch_first):
    """batch_sizes, sorted_indices and unsorted_indices are torch's (int64 numpy); pad_packed_sequence gives
    torch's padded batch (padding_value, total_length, batch_first) and lengths; the padded part of the
    input (here past the longest length too) gets no gradient."""
    shape = (4, 6, 2) if batch_first else (6, 4, 2)
    x = randn(*shape)
    tx = torch.from_numpy(x.copy()).requires_grad_()
    tp = trnn.pack_padded_sequence(tx, torch.tensor(lengths), batch_first=batch_first, enforce_sorted=enforce_sorted)
    ty, tl = trnn.pad_packed_sequence(tp, batch_first=batch_first, padding_value=2.5, total_length=7)
    g = lm.Graph()
    xi = g.input("x", shape)
    p = pack_padded_sequence(xi, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
    assert isinstance(p, PackedSequence) and p.batch_sizes.dtype == np.int64
    np.testing.assert_array_equal(p.batch_sizes, tp.batch_sizes.numpy())
    for ours, theirs in ((p.sorted_indices, tp.sorted_indices), (p.unsorted_indices, tp.unsorted_indices)):
        if theirs is None:
            assert ours is None
        else:
            np.testing.assert_array_equal(ours, theirs.numpy())
    y, lens = pad_packed_sequence(p, batch_first=batch_first, padding_value=2.5, total_length=7)
    assert lens.dtype == np.int64
    np.testing.assert_array_equal(lens, tl.numpy())
    w = randn(*ty.shape, seed=3)
    got = lm.compile([y, train.grad((y * g.constant(w)).sum(), [xi])[0]])(x=x)
    (ty * torch.from_numpy(w)).sum().backward()
    close(got[0], ty, "padded")
    close(got[1], tx.grad, "d/d x")


def test_pack_sequence_unpack_unpad():
    """pack_sequence (enforce_sorted=False) then unpack_sequence gives the sequences back; unpad_sequence
    cuts a padded batch (graph or numpy) as torch's."""
    arrays = [randn(n, 3, seed=n) for n in (2, 5, 3)]
    g = lm.Graph()
    xs = [g.input(f"x{i}", a.shape) for i, a in enumerate(arrays)]
    p = pack_sequence(xs, enforce_sorted=False)
    tp = trnn.pack_sequence([torch.from_numpy(a) for a in arrays], enforce_sorted=False)
    np.testing.assert_array_equal(p.batch_sizes, tp.batch_sizes.numpy())
    np.testing.assert_array_equal(p.sorted_indices, tp.sorted_indices.numpy())
    back = unpack_sequence(p)
    got = lm.compile(back)(**{f"x{i}": a for i, a in enumerate(arrays)})
    for a, b in zip(got, arrays, strict=True):
        close(a, b, "unpacked")
    padded = randn(5, 3, 2)
    want = trnn.unpad_sequence(torch.from_numpy(padded), torch.tensor([5, 2, 3]))
    for a, b in zip(unpad_sequence(padded, [5, 2, 3]), want, strict=True):
        close(a, b, "unpadded numpy")
    gp = g.input("p", padded.shape)
    outs = unpad_sequence(gp.transpose(0, 1), [5, 2, 3], batch_first=True)
    for a, b in zip(lm.compile(outs)(p=padded), want, strict=True):
        close(a, b, "unpadded graph, batch_first")


def test_public_names():
    """torch's import paths: ``nn.utils.rnn.X`` and ``from luminal.nn.utils.rnn import X``; clip_grad_* stay."""
    assert lm.nn.utils.rnn.pad_sequence is pad_sequence
    assert callable(lm.nn.utils.clip_grad_norm_) and callable(lm.nn.utils.clip_grad_value_)
    assert PackedSequence._fields == trnn.PackedSequence._fields


# errors -----------------------------------------------------------------------------------------------

def test_bad_lengths_raise_torchs_errors():
    g = lm.Graph()
    x = g.input("x", (4, 3, 2))
    with pytest.raises(RuntimeError, match="Length of all samples has to be greater than 0"):
        pack_padded_sequence(x, [4, 0, 1])
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order when `enforce_sorted` is True"):
        pack_padded_sequence(x, [1, 4, 2])
    with pytest.raises(ValueError, match=r"4 is longer than the padded sequence length 3"):
        pack_padded_sequence(x, [4, 2, 1, 1], batch_first=True)
    with pytest.raises(ValueError, match=r"Expected `len\(lengths\)` to be equal to batch_size, but got 2"):
        pack_padded_sequence(x, [4, 2])
    p = pack_padded_sequence(x, [3, 2, 1])
    with pytest.raises(ValueError, match="total_length=2 and max sequence length being 3"):
        pad_packed_sequence(p, total_length=2)

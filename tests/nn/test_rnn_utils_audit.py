"""``nn.utils.rnn`` edge cases beyond tests/nn/test_rnn_utils.py, against torch: more layer shapes on
packed batches (projections, three layers, ties, lengths of 1 and of the whole batch, float64, NaN in the
padding), graph lengths (a symbolic batch, run-time guards with torch's errors, total_length shorter
and longer, batch_sizes and sorted_indices at run time), repacking a PackedSequence, the lengths torch
accepts and refuses, and the errors of pad_sequence, unpad_sequence and the layers."""

import numpy as np
import pytest
import torch
import torch.nn.utils.rnn as trnn
from test_rnn_utils import close, randn, run_packed

import luminal as lm
from luminal import train
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

pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")]


# the layers ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,kw,lengths,opts", [
    ("LSTM", {"proj_size": 2, "num_layers": 2, "batch_first": True}, [2, 5, 3], {"graph_lengths": True}),
    ("GRU", {"num_layers": 3, "bidirectional": True}, [4, 4, 2, 2], {"enforce_sorted": True, "given": True}),
    ("RNN", {"nonlinearity": "relu", "num_layers": 2, "bidirectional": True, "batch_first": True},
     [1, 3, 1], {"given": True, "total_length": 6, "padding_value": 9.0}),
    ("LSTM", {"bidirectional": True}, [4, 4, 4], {"given": True}),
    ("RNN", {"bidirectional": True}, [3, 1, 2], {"dtype": lm.float64, "given": True}),
    ("GRU", {"batch_first": True}, [1], {"graph_lengths": True, "steps": 3, "total_length": 3}),
], ids=["LSTM-proj-2layers-graph", "GRU-3layers-bidi-ties-sorted", "RNN-relu-bidi-len1-total_length",
        "LSTM-bidi-full-lengths", "RNN-bidi-float64", "GRU-batch1-graph"])
def test_layer_cases(name, kw, lengths, opts):
    run_packed(name, kw, lengths, **opts)


def test_nan_padding_reaches_nothing():
    """torch never reads the padding: NaN there leaves outputs, states and every gradient finite and torch's."""
    torch.manual_seed(0)
    tm, m = torch.nn.LSTM(2, 3, bidirectional=True), LSTM(2, 3, bidirectional=True)
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    x = randn(4, 2, 2)
    x[2:, 1] = np.nan  # (sequence 1 has 2 steps)
    g = lm.Graph()
    xi = g.input("x", x.shape)
    out, (h, c) = m(pack_padded_sequence(xi, [4, 2]))
    y, _ = pad_packed_sequence(out)
    loss = y.sum() + h.sum() + c.sum()
    got = lm.compile([y, h, c, *train.grad(loss, [xi, *m.parameters()])])(x=x)
    tx = torch.from_numpy(x).requires_grad_()
    to, (th, tc) = tm(trnn.pack_padded_sequence(tx, [4, 2]))
    ty, _ = trnn.pad_packed_sequence(to)
    (ty.sum() + th.sum() + tc.sum()).backward()
    want = [ty, th, tc, tx.grad, *[p.grad for p in tm.parameters()]]
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        close(a, b, f"result {i}")


def test_symbolic_batch_graph_lengths():
    """One compiled program, batches of 2 and 4 with their lengths: torch's outputs and final states."""
    torch.manual_seed(1)
    tm, m = torch.nn.GRU(3, 4, batch_first=True), GRU(3, 4, batch_first=True)
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    g = lm.Graph()
    xi, li = g.input("x", ("B", 5, 3)), g.input("lengths", ("B",), dtype=lm.int32)
    out, h = m(pack_padded_sequence(xi, li, batch_first=True, enforce_sorted=False))
    f = lm.compile([pad_packed_sequence(out, batch_first=True, total_length=5)[0], h])
    for lengths in ([2, 5], [3, 1, 4, 5]):
        x = randn(len(lengths), 5, 3, seed=len(lengths))
        to, th = tm(trnn.pack_padded_sequence(torch.from_numpy(x), torch.tensor(lengths), batch_first=True,
                                              enforce_sorted=False))
        ty, _ = trnn.pad_packed_sequence(to, batch_first=True, total_length=5)
        got = f(x=x, lengths=np.array(lengths, np.int32))
        close(got[0], ty, f"output {lengths}")
        close(got[1], th, f"h_n {lengths}")


def test_hx_with_the_wrong_batch():
    g = lm.Graph()
    p = pack_padded_sequence(g.input("x", (3, 2, 4)), [3, 1])
    with pytest.raises(ValueError, match=r"GRU\(4, 3\): expected hx of shape \(1, 2, 3\)"):
        GRU(4, 3)(p, g.input("h", (1, 3, 3)))
    with pytest.raises(ValueError, match=r"PackedSequence data \(L, N, 5\)"):
        RNN(5, 3)(p)


# graph lengths -----------------------------------------------------------------------------------------

def test_graph_lengths_guards_raise_torchs_errors():
    """Lengths only a run sees are checked before the program runs: torch's errors for a length of 0 and
    unsorted lengths with enforce_sorted, luminal's for a length past the padding, torch's for a
    total_length shorter than the longest; total_length below the padded length cuts the padding."""
    g = lm.Graph()
    x, li = g.input("x", (4, 3, 1)), g.input("lengths", (3,), dtype=lm.int32)
    y, lens = pad_packed_sequence(pack_padded_sequence(x, li), padding_value=-1.0, total_length=3)
    assert y.shape == (3, 3, 1) and lens is li
    f = lm.compile([y])
    ones = np.ones((4, 3, 1), np.float32)
    cases = [([3, 0, 1], RuntimeError, "Length of all samples has to be greater than 0"),
             ([5, 2, 1], ValueError, "a length of 5 is longer than the padded sequence length 4"),
             ([2, 3, 1], RuntimeError, "must be sorted in decreasing order when `enforce_sorted` is True"),
             ([4, 2, 1], ValueError, "total_length=3 and max sequence length being 4")]
    for lengths, kind, msg in cases:
        with pytest.raises(kind, match=msg):
            f(x=ones, lengths=np.array(lengths, np.int32))
    got = f(x=ones, lengths=np.array([3, 2, 2], np.int32))[0][..., 0]
    np.testing.assert_array_equal(got, [[1, 1, 1], [1, 1, 1], [1, -1, -1]])


def test_graph_lengths_batch_sizes_sorted_indices_and_longer_total_length():
    """At run time batch_sizes are torch's followed by zeros up to the padded length; sorted_indices and
    unsorted_indices are torch's (distinct lengths); total_length past the padded length pads."""
    lengths = [2, 4, 1]
    g = lm.Graph()
    x, li = g.input("x", (5, 3, 2)), g.input("lengths", (3,), dtype=lm.int32)
    p = pack_padded_sequence(x, li, enforce_sorted=False)
    y, _ = pad_packed_sequence(p, batch_first=True, padding_value=3.0, total_length=7)
    xs = randn(5, 3, 2)
    got = lm.compile([p.batch_sizes, p.sorted_indices, p.unsorted_indices, y])(
        x=xs, lengths=np.array(lengths, np.int32))
    tp = trnn.pack_padded_sequence(torch.from_numpy(xs), torch.tensor(lengths), enforce_sorted=False)
    np.testing.assert_array_equal(got[0], [*tp.batch_sizes.tolist(), 0])
    np.testing.assert_array_equal(got[1], tp.sorted_indices.numpy())
    np.testing.assert_array_equal(got[2], tp.unsorted_indices.numpy())
    close(got[3], trnn.pad_packed_sequence(tp, batch_first=True, padding_value=3.0, total_length=7)[0], "padded")


def test_constant_graph_lengths_are_host_lengths():
    """A graph constant's values are known now: checked now and cut to the longest, as host lengths."""
    g = lm.Graph()
    x = g.input("x", (5, 2, 1))
    p = pack_padded_sequence(x, g.constant(np.array([3, 2], np.int32)))
    assert p.data.shape == (3, 2, 1)
    np.testing.assert_array_equal(p.lengths, [3, 2])
    with pytest.raises(RuntimeError, match="greater than 0"):
        pack_padded_sequence(x, g.constant(np.array([3, 0], np.int32)))


# PackedSequence ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("graph_lengths", [False, True])
def test_repacking_recovers_the_lengths(graph_lengths):
    """torch's idiom PackedSequence(f(p.data), p.batch_sizes, p.sorted_indices, p.unsorted_indices) and
    p._replace(data=...): the lengths come back from batch_sizes (in the batch's order)."""
    lengths = [2, 4, 1]
    g = lm.Graph()
    x = g.input("x", (4, 3, 2))
    lens = g.input("lengths", (3,), dtype=lm.int32) if graph_lengths else lengths
    p = pack_padded_sequence(x, lens, enforce_sorted=False)
    q = PackedSequence(p.data * 2.0, p.batch_sizes, p.sorted_indices, p.unsorted_indices)
    r = p._replace(data=p.data + 1.0)
    feeds = {"x": randn(4, 3, 2)} | ({"lengths": np.array(lengths, np.int32)} if graph_lengths else {})
    ys = [pad_packed_sequence(s)[0] for s in (q, r)]
    outs = ys + ([q.lengths, r.lengths] if graph_lengths else [])
    got = list(lm.compile(outs)(**feeds))
    if not graph_lengths:
        got += [q.lengths, r.lengths]
    tp = trnn.pack_padded_sequence(torch.from_numpy(feeds["x"]), torch.tensor(lengths), enforce_sorted=False)
    tq = trnn.PackedSequence(tp.data * 2.0, tp.batch_sizes, tp.sorted_indices, tp.unsorted_indices)
    close(got[0], trnn.pad_packed_sequence(tq)[0], "repacked")
    close(got[1], trnn.pad_packed_sequence(tp._replace(data=tp.data + 1.0))[0], "_replace")
    np.testing.assert_array_equal(got[2], lengths)
    np.testing.assert_array_equal(got[3], lengths)
    data, batch_sizes, sorted_indices, unsorted_indices = p  # (torch's four fields, unpacked as a tuple)


def test_hand_made_packed_sequence_pads_to_the_longest():
    """A PackedSequence made with data longer than its lengths pads to the longest length (or total_length),
    as torch's pad_packed_sequence does."""
    g = lm.Graph()
    x = g.input("x", (5, 2, 1))
    p = PackedSequence(x, lengths=[3, 1])
    ys = [pad_packed_sequence(p, padding_value=-1.0, total_length=n)[0] for n in (None, 4)]
    assert [y.shape for y in ys] == [(3, 2, 1), (4, 2, 1)]
    got = lm.compile(ys)(x=np.ones((5, 2, 1), np.float32))
    np.testing.assert_array_equal(got[1][..., 0], [[1, 1], [1, -1], [1, -1], [-1, -1]])


def test_packed_sequence_refuses_mismatched_lengths():
    g = lm.Graph()
    x = g.input("x", (3, 2, 1))
    with pytest.raises(ValueError, match=r"PackedSequence: 3 lengths for the batch of 2"):
        PackedSequence(x, lengths=[3, 2, 1])
    with pytest.raises(ValueError, match=r"4 is longer than the 3 steps"):
        PackedSequence(x, lengths=[4, 2])
    with pytest.raises(TypeError, match="expected a luminal PackedSequence"):
        pad_packed_sequence(trnn.pack_padded_sequence(torch.zeros(2, 1), [2]))


# lengths as torch takes them ------------------------------------------------------------------------------

def test_lengths_forms():
    """torch takes lists, int64/int32/float CPU tensors (float ones truncated); luminal takes the same but
    refuses a non-integral float rather than truncating it, and a 2-d, bool or float graph lengths."""
    g = lm.Graph()
    x = g.input("x", (3, 2, 1))
    for lengths in ([3.0, 2.0], torch.tensor([3, 2]), torch.tensor([3, 2], dtype=torch.int32),
                    np.array([3, 2], np.uint8), (3, 2)):
        p = pack_padded_sequence(x, lengths)
        assert p.lengths.dtype == np.int64 and p.lengths.tolist() == [3, 2], lengths
    with pytest.raises(TypeError, match=r"lengths must be integers, got float64 \[2.5, 1.0\]"):
        pack_padded_sequence(x, [2.5, 1.0])
    with pytest.raises(ValueError, match="should be a 1D int64 array, but got 2D"):
        pack_padded_sequence(x, [[3, 2]])
    with pytest.raises(TypeError, match="lengths must be integers, got bool"):
        pack_padded_sequence(x, [True, True])
    with pytest.raises(TypeError, match="lengths must be a 1-d int tensor, got float32"):
        pack_padded_sequence(x, g.input("lf", (2,)))
    with pytest.raises(ValueError, match="different graphs"):
        pack_padded_sequence(x, lm.Graph().input("l", (2,), dtype=lm.int32))
    with pytest.raises(ValueError, match=r"the batch B is symbolic but the 2 lengths are host data"):
        pack_padded_sequence(g.input("xb", (3, "B", 1)), [3, 2])


def test_sorted_indices_with_ties_sort_the_lengths():
    """Equal lengths: torch's sort may order ties either way; ours is stable and sorts the lengths."""
    g = lm.Graph()
    p = pack_padded_sequence(g.input("x", (3, 4, 1)), [2, 3, 2, 3], enforce_sorted=False)
    np.testing.assert_array_equal(p.sorted_indices, [1, 3, 0, 2])
    np.testing.assert_array_equal(p.sorted_indices[p.unsorted_indices], np.arange(4))


# pad_sequence, pack_sequence, unpad_sequence --------------------------------------------------------------

def test_pad_sequence_more():
    """Trailing dims, int numpy sequences (padding value cast), a mix of numpy and graph tensors, torch's
    pad_sequence of one sequence."""
    seqs = [np.arange(6, dtype=np.int32).reshape(3, 2), np.arange(2, dtype=np.int32).reshape(1, 2)]
    want = trnn.pad_sequence([torch.from_numpy(s) for s in seqs], batch_first=True, padding_value=-1)
    got = pad_sequence(seqs, batch_first=True, padding_value=-1)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want.numpy())
    cube = [randn(2, 2, 3, seed=1), randn(4, 2, 3, seed=2)]
    g = lm.Graph()
    xi = g.input("x", cube[1].shape)
    out = pad_sequence([cube[0], xi], padding_side="left")
    close(lm.compile([out])(x=cube[1])[0], trnn.pad_sequence([torch.from_numpy(c) for c in cube],
                                                               padding_side="left"), "mixed")
    one = pad_sequence([xi])
    assert one.shape == (4, 1, 2, 3)


def test_pad_sequence_errors():
    g = lm.Graph()
    with pytest.raises(RuntimeError, match="received an empty list of sequences"):
        pad_sequence([])
    with pytest.raises(ValueError, match="Expected padding_side to be one of left or right, but got up"):
        pad_sequence([np.ones(2)], padding_side="up")
    with pytest.raises(ValueError, match=r"trailing shape \(3,\) of sequences\[0\], but sequences\[1\] is \(3, 4\)"):
        pad_sequence([g.input("a", (2, 3)), g.input("b", (3, 4))])
    with pytest.raises(ValueError, match="sequences\\[0\\] is 0-d"):
        pad_sequence([np.float32(1.0)])
    with pytest.raises(ValueError, match="symbolic length L"):
        pad_sequence([g.input("c", ("L", 3))])
    with pytest.raises(ValueError, match="different graphs"):
        pad_sequence([g.input("d", (2,)), lm.Graph().input("e", (2,))])
    with pytest.raises(TypeError, match="sequences must be a list of tensors"):
        pad_sequence(5)


def test_pack_sequence_sorted_and_unpack_order():
    """enforce_sorted=True refuses unsorted sequences (torch's error); unpack_sequence returns the
    sequences in the order given."""
    g = lm.Graph()
    xs = [g.input("a", (3, 2)), g.input("b", (1, 2))]
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        pack_sequence(xs[::-1])
    back = unpack_sequence(pack_sequence(xs))
    assert [b.shape for b in back] == [(3, 2), (1, 2)]


def test_unpad_sequence_errors():
    g = lm.Graph()
    x = g.input("x", (4, 2, 1))
    with pytest.raises(TypeError, match="unpad_sequence: lengths must be host data"):
        unpad_sequence(x, g.input("lengths", (2,), dtype=lm.int32))
    with pytest.raises(ValueError, match=r"got 3 lengths for a batch of 2"):
        unpad_sequence(x, [1, 2, 3])
    with pytest.raises(ValueError, match=r"must be in \[0, 4\]"):
        unpad_sequence(x, [5, 2])
    p = pack_padded_sequence(x, g.input("l", (2,), dtype=lm.int32))
    with pytest.raises(TypeError, match="lengths must be host data"):
        unpack_sequence(p)

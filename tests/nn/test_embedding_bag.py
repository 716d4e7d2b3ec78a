"""Parity with torch for ``nn.EmbeddingBag`` and ``F.embedding_bag``: every mode over bags of equal size
(2-d input) and over bags given by offsets (1-d input), with empty bags, ``include_last_offset``,
``padding_idx`` (left out of bags and means), ``per_sample_weights`` (and its gradient); the module's
state_dict and ``from_pretrained``; offsets checked when the program runs; errors naming the op."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from parity import check, rand

import luminal as lm
import luminal.nn.functional as F
from luminal import nn

pytestmark = pytest.mark.usefixtures("one_torch_thread")

IDX = np.array([1, 2, 4, 5, 4, 3, 2, 9, 0, 0, 7, 7], np.int32)
W = rand((10, 4), seed=1)


def _bag(mode, **kwargs):
    def run(w, idx, *rest):
        fn = TF.embedding_bag if isinstance(w, torch.Tensor) else F.embedding_bag
        psw = rest[-1] if "psw" in kwargs else None
        offsets = rest[0] if len(rest) > (psw is not None) else None
        opts = {k: v for k, v in kwargs.items() if k != "psw"}
        return fn(idx, w, offsets, mode=mode, per_sample_weights=psw, **opts)
    return run


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 0, -3])
def test_bags_of_equal_size(mode, padding_idx):
    check(_bag(mode, padding_idx=padding_idx), [W, IDX.reshape(3, 4)])
    # a bag of nothing but padding: zeros, and no gradient
    check(_bag(mode, padding_idx=0), [W, np.array([[0, 0], [3, 0]], np.int32)])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("offsets,last", [([0, 2, 2, 5], False), ([0, 5, 12], False), ([0], False),
                                          ([0, 2, 2, 5, 12], True), ([0, 12, 12], True)], ids=str)
def test_bags_by_offsets(mode, offsets, last, backend):
    check(_bag(mode, include_last_offset=last), [W, IDX, np.array(offsets, np.int32)], backend=backend)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_padding_idx_with_offsets(mode):
    check(_bag(mode, padding_idx=4), [W, IDX, np.array([0, 2, 4, 5], np.int32)])


def test_per_sample_weights_and_their_gradient():
    psw = rand((12,), seed=2)
    check(_bag("sum", psw=True), [W, IDX, np.array([0, 3, 7], np.int32), psw])
    check(_bag("sum", psw=True, padding_idx=7), [W, IDX.reshape(4, 3), psw.reshape(4, 3)])


def test_bfloat16_table():
    check(_bag("mean"), [W, IDX.reshape(2, 6)], dtypes=[lm.bfloat16, lm.int32])


def test_module_state_dict_and_from_pretrained():
    t = torch.nn.EmbeddingBag(10, 4, mode="sum", padding_idx=2)
    m = nn.EmbeddingBag(10, 4, mode="sum", padding_idx=2)
    assert m.weight.data[2].tolist() == [0.0] * 4 and list(m.state_dict()) == list(t.state_dict())
    m.load_state_dict({k: v.detach().numpy() for k, v in t.state_dict().items()})
    g = lm.Graph()
    i, o = g.input("i", (12,), dtype=lm.int32), g.input("o", (3,), dtype=lm.int32)
    got = lm.compile(m(i, o))(i=IDX, o=np.array([0, 4, 8], np.int32))
    want = t(torch.from_numpy(IDX).long(), torch.tensor([0, 4, 8])).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    frozen = nn.EmbeddingBag.from_pretrained(W, mode="max")
    assert not frozen.weight.requires_grad and frozen.mode == "max"
    np.testing.assert_array_equal(frozen.weight.data, W)


def test_offsets_are_checked_when_the_program_runs():
    g = lm.Graph()
    w, i, o = g.input("w", (10, 4)), g.input("i", (12,), dtype=lm.int32), g.input("o", (3,), dtype=lm.int32)
    f = lm.compile(F.embedding_bag(i, w, o, mode="sum"))
    f(w=W, i=IDX, o=np.array([0, 4, 12], np.int32))
    for bad in ([1, 4, 8], [0, 8, 4], [0, 4, 13]):
        with pytest.raises(ValueError, match="offsets must start at 0, never decrease"):
            f(w=W, i=IDX, o=np.array(bad, np.int32))
    with pytest.raises(IndexError):
        f(w=W, i=np.where(IDX == 9, 10, IDX).astype(np.int32), o=np.array([0, 4, 8], np.int32))


def test_errors_name_the_op():
    g = lm.Graph()
    w, i2, i1 = g.input("w", (10, 4)), g.input("i", (3, 4), dtype=lm.int32), g.input("j", (12,), dtype=lm.int32)
    o = g.input("o", (3,), dtype=lm.int32)
    with pytest.raises(ValueError, match=r"embedding_bag: a 2-d input .* offsets must be None"):
        F.embedding_bag(i2, w, o)
    with pytest.raises(ValueError, match=r"embedding_bag: a 1-d input needs offsets"):
        F.embedding_bag(i1, w)
    with pytest.raises(ValueError, match=r"per_sample_weights is only supported for mode='sum'"):
        F.embedding_bag(i2, w, per_sample_weights=g.input("p", (3, 4)), mode="mean")
    with pytest.raises(ValueError, match=r"mode must be one of"):
        nn.EmbeddingBag(10, 4, mode="median")
    with pytest.raises(TypeError, match=r"EmbeddingBag\(10, 4, mode='mean'\).*integer indices"):
        nn.EmbeddingBag(10, 4)(g.input("f", (3, 4)))
    with pytest.raises(NotImplementedError, match="max_norm"):
        nn.EmbeddingBag(10, 4, max_norm=1.0)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_a_symbolic_number_of_indices_and_bags(mode):
    """One program for every batch: N indices in B bags, both known only when it runs."""
    check(_bag(mode), [W, IDX, np.array([0, 3, 3, 9], np.int32)], shapes=[(10, 4), ("N",), ("B",)])


def test_max_over_offsets_needs_a_static_bag_count_and_an_empty_input_gives_zeros():
    g = lm.Graph()
    w, i, o = g.input("w", (10, 4)), g.input("i", ("N",), dtype=lm.int32), g.input("o", ("B",), dtype=lm.int32)
    with pytest.raises(ValueError, match=r"embedding_bag: mode='max' over offsets needs a static number of bags"):
        F.embedding_bag(i, w, o, mode="max")
    empty, offsets = g.input("e", (0,), dtype=lm.int32), g.input("o2", (2,), dtype=lm.int32)
    out = lm.compile(F.embedding_bag(empty, w, offsets, mode="max"))(
        w=W, e=np.zeros(0, np.int32), o2=np.zeros(2, np.int32))
    np.testing.assert_array_equal(out, np.zeros((2, 4), np.float32))

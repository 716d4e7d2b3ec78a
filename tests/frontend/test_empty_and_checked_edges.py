"""Edges of four ops against torch: cummax/cummin of a size-0 input (empty values and int32 indices;
they raised), chunk of a size-0 dim (``chunks`` empty pieces; it gave one), repeat_interleave with a
tensor of repeats (torch's RuntimeErrors when a count is negative or the counts do not sum to
``output_size``: it cut the output short, or took the negative count), and einsum with '...' absent
from an explicit output (the broadcast dims summed; it raised)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity import check, rand

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# cummax / cummin -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("shape,dim", [((2, 0), 1), ((0, 3), 0), ((2, 0), -1), ((0, 3), 1), ((0,), 0), ((2, 0, 4), 2)])
def test_cum_extreme_of_empty(name, shape, dim, backend):
    check(lambda t: tuple(getattr(t, name)(dim)), [np.zeros(shape, np.float32)], backend=backend)
    check(lambda t: tuple(getattr(t, name)(dim)), [np.zeros(shape, np.int32)], backend=backend)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cum_extreme_symbolic_dim_empty_at_run_time(name, backend):
    g = lm.Graph()
    x = g.input("x", ("B", 3))
    for dim in (0, 1):
        v, i = getattr(x, name)(dim)
        got = lm.compile([v, i], backend=backend)(x=np.zeros((0, 3), np.float32))
        assert got[0].shape == (0, 3) and got[1].shape == (0, 3) and got[1].dtype == np.int32
        want = getattr(torch.zeros(3, 3), name)(dim)
        x3 = rand((3, 3), seed=1)
        got3 = lm.compile([v, i], backend=backend)(x=x3)
        want = getattr(torch.from_numpy(x3), name)(dim)
        np.testing.assert_array_equal(got3[0], want.values.numpy())
        np.testing.assert_array_equal(got3[1], want.indices.numpy())


def test_cum_extreme_nonempty_unchanged(backend):
    x = rand((3, 5), seed=2)
    check(lambda t: (*t.cummax(1), *t.cummin(0)), [x], backend=backend)


# chunk ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,chunks,dim", [((0, 3), 3, 0), ((2, 0), 2, 1), ((0,), 1, 0), ((4, 0), 5, -1)])
def test_chunk_of_an_empty_dim(shape, chunks, dim, backend):
    x = np.zeros(shape, np.float32)
    check(lambda t: tuple(t.chunk(chunks, dim)), [x], backend=backend)
    check(lambda t: tuple(torch.chunk(t, chunks, dim)) if isinstance(t, torch.Tensor) else lm.chunk(t, chunks, dim),
          [x], backend=backend)
    g = lm.Graph()
    assert len(g.input("x", shape).chunk(chunks, dim)) == chunks == len(torch.zeros(shape).chunk(chunks, dim))


@pytest.mark.parametrize("n,chunks", [(1, 3), (5, 3), (6, 3), (7, 3), (3, 5)])
def test_chunk_nonempty_unchanged(n, chunks, backend):
    check(lambda t: tuple(t.chunk(chunks, 0)), [rand((n, 2), seed=n)], backend=backend)


# repeat_interleave with a tensor of repeats -----------------------------------------------------------
def _repeat(output_size):
    def op(x, r):
        if isinstance(x, torch.Tensor):
            return torch.repeat_interleave(x, r.long(), 0, output_size=output_size)
        return lm.repeat_interleave(x, r, 0, output_size=output_size)
    return op


def test_repeat_interleave_right_output_size(backend):
    x = rand((3, 2), seed=3)
    check(_repeat(4), [x, np.array([1, 0, 3], np.int32)], backend=backend)


SIZE, NEGATIVE = "allocated size does not match required size", "repeats can not be negative"


@pytest.mark.parametrize("reps,output_size,message", [
    ([1, 0, 3], 3, f"{SIZE}: output_size=3 but the repeats sum to 4"),
    ([1, 0, 3], 6, f"{SIZE}: output_size=6 but the repeats sum to 4"),
    ([2, -1, 1], 2, rf"{NEGATIVE} \(1 negative count\(s\)\)"),
    ([2, -1, 1], 3, f"{SIZE}: output_size=3 but the repeats sum to 2"),  # torch compares the sum first
])
def test_repeat_interleave_checked_when_run(reps, output_size, message, backend):
    x = rand((3,), seed=4)
    r = np.array(reps, np.int32)
    with pytest.raises(RuntimeError, match=SIZE if message.startswith(SIZE) else NEGATIVE):  # torch's
        torch.repeat_interleave(torch.from_numpy(x), torch.from_numpy(r).long(), output_size=output_size)
    g = lm.Graph()
    t, rr = g.input("x", (3,)), g.input("r", (3,), dtype=lm.int32)
    f = lm.compile([t.repeat_interleave(rr, dim=0, output_size=output_size)], backend=backend)
    with pytest.raises(RuntimeError, match=f"^repeat_interleave: {message}"):
        f(x=x, r=r)
    # the same program runs with counts that fit
    ok = np.array([1, 1, output_size - 2] if output_size >= 2 else [output_size, 0, 0], np.int32)
    want = torch.repeat_interleave(torch.from_numpy(x), torch.from_numpy(ok).long(), output_size=output_size)
    np.testing.assert_array_equal(f(x=x, r=ok)[0], want.numpy())


def test_repeat_interleave_one_count_for_all(backend):
    g = lm.Graph()
    t, rr = g.input("x", (3,)), g.input("r", (), dtype=lm.int32)
    f = lm.compile([t.repeat_interleave(rr, dim=0, output_size=6)], backend=backend)
    x = rand((3,), seed=5)
    np.testing.assert_array_equal(f(x=x, r=np.array(2, np.int32))[0], np.repeat(x, 2))
    with pytest.raises(RuntimeError, match="sum to 9"):
        f(x=x, r=np.array(3, np.int32))


# einsum: '...' left out of an explicit output ------------------------------------------------------------
@pytest.mark.parametrize("eq,shapes", [
    ("...->", [(2, 3, 4)]),
    ("b...->b", [(2, 3, 4)]),
    ("...ij->ij", [(2, 3, 4)]),
    ("...ij->", [(5, 3, 4)]),
    ("...ij,...jk->ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,jk->ik", [(2, 3, 4), (4, 5)]),
    ("...ij,...jk->ik", [(2, 1, 3, 4), (3, 4, 5)]),  # broadcast ellipsis dims, summed after the product
    ("i...,i...->i", [(3, 2, 4), (3, 1, 4)]),
])
def test_einsum_sums_an_ellipsis_left_out(eq, shapes, backend):
    xs = [rand(s, seed=10 + k) for k, s in enumerate(shapes)]
    check(lambda *ts: torch.einsum(eq, *ts) if isinstance(ts[0], torch.Tensor) else lm.einsum(eq, *ts), xs,
          backend=backend)


def test_einsum_ellipsis_sum_equals_sum():
    x = rand((2, 3, 4), seed=20)
    check(lambda t: torch.einsum("...->", t) if isinstance(t, torch.Tensor) else lm.einsum("...->", t), [x],
          torch_op=lambda t: t.sum())

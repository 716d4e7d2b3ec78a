"""A dim named twice is refused where torch refuses it ("dim appears multiple times in the list of
dims"): flip and squeeze, and every reduction that takes a list of dims. ``x.flip((0, 0))`` returned
``x`` unchanged (flipped twice) and ``x.sum((0, 0))`` summed dim 0 once; both are a user's mistake,
reported at the call. Also: ``unfold`` with a window of size 0, which torch allows (n // step + 1
empty windows)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity import check, rand

import luminal as lm

CASES = {
    "flip": (lambda t: t.flip(0, 0), lambda t: t.flip((0, 0))),
    "flip-negative": (lambda t: t.flip((2, -1)), lambda t: t.flip((2, -1))),
    "squeeze": (lambda t: t.squeeze((0, 0)), lambda t: t.squeeze((0, 0))),
    "sum": (lambda t: t.sum((0, 0)), lambda t: t.sum((0, 0))),
    "mean": (lambda t: t.mean((2, -1)), lambda t: t.mean((2, -1))),
    "amax": (lambda t: t.amax((0, -3)), lambda t: t.amax((0, -3))),
    "std": (lambda t: t.std((0, 0)), lambda t: t.std((0, 0))),
    "logsumexp": (lambda t: t.logsumexp((2, 2)), lambda t: t.logsumexp((2, 2))),
    "any": (lambda t: t.any((0, 0)), lambda t: t.any((0, 0))),
    "nansum": (lambda t: t.nansum((0, 0)), lambda t: t.nansum((0, 0))),
    "vector_norm": (lambda t: lm.linalg.vector_norm(t, 2, (0, 0)),
                    lambda t: torch.linalg.vector_norm(t, 2, (0, 0))),
}


@pytest.mark.parametrize("name", CASES)
def test_a_dim_named_twice_is_refused(name):
    ours, theirs = CASES[name]
    with pytest.raises(RuntimeError, match="appears multiple times"):
        theirs(torch.zeros(1, 3, 2))
    g = lm.Graph()
    x = g.input("x", (1, 3, 2))
    with pytest.raises(ValueError, match=r"appears multiple times") as err:
        ours(x)
    assert "test_repeated_dims.py" in str(err.value)  # (the user's line)


def test_distinct_dims_still_work(backend):
    x = rand((2, 3, 4), seed=1)
    check(lambda t: (t.flip((0, -1)), t.sum((0, 2)), t.amax((-1, 0)), t.squeeze((0, 1))), [x],
          backend=backend, grad=False)


@pytest.mark.parametrize("dim, step", [(0, 1), (1, 2), (1, 1), (0, 3)])
def test_unfold_with_an_empty_window(dim, step, backend):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    check(lambda t: t.unfold(dim, 0, step) * 2, [x], backend=backend)


def test_unfold_with_a_negative_window_is_refused():
    g = lm.Graph()
    with pytest.raises(ValueError, match="unfold"):
        g.input("x", (2, 3)).unfold(0, -1, 1)

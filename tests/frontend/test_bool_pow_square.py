"""A bool tensor to a Python-number power, and its square, as torch: ``x ** int`` and ``x.square()``
are integers (torch's int64, luminal's int32: ``x ** 0`` is [1, 1], ``x ** 2`` [1, 0]); they stayed
bool, since the integer-exponent shortcut multiplied the bool tensor by itself. ``x ** True`` and
``x ** False`` stay bool, as torch's (they raised); a float exponent gives float32; a negative int
exponent and a bool tensor exponent are refused, as torch refuses them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from parity import check

import luminal as lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

X = np.array([[True, False, True], [False, False, True]])


def _pow(b):
    return lambda t: t ** b


POWERS = {"0": 0, "1": 1, "2": 2, "3": 3, "64": 64, "65": 65, "100": 100, "True": True, "False": False,
          "2.0": 2.0, "0.5": 0.5, "-1.0": -1.0}


@pytest.mark.parametrize("b", POWERS.values(), ids=POWERS.keys())
def test_bool_to_a_number(b, backend):
    check(_pow(b), [X], backend=backend)
    check(lambda t: lm.pow(t, b) if isinstance(t, lm.GraphTensor) else torch.pow(t, b), [X], backend=backend)


def test_bool_square(backend):
    check(lambda t: t.square(), [X], backend=backend)
    check(lambda t: lm.square(t) if isinstance(t, lm.GraphTensor) else torch.square(t), [X], backend=backend)
    check(lambda t: t.square() + t ** 2, [X], backend=backend)


def test_number_and_int_tensor_with_bool(backend):
    i = np.array([[2, 3, 0], [1, 5, 4]], np.int32)
    check(lambda t, u: (2 ** t, t ** u, u ** t), [X, i], backend=backend)


def test_refused_as_torch():
    g = lm.Graph()
    x = g.input("x", (2, 3), lm.bool)
    with pytest.raises(ValueError, match=r"^pow: integers to negative powers are not allowed"):
        x ** -1
    with pytest.raises(TypeError, match=r"^pow: not defined for bool tensors"):
        x ** x
    t = torch.from_numpy(X)
    with pytest.raises(RuntimeError):
        t ** -1
    with pytest.raises(NotImplementedError):
        t ** t


def test_other_dtypes_unchanged(backend):
    f = np.array([[1.5, -2.0, 0.0]], np.float32)
    i = np.array([[3, -2, 0]], np.int32)
    check(lambda t: (t ** 2, t ** 0, t.square()), [f], backend=backend)
    check(lambda t: (t ** 2, t ** 0, t.square(), t ** 3.0), [i], backend=backend)

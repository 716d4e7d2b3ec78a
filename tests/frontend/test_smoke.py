"""The contract example from the DSL issue, unchanged, against torch."""

import numpy as np
import torch

import luminal as lm


def test_contract_example(backend):
    g = lm.Graph()
    a = g.input("a", ("B", 3, 4)); b = g.input("b", (4, 5), dtype=lm.float32)
    c = g.constant(np.ones((5,), np.float32))
    y = ((a @ b).relu() + c).softmax(-1).sum(axis=1, keepdim=True)
    f = lm.compile(y, backend=backend)
    for batch in (2, 7):  # one compiled graph, two sizes of the symbolic dim
        A = np.random.rand(batch, 3, 4).astype(np.float32)
        B = np.random.rand(4, 5).astype(np.float32)
        out = f(a=A, b=B)
        want = ((torch.tensor(A) @ torch.tensor(B)).relu() + 1).softmax(-1).sum(1, keepdim=True)
        assert out.shape == (batch, 1, 5)
        np.testing.assert_allclose(out, want.numpy(), rtol=1e-5, atol=1e-6)

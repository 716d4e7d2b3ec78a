"""torch's factory keywords on every layer that has parameters: ``device=`` and ``dtype=`` (a port writes
``nn.Conv2d(..., device=device, dtype=dtype)``, and torch's own layers pass them on to their parts).
``device`` is accepted and ignored, as the arrays live on the host until a backend takes them; ``dtype``
is every parameter's dtype. Before, only some layers took ``device`` (Conv, BatchNorm, LayerNorm,
MultiheadAttention, TransformerEncoderLayer and others raised TypeError)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import nn

LAYERS = {  # name -> its constructor call, given the module (luminal.nn or torch.nn)
    "Linear": lambda m, **k: m.Linear(3, 4, **k),
    "Bilinear": lambda m, **k: m.Bilinear(2, 3, 4, **k),
    "Conv1d": lambda m, **k: m.Conv1d(3, 4, 3, **k),
    "Conv2d": lambda m, **k: m.Conv2d(3, 4, 3, **k),
    "Conv3d": lambda m, **k: m.Conv3d(3, 4, 3, **k),
    "ConvTranspose2d": lambda m, **k: m.ConvTranspose2d(3, 4, 3, **k),
    "BatchNorm1d": lambda m, **k: m.BatchNorm1d(4, **k),
    "BatchNorm2d": lambda m, **k: m.BatchNorm2d(4, **k),
    "InstanceNorm2d": lambda m, **k: m.InstanceNorm2d(4, affine=True, **k),
    "LayerNorm": lambda m, **k: m.LayerNorm(4, **k),
    "GroupNorm": lambda m, **k: m.GroupNorm(2, 4, **k),
    "RMSNorm": lambda m, **k: m.RMSNorm(4, **k),
    "PReLU": lambda m, **k: m.PReLU(**k),
    "Embedding": lambda m, **k: m.Embedding(5, 3, **k),
    "EmbeddingBag": lambda m, **k: m.EmbeddingBag(5, 3, **k),
    "MultiheadAttention": lambda m, **k: m.MultiheadAttention(4, 2, **k),
    "TransformerEncoderLayer": lambda m, **k: m.TransformerEncoderLayer(4, 2, 8, **k),
    "TransformerDecoderLayer": lambda m, **k: m.TransformerDecoderLayer(4, 2, 8, **k),
    "Transformer": lambda m, **k: m.Transformer(4, 2, 1, 1, 8, **k),
    "LSTM": lambda m, **k: m.LSTM(3, 4, **k),
    "GRUCell": lambda m, **k: m.GRUCell(3, 4, **k),
}


@pytest.mark.parametrize("name", LAYERS)
def test_device_and_dtype_keywords(name):
    ours, theirs = LAYERS[name](nn, device="cpu", dtype=lm.float64), LAYERS[name](torch.nn, dtype=torch.float64)
    sd = ours.state_dict()
    assert list(sd) == list(theirs.state_dict())
    for key, value in theirs.state_dict().items():
        if value.is_floating_point():  # (num_batches_tracked is an int)
            assert np.asarray(sd[key]).dtype == np.float64, key


@pytest.mark.parametrize("name", LAYERS)
def test_device_comes_before_dtype_as_in_torch(name):
    """The same positional order as torch's signature, so positional calls line up too."""
    ours_cls, theirs_cls = type(LAYERS[name](nn)), type(LAYERS[name](torch.nn))
    ours = list(inspect.signature(ours_cls.__init__).parameters)
    theirs = list(inspect.signature(theirs_cls.__init__).parameters)
    if "device" in theirs:  # (torch's recurrent layers take *args, **kwargs)
        assert theirs.index("device") + 1 == theirs.index("dtype")
    assert ours.index("device") + 1 == ours.index("dtype")

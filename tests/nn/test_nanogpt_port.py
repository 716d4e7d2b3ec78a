"""nanoGPT's model code runs on luminal with only its imports changed, and matches torch.

``nanogpt_model.py`` is nanoGPT's ``model.py`` (its own LayerNorm whose ``weight``/``bias`` Parameters
go to ``F.layer_norm``, the causal mask a registered buffer sliced ``[:, :, :T, :T]`` by the sequence
length, weight tying, ``torch.arange`` positions, ``x.size()`` unpacking, ``view``/``transpose``/
``contiguous``, ``F.cross_entropy(..., ignore_index=-1)``, ``configure_optimizers``'s AdamW groups and
``crop_block_size``'s surgery) with ``torch.X`` read as ``lm.X``. The reference is the same text run by
torch: its import block swapped for ``import torch as lm`` and friends, so both sides run one source
and the port cannot drift from what torch runs. The luminal graph takes ``idx`` and ``targets`` as
``("B", "T")``: the sequence length is symbolic, so the mask buffer is sliced by a symbolic ``T`` (and
the program checks ``T <= block_size`` when it runs).

The one line of nanoGPT's forward left out, and why (a lazy graph cannot compare a symbolic size while
it is built), is in ``nanogpt_model.py``'s docstring and the README.
"""

from __future__ import annotations

import copy
import pathlib

import numpy as np
import pytest

import luminal as lm
from luminal import train

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("one_torch_thread")

SOURCE = pathlib.Path(__file__).with_name("nanogpt_model.py")
BEGIN, END = "# --- imports (the test swaps this block for torch's) ---", "# --- end of imports ---"
TORCH_IMPORTS = """import inspect
import math
from dataclasses import dataclass

import torch as lm
from torch import nn
from torch import optim as train
from torch.nn import functional as F
"""
CONFIG = dict(block_size=16, vocab_size=64, n_layer=2, n_head=2, n_embd=32, dropout=0.0, bias=True)


def _load(torch_side: bool) -> dict:
    """The model module's namespace: the file as it is, or with its import block swapped for torch's."""
    text = SOURCE.read_text()
    if torch_side:
        head, rest = text.split(BEGIN)
        text = head + BEGIN + "\n" + TORCH_IMPORTS + "\n" + END + rest.split(END)[1]
    ns: dict = {"__name__": "nanogpt_torch" if torch_side else "nanogpt_luminal"}
    exec(compile(text, str(SOURCE), "exec", dont_inherit=True), ns)  # (not this file's __future__ import)
    return ns


def _models(**overrides):
    """(luminal GPT, torch GPT) of one config, the luminal one holding the torch one's weights."""
    lms, ts = _load(False), _load(True)
    cfg = {**CONFIG, **overrides}
    torch.manual_seed(0)
    ref = ts["GPT"](ts["GPTConfig"](**cfg))
    model = lms["GPT"](lms["GPTConfig"](**cfg))
    model.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
    return model, ref


def _batch(b, t, seed=0, ignore=True):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, CONFIG["vocab_size"], (b, t)).astype(np.int32)
    targets = rng.integers(0, CONFIG["vocab_size"], (b, t)).astype(np.int32)
    if ignore:
        targets[0, :2] = -1  # ignore_index=-1: positions without a target
    return idx, targets


def _graph():
    g = lm.Graph()
    return g, g.input("idx", ("B", "T"), dtype=lm.int32), g.input("targets", ("B", "T"), dtype=lm.int32)


def _close(a, b, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a), b.detach().numpy() if hasattr(b, "detach") else b, rtol=rtol, atol=atol)


def test_the_port_runs_one_source_with_torch():
    """The swap touches the import block alone: the model code both sides run is the same text."""
    text = SOURCE.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    body = text.split(END)[1]
    assert not [ln for ln in body.splitlines() if ln.lstrip().startswith(("import ", "from "))]
    assert "torch" not in body.replace("torch's", "")  # the model code names luminal only


def test_forward_logits_and_loss_match_torch_at_every_length():
    model, ref = _models()
    _, idx, targets = _graph()
    logits, loss = model(idx, targets)
    assert logits.shape == (idx.shape[0], idx.shape[1], CONFIG["vocab_size"]) and loss.shape == ()
    f = lm.compile([logits, loss])
    for b, t in ((2, 8), (3, 16), (1, 5)):  # one program, any T up to block_size
        a, y = _batch(b, t, seed=t)
        got_logits, got_loss = f(idx=a, targets=y)
        want_logits, want_loss = ref(torch.from_numpy(a).long(), torch.from_numpy(y).long())
        _close(got_logits, want_logits)
        _close(got_loss, want_loss, rtol=1e-5)


def test_a_sequence_longer_than_block_size_fails_before_running():
    """nanoGPT's ``assert t <= block_size`` is the program's own check here: the mask sliced by T."""
    model, _ = _models()
    _, idx, targets = _graph()
    f = lm.compile(list(model(idx, targets)))
    a, y = _batch(2, 17)
    with pytest.raises(ValueError, match=r"T=17.*getitem: slice \[:T\] of dim 2 \(size 16\).*nanogpt_model.py"):
        f(idx=a, targets=y)


def test_inference_path_takes_the_last_position():
    model, ref = _models()
    _, idx, _ = _graph()
    logits, loss = model(idx)
    assert loss is None and logits.shape == (idx.shape[0], 1, CONFIG["vocab_size"])
    a, _ = _batch(2, 7)
    _close(lm.compile(logits)(idx=a), ref(torch.from_numpy(a).long())[0])


def test_gradients_and_one_adamw_step_match_torch():
    """``train.grad`` of the loss agrees with torch's ``.grad`` (the tied embedding included), and one
    ``compile_step`` with ``configure_optimizers``'s AdamW groups leaves the parameters torch's step does."""
    model, ref = _models()
    _, idx, targets = _graph()
    _, loss = model(idx, targets)
    a, y = _batch(2, 12)
    _, want_loss = ref(torch.from_numpy(a).long(), torch.from_numpy(y).long())
    want_loss.backward()

    names = ["transformer.wte.weight", "transformer.wpe.weight", "transformer.h.0.attn.c_attn.weight",
             "transformer.h.1.mlp.c_proj.bias", "transformer.h.0.ln_1.weight", "transformer.ln_f.bias"]
    mine, theirs = dict(model.named_parameters()), dict(ref.named_parameters())  # (the tied matrix: wte's name)
    grads = lm.compile(train.grad(loss, [mine[n] for n in names]))(idx=a, targets=y)
    for n, got in zip(names, grads):
        _close(got, theirs[n].grad, rtol=1e-3, atol=1e-6)

    before = {n: mine[n].data.copy() for n in names}
    opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.95), "cpu")
    ref_opt = ref.configure_optimizers(0.1, 1e-3, (0.9, 0.95), "cpu")
    step = train.compile_step(loss, opt)
    _close(step(idx=a, targets=y), want_loss, rtol=1e-5)
    ref_opt.step()
    for n in names:
        assert np.abs(mine[n].data - before[n]).max() > 1e-4, n  # the step moved it (by about lr)
        _close(mine[n].data, theirs[n], rtol=1e-4, atol=1e-5)
    assert model.lm_head.weight is model.transformer.wte.weight  # still tied after the update


def test_crop_block_size_reads_parameters_outside_any_graph():
    """``nn.Parameter(wpe.weight[:n])`` and ``attn.bias = attn.bias[:, :, :n, :n]`` run on the host:
    the new Parameter and buffer hold those rows, and the cropped model matches torch's."""
    model, ref = _models()
    before = copy.deepcopy(model.transformer.wpe.weight.data)
    model.crop_block_size(8)
    ref.crop_block_size(8)
    assert model.transformer.wpe.weight.shape == (8, CONFIG["n_embd"])
    np.testing.assert_array_equal(model.transformer.wpe.weight.data, before[:8])
    assert model.transformer.h[0].attn.bias.shape == (1, 1, 8, 8)
    assert dict(model.named_buffers())["transformer.h.0.attn.bias"] is model.transformer.h[0].attn.bias
    _, idx, targets = _graph()
    f = lm.compile(list(model(idx, targets)))
    a, y = _batch(2, 8)
    got_logits, got_loss = f(idx=a, targets=y)
    want_logits, want_loss = ref(torch.from_numpy(a).long(), torch.from_numpy(y).long())
    _close(got_logits, want_logits)
    _close(got_loss, want_loss, rtol=1e-5)


def test_without_biases():
    """``bias=False``: the own LayerNorm passes ``self.bias = None`` to ``F.layer_norm``."""
    model, ref = _models(bias=False)
    assert model.transformer.ln_f.bias is None
    _, idx, targets = _graph()
    _, loss = model(idx, targets)
    a, y = _batch(2, 6, ignore=False)
    _close(lm.compile(loss)(idx=a, targets=y), ref(torch.from_numpy(a).long(), torch.from_numpy(y).long())[1],
           rtol=1e-5)

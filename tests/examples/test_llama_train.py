"""Training the Llama example: loss and every parameter's gradient against ``torch.autograd`` on the
torch reference, two AdamW steps with clipping against ``torch.optim.AdamW``, and ``finetune.py`` end
to end (the loss falls; the saved HF-layout directory loads back here and in the torch reference)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from llama_reference import TorchLlama

import luminal as lm
from luminal import train

LLAMA = Path(__file__).resolve().parents[2] / "examples" / "llama"
sys.path.insert(0, str(LLAMA))
import make_random  # noqa: E402
from model import Llama  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module", params=["gqa", "tied"])
def model_dir(request, tmp_path_factory):
    extra = dict(tie=True) if request.param == "tied" else dict(kv_heads=1, bias=True)
    return make_random.make_random(tmp_path_factory.mktemp(request.param), layers=2, hidden=32, heads=4,
                                   intermediate=48, vocab=96, max_positions=32, std=0.2, tokenizer=False, **extra)


def _batch():
    rng = np.random.default_rng(0)
    b = rng.integers(0, 96, (3, 13)).astype(np.int32)
    return b[:, :-1], b[:, 1:]


def _torch_loss(ref, x, y):
    logits = ref.forward(torch.from_numpy(x).long())
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.from_numpy(y).long().reshape(-1))


def test_loss_and_gradients_match_torch_autograd(model_dir):
    model = Llama.from_pretrained(model_dir)
    model.train()
    g = lm.Graph()
    ids, targets = g.input("ids", ("B", "S"), dtype=lm.int32), g.input("targets", ("B", "S"), dtype=lm.int32)
    logits = model(ids)
    loss = train.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    names, params = zip(*model.named_parameters())
    f = lm.compile([loss, *train.grad(loss, list(params))])
    x, y = _batch()
    got_loss, *got_grads = f(ids=x, targets=y)

    ref = TorchLlama(model_dir)
    for t in ref.sd.values():
        t.requires_grad_(True)
    want = _torch_loss(ref, x, y)
    want.backward()
    np.testing.assert_allclose(got_loss, want.item(), rtol=1e-5)
    assert set(names) == set(ref.sd)
    for name, gr in zip(names, got_grads):
        w = ref.sd[name].grad.numpy()
        np.testing.assert_allclose(gr, w, rtol=1e-4, atol=1e-4 * np.abs(w).max(), err_msg=name)


def test_adamw_steps_with_clipping_match_torch(model_dir):
    from finetune import build_step

    model = Llama.from_pretrained(model_dir)
    step, _ = build_step(model, lr=1e-2, weight_decay=0.1, clip=0.5, backend="cpu")
    loops = step.report(show=False).loops
    assert loops[0]["trips"] == 2  # the decoder layers' forward, rolled
    ref = TorchLlama(model_dir)
    params = [ref.sd[n] for n, _ in model.named_parameters()]
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1)
    x, y = _batch()
    for k in range(2):
        xb, yb = (x, y) if k == 0 else (x[::-1].copy(), y[::-1].copy())
        got = step(ids=xb, targets=yb)
        opt.zero_grad()
        want = _torch_loss(ref, xb, yb)
        want.backward()
        torch.nn.utils.clip_grad_norm_(params, 0.5)
        opt.step()
        np.testing.assert_allclose(got, want.item(), rtol=1e-5, err_msg=f"step {k + 1} loss")
    # Adam's first steps move each weight by about lr * sign(gradient) (0.01 here): a gradient near 0 whose
    # last bits differ moves differently, so the bound is a few percent of lr, far below a wrong update
    for (name, p), w in zip(model.named_parameters(), params):
        np.testing.assert_allclose(p.data, w.detach().numpy(), rtol=1e-4, atol=5e-4, err_msg=name)


def test_finetune_script_trains_and_saves_hf_layout(tmp_path):
    src = make_random.make_random(tmp_path / "src", layers=2, hidden=32, heads=2, kv_heads=1, intermediate=48,
                                  vocab=320, max_positions=64)
    data = tmp_path / "data.txt"
    data.write_text("the quick brown fox jumps over the lazy dog. " * 60)
    spec = importlib.util.spec_from_file_location("llama_finetune", LLAMA / "finetune.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = script.main([str(src), "--data", str(data), "--steps", "12", "--batch-size", "4", "--seq-len", "16",
                       "--lr", "1e-2", "--save", str(tmp_path / "tuned")])
    losses = out["losses"]
    assert np.mean(losses[-3:]) < np.mean(losses[:3]) - 0.5  # a repeated sentence is learnt fast
    saved = tmp_path / "tuned"
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {f.name for f in saved.iterdir()}
    assert not [f for f in saved.iterdir() if f.name.endswith(".tmp")]
    again = Llama.from_pretrained(saved)
    for (name, a), (_, b) in zip(out["model"].named_parameters(), again.named_parameters()):
        np.testing.assert_array_equal(a.data, b.data, err_msg=name)
    x = np.array([[1, 5, 9, 33, 2, 7]], np.int32)
    g = lm.Graph()
    ids = g.input("ids", (1, 6), dtype=lm.int32)
    again.eval()
    np.testing.assert_allclose(lm.compile(again(ids))(ids=x), TorchLlama(saved).forward(torch.from_numpy(x).long())
                               .numpy(), rtol=1e-4, atol=1e-4)

"""End-to-end audit: small real models trained for several steps in luminal and in torch from the same
weights on the same data, compared at every step (loss) and at the end (every parameter and buffer).

Op-level parity is tested elsewhere; these look for what breaks when things compose: nested modules,
weight tying, BatchNorm running statistics, train/eval switches, param groups with weight-decay
exclusions, gradient clipping inside compile_step, schedulers, gradient accumulation and a checkpoint
taken mid-run and resumed into fresh objects. The models are in tests/model_zoo.py, written once for
both frameworks.
"""

import numpy as np
import pytest
import torch
from model_zoo import assert_params_close, char_lm, gpt, nano_gpt, to_torch, unet, vit, vit_param_groups

import luminal as lm
from luminal import train
from luminal.frontend.seed import manual_seed
from luminal.nn import functional as F

TF = torch.nn.functional


def images(steps, batch, shape, ncls, seed, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((batch, *shape)).astype(dtype), rng.integers(0, ncls, batch).astype(np.int32))
            for _ in range(steps)]


def tokens(steps, batch, length, vocab, seed):
    """Next-token batches: x = s[:, :-1], y = s[:, 1:]."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        s = rng.integers(0, vocab, (batch, length + 1)).astype(np.int32)
        out.append((s[:, :-1].copy(), s[:, 1:].copy()))
    return out


def tt(a):
    """A batch array as torch takes it (class indices as int64)."""
    return torch.tensor(a).long() if a.dtype == np.int32 else torch.tensor(a)


# ------------------------------------------------------------------------------------------ ViT
def warmup_cosine(sched_mod, opt, warmup, total):
    return sched_mod.SequentialLR(opt, [sched_mod.LinearLR(opt, start_factor=0.25, total_iters=warmup),
                                        sched_mod.CosineAnnealingLR(opt, T_max=total - warmup, eta_min=1e-4)],
                                  milestones=[warmup])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_vit_adamw_param_groups_warmup_cosine_clip(dtype):
    """ViT, AdamW with two groups at different learning rates (no decay on biases/norms/embeddings),
    warmup + cosine by SequentialLR, clip_grad_norm: 8 steps, the loss and the clipped norm at every
    step, every weight at the end, then the eval-mode logits of a fresh batch."""
    manual_seed(0)
    model, tmodel = vit("lm"), vit("torch")
    to_torch(model, tmodel)
    npd = np.dtype(dtype)
    if dtype == "float64":
        model.double()
        tmodel.double()
    steps, batches = 8, images(8, 4, (3, 8, 8), 5, seed=1, dtype=npd)

    g = lm.Graph()
    x, y = g.input("x", ("B", 3, 8, 8), dtype=dtype), g.input("y", ("B",), dtype=lm.int32)
    model.train()
    loss = F.cross_entropy(model(x), y)
    opt = train.AdamW(vit_param_groups(model, 0.05, no_decay_lr=1e-3), lr=3e-3)
    sched = warmup_cosine(train, opt, 3, steps)
    step = train.compile_step(loss, opt, clip_grad_norm=0.5)

    topt = torch.optim.AdamW(vit_param_groups(tmodel, 0.05, no_decay_lr=1e-3), lr=3e-3, foreach=False)
    tsched = warmup_cosine(torch.optim.lr_scheduler, topt, 3, steps)
    tol = dict(rtol=1e-4, atol=1e-6) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    for i, (xb, yb) in enumerate(batches):
        ours = step(x=xb, y=yb)
        topt.zero_grad()
        tl = TF.cross_entropy(tmodel(tt(xb)), tt(yb))
        tl.backward()
        tnorm = torch.nn.utils.clip_grad_norm_(tmodel.parameters(), 0.5)
        topt.step()
        tsched.step()
        sched.step()
        np.testing.assert_allclose(ours, tl.item(), **tol, err_msg=f"loss at step {i}")
        np.testing.assert_allclose(step.last_grad_norm, tnorm.item(), **tol, err_msg=f"grad norm at step {i}")
        for ours_g, theirs_g in zip(opt.param_groups, topt.param_groups, strict=True):
            assert ours_g["lr"] == pytest.approx(theirs_g["lr"], rel=1e-12)
    assert_params_close(model, tmodel, **({"rtol": 1e-4, "atol": 1e-6, "noise_atol": steps * 3e-3}
                                          if dtype == "float32" else tol))

    with pytest.warns(UserWarning, match="keep train mode"):  # (its dropout layers read the mode)
        model.eval()
    tmodel.eval()
    xe = images(1, 3, (3, 8, 8), 5, seed=2, dtype=npd)[0][0]
    out = lm.compile(model(lm.Graph().input("x", ("B", 3, 8, 8), dtype=dtype)))(x=xe)
    with torch.no_grad():
        np.testing.assert_allclose(out, tmodel(tt(xe)).numpy(), **({"rtol": 1e-3, "atol": 1e-5}
                                                                   if dtype == "float32" else tol))


# ------------------------------------------------------------------------------------------ U-Net
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unet_batchnorm_sgd_nesterov_train_eval_switch(dtype):
    """U-Net with BatchNorm2d, MaxPool, ConvTranspose2d and a skip: per-pixel cross-entropy, SGD with
    nesterov momentum and weight decay. 4 steps; running statistics and num_batches_tracked; eval
    logits with dropout p=0.5 set after training (off in eval); then 3 more train steps with the step
    compiled before the switch (it stays in train mode), and the eval program compiled earlier sees
    the new weights and statistics. Sizes of batch change (3, 1, 2, ...: the count in the unbiased
    running variance is symbolic)."""
    manual_seed(1)
    model, tmodel = unet("lm"), unet("torch")
    to_torch(model, tmodel)
    if dtype == "float64":
        model.double()
        tmodel.double()
    f32 = dtype == "float32"
    loss_tol = dict(rtol=1e-5, atol=1e-6) if f32 else dict(rtol=1e-12, atol=1e-13)
    tol = dict(rtol=1e-4, atol=1e-6) if f32 else dict(rtol=1e-10, atol=1e-12)
    out_tol = dict(rtol=1e-4, atol=1e-5) if f32 else dict(rtol=1e-10, atol=1e-12)
    rng = np.random.default_rng(3)
    batches = [(rng.standard_normal((b, 2, 8, 8)).astype(dtype), rng.integers(0, 3, (b, 8, 8)).astype(np.int32))
               for b in (3, 1, 2, 3, 4, 1, 3)]
    g = lm.Graph()
    x, y = g.input("x", ("B", 2, 8, 8), dtype=dtype), g.input("y", ("B", 8, 8), dtype=lm.int32)
    model.train()
    opt = train.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)
    step = train.compile_step(F.cross_entropy(model(x), y), opt)
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3,
                           foreach=False)

    def train_on(bs):
        for i, (xb, yb) in enumerate(bs):
            ours = step(x=xb, y=yb)
            topt.zero_grad()
            tl = TF.cross_entropy(tmodel(tt(xb)), tt(yb))
            tl.backward()
            topt.step()
            np.testing.assert_allclose(ours, tl.item(), **loss_tol, err_msg=f"loss at step {i}")

    tmodel.train()
    train_on(batches[:4])
    assert_params_close(model, tmodel, **tol)
    assert int(model.enc1[1].num_batches_tracked.data) == 4

    model.drop.p = tmodel.drop.p = 0.5
    with pytest.warns(UserWarning, match="keep train mode"):
        model.eval()
    tmodel.eval()
    ge = lm.Graph()  # evaluation in a graph of its own (see test_eval_in_the_training_graph_...)
    predict = lm.compile(model(ge.input("x", ("B", 2, 8, 8), dtype=dtype)))
    probe = np.random.default_rng(4).standard_normal((2, 2, 8, 8)).astype(dtype)
    with torch.no_grad():
        np.testing.assert_allclose(predict(x=probe), tmodel(tt(probe)).numpy(), **out_tol)

    tmodel.train()
    tmodel.drop.p = 0.0  # (luminal's step keeps the p=0 it was built with)
    train_on(batches[4:])  # model is in eval mode now: the compiled step still trains as built
    assert_params_close(model, tmodel, **tol)
    tmodel.eval()
    with torch.no_grad():
        np.testing.assert_allclose(predict(x=probe), tmodel(tt(probe)).numpy(), **out_tol)


# ------------------------------------------------------------------------------------------ char LM
def _char_lm_run(batches, ckpt_at=None, path=None):
    """Adam on the tied LSTM LM; with ``ckpt_at``: save after that many steps, rebuild everything from
    another seed and load. Returns (model, losses)."""

    def make(seed):
        manual_seed(seed)
        model = char_lm("lm")
        g = lm.Graph()
        x, y = g.input("x", ("B", 7), dtype=lm.int32), g.input("y", ("B", 7), dtype=lm.int32)
        logits, _ = model(x)
        loss = F.cross_entropy(logits.reshape(-1, 11), y.reshape(-1))
        opt = train.Adam(model.parameters(), lr=1e-2)
        sched = train.StepLR(opt, step_size=3, gamma=0.5)
        return model, opt, sched, train.compile_step(loss, opt)

    model, opt, sched, step = make(5)
    losses, start = [], 0
    if ckpt_at is not None:
        for xb, yb in batches[:ckpt_at]:
            losses.append(step(x=xb, y=yb))
            sched.step()
        train.save_checkpoint(path, model=model, optimizer=opt, scheduler=sched, step=step, extra={"at": ckpt_at})
        model, opt, sched, step = make(99)
        start = train.load_checkpoint(path, model=model, optimizer=opt, scheduler=sched, step=step)["at"]
        assert model.decoder.weight is model.embedding.weight  # loading keeps the tie
    for xb, yb in batches[start:]:
        losses.append(step(x=xb, y=yb))
        sched.step()
    return model, losses


def test_char_lm_tied_lstm_adam_checkpoint_resume(tmp_path):
    """2-layer LSTM LM with the decoder tied to the embedding, Adam + StepLR: 8 steps against torch;
    the same run stopped after 4 steps, checkpointed, loaded into fresh objects and continued gives
    the same losses and weights bit for bit."""
    batches = tokens(8, 4, 7, 11, seed=6)
    model, losses = _char_lm_run(batches)
    assert len(list(model.parameters())) == len(dict(model.named_parameters())) == 10  # the tie counted once

    manual_seed(5)
    tmodel = char_lm("torch")
    to_torch(char_lm("lm"), tmodel)
    topt = torch.optim.Adam(tmodel.parameters(), lr=1e-2, foreach=False)
    tsched = torch.optim.lr_scheduler.StepLR(topt, step_size=3, gamma=0.5)
    theirs = []
    for xb, yb in batches:
        topt.zero_grad()
        tl = TF.cross_entropy(tmodel(tt(xb))[0].reshape(-1, 11), tt(yb).reshape(-1))
        tl.backward()
        topt.step()
        tsched.step()
        theirs.append(tl.item())
    np.testing.assert_allclose(losses, theirs, rtol=1e-5, atol=1e-6)
    assert_params_close(model, tmodel, rtol=1e-4, atol=1e-5)

    resumed, losses2 = _char_lm_run(batches, ckpt_at=4, path=tmp_path / "lm.safetensors")
    assert losses2 == losses
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(resumed.state_dict()[k], v, err_msg=k)


# ------------------------------------------------------------------------------------------ GPT
def test_gpt_causal_mha_label_smoothing_accumulation():
    """GPT blocks (causal MultiheadAttention: a float mask with is_causal=True, then a bool mask),
    cross_entropy with label_smoothing=0.1, AdamW with weight decay and a warmup LambdaLR, 2-step
    gradient accumulation (torch: loss / 2, backward twice, step): 4 updates from 8 batches."""
    manual_seed(2)
    model, tmodel = gpt("lm"), gpt("torch")
    to_torch(model, tmodel)
    batches = tokens(8, 3, 6, 13, seed=8)

    def lam(s):
        return min(1.0, (s + 1) / 2) * 0.5 ** (s // 3)

    g = lm.Graph()
    x, y = g.input("x", ("B", 6), dtype=lm.int32), g.input("y", ("B", 6), dtype=lm.int32)
    loss = F.cross_entropy(model(x).reshape(-1, 13), y.reshape(-1), label_smoothing=0.1)
    opt = train.AdamW(model.parameters(), lr=5e-3, weight_decay=0.1)
    sched = train.LambdaLR(opt, lam)
    step = train.compile_step(loss, opt, accumulate=2)
    topt = torch.optim.AdamW(tmodel.parameters(), lr=5e-3, weight_decay=0.1, foreach=False)
    tsched = torch.optim.lr_scheduler.LambdaLR(topt, lam)
    for i, (xb, yb) in enumerate(batches):
        ours = step(x=xb, y=yb)
        tl = TF.cross_entropy(tmodel(tt(xb)).reshape(-1, 13), tt(yb).reshape(-1), label_smoothing=0.1)
        (tl / 2).backward()
        np.testing.assert_allclose(ours, tl.item(), rtol=1e-5, atol=1e-6, err_msg=f"loss at call {i}")
        if i % 2 == 1:
            assert step.micro_step == 0
            topt.step()
            topt.zero_grad()
            tsched.step()
            sched.step()
    assert opt.steps == 4
    assert_params_close(model, tmodel, rtol=1e-4, atol=1e-6, noise_atol=4 * 5e-3)


def _gpt_run(batches, ckpt_at=None, path=None):
    """GPT, AdamW, LambdaLR, accumulate=2 and clip_grad_norm; with ``ckpt_at``: save after that many
    calls (mid-accumulation when odd), rebuild from another seed, load, continue. Returns (model,
    losses, gradient norms of the updates)."""

    def make(seed):
        manual_seed(seed)
        model = gpt("lm")
        g = lm.Graph()
        x, y = g.input("x", ("B", 6), dtype=lm.int32), g.input("y", ("B", 6), dtype=lm.int32)
        loss = F.cross_entropy(model(x).reshape(-1, 13), y.reshape(-1), label_smoothing=0.1)
        opt = train.AdamW(model.parameters(), lr=5e-3, weight_decay=0.1)
        sched = train.LambdaLR(opt, _gpt_lambda)
        return model, opt, sched, train.compile_step(loss, opt, accumulate=2, clip_grad_norm=0.3)

    model, opt, sched, step = make(2)
    losses, norms, start = [], [], 0

    def run(bs):
        for xb, yb in bs:
            losses.append(step(x=xb, y=yb))
            if step.micro_step == 0:
                norms.append(step.last_grad_norm)
                sched.step()

    if ckpt_at is not None:
        run(batches[:ckpt_at])
        train.save_checkpoint(path, model=model, optimizer=opt, scheduler=sched, step=step)
        model, opt, sched, step = make(77)
        train.load_checkpoint(path, model=model, optimizer=opt, scheduler=sched, step=step)
        start = ckpt_at
    run(batches[start:])
    return model, losses, norms


def _gpt_lambda(s):
    return min(1.0, (s + 1) / 2) * 0.5 ** (s // 3)


def test_gpt_clip_after_accumulation_and_resume_mid_accumulation(tmp_path):
    """clip_grad_norm with accumulate=2 clips the accumulated (mean) gradient, as torch's
    clip_grad_norm_ after two backward passes of loss / 2; a run checkpointed after 3 calls (between
    the two halves of an update) and resumed into fresh objects repeats the straight run bit for bit."""
    batches = tokens(8, 3, 6, 13, seed=9)
    model, losses, norms = _gpt_run(batches)
    manual_seed(2)
    tmodel = gpt("torch")
    to_torch(gpt("lm"), tmodel)
    topt = torch.optim.AdamW(tmodel.parameters(), lr=5e-3, weight_decay=0.1, foreach=False)
    tsched = torch.optim.lr_scheduler.LambdaLR(topt, _gpt_lambda)
    tlosses, tnorms = [], []
    for i, (xb, yb) in enumerate(batches):
        tl = TF.cross_entropy(tmodel(tt(xb)).reshape(-1, 13), tt(yb).reshape(-1), label_smoothing=0.1)
        (tl / 2).backward()
        tlosses.append(tl.item())
        if i % 2 == 1:
            tnorms.append(torch.nn.utils.clip_grad_norm_(tmodel.parameters(), 0.3).item())
            topt.step()
            topt.zero_grad()
            tsched.step()
    np.testing.assert_allclose(losses, tlosses, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(norms, tnorms, rtol=1e-5)
    assert_params_close(model, tmodel, rtol=1e-4, atol=1e-6, noise_atol=4 * 5e-3)

    resumed, losses2, norms2 = _gpt_run(batches, ckpt_at=3, path=tmp_path / "gpt.safetensors")
    assert losses2 == losses and norms2 == norms
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(resumed.state_dict()[k], v, err_msg=k)


def _unet_run(batches, ckpt_at=None, path=None):
    def make(seed):
        manual_seed(seed)
        model = unet("lm")
        g = lm.Graph()
        x, y = g.input("x", ("B", 2, 8, 8)), g.input("y", ("B", 8, 8), dtype=lm.int32)
        opt = train.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)
        sched = train.MultiStepLR(opt, milestones=[2, 4], gamma=0.5)
        return model, opt, sched, train.compile_step(F.cross_entropy(model(x), y), opt)

    model, opt, sched, step = make(1)
    losses, start = [], 0
    if ckpt_at is not None:
        for xb, yb in batches[:ckpt_at]:
            losses.append(step(x=xb, y=yb))
            sched.step()
        train.save_checkpoint(path, model=model, optimizer=opt, scheduler=sched, step=step)
        model, opt, sched, step = make(55)
        train.load_checkpoint(path, model=model, optimizer=opt, scheduler=sched, step=step)
        start = ckpt_at
    for xb, yb in batches[start:]:
        losses.append(step(x=xb, y=yb))
        sched.step()
    return model, losses


def test_unet_resume_keeps_batchnorm_statistics_and_momentum(tmp_path):
    """The U-Net resumed after 3 of 6 steps (running statistics, num_batches_tracked, momentum
    buffers, MultiStepLR from the file) repeats the straight run bit for bit, and both track torch."""
    rng = np.random.default_rng(10)
    batches = [(rng.standard_normal((2, 2, 8, 8)).astype(np.float32),
                rng.integers(0, 3, (2, 8, 8)).astype(np.int32)) for _ in range(6)]
    model, losses = _unet_run(batches)
    resumed, losses2 = _unet_run(batches, ckpt_at=3, path=tmp_path / "unet.safetensors")
    assert losses2 == losses
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(resumed.state_dict()[k], v, err_msg=k)
    assert int(model.dec[1].num_batches_tracked.data) == 6

    manual_seed(1)
    tmodel = unet("torch")
    to_torch(unet("lm"), tmodel)
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3,
                           foreach=False)
    tsched = torch.optim.lr_scheduler.MultiStepLR(topt, milestones=[2, 4], gamma=0.5)
    tlosses = []
    for xb, yb in batches:
        topt.zero_grad()
        tl = TF.cross_entropy(tmodel(tt(xb)), tt(yb))
        tl.backward()
        topt.step()
        tsched.step()
        tlosses.append(tl.item())
    np.testing.assert_allclose(losses, tlosses, rtol=1e-5, atol=1e-6)
    assert_params_close(model, tmodel, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nano_gpt_as_written_for_torch(dtype):
    """nanoGPT's model and configure_optimizers (AdamW, decay on the >= 2-d parameters only, betas
    (0.9, 0.95)), CosineAnnealingLR, clip_grad_norm 1.0, batches of changing size (the batch dim is
    symbolic): 6 steps against torch, losses, clipped norms and every weight."""
    manual_seed(0)
    model, tmodel = nano_gpt("lm"), nano_gpt("torch")
    to_torch(model, tmodel)
    if dtype == "float64":
        model.double()
        tmodel.double()
    g = lm.Graph()
    x, y = g.input("x", ("B", 6), dtype=lm.int32), g.input("y", ("B", 6), dtype=lm.int32)
    logits = model(x)
    opt = model.configure_optimizers(train, 0.1, 6e-3, (0.9, 0.95))
    sched = train.CosineAnnealingLR(opt, T_max=6)
    step = train.compile_step(F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1)), opt, clip_grad_norm=1.0)
    topt = tmodel.configure_optimizers(torch.optim, 0.1, 6e-3, (0.9, 0.95))
    tsched = torch.optim.lr_scheduler.CosineAnnealingLR(topt, T_max=6)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-11, atol=1e-13)
    rng = np.random.default_rng(11)
    for i, b in enumerate([3, 3, 1, 4, 2, 3]):
        s = rng.integers(0, 13, (b, 7)).astype(np.int32)
        xb, yb = s[:, :-1].copy(), s[:, 1:].copy()
        ours = step(x=xb, y=yb)
        sched.step()
        topt.zero_grad()
        tlog = tmodel(tt(xb))
        tl = TF.cross_entropy(tlog.view(-1, tlog.size(-1)), tt(yb).view(-1))
        tl.backward()
        tnorm = torch.nn.utils.clip_grad_norm_(tmodel.parameters(), 1.0)
        topt.step()
        tsched.step()
        np.testing.assert_allclose(ours, tl.item(), **tol, err_msg=f"loss at step {i}")
        np.testing.assert_allclose(step.last_grad_norm, tnorm.item(), **tol, err_msg=f"norm at step {i}")
    assert_params_close(model, tmodel, **({"rtol": 1e-4, "atol": 1e-6, "noise_atol": 6 * 6e-3}
                                          if dtype == "float32" else {"rtol": 1e-9, "atol": 1e-12,
                                                                      "noise_atol": 1e-8}))


def test_char_lm_truncated_bptt_with_padding_idx():
    """Truncated BPTT: the LSTM state (h_n, c_n) is an extra output of the step and the next call's
    input (torch: detached, fed back). The embedding has padding_idx=0 and is tied to the decoder:
    torch zeroes row 0's gradient from the lookup only, so the decoder's gradient still moves it."""
    manual_seed(4)
    model, tmodel = char_lm("lm", padding_idx=0), char_lm("torch", padding_idx=0)
    to_torch(model, tmodel)
    g = lm.Graph()
    x, y = g.input("x", ("B", 5), dtype=lm.int32), g.input("y", ("B", 5), dtype=lm.int32)
    h0, c0 = g.input("h0", (2, "B", 12)), g.input("c0", (2, "B", 12))
    logits, (hn, cn) = model(x, (h0, c0))
    step = train.compile_step(F.cross_entropy(logits.reshape(-1, 11), y.reshape(-1)),
                              train.Adam(model.parameters(), lr=1e-2), outputs=[hn, cn])
    topt = torch.optim.Adam(tmodel.parameters(), lr=1e-2, foreach=False)
    stream = np.random.default_rng(12).integers(0, 11, (3, 21)).astype(np.int32)
    h = c = np.zeros((2, 3, 12), np.float32)
    th = None
    row0 = model.embedding.weight.data[0].copy()
    for i in range(4):
        xb, yb = stream[:, 5 * i:5 * i + 5].copy(), stream[:, 5 * i + 1:5 * i + 6].copy()
        ours, h, c = step(x=xb, y=yb, h0=h, c0=c)
        topt.zero_grad()
        tlogits, th = tmodel(tt(xb), th)
        th = tuple(t.detach() for t in th)
        tl = TF.cross_entropy(tlogits.reshape(-1, 11), tt(yb).reshape(-1))
        tl.backward()
        topt.step()
        np.testing.assert_allclose(ours, tl.item(), rtol=1e-5, atol=1e-6, err_msg=f"loss at step {i}")
        np.testing.assert_allclose(h, th[0].numpy(), rtol=1e-4, atol=1e-6, err_msg=f"h_n at step {i}")
        np.testing.assert_allclose(c, th[1].numpy(), rtol=1e-4, atol=1e-6, err_msg=f"c_n at step {i}")
    assert_params_close(model, tmodel, rtol=1e-4, atol=1e-6)
    assert not np.array_equal(model.embedding.weight.data[0], row0)  # the decoder's gradient reached it

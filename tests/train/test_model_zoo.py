"""Quick tier of tests/train/test_model_zoo_audit.py: the two cheapest models of the zoo trained in
luminal and torch from the same weights (tests/model_zoo.py), and evaluation in the training graph."""

import warnings

import numpy as np
import pytest
import torch
from model_zoo import assert_params_close, nano_gpt, to_torch, unet, vit, vit_param_groups

import luminal as lm
from luminal import nn, train
from luminal.frontend.seed import manual_seed
from luminal.nn import functional as F

TF = torch.nn.functional


def test_vit_two_param_groups_clip_and_warmup():
    """ViT: AdamW with a no-decay group, LambdaLR warmup, clip_grad_norm; 4 steps against torch."""
    manual_seed(0)
    model, tmodel = vit("lm", layers=1), vit("torch", layers=1)
    to_torch(model, tmodel)
    rng = np.random.default_rng(1)
    batches = [(rng.standard_normal((3, 3, 8, 8)).astype(np.float32), rng.integers(0, 5, 3).astype(np.int32))
               for _ in range(4)]
    g = lm.Graph()
    x, y = g.input("x", ("B", 3, 8, 8)), g.input("y", ("B",), dtype=lm.int32)
    opt = train.AdamW(vit_param_groups(model, 0.05), lr=3e-3)
    sched = train.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 3))
    step = train.compile_step(F.cross_entropy(model(x), y), opt, clip_grad_norm=0.5)
    topt = torch.optim.AdamW(vit_param_groups(tmodel, 0.05), lr=3e-3, foreach=False)
    tsched = torch.optim.lr_scheduler.LambdaLR(topt, lambda s: min(1.0, (s + 1) / 3))
    for i, (xb, yb) in enumerate(batches):
        ours = step(x=xb, y=yb)
        topt.zero_grad()
        tl = TF.cross_entropy(tmodel(torch.tensor(xb)), torch.tensor(yb).long())
        tl.backward()
        tnorm = torch.nn.utils.clip_grad_norm_(tmodel.parameters(), 0.5)
        topt.step()
        tsched.step()
        sched.step()
        np.testing.assert_allclose(ours, tl.item(), rtol=1e-4, atol=1e-6, err_msg=f"loss at step {i}")
        np.testing.assert_allclose(step.last_grad_norm, tnorm.item(), rtol=1e-4, err_msg=f"norm at step {i}")
    assert_params_close(model, tmodel, rtol=1e-4, atol=1e-6, noise_atol=4 * 3e-3)


def test_unet_batchnorm_running_stats_and_eval():
    """U-Net with BatchNorm2d and ConvTranspose2d, SGD nesterov: 3 steps, running statistics, then the
    eval-mode logits from a graph of their own."""
    manual_seed(1)
    model, tmodel = unet("lm"), unet("torch")
    to_torch(model, tmodel)
    rng = np.random.default_rng(3)
    g = lm.Graph()
    x, y = g.input("x", ("B", 2, 8, 8)), g.input("y", ("B", 8, 8), dtype=lm.int32)
    opt = train.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    step = train.compile_step(F.cross_entropy(model(x), y), opt)
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.05, momentum=0.9, nesterov=True, foreach=False)
    for i in range(3):
        xb, yb = rng.standard_normal((3, 2, 8, 8)).astype(np.float32), rng.integers(0, 3, (3, 8, 8)).astype(np.int32)
        ours = step(x=xb, y=yb)
        topt.zero_grad()
        tl = TF.cross_entropy(tmodel(torch.tensor(xb)), torch.tensor(yb).long())
        tl.backward()
        topt.step()
        np.testing.assert_allclose(ours, tl.item(), rtol=1e-5, atol=1e-6, err_msg=f"loss at step {i}")
    assert_params_close(model, tmodel, rtol=1e-4, atol=1e-6)  # running_mean/var, num_batches_tracked too
    with pytest.warns(UserWarning, match="keep train mode"):
        model.eval()
    tmodel.eval()
    ge = lm.Graph()
    probe = rng.standard_normal((2, 2, 8, 8)).astype(np.float32)
    with torch.no_grad():
        want = tmodel(torch.tensor(probe)).numpy()
    np.testing.assert_allclose(lm.compile(model(ge.input("x", ("B", 2, 8, 8))))(x=probe), want, rtol=1e-4,
                               atol=1e-5)


def test_eval_built_in_the_training_graph_warns():
    """Every program compiled from a graph writes all of that graph's state updates: an eval-mode
    forward built into the graph of a BatchNorm's train-mode forward (examples/mnist/train.py's
    pattern, with a BatchNorm) compiles to a program that updates the running statistics from each
    evaluated batch. Building it warns, naming the updated states; a graph of its own does not."""
    bn = nn.BatchNorm1d(3)
    g = lm.Graph()
    x = g.input("x", ("B", 3))
    step = train.compile_step(bn(x).square().mean(), train.SGD(bn.parameters(), lr=0.1))
    step(x=np.arange(6, dtype=np.float32).reshape(2, 3))
    with pytest.warns(UserWarning, match="keep train mode"):
        bn.eval()
    with pytest.warns(UserWarning, match=r"BatchNorm1d: called in eval mode in a graph that already holds its "
                                         r"train-mode forward: every program compiled from this graph writes the "
                                         r"graph's state updates \(running_mean, running_var, "
                                         r"num_batches_tracked\) after each run, .* new lm.Graph\(\)"):
        bn(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bn(lm.Graph().input("x", ("B", 3)))


def test_tied_weights_saved_once_load_with_strict_false(tmp_path):
    """safetensors' save_model (as Hugging Face files) keeps a tied weight under one name. A strict load
    reports the other name missing, as torch's load_state_dict does, and says it is tied to a name the
    file has; strict=False loads it, tie kept."""
    import safetensors.torch

    manual_seed(0)
    tmodel, model = nano_gpt("torch"), nano_gpt("lm")
    path = tmp_path / "tied.safetensors"
    safetensors.torch.save_model(tmodel, str(path))
    with pytest.raises(ValueError, match=r"missing: transformer.wte.weight \(tied: the same parameter as "
                                         r"'lm_head.weight', which the checkpoint has\) \| a checkpoint that stores "
                                         r"tied weights under one name loads with strict=False"):
        model.load_safetensors(path)
    missing, unexpected = model.load_safetensors(path, strict=False)
    assert (missing, unexpected) == (["transformer.wte.weight"], [])
    assert model.transformer.wte.weight is model.lm_head.weight
    np.testing.assert_array_equal(model.lm_head.weight.data, tmodel.lm_head.weight.detach().numpy())

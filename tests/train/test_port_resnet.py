"""A torch CNN training script and its luminal port, side by side, as a new user writes them.

The model (a CIFAR-style ResNet: a conv3x3 stem, two residual blocks of ``Conv2d(bias=False)`` +
``BatchNorm2d`` + ReLU, the second with stride 2 and a 1x1 downsample, ``Dropout``,
``AdaptiveAvgPool2d(1)``, ``Flatten``, ``Linear``) is one class body run over ``torch.nn`` and over
``luminal.nn``: the model ports by changing the import. The scripts differ where luminal is lazy: the
loss is built once on graph inputs and ``train.compile_step`` runs forward, backward, clipping and the
update per batch (torch's ``zero_grad``/``backward``/``clip_grad_norm_``/``step``), evaluation is a graph
built after ``model.eval()`` (torch's ``no_grad`` block), and a checkpoint is ``train.save_checkpoint``
(torch's ``torch.save`` of the state dicts). Both run SGD (momentum, nesterov, weight decay) and, apart,
AdamW, under ``optim.lr_scheduler.OneCycleLR``, from the same weights (dropout p=0 while training), and
must agree on the losses, the first step's gradients, the gradient norms, the learning rates and
momenta, the BatchNorm running statistics and parameters after a checkpoint round trip, and the eval
outputs (dropout raised to p=0.5 for eval, which must ignore it).
"""

import io

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import nn, optim, train

BATCH, STEPS, CHECKPOINT_AFTER = 8, 3, 2


def resnet(nnm):
    """The model, over ``nnm`` (``torch.nn`` or ``luminal.nn``): the same source for both."""

    class BasicBlock(nnm.Module):
        def __init__(self, cin, cout, stride=1):
            super().__init__()
            self.conv1 = nnm.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nnm.BatchNorm2d(cout)
            self.conv2 = nnm.Conv2d(cout, cout, 3, padding=1, bias=False)
            self.bn2 = nnm.BatchNorm2d(cout)
            self.relu = nnm.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nnm.Sequential(nnm.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                                 nnm.BatchNorm2d(cout))

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out += identity
            return self.relu(out)

    class ResNet(nnm.Module):
        def __init__(self, num_classes=10):
            super().__init__()
            self.stem = nnm.Sequential(nnm.Conv2d(3, 8, 3, padding=1, bias=False), nnm.BatchNorm2d(8), nnm.ReLU())
            self.layer1 = BasicBlock(8, 8)
            self.layer2 = BasicBlock(8, 16, stride=2)
            self.pool = nnm.AdaptiveAvgPool2d(1)
            self.flatten = nnm.Flatten()
            self.dropout = nnm.Dropout(0.0)
            self.fc = nnm.Linear(16, num_classes)
            for m in self.modules():
                if isinstance(m, nnm.Conv2d):
                    nnm.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

        def forward(self, x):
            x = self.layer2(self.layer1(self.stem(x)))
            return self.fc(self.dropout(self.flatten(self.pool(x))))

    return ResNet()


def make_optimizer(optim_module, params, kind):
    """The two optimizers of the comparison, from ``torch.optim`` or ``luminal.optim``."""
    if kind == "sgd":
        return optim_module.SGD(params, lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    return optim_module.AdamW(params, lr=1e-2, weight_decay=0.05)


def make_scheduler(optim_module, opt, kind):
    max_lr = 0.1 if kind == "sgd" else 1e-2
    return optim_module.lr_scheduler.OneCycleLR(opt, max_lr=max_lr, epochs=2, steps_per_epoch=2)


def momentum_of(opt):
    group = opt.param_groups[0]
    return group["momentum"] if "momentum" in group else group["betas"][0]


def batches():
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((BATCH, 3, 32, 32)).astype(np.float32),
             rng.integers(0, 10, BATCH).astype(np.int32)) for _ in range(STEPS)]


def torch_script(kind, data, init):
    """The torch original: returns what the comparison reads."""
    rec = {"loss": [], "norm": [], "lr": [], "momentum": []}
    model = resnet(torch.nn)
    model.load_state_dict(init)
    criterion = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    opt = make_optimizer(torch.optim, model.parameters(), kind)
    sched = make_scheduler(torch.optim, opt, kind)
    for i, (xb, yb) in enumerate(data):
        if i == CHECKPOINT_AFTER:  # save, then resume in a fresh model, optimizer and scheduler
            buf = io.BytesIO()
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                        "scheduler": sched.state_dict()}, buf)
            buf.seek(0)
            ckpt = torch.load(buf)
            model = resnet(torch.nn)
            model.load_state_dict(ckpt["model"])
            opt = make_optimizer(torch.optim, model.parameters(), kind)
            sched = make_scheduler(torch.optim, opt, kind)  # before loading opt: it sets the group's lr
            opt.load_state_dict(ckpt["optimizer"])
            sched.load_state_dict(ckpt["scheduler"])
        model.train()
        opt.zero_grad()
        loss = criterion(model(torch.from_numpy(xb)), torch.from_numpy(yb).long())
        loss.backward()
        if i == 0:
            rec["grads"] = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
        rec["norm"].append(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0).item())
        opt.step()
        sched.step()
        rec["loss"].append(loss.item())
        rec["lr"].append(sched.get_last_lr()[0])
        rec["momentum"].append(momentum_of(opt))
    model.dropout.p = 0.5  # eval must ignore it
    model.eval()
    with torch.no_grad():
        xe, ye = data[0]
        logits = model(torch.from_numpy(xe))
        rec["eval_logits"] = logits.numpy()
        rec["eval_loss"] = criterion(logits, torch.from_numpy(ye).long()).item()
    rec["state"] = {k: v.numpy() for k, v in model.state_dict().items()}
    return rec


def luminal_script(kind, data, init, tmp_path):
    """The luminal port of ``torch_script``."""
    rec = {"loss": [], "norm": [], "lr": [], "momentum": []}
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

    def build(model):  # the training program: forward, backward, clipping and update in one
        g = lm.Graph()
        x, y = g.input("x", ("B", 3, 32, 32)), g.input("y", ("B",), dtype=lm.long)
        model.train()
        loss = criterion(model(x), y)
        opt = make_optimizer(optim, model.parameters(), kind)
        sched = make_scheduler(optim, opt, kind)
        # the unclipped gradients too (torch.autograd.grad's), for the first step's comparison
        grads = lm.autograd.grad(loss, list(model.parameters()))
        return opt, sched, train.compile_step(loss, opt, clip_grad_norm=1.0, outputs=grads)

    model = resnet(nn)
    model.load_state_dict(init)
    opt, sched, step = build(model)
    for i, (xb, yb) in enumerate(data):
        if i == CHECKPOINT_AFTER:
            path = tmp_path / "ckpt.safetensors"
            train.save_checkpoint(path, model=model, optimizer=opt, scheduler=sched)
            lm.manual_seed(123)  # another initialisation: the checkpoint overwrites it
            model = resnet(nn)
            opt, sched, step = build(model)
            train.load_checkpoint(path, model=model, optimizer=opt, scheduler=sched)
            # the evaluation program, built now: eval mode is fixed when a graph is built, and each run
            # reads the parameters and running statistics as they are then
            model.dropout.p = 0.5
            with pytest.warns(UserWarning, match="keep train mode"):  # the training graph stays in train mode
                model.eval()
            ge = lm.Graph()
            xe, ye = ge.input("x", ("B", 3, 32, 32)), ge.input("y", ("B",), dtype=lm.long)
            logits = model(xe)
            evaluate = lm.compile([logits, criterion(logits, ye)])
        loss, *grads = step(x=xb, y=yb)  # the loss, then the outputs
        sched.step()
        if i == 0:
            rec["grads"] = {n: gr for (n, _), gr in zip(model.named_parameters(), grads)}
        rec["loss"].append(loss)
        rec["norm"].append(step.last_grad_norm)
        rec["lr"].append(sched.get_last_lr()[0])
        rec["momentum"].append(momentum_of(opt))
    rec["eval_logits"], rec["eval_loss"] = evaluate(x=data[0][0], y=data[0][1])
    rec["state"] = model.state_dict()
    return rec


@pytest.mark.parametrize("kind", ["sgd", "adamw"])
def test_resnet_training_script_port_matches_torch(kind, tmp_path):
    torch.manual_seed(0)
    init = resnet(torch.nn).state_dict()
    data = batches()
    ref = torch_script(kind, data, init)
    ours = luminal_script(kind, data, init, tmp_path)

    np.testing.assert_allclose(ours["loss"], ref["loss"], rtol=1e-5, atol=1e-6, err_msg="losses")
    assert ref["grads"].keys() == ours["grads"].keys()
    for n, gr in ref["grads"].items():
        np.testing.assert_allclose(ours["grads"][n], gr, rtol=1e-4, atol=1e-6, err_msg=f"first step's grad of {n}")
    np.testing.assert_allclose(ours["norm"], ref["norm"], rtol=1e-5, err_msg="clip_grad_norm_'s total norms")
    assert ref["norm"][0] > 1.0  # the clipping acted at least once
    np.testing.assert_allclose(ours["lr"], ref["lr"], rtol=1e-12, err_msg="OneCycleLR's learning rates")
    np.testing.assert_allclose(ours["momentum"], ref["momentum"], rtol=1e-12, err_msg="OneCycleLR's momenta")
    assert ref["state"].keys() == ours["state"].keys()
    for k, v in ref["state"].items():  # parameters and BatchNorm running statistics after the resumed step
        if k.endswith("num_batches_tracked"):
            assert int(ours["state"][k]) == int(v) == STEPS, k
        else:
            np.testing.assert_allclose(ours["state"][k], v, rtol=1e-4, atol=1e-5, err_msg=k)
    np.testing.assert_allclose(ours["eval_logits"], ref["eval_logits"], rtol=1e-4, atol=1e-5, err_msg="eval logits")
    np.testing.assert_allclose(ours["eval_loss"], ref["eval_loss"], rtol=1e-5, err_msg="eval loss")


def test_optim_is_torch_optim_layout():
    """``lm.optim`` holds torch.optim's optimizers, ``lr_scheduler`` and ``swa_utils`` names, as the same
    objects as ``luminal.train``'s (what ``compile_step`` updates). Before, ``from luminal import optim``
    failed with an ImportError and the names lived only under ``luminal.train``."""
    import torch.optim.lr_scheduler as torch_sched
    import torch.optim.swa_utils as torch_swa

    import luminal.optim.lr_scheduler
    import luminal.optim.swa_utils

    assert lm.optim is optim
    missing = set(torch.optim.__all__) - set(optim.__all__) - {"swap_in_optimizer_params_and_state"}
    assert not missing
    assert set(torch_sched.__all__) <= set(luminal.optim.lr_scheduler.__all__)
    assert set(torch_swa.__all__) <= set(luminal.optim.swa_utils.__all__)
    assert optim.SGD is train.SGD and optim.AdamW is train.AdamW
    assert optim.lr_scheduler.OneCycleLR is train.OneCycleLR
    assert optim.swa_utils.AveragedModel is train.AveragedModel


def _positional(f):
    import inspect

    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in inspect.signature(f).parameters.values() if p.kind in kinds]


@pytest.mark.parametrize("name", [n for n in torch.optim.__all__ if n[0].isupper() and n != "Optimizer"])
def test_optimizer_positional_arguments_bind_as_torchs(name):
    """A torch call's positional arguments name the same parameters here (luminal may take more).
    Before, ``Adagrad``'s 7th (torch's ``foreach``) and ``RMSprop``'s 8th (torch's ``capturable``) were
    ``maximize``: ``Adagrad(p, 0.01, 0, 0, 0, 1e-10, True)`` ascended the loss."""
    ours, theirs = _positional(getattr(optim, name)), _positional(getattr(torch.optim, name))
    assert ours[:len(theirs)] == theirs


def test_torch_kernel_flags_given_by_position_do_not_maximize():
    params = list(nn.Linear(2, 2).parameters())
    assert optim.Adagrad(params, 0.01, 0, 0, 0, 1e-10, True).defaults["maximize"] is False
    assert optim.RMSprop(params, 0.01, 0.99, 1e-8, 0, 0, False, True).defaults["maximize"] is False
    assert optim.RMSprop(params, 0.01, 0.99, 1e-8, 0, 0, False, False, None, True).defaults["maximize"] is True


def test_nn_init_takes_torchs_parameter_names():
    """``nn.init.trunc_normal_(tensor=w, std=0.02)``, as torch spells it (a ViT's init): luminal's
    initialisers named their first parameter ``p``, so the keyword call was a TypeError."""
    import inspect

    for name in ("uniform_", "normal_", "trunc_normal_", "constant_", "zeros_", "ones_", "eye_", "dirac_",
                 "orthogonal_", "sparse_", "kaiming_uniform_", "kaiming_normal_", "xavier_uniform_", "xavier_normal_"):
        ours = list(inspect.signature(getattr(nn.init, name)).parameters)
        assert ours == list(inspect.signature(getattr(torch.nn.init, name)).parameters), name
    w = nn.Parameter(np.zeros((4, 3), np.float32))
    nn.init.trunc_normal_(tensor=w, std=0.02, a=-0.04, b=0.04)
    assert 0 < np.abs(w.data).max() <= 0.04
    nn.init.constant_(tensor=w, val=0.5)
    np.testing.assert_array_equal(w.data, np.full((4, 3), 0.5, np.float32))

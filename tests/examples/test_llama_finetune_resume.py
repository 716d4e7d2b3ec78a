"""``finetune.py`` keeps its training state: ``--save-every N`` writes a checkpoint every N steps, Ctrl-C
(a real SIGINT to the process) waits for the step under way, saves the steps done and exits with a
message and status 130, and ``--resume`` continues from the file as if the run had not stopped."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from luminal import train

LLAMA = Path(__file__).resolve().parents[2] / "examples" / "llama"
sys.path.insert(0, str(LLAMA))
import make_random  # noqa: E402
from model import Llama  # noqa: E402


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("finetune")
    src = make_random.make_random(root / "src", layers=2, hidden=32, heads=2, kv_heads=1, intermediate=48,
                                  vocab=320, max_positions=64)
    data = root / "data.txt"
    data.write_text("the quick brown fox jumps over the lazy dog. " * 20)
    return src, data


def _script():
    spec = importlib.util.spec_from_file_location("llama_finetune_resume", LLAMA / "finetune.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def _args(setup, *more):
    src, data = setup
    return [str(src), "--data", str(data), "--steps", "5", "--batch-size", "2", "--seq-len", "8", "--lr", "1e-2",
            *more]


def _load(setup, path):
    """A fresh model, optimizer, schedule and step with ``path``'s state; the steps it had done."""
    script = _script()
    model = Llama.from_pretrained(setup[0])
    step, opt = script.build_step(model, 1e-2, 0.0, 1.0, "cpu")
    sched = train.CosineAnnealingLR(opt, T_max=5)
    extra = train.load_checkpoint(path, model=model, optimizer=opt, scheduler=sched, step=step)
    return model, opt, extra["done"]


@pytest.mark.slow  # the full tier: a training process interrupted and restarted
def test_ctrl_c_saves_the_steps_done_and_exits_cleanly(setup, tmp_path):
    ck = tmp_path / "state.safetensors"
    args = _args(setup, "--checkpoint", str(ck), "--save-every", "1")
    args[args.index("--steps") + 1] = "100000"  # runs until interrupted
    proc = subprocess.Popen([sys.executable, str(LLAMA / "finetune.py"), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 300
        while not ck.exists():  # a first step done and saved: the program is compiled, steps are running
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "no checkpoint after 300 s"
            time.sleep(0.1)
        ck.unlink()  # what is there now was written by the interrupt
        os.kill(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    assert "Traceback" not in out
    assert "interrupted after step" in out and f"--resume {ck}" in out
    model, opt, done = _load(setup, ck)
    assert done >= 1 and opt.steps == done  # the count and the moments are of the same step
    assert f"interrupted after step {done} of 100000" in out


def test_resume_continues_as_the_run_would_have(setup, tmp_path, monkeypatch):
    whole = _script().main(_args(setup, "--checkpoint", str(tmp_path / "whole.safetensors"), "--save-every", "5"))
    assert not whole["interrupted"] and len(whole["losses"]) == 5
    _, opt, done = _load(setup, tmp_path / "whole.safetensors")  # --save-every 5: written after step 5
    assert done == 5 == opt.steps

    script = _script()
    build = script.build_step

    def interrupting_build(*a, **kw):
        step, opt = build(*a, **kw)
        return CtrlCAfterStep2(step, opt), opt

    monkeypatch.setattr(script, "build_step", interrupting_build)
    ck = tmp_path / "part.safetensors"
    part = script.main(_args(setup, "--checkpoint", str(ck)))
    assert part["interrupted"] and part["done"] == 2 and len(part["losses"]) == 2
    monkeypatch.undo()
    rest = _script().main(_args(setup, "--checkpoint", str(ck), "--resume", str(ck)))
    assert not rest["interrupted"] and rest["done"] == 5
    np.testing.assert_allclose(part["losses"] + rest["losses"], whole["losses"], rtol=1e-5)
    for (name, a), (_, b) in zip(rest["model"].named_parameters(), whole["model"].named_parameters()):
        np.testing.assert_allclose(a.data, b.data, rtol=1e-5, atol=1e-6, err_msg=name)


class CtrlCAfterStep2:
    """The train step, sending this process a SIGINT as soon as the second step returns (outside the
    step's own deferred block: finetune.py must count the step and its schedule before it stops)."""

    def __init__(self, step, opt):
        self.step, self.opt = step, opt

    def __call__(self, **batch):
        loss = self.step(**batch)
        if self.opt.steps == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return loss

    def __getattr__(self, name):  # state_dict, load_state_dict, ... of the real step
        return getattr(self.step, name)


def test_resume_of_another_run_is_refused(setup, tmp_path):
    ck = tmp_path / "state.safetensors"
    _script().main(_args(setup, "--checkpoint", str(ck), "--save-every", "5"))
    args = _args(setup, "--resume", str(ck))
    args[args.index("--steps") + 1] = "7"
    with pytest.raises(SystemExit, match=r"another run \(--steps 5 there, 7 here\)"):
        _script().main(args)


@pytest.fixture(scope="module")
def finished(setup, tmp_path_factory):
    """The state of a whole 5-step run on ``setup``'s data."""
    ck = tmp_path_factory.mktemp("finished") / "state.safetensors"
    _script().main(_args(setup, "--checkpoint", str(ck), "--save-every", "5"))
    return ck


def test_resume_on_other_data_is_refused(setup, finished, tmp_path):
    other = tmp_path / "other.txt"
    other.write_text(setup[1].read_text().replace("fox", "cat"))  # as many bytes, other text
    args = _args((setup[0], other), "--resume", str(finished))
    with pytest.raises(SystemExit, match=rf"another run \(--data {setup[1]} \(\d+ bytes, sha256 \w+\.\.\.\) there, "
                                         rf"{other} \(\d+ bytes, sha256 \w+\.\.\.\) here\)"):
        _script().main(args)


def test_resume_on_the_same_data_moved_is_accepted(setup, finished, tmp_path):
    moved = tmp_path / "moved.txt"
    moved.write_bytes(setup[1].read_bytes())
    rest = _script().main(_args((setup[0], moved), "--resume", str(finished)))
    assert rest["done"] == 5 and rest["losses"] == []  # all 5 steps were done: nothing left to run


@pytest.mark.parametrize("extra", [{"epoch": 3}, {"done": 2, "run": "steps=5"}, {"run": {"steps": 5}}, [1, 2]])
def test_resume_of_a_checkpoint_not_written_by_finetune_is_refused(setup, tmp_path, extra):
    """A luminal checkpoint of the same model written by another program: a message, not a KeyError."""
    script = _script()
    model = Llama.from_pretrained(setup[0])
    step, opt = script.build_step(model, 1e-2, 0.0, 1.0, "cpu")
    ck = tmp_path / "foreign.safetensors"
    train.save_checkpoint(ck, model=model, optimizer=opt, scheduler=train.CosineAnnealingLR(opt, T_max=5),
                          step=step, extra=extra)
    with pytest.raises(SystemExit, match=rf"--resume {ck} is a luminal checkpoint but not a finetune\.py training "
                                         rf"state"):
        script.main(_args(setup, "--resume", str(ck)))

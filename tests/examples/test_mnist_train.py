"""The MNIST example runs a short training in the suite: the loss falls, both models train, and a
saved run resumes exactly."""

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "mnist" / "train.py"


def _load():
    spec = importlib.util.spec_from_file_location("mnist_example_train", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["mnist_example_train"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def example():
    return _load()


def test_mlp_loss_falls_and_learns(example, backend):
    out = example.main(["--limit", "640", "--epochs", "2", "--backend", backend, "--batch-size", "32"])
    h = out["history"]
    assert h[1]["loss"] < h[0]["loss"] < 2.3
    assert h[1]["accuracy"] > 0.6  # 160 held-out digits after 40 steps; chance is 0.1


def test_cnn_trains(example):
    out = example.main(["--model", "cnn", "--limit", "128", "--epochs", "2", "--batch-size", "32", "--lr", "3e-3"])
    h = out["history"]
    assert h[1]["loss"] < h[0]["loss"]


def test_save_and_resume_continue_exactly(example, tmp_path, monkeypatch):
    """One thread: a step whose thread layout (ours or BLAS's) is timed at its first call may take the
    other layout in the resumed program when the machine is loaded, and the layouts round differently
    in the last bit (CI saw a 1-ulp batch loss); the checkpoint is what this test checks."""
    monkeypatch.setenv("LUMINAL_NUM_THREADS", "1")
    args = ["--limit", "256", "--batch-size", "64", "--optimizer", "sgd"]
    straight = example.main(args + ["--epochs", "3"])["history"]
    ckpt = tmp_path / "mnist.safetensors"
    first = example.main(args + ["--epochs", "1", "--save", str(ckpt)])["history"]
    rest = example.main(args + ["--epochs", "3", "--resume", str(ckpt)])["history"]
    assert first + rest == straight


@pytest.mark.parametrize("argv,message", [
    (["--seed", "-1"], "argument --seed: must be at least 0, got -1"),
    (["--batch-size", "0"], "argument --batch-size: must be at least 1, got 0"),
])
def test_bad_options_are_usage_errors(example, capsys, argv, message):
    """A negative seed was a numpy traceback from manual_seed after the data had loaded."""
    with pytest.raises(SystemExit) as e:
        example.parse_args(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err

"""The MNIST example stops a diverging run before it saves NaN weights, and refuses nonsense
arguments as usage errors."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "mnist" / "train.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("mnist_example_train_robust", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["mnist_example_train_robust"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_huge_lr_stops_before_overwriting_a_good_checkpoint(example, tmp_path, capsys):
    """Before: lr=1e10 trained on through inf and NaN losses and saved NaN weights every epoch."""
    from luminal.core.safetensors_io import load_file

    ckpt = tmp_path / "mnist.safetensors"
    args = ["--limit", "256", "--batch-size", "64", "--optimizer", "sgd"]
    example.main(args + ["--epochs", "1", "--save", str(ckpt)])
    good = ckpt.read_bytes()
    with pytest.raises(SystemExit) as e:
        example.main(args + ["--epochs", "3", "--lr", "1e10", "--save", str(ckpt)])
    msg = str(e.value.code)
    assert "stopped in epoch" in msg and "at call" in msg and "was not overwritten" in msg
    assert ckpt.read_bytes() == good
    assert all(np.isfinite(v).all() for v in load_file(ckpt).values())


@pytest.mark.parametrize("argv,match", [
    (["--batch-size", "0"], "--batch-size: must be at least 1, got 0"),
    (["--batch-size", "-3"], "--batch-size: must be at least 1"),
    (["--epochs", "0"], "--epochs: must be at least 1"),
    (["--lr", "-1"], "--lr: must be a positive finite number"),
    (["--lr", "nan"], "--lr: must be a positive finite number"),
    (["--limit", "2"], "--limit: must be at least 4"),
    (["--batch-size", "x"], "--batch-size: expected an integer, got 'x'"),
])
def test_bad_arguments_are_usage_errors(example, capsys, argv, match):
    """Before: --batch-size 0 ran into a ZeroDivisionError traceback."""
    with pytest.raises(SystemExit) as e:
        example.parse_args(argv)
    assert e.value.code == 2 and match in capsys.readouterr().err

"""Types an editor and mypy see: ``luminal`` ships ``py.typed`` (PEP 561), every public op and every
GraphTensor method has a return annotation, the methods declared for type checkers in
``frontend/tensor.py`` are exactly the ones ``frontend/ops/__init__.py`` installs (with the same return
types), and mypy run on a user script reveals ``GraphTensor`` flowing through ops."""

from __future__ import annotations

import importlib.util
import inspect
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

import luminal as lm
from luminal.frontend import ops
from luminal.frontend.tensor import GraphTensor

ROOT = pathlib.Path(__file__).resolve().parents[1]
SKIP = {"__init__", "__init_subclass__", "__subclasshook__", "__class__", "__module__", "__doc__", "__slots__",
        "__hash__", "__array_ufunc__", "__annotations__"}


def _public_ops():
    return [(f"lm.{n}", getattr(ops, n)) for n in ops.__all__]


def _tensor_methods():
    out = []
    for n in dir(GraphTensor):
        if n in SKIP or (n.startswith("_") and not (n.startswith("__") and n in vars(GraphTensor))):
            continue
        v = inspect.getattr_static(GraphTensor, n)
        if isinstance(v, property):
            out.append((f"GraphTensor.{n}", v.fget))
        elif callable(v) and not isinstance(v, type):
            out.append((f"GraphTensor.{n}", v))
    return out


def test_py_typed_is_shipped():
    assert (ROOT / "luminal" / "py.typed").is_file()
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["luminal"]
    assert "py.typed" in data


def test_every_public_op_and_tensor_method_has_a_return_annotation():
    checked = _public_ops() + _tensor_methods()
    assert len(checked) > 250
    missing = [q for q, f in checked if inspect.signature(f).return_annotation is inspect.Signature.empty]
    assert not missing, f"{len(missing)} without a return annotation: {missing}"


def test_ops_all_lists_every_public_op():
    """``ops.__all__`` is written out (so type checkers see ``lm.exp``); it must name every function
    defined in the ops modules and nothing else."""
    defined = sorted(n for n, v in vars(ops).items() if not n.startswith("_") and callable(v)
                     and getattr(v, "__module__", "").startswith(ops.__name__ + "."))
    assert sorted(ops.__all__) == defined
    assert all(getattr(lm, n) is getattr(ops, n) for n in ops.__all__)


def test_type_checking_declarations_match_the_installed_methods():
    src = inspect.getsource(ops._install)
    installed = re.findall(r'"(\w+)": ', src[src.index("methods = {"):src.index("for name, fn in methods.items()")])
    text = (ROOT / "luminal" / "frontend" / "tensor.py").read_text()
    block = text[text.index("    if TYPE_CHECKING:\n        # The methods"):text.index("\n\nclass ValuesIndices")]
    declared = dict(re.findall(r"(\w+): Callable\[\.\.\., ([^\]]+\]?)\]", block))
    assert sorted(declared) == sorted(installed)
    for name, ret in declared.items():
        want = inspect.signature(getattr(GraphTensor, name)).return_annotation
        assert ret == (want if isinstance(want, str) else want.__name__), name


USER_SCRIPT = '''
import numpy as np
import luminal as lm

g = lm.Graph()
x = g.input("x", (3, 4))
w = g.constant(np.ones((4, 2), np.float32))
reveal_type(x)
reveal_type((x + 1).relu().sum(0))
reveal_type((x @ w).softmax(-1).mean())
reveal_type(lm.exp(x) * 2 - x.float())
reveal_type(x.reshape(12)[3:].unsqueeze(0).T)
reveal_type(lm.arange(4, graph=g) + lm.zeros_like(x))
reveal_type(x.sort(-1).values)
'''


CALLS_SCRIPT = '''
import numpy as np
import luminal as lm
from luminal import nn, train

g = lm.Graph()
x = g.input("x", (3, 4))
reveal_type(lm.compile(x * 2)(x=np.ones((3, 4), np.float32)))
a, b = lm.compile([x, x + 1])(x=np.ones((3, 4), np.float32))
reveal_type(b)
model = nn.Linear(4, 1)
loss = train.mse_loss(nn.functional.relu(x) @ model.weight.T, x[:, :1])
opt = train.AdamW(model.parameters(), lr=0.1)
reveal_type(train.compile_step(loss, opt)(x=np.ones((3, 4), np.float32)))
'''
CALLS_WANT = ["ndarray", "ndarray", "float"]  # a compiled call's arrays (one, or a tuple's), a step's loss


def _revealed(text: str, pattern: str) -> list[str]:
    return re.findall(pattern, text)


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed (the test extra has it)")
def test_mypy_resolves_the_installed_package_and_sees_types(tmp_path):
    """Run where nothing but the README's install (``pip install -e .``: a static path in site-packages,
    which type checkers read; an import hook they would not follow) tells mypy where ``luminal`` is."""
    res = {}
    for name, script in (("user", USER_SCRIPT), ("calls", CALLS_SCRIPT)):
        (tmp_path / f"{name}.py").write_text(script)
        env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
        res[name] = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent",
                                    "--cache-dir", str(tmp_path / "cache"), f"{name}.py"],
                                   capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    out = res["user"].stdout + res["user"].stderr
    assert "import-not-found" not in out, out
    revealed = _revealed(res["user"].stdout, r'Revealed type is "([^"]+)"')
    assert len(revealed) == USER_SCRIPT.count("reveal_type"), out
    assert all(r == "luminal.frontend.tensor.GraphTensor" for r in revealed), out
    calls = _revealed(res["calls"].stdout, r'Revealed type is "(?:builtins\.|numpy\.)?(\w+)')
    assert calls == CALLS_WANT, res["calls"].stdout + res["calls"].stderr
    assert res["calls"].returncode == 0, res["calls"].stdout


def _pyright():
    """The pyright command (the test extra's ``pyright`` wheel carries pyright itself; it runs on a
    ``node`` on PATH), or None."""
    if importlib.util.find_spec("pyright") is None or shutil.which("node") is None:
        return None
    return [sys.executable, "-m", "pyright"]


@pytest.mark.skipif(_pyright() is None, reason="pyright (the test extra) or node (the system's) is not installed")
def test_pyright_resolves_the_installed_package_and_sees_types(tmp_path):
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT + CALLS_SCRIPT.split("\n", 3)[3])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([*_pyright(), "--pythonpath", sys.executable, str(script)],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    out = res.stdout + res.stderr
    assert "could not be resolved" not in out and "is not exported" not in out, out
    revealed = _revealed(res.stdout, r'Type of "[^\n]*" is "(\w+)')
    n_user = USER_SCRIPT.count("reveal_type")
    assert revealed == ["GraphTensor"] * n_user + CALLS_WANT, out
    assert res.returncode == 0, out

"""A non-editable install has what the MNIST example needs: the wheel carries the MNIST subset and the
egglog rule files, and the example trains from an installed (unpacked) copy of that wheel."""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """Build the wheel from a copy of the sources (no build/ or egg-info in the shared tree), offline."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "luminal", src / "luminal", ignore=shutil.ignore_patterns("__pycache__"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation",
                        "-w", str(tmp / "dist"), "-q"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (whl,) = (tmp / "dist").glob("luminal-*.whl")
    return whl


@pytest.mark.slow
def test_wheel_carries_package_data(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "luminal/data/mnist_subset.npz" in names
    rules = {p.name for p in (ROOT / "luminal/compiler/egraph/rules").glob("*.egg")}
    assert rules and {f"luminal/compiler/egraph/rules/{r}" for r in rules} <= names
    assert "luminal/data/__init__.py" in names


@pytest.mark.slow
def test_example_trains_from_installed_wheel(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)  # a pure-python wheel installs by unpacking
    script = tmp_path / "train.py"
    shutil.copy(ROOT / "examples/mnist/train.py", script)  # away from the repo: no sibling data module
    runner = (
        "import runpy, sys, luminal, luminal.data\n"
        f"assert luminal.__file__.startswith({str(site)!r}), luminal.__file__\n"
        f"assert luminal.data.SUBSET_PATH.is_file() and str(luminal.data.SUBSET_PATH).startswith({str(site)!r})\n"
        f"sys.argv = [{str(script)!r}, '--limit', '256', '--epochs', '1', '--batch-size', '64']\n"
        f"runpy.run_path({str(script)!r}, run_name='__main__')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}  # ahead of the editable install's finder
    r = subprocess.run([sys.executable, "-c", runner], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "shipped MNIST subset" in r.stdout and "held-out accuracy" in r.stdout, r.stdout[-2000:]

"""``backend="cuda"`` is always registered and importing luminal needs no CUDA package; without a
device, ``lm.cuda.is_available()`` is False and compiling for ``cuda`` says why and names
``cuda-emulated``."""

import subprocess
import sys

import pytest

import luminal as lm
from luminal.backends.cuda import NoDeviceError


def test_cuda_is_registered_and_luminal_imports_without_cuda_python():
    """cuda-python made unimportable: luminal imports, lists ``cuda``, compiles for the cpu, and
    ``lm.cuda`` answers no, with the reason."""
    code = ("import sys; sys.modules['cuda'] = None\n"  # every 'import cuda...' now fails
            "import numpy as np, luminal as lm\n"
            "g = lm.Graph(); x = g.input('x', (3,))\n"
            "assert lm.compile(x * 2, backend='cpu')(x=np.ones(3, np.float32)).tolist() == [2, 2, 2]\n"
            "ok, why = lm.cuda.status()\n"
            "assert 'cuda' in lm.backend_names() and not ok and 'cuda-python is not installed' in why, why\n"
            "assert not any(m == 'cuda' or m.startswith('cuda.') for m in sys.modules if sys.modules[m])\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.skipif(lm.cuda.is_available(), reason="a CUDA device is here")
def test_compiling_for_cuda_without_a_device_names_cuda_emulated():
    assert not lm.cuda.is_available()
    g = lm.Graph()
    x = g.input("x", (3,))
    with pytest.raises(NoDeviceError, match=r"backend 'cuda' needs a CUDA device: no CUDA device: .*'cuda-emulated'"):
        lm.compile(x * 2, backend="cuda")


def test_only_the_driver_and_nvrtc_modules_import_cuda_python():
    """The device layer is narrow: cuda-python is imported by ``driver.py`` (the checked driver calls
    the layer's driver half is built on) and ``nvrtc.py`` (the compiler) alone, so the simulated
    device stands in for everything else."""
    import re
    from pathlib import Path

    root = Path(lm.__file__).parent
    pattern = re.compile(r"^\s*(from\s+cuda[\s.]|import\s+cuda\b)", re.M)
    users = sorted(str(p.relative_to(root)) for p in root.rglob("*.py") if pattern.search(p.read_text()))
    assert users == ["backends/cuda/driver.py", "backends/cuda/nvrtc.py"]

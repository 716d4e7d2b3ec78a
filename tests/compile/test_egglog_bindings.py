"""``compiler/egraph/egglog_bindings.py``: the compiler loads egglog's Rust bindings without the
package's Python layer, and egglog imported later (or earlier) shares that one extension module.
Each case is a new process: what a process has imported is what is tested."""

from __future__ import annotations

import os
import subprocess
import sys

COMPILE = ("import sys, numpy as np, luminal as lm\n"
           "g = lm.Graph(); f = lm.compile([g.input('x', (4, 4)) * 2 + 1], backend='cpu')\n"
           "assert (np.asarray(f(x=np.ones((4, 4), np.float32))[0]) == 3).all()\n")


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "LUMINAL_CACHE": "0"})  # (egglog runs: no compile cache)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


def test_a_compile_loads_the_bindings_alone_and_a_later_import_of_egglog_shares_them():
    code = COMPILE + (
        "print('package imported' if 'egglog' in sys.modules else 'bindings alone', end=' ')\n"
        "import egglog\n"
        "from egglog import EGraph, i64\n"
        "EGraph().check(i64(1) + i64(2) == i64(3))  # egglog's own language works over them\n"
        "from egglog import bindings\n"
        "print(egglog.bindings is sys.modules['egglog.bindings'] is bindings)\n")
    assert _run(code) == "bindings alone True"


def test_egglog_imported_first_gives_the_compiler_its_bindings():
    code = ("import egglog\n" + COMPILE +
            "from luminal.compiler.egraph.egglog_bindings import bindings\n"
            "print(bindings is egglog.bindings)\n")
    assert _run(code) == "True"


def test_a_look_for_egglog_before_importing_it_still_gives_it_the_bindings():
    """An optional-dependency check (``find_spec``) does not use up the finder that gives the package its
    ``bindings``; the wrapped loader copies and pickles as egglog's own does."""
    code = COMPILE + (
        "import copy, importlib.util, pickle\n"
        "assert importlib.util.find_spec('egglog') is not None\n"
        "import egglog\n"
        "copy.copy(egglog.__loader__); pickle.loads(pickle.dumps(egglog.__loader__)); copy.deepcopy(egglog.__spec__)\n"
        "left = [f for f in sys.meta_path if type(f).__name__ == '_GiveBindings']\n"
        "print(egglog.bindings is sys.modules['egglog.bindings'], left)\n")
    assert _run(code) == "True []"

"""Launching test programs under ``mpiexec`` from pytest.

Each launch has a timeout, and on it the whole process group is killed (a rank that died can leave
another waiting in a collective; killing ``mpiexec`` alone would leave the ranks running). Each rank
gets one thread (OpenBLAS and luminal's), so two ranks do not oversubscribe a 2-core machine.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def mpiexec() -> str | None:
    """The launcher next to this Python (the ``mpich`` wheel puts it in the venv's bin), else on PATH."""
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def _missing() -> str | None:
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py is not installed (pip install -e '.[distributed]')"
    if mpiexec() is None:
        return "no mpiexec next to this Python or on PATH (pip install -e '.[distributed]')"
    return None


requires_mpi = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))


def run_mpi(args: list[str], n: int = 2, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``python *args`` on ``n`` ranks; the completed process (stdout and stderr as text). A launch
    that outlives ``timeout`` seconds fails the test, its processes killed."""
    full_env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "LUMINAL_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                "LUMINAL_COMPILE_WORKERS": "1", "LUMINAL_DIST_TIMEOUT": "60",
                "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",  # Open MPI's launcher, as root
                "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
                **(env or {})}
    cmd = [mpiexec(), "-n", str(n), sys.executable, *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env,
                            cwd=ROOT, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} did not end within {timeout} s (a hang)\nstdout:\n{out[-3000:]}\n"
                    f"stderr:\n{err[-3000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def results(directory: Path) -> dict:
    """The JSON lines the ranks wrote to ``rank<r>.jsonl`` in ``directory``, as {(case, rank): dict}."""
    found = {}
    for path in sorted(Path(directory).glob("rank*.jsonl")):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            found[(r["case"], r["rank"])] = r
    return found

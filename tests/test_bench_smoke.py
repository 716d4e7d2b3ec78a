"""The benchmarks of ``bench/`` still run: each script, at its smallest settings, in a subprocess, prints
its table. Timings are never checked (``bench/README.md``); the train step runs without its
``torch.compile`` column (a cold inductor cache compiles a train step for half a minute), the inference
script with it on the cheapest row."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _run(*args: str) -> str:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")  # a smoke run: no thread pools to wake on a busy machine
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _table_rows(out: str, header: str) -> list[list[str]]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def test_cpu_train_prints_its_table_and_floor():
    out = _run("bench/cpu_train.py", "--quick", "--models", "mlp", "--steps", "2", "--no-compile")
    assert out.startswith("# "), out  # the machine header
    rows = _table_rows(out, "| model |")
    assert [r[0] for r in rows] == ["mlp"], out
    assert float(rows[0][4]) > 0 and rows[0][3] == "-", out  # luminal / eager; no torch.compile column
    assert "mlp: floor " in out and "% of floor" in out, out


def test_cpu_infer_prints_its_table():
    out = _run("bench/cpu_infer.py", "--quick", "--only", "overhead", "--repeats", "2", "--sample-ms", "1")
    assert out.startswith("# "), out
    rows = _table_rows(out, "| row |")
    assert [r[:2] for r in rows] == [["overhead", "us"]], out
    assert float(rows[0][5]) > 0 and float(rows[0][6]) > 0, out  # luminal / eager and / torch.compile


def test_cpu_infer_gives_a_batch_1_products_bandwidth():
    out = _run("bench/cpu_infer.py", "--quick", "--only", "linear-b1-2048x2048", "--repeats", "2", "--sample-ms", "1",
               "--no-compile")
    rows = _table_rows(out, "| row | weights MB |")
    assert [r[:2] for r in rows] == [["linear-b1-2048x2048", "17"]], out
    assert int(rows[0][2].split()[0]) >= 2, out  # weight copies the calls rotate over (cache-sized working set)
    assert float(rows[0][3]) > 0, out  # the read bandwidth, torch summing the same weights in the same blocks
    assert rows[0][4].endswith("%)") and rows[0][6] in ("met", "not met"), out


def test_compile_step_prints_its_table():
    out = _run("bench/compile_step.py", "--rounds", "1", "--models", "mlp")  # (the GPT takes a minute)
    assert out.startswith("# "), out
    rows = _table_rows(out, "| case |")
    assert [r[0] for r in rows] == ["cold", "warm", "warm, llvm only"], out
    assert all(float(r[1].split()[0]) > 0 for r in rows), out
    assert "from the compile cache" in out, out


@pytest.mark.skipif(not __import__("luminal.backends.cpu.blas", fromlist=["gemms"]).gemms(),
                    reason="numpy's BLAS is not its bundled OpenBLAS: no cblas_sgemm to compare against")
def test_cpu_gemm_prints_its_table():
    out = _run("bench/cpu_gemm.py", "--quick", "--only", "conv1 forward")
    rows = _table_rows(out, "| product |")
    assert [r[0] for r in rows] == ["cnn conv1 forward"] and rows[0][3] == "generated", out
    assert float(rows[0][-1]) > 0, out


def test_embedding_step_prints_its_table():
    out = _run("bench/embedding_step.py", "--quick", "--tables", "small")
    assert out.startswith("# "), out
    rows = _table_rows(out, "| table |")
    assert [r[0] for r in rows] == ["small 8192 x 256"], out
    assert float(rows[0][3]) > 0 and float(rows[0][4]) > 0, out  # luminal / eager, the floor

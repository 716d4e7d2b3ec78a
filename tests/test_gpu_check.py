"""``bench/gpu_check.sh --dry`` (the GPU check on the simulated device, tiny sizes) runs every stage and
leaves its markdown summary in the directory it is given, so the script a lent GPU runs first is known
to work before device time is spent on it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def test_the_dry_run_passes_every_stage_and_writes_the_summary(tmp_path):
    env = dict(os.environ, PYTHON=sys.executable, OPENBLAS_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(["bash", "bench/gpu_check.sh", "--dry", str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    summary = (tmp_path / "gpu_check.md").read_text()
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}\n{summary}"
    for stage in ("probe", "tests", "benches", "bandwidth", "decode", "schedules"):
        assert f"| {stage} | ok |" in summary
    assert "simulated device: first launch ok" in summary
    for row in ("| MLP AdamW step, batch 8 |", "| CNN AdamW step, batch 1 |", "| elementwise chain | 4096 |",
                "| softmax rows | 2x2048 |", "| layer norm rows | 16x64 |", "| decode, 2 layers, prompt 4 |"):
        assert row in summary, row  # each bench's table, after its check against torch passed
    assert "prefill and 2 decode steps agree" in summary and "CNN: losses of 2 steps equal" in summary
    row = next(line for line in summary.splitlines() if line.startswith("| batch-1 product | matmul 1x300x150 |"))
    assert all(f"{option} " in row for option in ("gemv", "warp", "tiled")), row  # a schedule search's row


def test_stages_past_the_budget_are_skipped_and_the_check_fails(tmp_path):
    """Every stage's timeout is cut to what is left of the check's budget (5 minutes on a GPU); with
    too little left, a stage is skipped and named so in the summary, and the check exits non-zero."""
    env = dict(os.environ, PYTHON=sys.executable, GPU_CHECK_BUDGET_S="20")
    proc = subprocess.run(["bash", "bench/gpu_check.sh", "--dry", str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    summary = (tmp_path / "gpu_check.md").read_text()
    assert proc.returncode == 1, f"{proc.stdout}\n{proc.stderr}"
    for stage in ("probe", "tests", "benches", "bandwidth", "decode", "schedules"):
        assert f"| {stage} | skipped: " in summary, summary

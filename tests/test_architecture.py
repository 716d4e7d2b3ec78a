"""The house's layering (docs/architecture.md), enforced: import-linter checks the contracts declared in
pyproject.toml (layers, backends reading only the core, no layer importing a backend, backends
independent, no import cycles anywhere under ``luminal``), so a wrong import arrow fails CI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import luminal as lm

ROOT = Path(__file__).resolve().parents[1]


def _lint_imports():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([exe, "--no-cache"], cwd=ROOT, env=env,  # reads pyproject.toml in ROOT
                          capture_output=True, text=True, timeout=300)


def test_import_contracts_hold():
    r = _lint_imports()
    report = r.stdout.split("Contracts\n---------")[-1]  # past the banner
    assert r.returncode == 0, report[-4000:] + r.stderr[-2000:]
    assert "Contracts: 8 kept, 0 broken." in report, report[-2000:]


def test_backends_are_found_by_name():
    assert {"reference", "cpu"} <= set(lm.backend_names())

"""The disk cache as a victim process meets it (issue 29): an LLVM object planted by someone else never
runs, and a damaged, truncated, altered or swapped object is compiled again rather than loaded. Each
victim is a process of its own (``VICTIM``: ``lm.compile`` of a small program, a cold start of the
caches), since a bad object loaded into MCJIT can crash the process or compute wrong numbers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from luminal.backends.cpu import driver
from luminal.codegen import llvm
from luminal.core import disk_cache

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534
VICTIM = """
import json
import numpy as np
import luminal as lm
g = lm.Graph()
x = g.input("x", (4, 5))
f = lm.compile([(x * 3.0 + 12.0).sum(1)], backend="cpu")
(y,) = f(x=np.arange(20, dtype=np.float32).reshape(4, 5))
print(json.dumps(np.asarray(y).tolist()))
"""
EXPECTED = (np.arange(20, dtype=np.float64).reshape(4, 5) * 3 + 12).sum(1)
TWELVE, FOURTEEN = np.float32(12).tobytes(), np.float32(14).tobytes()


def _victim(cache: Path) -> subprocess.CompletedProcess:
    """``VICTIM`` run with its caches in ``cache`` (the LLVM objects only: the compile cache's entries
    are another test's)."""
    env = {**os.environ, "LUMINAL_CACHE_DIR": str(cache), "LUMINAL_CACHE": "llvm"}
    env.pop("LUMINAL_CACHE_MAX_MB", None)
    return subprocess.run([sys.executable, "-c", VICTIM], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def _right(r: subprocess.CompletedProcess) -> None:
    assert r.returncode == 0, r.stderr[-3000:]
    np.testing.assert_allclose(json.loads(r.stdout.strip().splitlines()[-1]), EXPECTED, rtol=1e-6)


def _objects(cache: Path) -> list[Path]:
    return sorted((cache / "llvm").rglob("*.o"))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A private cache the victim has filled (its kernel's object and the driver's)."""
    cache = tmp_path_factory.mktemp("pristine") / "cache"
    _right(_victim(cache))
    assert len(_objects(cache)) == 2
    return cache


@pytest.fixture
def at(tmp_path, monkeypatch):
    """This process's caches in ``tmp_path / "cache"``, checked and warned about afresh."""
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LUMINAL_CACHE", "llvm")
    for name, empty in (("_verdicts", {}), ("_warned", set()), ("_cleaned", set()), ("_sizes", {})):
        monkeypatch.setattr(disk_cache, name, empty, raising=False)
    return tmp_path / "cache"


# planted ---------------------------------------------------------------------------------------------

def _plant(marker: Path) -> Path:
    """Write, through the cache's own writer (so the entry's header is right), an object that defines
    the generated driver as ``system("touch <marker>")``, under the driver's key: the key every program
    on this host looks up. Returns its file."""
    command = f"touch {marker}".encode() + b"\0"
    text = (f"declare i32 @system(ptr)\n"
            f"@cmd = private unnamed_addr constant [{len(command)} x i8] c\"{command[:-1].decode()}\\00\"\n"
            f"define void @luminal_driver(ptr %table, i64 %count) {{\n"
            f"  %r = call i32 @system(ptr @cmd)\n  ret void\n}}\n")
    mod = llvm.llvm.parse_assembly(text)
    mod.verify()
    evil = llvm._init()["tm"].emit_object(mod)
    key = llvm.cache_key(driver.DRIVER_IR)
    name = f"{key[:2]}/{key}.o"
    d = disk_cache.DiskCache("llvm")
    assert d.write(name, evil)
    return d.path(name)


@pytest.mark.parametrize("how", ["open to everyone", "another user's", "an entry of another user's"])
def test_a_planted_object_never_runs(at, tmp_path, how):
    """Someone who can write the cache directory puts machine code where the victim looks: it must not
    run, and the victim's numbers must be right. As root, "another user" is ``nobody``."""
    if how != "open to everyone" and os.getuid() != 0:
        pytest.skip("giving files to another user needs root")
    marker = tmp_path / "planted-code-ran"
    entry = _plant(marker)
    if how == "open to everyone":
        os.chmod(at, 0o777)
    else:
        owned = [entry] if how == "an entry of another user's" else [at, at / "llvm", entry.parent, entry]
        for p in owned:
            os.chown(p, NOBODY, NOBODY)
    r = _victim(at)
    assert not marker.exists(), "the planted object ran in the victim"
    _right(r)
    warned = r.stderr.count("disk cache not used")
    if how == "an entry of another user's":  # a private directory: the entry is a miss, replaced
        assert warned == 0 and os.lstat(entry).st_uid == os.getuid()
    else:
        assert warned == 1, r.stderr
        assert str(at) in r.stderr


# damaged --------------------------------------------------------------------------------------------

def _payload_at(data: bytes) -> int:
    return data.index(b"\x7fELF")  # where the object starts, after the entry's header


def _damage(how: str, files: list[Path]) -> None:
    if how == "swapped":
        a, b = (p.read_bytes() for p in files)
        files[0].write_bytes(b)
        files[1].write_bytes(a)
        return
    for p in files:
        data = p.read_bytes()
        at = _payload_at(data)
        if how == "empty":
            data = b""
        elif how == "truncated":
            data = data[: at + (len(data) - at) // 2]
        elif how == "random":
            data = data[:at] + np.random.default_rng(0).bytes(len(data) - at)
        elif how == "a flipped bit":  # in the ELF header's offset of the section headers
            data = data[: at + 0x29] + bytes([data[at + 0x29] ^ 0x10]) + data[at + 0x2A:]
        elif how == "12 made 14":  # the kernel's constant: the same object otherwise
            data = data[:at] + data[at:].replace(TWELVE, FOURTEEN)
        p.write_bytes(data)


@pytest.mark.parametrize("how", ["empty", "truncated", "random", "a flipped bit", "12 made 14", "swapped"])
def test_a_damaged_object_is_compiled_again_and_rewritten(pristine, at, how):
    shutil.copytree(pristine, at)
    files = _objects(at)
    good = {p: p.read_bytes() for p in files}
    if how == "12 made 14":
        assert sum(TWELVE in data[_payload_at(data):] for data in good.values()) == 1
    _damage(how, files)
    assert {p: p.read_bytes() for p in files} != good
    _right(_victim(at))
    assert {p: p.read_bytes() for p in files} == good  # each entry rewritten as it was
    d = disk_cache.DiskCache("llvm")
    assert all(d.read(str(p.relative_to(at / "llvm"))) is not None for p in files)

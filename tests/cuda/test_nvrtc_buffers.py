"""NVRTC writes its log and cubin into buffers we hand it: they must be our own mutable ones.

A kernel whose log is empty (NVRTC's log size 1, the NUL alone) read into ``b" " * size`` handed
NVRTC CPython's process-wide one-byte singleton ``b" "``: every ``b" "`` (and ``bytes([32])``) in the
process became ``b"\\0"``, and on the H200 image ``import torch`` (2.11) then failed inside
``parse_schema``. Each check runs in a child process, since the failure corrupts the interpreter."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from luminal.backends.cuda import nvrtc

SOURCE = 'extern "C" __global__ void k(float* x) { x[0] = 1.0f; }'


def _child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)


def test_an_empty_log_leaves_the_interpreters_bytes_alone():
    """No ``--ptxas-options=-v``: the log is empty; a space is still a space afterwards."""
    try:
        nvrtc.nvrtc_version()
    except nvrtc.CudaUnavailableError as e:
        pytest.skip(f"no NVRTC here: {e}")
    r = _child(f"""
        from luminal.backends.cuda import nvrtc
        cubin = nvrtc._compile({SOURCE!r}, "k", "sm_90", ("--fmad=true",))
        assert cubin.log == "", repr(cubin.log)  # (the case that matters: NVRTC's log size was 1)
        assert cubin.data[:4] == b"\\x7fELF", cubin.data[:4]
        print(b" "[0], bytes([32])[0], b"a b".split() == [b"a", b"b"])
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["32", "32", "True"], r.stdout


def test_the_cubin_and_a_verbose_log_come_back_whole():
    """The usual options (ptxas's report in the log): the log is text and the cubin an ELF file."""
    try:
        nvrtc.nvrtc_version()
    except nvrtc.CudaUnavailableError as e:
        pytest.skip(f"no NVRTC here: {e}")
    cubin = nvrtc._compile(SOURCE, "k", "sm_90", nvrtc.options())
    assert cubin.data.startswith(b"\x7fELF") and isinstance(cubin.data, bytes)
    if "ptxas" in cubin.log:
        assert cubin.spills == 0 and cubin.registers > 0, cubin.log
    else:  # (the H200 image: NVRTC 13.0 leaves ptxas's report out once torch 2.11 is imported)
        assert (cubin.registers, cubin.spills) == (-1, -1), "no report must read as unknown, not as 0 spills"


def test_a_cached_cubin_reads_its_spills_from_its_log(tmp_path, monkeypatch):
    """An entry that a luminal from before the fix wrote for a log without ptxas's report stored 0 spills
    (registers -1): read back, it is unknown (-1), as a compile now says, not "no spills"; an entry whose
    log has the report reads the report's numbers."""
    try:
        nvrtc.nvrtc_version()
    except nvrtc.CudaUnavailableError as e:
        pytest.skip(f"no NVRTC here: {e}")
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    key = nvrtc.cache_key(SOURCE, "sm_90")
    nvrtc._write_cache(nvrtc.cache_dir() / f"{key}.cubin", nvrtc.Cubin(b"\x7fELF", "sm_90", -1, 0, ""))
    cubin = nvrtc.compile_cubin(SOURCE, "k", "sm_90")
    assert cubin.data == b"\x7fELF"  # (the cache's entry, not a new compile)
    assert (cubin.registers, cubin.spills) == (-1, -1)
    report = ("ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
              "ptxas info    : Used 6 registers, 8 bytes spill stores, 4 bytes spill loads")
    nvrtc._write_cache(nvrtc.cache_dir() / f"{key}.cubin", nvrtc.Cubin(b"\x7fELF", "sm_90", 6, 12, report))
    cubin = nvrtc.compile_cubin(SOURCE, "k", "sm_90")
    assert (cubin.registers, cubin.spills) == (6, 12)

"""CUDA C -> cubin with NVRTC, cached on disk.

Why a cubin and not PTX: NVRTC 13.x emits a PTX ISA newer than the GPU machine's driver can JIT
(``CUDA_ERROR_UNSUPPORTED_PTX_VERSION``); machine code for the device's exact arch needs no driver
JIT (``shared/notes/cuda.md``). The compile runs without a GPU (CI checks that generated kernels
compile and do not spill), and ptxas's ``-v`` report in NVRTC's log gives registers and spills.

Options (:func:`options`): FMA contraction on (``--fmad=true``, NVRTC's default): ``a * b + c``
becomes one fused multiply-add, rounded once, which is faster and no less accurate, but can differ
in the last bit from the reference and the emulator, which round every operation as the IR says.
``LUMINAL_CUDA_FMAD=0`` turns it off (``--fmad=false``): the device then rounds as the IR does.
Precise division, square root and denormals are NVRTC's defaults.

The cache key is the sha256 of (source, arch, options, NVRTC version); each
entry is one file written atomically (a temporary file, then ``os.replace``; ``core/disk_cache.py``, shared
with the other caches), so a crash never leaves a torn entry and concurrent processes at worst compile
the same kernel twice. A cubin is code the GPU runs: ``DiskCache`` reads it only from a directory the
user owns and nobody else can write, and only when its header's digest and name match (a damaged or
swapped entry is compiled again). The entry's payload is a JSON line of what ptxas reported, then the
cubin.

cuda-python is imported inside the functions: importing luminal never needs it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from luminal.core.disk_cache import DiskCache

DEFAULT_ARCH = "sm_90"  # without a GPU: the H200 this project targets
_BASE_OPTIONS = ("--std=c++17", "--ptxas-options=-v")


def options() -> tuple:
    """NVRTC's options now: FMA contraction on unless ``LUMINAL_CUDA_FMAD=0`` (module docstring); any
    other value than 0 or 1 is an error (it changes the math: never guessed)."""
    value = os.environ.get("LUMINAL_CUDA_FMAD", "1").strip() or "1"
    if value not in ("0", "1"):
        raise ValueError(f"LUMINAL_CUDA_FMAD must be 0 (round every operation, as the reference) or 1 (fused "
                         f"multiply-adds, the default), got {value!r}")
    return (*_BASE_OPTIONS, f"--fmad={'true' if value == '1' else 'false'}")
_CACHE_FORMAT = 2  # in the key (2: entries carry disk_cache's header; a luminal from before it never reads them)


class CudaUnavailableError(RuntimeError):
    """cuda-python or the NVRTC library is not installed."""


class NvrtcError(RuntimeError):
    """NVRTC rejected a kernel: the message holds the kernel's name, NVRTC's log and the numbered source."""


@dataclass(frozen=True)
class Cubin:
    """A compiled kernel: machine code for ``arch`` plus ptxas's resource report.

    ``registers``: registers per thread of the entry function (-1 if the log did not say);
    ``spills``: bytes of spill stores plus spill loads, over every function of the module (-1 if the
    log has no ptxas report: unknown); ``log``: NVRTC's whole log."""

    data: bytes
    arch: str
    registers: int
    spills: int
    log: str


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        raise CudaUnavailableError(
            "the CUDA backend needs cuda-python and NVRTC: pip install 'luminal[cuda]' "
            f"(cuda-python, nvidia-cuda-nvrtc); import failed: {e}") from e
    return nvrtc


def _check(nvrtc, result, what: str):
    err = result[0]
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, msg = nvrtc.nvrtcGetErrorString(err)
        raise NvrtcError(f"NVRTC {what} failed: {msg.decode() if isinstance(msg, bytes) else msg}")
    return result[1:]


_VERSION: str | None = None


def nvrtc_version() -> str:
    """NVRTC's version (``"13.5"``, plus the wheel's exact version when it is a pip package): part of
    the cache key, since another compiler may emit other code for the same source."""
    global _VERSION
    if _VERSION is None:
        nvrtc = _nvrtc()
        try:
            major, minor = _check(nvrtc, nvrtc.nvrtcVersion(), "nvrtcVersion")
        except RuntimeError as e:  # the bindings load libnvrtc lazily: a missing library shows here
            if isinstance(e, NvrtcError):
                raise
            raise CudaUnavailableError(
                f"the NVRTC library is missing: pip install 'luminal[cuda]' (nvidia-cuda-nvrtc); {e}") from e
        v = f"{major}.{minor}"
        try:
            from importlib.metadata import PackageNotFoundError, version
            try:
                v += f"/{version('nvidia-cuda-nvrtc')}"
            except PackageNotFoundError:
                pass
        except ImportError:  # pragma: no cover - importlib.metadata is in every supported Python
            pass
        _VERSION = v
    return _VERSION


_DISK = DiskCache("cuda")


def cache_dir() -> Path:
    """``$LUMINAL_CACHE_DIR/cuda``, else ``~/.cache/luminal/cuda`` (read at each call; ``core/disk_cache.py``:
    the root, the ``LUMINAL_CACHE`` switch and the size cap)."""
    return _DISK.directory


def cache_key(source: str, arch: str, opts: tuple | None = None) -> str:
    """The cubin's cache key: the source, the arch, NVRTC's options (None: :func:`options`' now) and
    NVRTC's version."""
    opts = options() if opts is None else opts
    h = hashlib.sha256()
    for part in (f"luminal-cubin-{_CACHE_FORMAT}", source, arch, "\0".join(opts), nvrtc_version()):
        h.update(part.encode())
        h.update(b"\0\1\0")  # a separator no part contains
    return h.hexdigest()


def _read_cache(path: Path, name: str) -> Cubin | None:
    """The cached cubin at ``path``, its registers and spills read again from its log by
    :func:`parse_resources` (the stored numbers are what the writer's luminal parsed: one from before
    0459909 stored 0 spills for a log without ptxas's report, which reads as unknown now)."""
    raw = _DISK.read(path.name)
    if raw is None:
        return None
    head, sep, data = raw.partition(b"\n")  # (the digest checked the bytes: this is the layout only)
    try:
        meta = json.loads(head)
        if not sep:
            return None
        return Cubin(data, meta["arch"], *parse_resources(meta["log"], name), meta["log"])
    except (ValueError, KeyError, TypeError):
        return None  # an older layout: compile again and overwrite it


def _write_cache(path: Path, cubin: Cubin):
    meta = {"arch": cubin.arch, "registers": cubin.registers, "spills": cubin.spills, "log": cubin.log}
    blob = json.dumps(meta).encode() + b"\n" + cubin.data  # json escapes newlines: the first line is the header
    _DISK.write(path.name, blob)  # atomic; a read-only or full cache only costs the next process a compile


def parse_resources(log: str, name: str) -> tuple[int, int]:
    """(registers of entry function ``name``, spill bytes stored + loaded over all functions) from
    ptxas's ``-v`` report in NVRTC's log; both -1 when the report is not there (unknown, not "none":
    on the H200 image, NVRTC 13.0 left the report out of every log once torch 2.11 was imported)."""
    if "ptxas" not in log:
        return -1, -1
    registers = -1
    entry = re.search(rf"Compiling entry function '{re.escape(name)}'", log)
    if entry:
        m = re.search(r"Used (\d+) registers", log[entry.end():])
        if m:
            registers = int(m.group(1))
    spills = sum(int(s) + int(ld) for s, ld in
                 re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log))
    return registers, spills


def entry_resources(log: str) -> dict[str, tuple[int, int]]:
    """``{entry function: (registers, spill bytes stored + loaded)}`` from ptxas's ``-v`` report of a
    program with several kernels (each entry's lines follow its "Compiling entry function")."""
    out = {}
    parts = re.split(r"Compiling entry function '([^']+)'", log)
    for name, text in zip(parts[1::2], parts[2::2]):
        regs = re.search(r"Used (\d+) registers", text)
        spills = sum(int(a) + int(b) for a, b in re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text))
        out[name] = (int(regs.group(1)) if regs else -1, spills)
    return out


def numbered(source: str) -> str:
    """``source`` with line numbers (NVRTC's log cites lines)."""
    lines = source.splitlines()
    width = len(str(len(lines)))
    return "\n".join(f"{i:>{width}} | {line}" for i, line in enumerate(lines, 1))


def default_arch() -> str:
    """The GPU's arch (``sm_XY``) when a CUDA device answers, else ``sm_90``."""
    from luminal.backends.cuda import driver

    ok, _ = driver.device_status()
    return driver.device_arch() if ok else DEFAULT_ARCH


def compile_cubin(source: str, name: str, arch: str | None = None) -> Cubin:
    """Compile CUDA C ``source`` (entry function ``name``) to a cubin for ``arch`` (default: the device's,
    else sm_90), through the disk cache. Raises :class:`NvrtcError` with the log and numbered source."""
    arch = arch or default_arch()
    if not re.fullmatch(r"sm_\d+[a-z]?", arch):
        raise ValueError(f"arch {arch!r}: expected a real architecture like 'sm_90' (a cubin, not PTX)")
    opts = options()
    path = cache_dir() / f"{cache_key(source, arch, opts)}.cubin"
    hit = _read_cache(path, name)
    if hit is not None:
        return hit
    cubin = _compile(source, name, arch, opts)
    _write_cache(path, cubin)
    return cubin


def _compile(source: str, name: str, arch: str, opts: tuple) -> Cubin:
    nvrtc = _nvrtc()
    try:
        (prog,) = _check(nvrtc, nvrtc.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], []),
                         "nvrtcCreateProgram")
    except RuntimeError as e:
        if isinstance(e, NvrtcError):
            raise
        raise CudaUnavailableError(
            f"the NVRTC library is missing: pip install 'luminal[cuda]' (nvidia-cuda-nvrtc); {e}") from e
    try:
        args = [f"--gpu-architecture={arch}".encode()] + [o.encode() for o in opts]
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(args), args)
        (size,) = _check(nvrtc, nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        # NVRTC writes into the buffers it is given: mutable ones of our own. (``b" " * size`` was the
        # process-wide one-byte singleton ``b" "`` when the log was empty (size 1): NVRTC's NUL turned
        # every b" " in the process into b"\0", and torch 2.11 then failed to import.)
        buf = bytearray(size)
        _check(nvrtc, nvrtc.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
        log = buf.rstrip(b"\0").decode(errors="replace").strip()
        if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise NvrtcError(f"NVRTC could not compile kernel {name} for {arch} ({result.name}):\n{log}\n\n"
                             f"source:\n{numbered(source)}")
        (size,) = _check(nvrtc, nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        data = bytearray(size)
        _check(nvrtc, nvrtc.nvrtcGetCUBIN(prog, data), "nvrtcGetCUBIN")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    registers, spills = parse_resources(log, name)
    return Cubin(bytes(data), arch, registers, spills, log)

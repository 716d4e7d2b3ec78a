"""The on-disk caches: where they live, whether they are on, atomic writes and a size cap.

Three things are cached across processes, each in a directory of its own (a *kind*) under one root:
compile results (``compile``: the compiler pipeline's kernel graph and memory plan, so a warm compile
skips egglog), LLVM object code (``llvm``) and CUDA cubins (``cuda``). They share this one mechanism so
that one variable moves them, one switches them off and one bounds them:

- ``LUMINAL_CACHE_DIR``: the root (default ``~/.cache/luminal``); kind ``k`` lives in ``<root>/<k>``.
  Read at every call, so a test (or a program) may point it elsewhere at any time.
- ``LUMINAL_CACHE``: which kinds are on. Unset, empty or ``1``: all; ``0``: none (nothing is read or
  written); otherwise a comma-separated list of the kinds that are on (``llvm,cuda``: every cache but
  the compile results). A cache that is off behaves as an empty one that cannot be written.
- ``LUMINAL_CACHE_MAX_MB``: the size cap per kind, in MiB (default 1024). Past it the least recently
  used entries are deleted (a read of an entry marks it used: its modification time is set to now, since
  access times are often not kept) until the kind's directory is at most ``KEEP`` of the cap, so that a
  full cache does not scan again at every write.

Why these rules:

- **Atomic writes** (a temporary file in the same directory, then ``os.replace``): a process killed
  mid-write, or two processes writing the same entry, never leave a torn entry; readers see the old
  file or the new one. A leftover temporary file (a killed writer's) is deleted by the next eviction scan
  once it is an hour old.
- **A cache is an optimisation**: a directory that cannot be read or written costs a recompile, never an
  error (every ``OSError`` is swallowed).
- **Eviction is cheap**: the first write of a kind in a process scans its directory once (a stat per
  entry) to learn its size; later writes add their own bytes to that count, and only a count past the
  cap scans (and evicts) again. Other processes' writes are seen at their own scans, so the cap may be
  passed by what several processes write at once, never for long.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

KINDS = ("compile", "llvm", "cuda")
DEFAULT_MAX_MB = 1024
KEEP = 0.8  # an eviction deletes down to this share of the cap
TMP_PREFIX = ".tmp-"
STALE_TMP_S = 3600.0  # a temporary file this old belongs to a writer that died

_lock = threading.Lock()
_sizes: dict[str, int] = {}  # directory -> bytes known to be in it (from this process's scan and writes)


def root() -> Path:
    """``$LUMINAL_CACHE_DIR``, else ``~/.cache/luminal``."""
    r = os.environ.get("LUMINAL_CACHE_DIR")
    return Path(r) if r else Path.home() / ".cache" / "luminal"


def enabled(kind: str) -> bool:
    """Whether the cache ``kind`` is on (``LUMINAL_CACHE``; see the module docstring)."""
    v = os.environ.get("LUMINAL_CACHE", "").strip().lower()
    if v in ("", "1", "on", "true", "yes", "all"):
        return True
    if v in ("0", "off", "false", "no", "none"):
        return False
    return kind in {k.strip() for k in v.split(",")}


def max_bytes() -> int:
    """The cap per kind (``LUMINAL_CACHE_MAX_MB``, default 1024 MiB)."""
    v = os.environ.get("LUMINAL_CACHE_MAX_MB", "").strip()
    try:
        mb = float(v) if v else DEFAULT_MAX_MB
    except ValueError:
        mb = DEFAULT_MAX_MB
    return max(0, int(mb * (1 << 20)))


class DiskCache:
    """The cache of one kind: entries are files at relative paths (``ab/abcdef....o``) under
    ``directory``. ``read`` and ``write`` are no-ops returning None when the kind is off."""

    def __init__(self, kind: str):
        if kind not in KINDS:
            raise ValueError(f"unknown cache kind {kind!r}; one of {KINDS}")
        self.kind = kind

    @property
    def directory(self) -> Path:
        return root() / self.kind

    @property
    def enabled(self) -> bool:
        return enabled(self.kind)

    def path(self, name: str) -> Path:
        return self.directory / name

    def read(self, name: str) -> bytes | None:
        """The entry's bytes (and marks it used), or None when absent, unreadable or the kind is off."""
        if not self.enabled:
            return None
        p = self.path(name)
        try:
            data = p.read_bytes()
        except OSError:
            return None
        try:
            os.utime(p)  # used now: the least recently used entries are evicted first
        except OSError:
            pass
        return data

    def write(self, name: str, data: bytes) -> bool:
        """Write the entry atomically; True when it was written. Evicts past the cap (module docstring)."""
        if not self.enabled:
            return False
        p = self.path(name)
        if not write_atomic(p, data):
            return False
        self._account(len(data))
        return True

    def _account(self, nbytes: int) -> None:
        """Count a write of ``nbytes``; scan and evict on the first write here or past the cap."""
        d = str(self.directory)
        with _lock:
            known = _sizes.get(d)
            cap = max_bytes()
            if known is not None and known + nbytes <= cap:
                _sizes[d] = known + nbytes
            else:  # the first write here in this process, or past the cap: scan (and evict)
                _sizes[d] = evict(self.directory, cap)


def write_atomic(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` through a temporary file in the same directory and ``os.replace``;
    False (and nothing left behind) when it cannot be written."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=TMP_PREFIX)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return True
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            return False
        raise


def evict(directory: Path, cap: int) -> int:
    """Delete the least recently used entries under ``directory`` (by modification time) while it holds
    more than ``cap`` bytes, down to ``KEEP * cap``; stale temporary files go first. Returns the bytes
    left."""
    entries = []
    now = time.time()
    total = 0
    for dirpath, _, files in os.walk(directory):
        for f in files:
            p = os.path.join(dirpath, f)
            try:
                st = os.stat(p)
            except OSError:
                continue
            if f.startswith(TMP_PREFIX):
                if now - st.st_mtime > STALE_TMP_S:
                    _unlink(p)
                continue  # a writer's, still being written: not ours to count
            entries.append((st.st_mtime, st.st_size, p))
            total += st.st_size
    if total <= cap:
        return total
    entries.sort()
    target = int(cap * KEEP)
    for _, size, p in entries:
        if total <= target:
            break
        if _unlink(p):
            total -= size
    return total


def _unlink(p: str) -> bool:
    try:
        os.unlink(p)
        return True
    except OSError:
        return False


__all__ = ["DiskCache", "KINDS", "enabled", "evict", "max_bytes", "root", "write_atomic"]

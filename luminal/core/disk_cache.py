"""The on-disk caches: where they live, whether they are on and may be trusted, verified entries, atomic
writes and a size cap.

Three things are cached across processes, each in a directory of its own (a *kind*) under one root:
compile results (``compile``: the compiler pipeline's kernel graph and memory plan, so a warm compile
skips egglog), LLVM object code (``llvm``) and CUDA cubins and schedule-search winners (``cuda``). They
share this one mechanism so that one variable moves them, one switches them off, one bounds them, and
every entry is checked in one place:

- ``LUMINAL_CACHE_DIR``: the root (default ``~/.cache/luminal``); kind ``k`` lives in ``<root>/<k>``.
  Read at every call, so a test (or a program) may point it elsewhere at any time.
- ``LUMINAL_CACHE``: which kinds are on. Unset, empty or ``1``: all; ``0``: none (nothing is read or
  written); otherwise a comma-separated list of the kinds that are on (``llvm,cuda``: every cache but
  the compile results; a name that is no kind is a warning). A cache that is off behaves as an empty
  one that cannot be written.
- ``LUMINAL_CACHE_MAX_MB``: the size cap per kind, in MiB (default 1024). Past it the least recently
  used entries are deleted (a read of an entry marks it used: its modification time is set to now, since
  access times are often not kept) until the kind's directory is at most ``KEEP`` of the cap, so that a
  full cache does not scan again at every write. A value that is not a finite number >= 0 (``inf``,
  ``nan``, ``1e400``, ``abc``, ``-5``) is a one-line warning and the default.

**Trust.** An LLVM object from the cache is machine code that runs in this process, and the other
kinds decide what the compiler runs: whoever can write the cache can run code as the user. So a
cache directory is used only when nobody else can write it:

- the root is resolved as the kernel resolves it (its links followed, a ``..`` taken after the link
  before it, a relative one from the working directory) and entries are read and written under that
  real path, never through the links: the directory checked is the one used. It is resolved and
  checked once per value of ``LUMINAL_CACHE_DIR`` (and working directory, for a relative one);
- the real root and what luminal creates under it (the kind's directory, its two-character
  subdirectories, and any missing directory above the root) are created 0700 (``mkdir`` then
  ``chmod``: the umask cannot widen it); the real root and the kind's directory, when they exist, must
  be directories owned by the user and not writable by group or others (the kind's directory may not
  be a symlink);
- every directory a lookup passes through on the way to the real root (above it, and those holding
  the links met) must be owned by the user or by root and not writable by group or others unless
  sticky (``/tmp``), or another user could move the root aside and put their own in its place; every
  link met must be the user's or root's (as the kernel's ``protected_symlinks`` asks in a sticky
  directory), or its owner could point it elsewhere;
- an entry is opened without following a symlink and used only when it is a regular file owned by
  the user and not writable by group or others (a file planted while the directory was open).

A directory that fails is refused for the rest of the process, with one warning naming it, why, and
for one writable by others the fix (``chmod go-w``: under umask 002, a ``~/.cache`` another tool made
is 0775): compiling works as with that cache off. A real directory found trusted once every part
exists is not checked again: it holds no link, and only the user or root can change it or what leads
to it (a directory above it that others can write is sticky, so they cannot move what is not theirs).

**Every entry is verified.** A file is a header line and the payload:
``luminal-cache <FORMAT> <sha256 of the payload> <name>``. A read returns the payload only when the
magic, the format, the name (the key the caller asks for) and the digest all match: an empty,
truncated, bit-flipped or otherwise damaged file, or one that holds another entry (two swapped), is a
miss, and the caller's recompile overwrites it. The digest is no signature (anyone can compute one):
it defends against damage and mix-ups, the directory rules against planting.

Why the other rules:

- **Atomic, durable writes**: a temporary file in the same directory (``TMP_PREFIX``, the writer's pid
  and host), written, flushed and fsynced, then ``os.replace``: a process killed mid-write, or two
  processes writing the same entry, never leave a torn entry, and a crash cannot leave a renamed file
  whose data never reached the disk (the directory itself is not fsynced: a rename lost in a crash is
  only a miss). A temporary file left by a writer killed mid-write (SIGINT during a cold compile) is
  deleted by the next writer in that directory (at its first write there in a process), or at an
  eviction scan, once its writer's pid is gone from this host or it is ``STALE_TMP_S`` old.
- **Eviction touches only luminal's files**: entries (regular files of the user's, writable by nobody
  else, that start with the header's magic), luminal's temporary files, and files named as luminal
  named its entries before they had a header (``<2 hex>/<64 hex>.pkl`` or ``.entry`` in ``compile``,
  ``<2 hex>/<64 hex>.o`` in ``llvm``, ``<64 hex>.cubin`` in ``cuda``; the 2 hex the 64's first two):
  never read again, they would otherwise stay forever, uncounted, after an upgrade. Anything else in
  a kind's directory (a ``LUMINAL_CACHE_DIR`` that has an ``llvm`` folder of its own) is neither
  counted nor deleted.
- **A cache is an optimisation**: a directory that cannot be read or written costs a recompile, never an
  error (every ``OSError`` is swallowed).
- **Eviction is cheap**: the first write of a kind in a process scans its directory once (a stat and
  a 14-byte read per file) to learn its size; later writes add their own bytes to that count, and only
  a count past the cap scans (and evicts) again. Other processes' writes are seen at their own scans, so
  the cap may be passed by what several processes write at once, never for long.
"""

from __future__ import annotations

import atexit
import errno
import hashlib
import math
import os
import queue
import re
import stat
import tempfile
import threading
import time
import warnings
from pathlib import Path

from luminal.core.errors import user_stacklevel

KINDS = ("compile", "llvm", "cuda")
DEFAULT_MAX_MB = 1024
KEEP = 0.8  # an eviction deletes down to this share of the cap
MAGIC = b"luminal-cache"
FORMAT = 1  # the entry header's; bump when it changes
TMP_PREFIX = ".tmp-luminal-"
STALE_TMP_S = 300.0  # a temporary file this old belongs to a writer that died (a write takes milliseconds)

_NAME = re.compile(r"[\w.-]+(/[\w.-]+)*")  # an entry's name: no space (the header) and no ``..`` (below)
_TMP = re.compile(re.escape(TMP_PREFIX) + r"([0-9]{1,10})-([0-9a-f]{8})-")  # (a pid has at most 10 digits)
_OLD = {  # the names of luminal's entries before the header (module docstring), per kind
    "compile": re.compile(r"([0-9a-f]{2})/\1[0-9a-f]{62}\.(pkl|entry)"),
    "llvm": re.compile(r"([0-9a-f]{2})/\1[0-9a-f]{62}\.o"),
    "cuda": re.compile(r"[0-9a-f]{64}\.cubin"),
}
_HOST = hashlib.sha256(os.uname().nodename.encode()).hexdigest()[:8]

_lock = threading.Lock()
_sizes: dict[str, int] = {}  # directory -> bytes known to be in it (from this process's scan and writes)
_verdicts: dict[tuple[str, str], tuple[Path, str | None]] = {}  # (kind directory, cwd) -> (real one, why not)
_cleaned: set[str] = set()  # directories whose stale temporary files this process has deleted
_warned: set[str] = set()


def root() -> Path:
    """``$LUMINAL_CACHE_DIR``, else ``~/.cache/luminal``."""
    r = os.environ.get("LUMINAL_CACHE_DIR")
    return Path(r) if r else Path.home() / ".cache" / "luminal"


def enabled(kind: str) -> bool:
    """Whether the cache ``kind`` is switched on (``LUMINAL_CACHE``; see the module docstring)."""
    raw = os.environ.get("LUMINAL_CACHE", "")
    v = raw.strip().lower()
    if v in ("", "1", "on", "true", "yes", "all"):
        return True
    if v in ("0", "off", "false", "no", "none"):
        return False
    named = {k.strip() for k in v.split(",") if k.strip()}
    if named - set(KINDS):
        _warn(f"LUMINAL_CACHE={raw!r}: {', '.join(sorted(named - set(KINDS)))} is no cache kind "
              f"(the kinds: {', '.join(KINDS)}; 0 for none, 1 for all)")
    return kind in named


def max_bytes() -> int:
    """The cap per kind (``LUMINAL_CACHE_MAX_MB``, default 1024 MiB; a bad value warns, then the default)."""
    raw = os.environ.get("LUMINAL_CACHE_MAX_MB", "")
    if not raw.strip():
        return DEFAULT_MAX_MB << 20
    try:
        mb = float(raw)
    except ValueError:
        mb = math.nan
    if not 0 <= mb < math.inf:  # (NaN fails every comparison)
        _warn(f"LUMINAL_CACHE_MAX_MB={raw!r} is not a finite number of MiB >= 0: using the default, "
              f"{DEFAULT_MAX_MB}")
        return DEFAULT_MAX_MB << 20
    return int(mb * (1 << 20))


def _warn(message: str) -> None:
    """Warn once per process per message (the caches are asked at every compile)."""
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=user_stacklevel())  # (at the user's line)


class DiskCache:
    """The cache of one kind: entries are files at relative paths (``ab/abcdef....o``) under
    ``directory``. ``read`` and ``write`` are no-ops returning None / False when the kind is off or its
    directory is not trusted."""

    def __init__(self, kind: str):
        if kind not in KINDS:
            raise ValueError(f"unknown cache kind {kind!r}; one of {KINDS}")
        self.kind = kind

    @property
    def directory(self) -> Path:
        """``root() / kind``, as the root is set (entries are read and written under its real path)."""
        return root() / self.kind

    @property
    def enabled(self) -> bool:
        """Switched on (``LUMINAL_CACHE``) and in a directory nobody else can write."""
        return self._real() is not None

    def _real(self) -> Path | None:
        """The real path of the kind's directory when the kind is on and the directory trusted."""
        if not enabled(self.kind):
            return None
        real, why = _place(self.directory)
        return real if why is None else None

    def path(self, name: str) -> Path:
        """Where entry ``name`` is, under ``directory``."""
        return self.directory / _checked(name)

    def read(self, name: str) -> bytes | None:
        """The entry's payload (and marks it used), or None when absent, not the user's, damaged, not
        the entry ``name`` (module docstring), or the cache is off."""
        real = self._real()
        if real is None:
            return None
        p = real / _checked(name)
        data = _read_own(p)
        if data is None:
            return None
        head, sep, payload = data.partition(b"\n")
        if not sep or head + sep != header(name, payload):
            return None  # a miss: the caller's write replaces it
        try:
            os.utime(p)  # used now: the least recently used entries are evicted first
        except OSError:
            pass
        return payload

    def write(self, name: str, data: bytes) -> bool:
        """Write the entry (header and ``data``) atomically; True when it was written. Creates the
        directories it needs 0700 (module docstring) and evicts past the cap."""
        real = self._real()
        return real is not None and self._write(self.directory, real, _checked(name), data)

    def write_behind(self, name: str, data: bytes) -> None:
        """:meth:`write` on the process's writer thread, for an entry the caller keeps in memory
        meanwhile (a cold compile's objects and index entries: each write's fsync off its path, 135 of
        them 0.17 s of a cold GPT step on a 2-vCPU EPYC). The directory is the one set now; every
        entry queued is written before the process exits (:func:`flush` waits for them sooner)."""
        real = self._real()
        if real is not None:
            _behind.put((self, self.directory, real, _checked(name), data))
            _start_writer()

    def _write(self, directory: Path, real: Path, name: str, data: bytes) -> bool:
        """Write entry ``name`` into ``real``, the real path of ``directory`` (both as they were when
        the write was asked for)."""
        p = real / name
        why = _make_dirs(real.parent, p.parent)
        if why is not None:
            _refuse(directory, why)
            return False
        _settle(directory, real)
        blob = header(name, data) + data
        if not write_atomic(p, blob):
            return False
        self._account(real, len(blob))
        return True

    def _account(self, real: Path, nbytes: int) -> None:
        """Count a write of ``nbytes`` into ``real``; scan and evict on the first write there or past the cap."""
        d = str(real)
        with _lock:
            known = _sizes.get(d)
            cap = max_bytes()
            if known is not None and known + nbytes <= cap:
                _sizes[d] = known + nbytes
            else:  # the first write here in this process, or past the cap: scan (and evict)
                _sizes[d] = evict(real, cap, self.kind)


def _checked(name: str) -> str:
    """``name``, when it is an entry's name: a relative path that stays inside the kind's directory."""
    if not _NAME.fullmatch(name) or ".." in name.split("/"):
        raise ValueError(f"cache entry name {name!r}: expected a relative path of letters, digits, '._-'")
    return name


def header(name: str, payload: bytes) -> bytes:
    """The first line of entry ``name`` holding ``payload`` (module docstring)."""
    return b"%s %d %s %s\n" % (MAGIC, FORMAT, hashlib.sha256(payload).hexdigest().encode(), name.encode())


# trust ------------------------------------------------------------------------------------------------

def refusal(directory: Path) -> str | None:
    """Why the kind directory ``directory`` (``root() / kind``) may not be used, or None when it may
    (module docstring)."""
    return _place(directory)[1]


def _place(directory: Path) -> tuple[Path, str | None]:
    """``(where directory really is, why it may not be used or None)``: the path resolved as the kernel
    resolves it, checked on the way, once per value of the root (and working directory, for a relative
    one). Entries are read and written under the real path, never through the links that led to it, so
    the directory checked is the one used. A refusal is final for the process and warns once; a real
    directory found trusted with every part existing is not checked again: only the user or root could
    change that (it holds no link, and a directory above it others can write is sticky, so they cannot
    move what is in it)."""
    key = _key(directory)
    if key is None:
        why = f"{directory} is relative and the working directory is gone"
        _refuse(directory, why)
        return directory, why
    if key in _verdicts:
        return _verdicts[key]
    try:
        real, why, complete = _check(directory, key[1])
    except OSError as e:  # (a directory on the way that cannot be searched; a loop of links)
        real, why, complete = directory, f"cannot inspect {e.filename}: {e.strerror}", True
    if why is not None:
        _refuse(directory, why)
    elif complete:
        _verdicts[key] = (real, None)
    return real, why


def _key(directory: Path) -> tuple[str, str] | None:
    """The directory as given, with the working directory when it is relative (None: there is none)."""
    if directory.is_absolute():
        return str(directory), ""
    try:
        return str(directory), os.getcwd()
    except OSError:
        return None


def _settle(directory: Path, real: Path) -> None:
    """``directory`` leads to ``real``, which now exists, checked (``_make_dirs``): it is used from now
    on, even if a link that led to it is pointed elsewhere."""
    key = _key(directory)
    if key is not None:
        _verdicts.setdefault(key, (real, None))


def _refuse(directory: Path, why: str) -> None:
    key = _key(directory)
    if key is not None:
        _verdicts[key] = (directory, why)
    _warn(f"luminal: disk cache not used: {why} (it must be yours and writable by nobody else; "
          f"compiling without it)")  # (``why`` names the directory: a root-level one warns once for every kind)


def _check(directory: Path, cwd: str) -> tuple[Path, str | None, bool]:
    """``(the real kind directory, why not, whether every directory exists)`` for the kind directory
    ``directory`` (from ``cwd`` when relative): the directories and links resolving its root passes
    through by the shared rule, the root and the kind's own by the private one."""
    top, why, complete = _resolve(os.path.join(cwd, directory.parent))
    real = Path(top) / directory.name
    if why is not None or not complete:
        return real, why, complete
    for d in (top, real):
        st = _lstat(d)
        if st is None:
            return real, None, False
        if (why := _problem(d, st, private=True)) is not None:
            return real, why, True
    return real, None, True


def _resolve(path: str) -> tuple[str, str | None, bool]:
    """``(path resolved as the kernel resolves it, why not, whether it exists)``; a missing tail is kept
    as written (as ``_make_dirs`` creates it). Every directory a lookup is made in must pass the shared
    rule and every link met must be the user's or root's (as the kernel's ``protected_symlinks`` asks
    in a sticky directory): another user's link could be pointed elsewhere at any time. ``..`` is taken
    where the kernel takes it, after the link before it."""
    todo = path.split("/")[::-1]
    done, checked, links = "/", set(), 0
    while todo:
        part = todo.pop()
        if part in ("", "."):
            continue
        if part == "..":
            done = os.path.dirname(done)
            continue
        if done not in checked:  # a lookup in ``done``: whoever can write it can change what it finds
            checked.add(done)
            if (why := _problem(done, os.lstat(done), private=False)) is not None:
                return done, why, True
        step = os.path.join(done, part)
        st = _lstat(step)
        if st is None:
            return os.path.normpath(os.path.join(step, *todo[::-1])), None, False
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid not in (os.getuid(), 0):
                return step, f"{step}, a symlink on the way to the cache, belongs to uid {st.st_uid}", True
            links += 1
            if links > 40:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
            target = os.readlink(step)
            if target.startswith("/"):
                done = "/"
            todo.extend(target.split("/")[::-1])
            continue
        done = step
    return done, None, True


def _lstat(d) -> os.stat_result | None:
    try:
        return os.lstat(d)
    except FileNotFoundError:
        return None


def _problem(d, st: os.stat_result, private: bool) -> str | None:
    """What is wrong with the directory ``d``: a ``private`` one (the root or under it) must be a real
    directory of the user's that nobody else can write; one above the root may be root's too, and
    writable by others when sticky (``/tmp``: they cannot move what is not theirs)."""
    if stat.S_ISLNK(st.st_mode):
        return f"{d} is a symlink"  # (a link on the resolved path: the path changed since it was resolved)
    if not stat.S_ISDIR(st.st_mode):
        return f"{d} is not a directory"
    above = "" if private else ", above the cache,"
    if st.st_uid != os.getuid() and (private or st.st_uid != 0):
        return f"{d}{above} belongs to uid {st.st_uid} (you are {os.getuid()})"
    if st.st_mode & 0o022 and (private or not st.st_mode & stat.S_ISVTX):
        who = "group or others" if private else "others"
        return (f"{d}{above} is writable by {who} (mode {stat.S_IMODE(st.st_mode):o}; "
                f"`chmod go-w {d}` fixes that)")
    return None


def _make_dirs(top: Path, leaf: Path) -> str | None:
    """Create the missing directories from above the real root ``top`` down to ``leaf`` (under it),
    0700; why one that exists (or appeared meanwhile: a symlink there now is refused) may not be used,
    or None."""
    parts = leaf.relative_to(top).parts
    chain = [(d, False) for d in reversed(top.parents)] + [(top.joinpath(*parts[:i]), True)
                                                          for i in range(len(parts) + 1)]
    for d, private in chain:
        try:
            st = _lstat(d)
            if st is None:
                try:
                    os.mkdir(d, 0o700)
                    os.chmod(d, 0o700)
                    continue
                except FileExistsError:
                    st = os.lstat(d)
        except OSError as e:
            return f"cannot create {d}: {e.strerror}"
        why = _problem(d, st, private)
        if why is not None:
            return why
    return None


def _read_own(p, limit: int = -1) -> bytes | None:
    """The bytes of ``p`` (the first ``limit``; all: -1) when it is a regular file of the user's that
    nobody else can write; else None (a symlink is not followed; a planted FIFO does not block)."""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            return f.read(limit) if _own(os.fstat(f.fileno())) else None
    except OSError:
        return None


def _own(st: os.stat_result) -> bool:
    """A regular file of the user's that nobody else can write."""
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


# writing and evicting ------------------------------------------------------------------------------

_behind: queue.SimpleQueue = queue.SimpleQueue()  # (cache, directory, its real path, name, data), or an Event
_writer: list = []  # the writer thread, once started


def _start_writer() -> None:
    """The writer thread running (started anew in a forked child, which has the list but not the thread)."""
    with _lock:
        if not _writer or not _writer[0].is_alive():
            _writer[:] = [threading.Thread(target=_write_behind, name="luminal-cache-writer", daemon=True)]
            _writer[0].start()


def _write_behind() -> None:
    while True:
        item = _behind.get()
        if isinstance(item, threading.Event):
            item.set()
            continue
        cache, directory, real, name, data = item
        try:
            cache._write(directory, real, name, data)
        except Exception:  # noqa: BLE001 - a cache that cannot be written is skipped (write swallows OSError)
            pass


@atexit.register
def flush() -> None:
    """Wait until every entry queued by :meth:`DiskCache.write_behind` is written (at exit too)."""
    if _writer and _writer[0].is_alive():
        done = threading.Event()
        _behind.put(done)
        done.wait()


def write_atomic(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` (whose directory exists) through a temporary file in the same
    directory, fsynced, then ``os.replace``; False (and nothing left behind) when it cannot be written.
    The first write into a directory in a process deletes its dead writers' temporary files."""
    path = Path(path)
    if str(path.parent) not in _cleaned:
        _cleaned.add(str(path.parent))
        _clean_tmp(path.parent)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{TMP_PREFIX}{os.getpid()}-{_HOST}-")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # the data is on disk before the name points at it
        os.replace(tmp, path)
        return True
    except BaseException as e:
        _unlink(tmp)
        if isinstance(e, OSError):
            return False
        raise


def _clean_tmp(directory: Path) -> None:
    try:
        names = os.listdir(directory)
    except OSError:
        return
    now = time.time()
    for f in names:
        if f.startswith(TMP_PREFIX):
            p = os.path.join(directory, f)
            if _dead_tmp(f, p, now):
                _unlink(p)


def _dead_tmp(name: str, p: str, now: float) -> bool:
    """Whether ``p`` is a temporary file of luminal's (the user's, regular) whose writer is gone: its
    pid is not alive on this host, or it is ``STALE_TMP_S`` old."""
    try:
        st = os.lstat(p)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
        return False
    if now - st.st_mtime > STALE_TMP_S:
        return True
    m = _TMP.match(name)
    if m is None or m.group(2) != _HOST or int(m.group(1)) == os.getpid():
        return False
    try:
        os.kill(int(m.group(1)), 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):  # alive (another user's pid), or a pid out of range: left until stale
        return False
    return False


def evict(directory: Path, cap: int, kind: str | None = None) -> int:
    """Delete the least recently used entries under ``directory`` (by modification time) while they
    hold more than ``cap`` bytes, down to ``KEEP * cap``; dead writers' temporary files go first. Only
    luminal's own files are counted or deleted (module docstring): entries, and for a ``kind`` the
    files named as luminal named its entries before they had a header. Returns the entries' bytes left."""
    old, start = _OLD.get(kind), len(os.path.join(directory, ""))  # (a file's name from the kind's directory)
    entries = []
    now = time.time()
    total = 0
    for dirpath, _, files in os.walk(directory):
        for f in files:
            p = os.path.join(dirpath, f)
            if f.startswith(TMP_PREFIX):
                if _dead_tmp(f, p, now):
                    _unlink(p)
                continue  # a writer's, still being written: not ours to count
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if not _own(st):
                continue
            if (old is not None and old.fullmatch(p[start:]) is not None
                    or _read_own(p, len(MAGIC) + 1) == MAGIC + b" "):
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


def _unlink(p) -> bool:
    try:
        os.unlink(p)
        return True
    except OSError:
        return False


__all__ = ["DiskCache", "KINDS", "enabled", "evict", "flush", "header", "max_bytes", "refusal", "root", "write_atomic"]

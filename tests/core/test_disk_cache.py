"""The disk caches' shared mechanism (``luminal/core/disk_cache.py``): who may own a cache directory,
entries verified against their header, eviction of luminal's own files only, bad environment values,
durable writes (on the caller's thread or written behind) and a dead writer's temporary file. The
cache as the compiler meets it (planted and damaged LLVM objects, in a process of their own) is
``tests/core/test_cache_trust.py``."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import warnings

import pytest

from luminal.core import disk_cache

NAME = "ab/" + "ab" * 32 + ".o"
OTHER = "cd/" + "cd" * 32 + ".o"
NOBODY = 65534
as_root = pytest.mark.skipif(os.getuid() != 0, reason="giving a directory to another user needs root")


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """A cache root in ``tmp_path`` (not made yet) and a process that has checked and warned nothing."""
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LUMINAL_CACHE", "1")
    monkeypatch.delenv("LUMINAL_CACHE_MAX_MB", raising=False)
    for name, empty in (("_verdicts", {}), ("_warned", set()), ("_cleaned", set()), ("_sizes", {})):
        monkeypatch.setattr(disk_cache, name, empty, raising=False)
    return tmp_path / "cache"


def _mode(p) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def _refused(d: disk_cache.DiskCache, *words) -> None:
    """``d`` neither writes nor reads, with one warning (once) whose text has ``words``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert d.read(NAME) is None and not d.write(NAME, b"payload") and not d.enabled
        assert not d.write(OTHER, b"payload")
    assert len(caught) == 1, [str(w.message) for w in caught]
    text = str(caught[0].message)
    assert "disk cache not used" in text and all(w in text for w in words), text


# who may own it -------------------------------------------------------------------------------------

def test_the_default_root_and_what_luminal_creates_are_private(tmp_path, monkeypatch, fresh):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("LUMINAL_CACHE_DIR")
    old = os.umask(0o022)  # the usual umask: a plain mkdir would make them 0755
    try:
        assert disk_cache.DiskCache("llvm").write(NAME, b"object")
    finally:
        os.umask(old)
    made = [home / ".cache", home / ".cache/luminal", home / ".cache/luminal/llvm", home / ".cache/luminal/llvm/ab"]
    assert [_mode(d) for d in made] == [0o700] * 4
    assert _mode(home / ".cache/luminal/llvm" / NAME) == 0o600
    assert disk_cache.DiskCache("llvm").read(NAME) == b"object"


@pytest.mark.parametrize("how", ["0777", "group-writable", "nobody's", "a file", "kind dir a symlink"])
def test_an_unsafe_root_turns_the_cache_off_with_one_warning(fresh, tmp_path, how):
    d = disk_cache.DiskCache("llvm")
    if how == "a file":
        fresh.write_bytes(b"")
        words = [str(fresh), "not a directory"]
    else:
        fresh.mkdir(0o700)
        if how == "0777":
            os.chmod(fresh, 0o777)
            words = [str(fresh), "writable by group or others", "777"]
        elif how == "group-writable":
            os.chmod(fresh, 0o770)
            words = [str(fresh), "writable by group or others"]
        elif how == "nobody's":
            if os.getuid() != 0:
                pytest.skip("giving a directory to another user needs root")
            os.chown(fresh, NOBODY, NOBODY)
            words = [str(fresh), f"belongs to uid {NOBODY}"]
        else:
            (tmp_path / "elsewhere").mkdir(0o700)
            (fresh / "llvm").symlink_to(tmp_path / "elsewhere")
            words = [str(fresh / "llvm"), "symlink"]
    _refused(d, *words)
    assert not (tmp_path / "elsewhere").exists() or not list((tmp_path / "elsewhere").iterdir())


def test_a_root_under_a_file_is_refused_not_an_error(tmp_path, monkeypatch, fresh):
    (tmp_path / "afile").write_bytes(b"")
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path / "afile" / "cache"))
    _refused(disk_cache.DiskCache("llvm"), str(tmp_path / "afile"), "not a directory")


def test_a_directory_that_cannot_be_searched_is_refused_not_an_error(tmp_path, monkeypatch, fresh):
    """(Another user's 0700 home on the way, as root cannot show: ``lstat`` is told to fail there.)"""
    real_lstat, closed = os.lstat, str(tmp_path / "closed")

    def lstat(p, *a, **kw):
        if str(p).startswith(closed + "/"):
            raise PermissionError(13, "Permission denied", str(p))
        return real_lstat(p, *a, **kw)

    (tmp_path / "closed").mkdir(0o700)
    monkeypatch.setattr(os, "lstat", lstat)
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path / "closed" / "cache"))
    _refused(disk_cache.DiskCache("llvm"), "cannot inspect", "Permission denied")


def test_one_warning_for_every_kind_of_a_bad_root(fresh):
    fresh.mkdir(0o777)
    os.chmod(fresh, 0o777)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for kind in disk_cache.KINDS:
            assert not disk_cache.DiskCache(kind).write(NAME, b"x")
    assert len(caught) == 1


def test_a_directory_above_the_root_that_others_can_write(tmp_path, monkeypatch, fresh):
    """Another user could move the root aside and put their own there; a sticky one (``/tmp``) they cannot."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(shared / "cache"))
    _refused(disk_cache.DiskCache("llvm"), str(shared), "above the cache", "writable by others")
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(sticky / "cache"))
    d = disk_cache.DiskCache("llvm")
    assert d.write(NAME, b"x") and d.read(NAME) == b"x" and _mode(sticky / "cache") == 0o700


def test_a_root_that_is_a_symlink_is_checked_where_it_leads(tmp_path, monkeypatch, fresh):
    real = tmp_path / "real"
    real.mkdir(0o700)
    (tmp_path / "link").symlink_to(real)
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path / "link"))
    d = disk_cache.DiskCache("llvm")
    assert d.write(NAME, b"x") and (real / "llvm" / NAME).is_file()
    os.chmod(real, 0o777)  # what the link leads to decides
    monkeypatch.setattr(disk_cache, "_verdicts", {})
    _refused(disk_cache.DiskCache("cuda"), str(real), "writable by group or others")


@pytest.mark.parametrize("how", ["nobody's", "writable by others", "a symlink"])
def test_an_entry_that_is_not_the_users_is_a_miss_and_is_replaced(fresh, tmp_path, how):
    if how == "nobody's" and os.getuid() != 0:
        pytest.skip("giving a file to another user needs root")
    d = disk_cache.DiskCache("llvm")
    assert d.write(NAME, b"planted")
    p = d.path(NAME)
    if how == "nobody's":
        os.chown(p, NOBODY, NOBODY)
    elif how == "writable by others":
        os.chmod(p, 0o666)
    else:  # a good entry of this name, kept elsewhere: a link to it is not followed
        (tmp_path / "elsewhere.o").write_bytes(p.read_bytes())
        p.unlink()
        p.symlink_to(tmp_path / "elsewhere.o")
    assert d.read(NAME) is None
    assert d.write(NAME, b"mine") and d.read(NAME) == b"mine" and os.lstat(p).st_uid == os.getuid()


# entries are verified -------------------------------------------------------------------------------

@pytest.mark.parametrize("damage", ["empty", "truncated", "a flipped bit", "no header", "another format",
                                    "swapped"])
def test_a_damaged_or_misplaced_entry_is_a_miss_then_rewritten(fresh, damage):
    d = disk_cache.DiskCache("compile")
    payload = bytes(range(256)) * 40
    assert d.write(NAME, payload) and d.write(OTHER, payload[::-1])
    p = d.path(NAME)
    good = p.read_bytes()
    if damage == "swapped":
        other = d.path(OTHER).read_bytes()
        d.path(OTHER).write_bytes(good)
        p.write_bytes(other)
        assert d.read(OTHER) is None
    else:
        bad = {"empty": b"", "truncated": good[:-1], "no header": payload,
               "a flipped bit": good[:5000] + bytes([good[5000] ^ 4]) + good[5001:],
               "another format": good.replace(b"luminal-cache 1 ", b"luminal-cache 2 ", 1)}[damage]
        p.write_bytes(bad)
    assert d.read(NAME) is None
    assert d.write(NAME, payload) and d.read(NAME) == payload and p.read_bytes() == good


def test_entry_names_stay_inside_the_kind(fresh):
    d = disk_cache.DiskCache("llvm")
    for bad in ("../compile/x.pkl", "/etc/passwd", "a b.o", "a\n.o", ""):
        with pytest.raises(ValueError, match="cache entry name"):
            d.write(bad, b"x")


# eviction --------------------------------------------------------------------------------------------

def test_eviction_deletes_only_what_luminal_wrote(fresh, monkeypatch):
    """A ``LUMINAL_CACHE_DIR`` with an ``llvm`` folder of its own: the user's files are neither evicted
    nor counted (one large file of theirs does not empty luminal's entries either)."""
    user = fresh / "llvm"
    (user / "ab").mkdir(parents=True, mode=0o700)
    os.chmod(fresh, 0o700)
    mine = {"notes.txt": b"n" * 50_000, "ab/data.bin": b"d" * 1000, ".tmp-draft": b"t" * 100}
    for rel, data in mine.items():
        (user / rel).write_bytes(data)
        os.utime(user / rel, (0, 0))  # older than any entry: the first an LRU would take
    monkeypatch.setenv("LUMINAL_CACHE_MAX_MB", str(16384 / (1 << 20)))  # 16 KiB
    d = disk_cache.DiskCache("llvm")
    for i in range(40):
        assert d.write(f"{i:02x}/" + f"{i:02x}" * 32 + ".o", bytes(1000))
    assert {rel: (user / rel).read_bytes() for rel in mine} == mine
    entries = [p for p in user.rglob("*.o")]
    assert 8 <= len(entries) <= 16 and sum(p.stat().st_size for p in entries) <= 16384


# environment values -----------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["inf", "nan", "1e400", "abc", "-5", "-inf"])
def test_a_bad_size_cap_warns_once_and_means_the_default(fresh, monkeypatch, value):
    monkeypatch.setenv("LUMINAL_CACHE_MAX_MB", value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert disk_cache.max_bytes() == disk_cache.DEFAULT_MAX_MB << 20
        d = disk_cache.DiskCache("llvm")
        assert d.write(NAME, b"x") and d.write(OTHER, b"y")  # no error: a write reads the cap
    assert len(caught) == 1
    text = str(caught[0].message)
    assert f"LUMINAL_CACHE_MAX_MB={value!r}" in text and "default" in text and "\n" not in text


@pytest.mark.parametrize("value,mb", [("", 1024), (" 2 ", 2), ("0.5", 0.5), ("0", 0)])
def test_good_size_caps_are_read_without_a_warning(fresh, monkeypatch, value, mb):
    monkeypatch.setenv("LUMINAL_CACHE_MAX_MB", value)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert disk_cache.max_bytes() == int(mb * (1 << 20))


def test_an_unknown_kind_in_luminal_cache_warns(fresh, monkeypatch):
    monkeypatch.setenv("LUMINAL_CACHE", "llvm,cdua")
    with pytest.warns(RuntimeWarning, match="LUMINAL_CACHE='llvm,cdua': cdua is no cache kind"):
        assert disk_cache.enabled("llvm") and not disk_cache.enabled("cuda")


@pytest.mark.parametrize("how", ["a group-writable root", "a bad size cap", "a bad root met by lm.compile"])
def test_a_cache_warning_names_the_users_line(fresh, monkeypatch, how):
    """Before: the warning named a line of disk_cache.py (a fixed stacklevel, however deep in luminal the
    check ran), not the line of the user's that reached it."""
    import luminal as lm

    if how == "a bad size cap":
        monkeypatch.setenv("LUMINAL_CACHE_MAX_MB", "abc")
    else:
        fresh.mkdir(0o700)
        os.chmod(fresh, 0o770)
    g = lm.Graph()
    y = g.input("x", (3,)) * 2.0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1
        lm.compile(y) if how.endswith("lm.compile") else disk_cache.DiskCache("llvm").write(NAME, b"x")
    assert [(w.filename, w.lineno) for w in caught] == [(__file__, line)], [str(w.message) for w in caught]


# writes -----------------------------------------------------------------------------------------------

def test_a_write_is_fsynced_before_the_rename(fresh, monkeypatch):
    calls = []  # (what, the file's inode)
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        calls.append(("fsync", os.fstat(fd).st_ino))
        real_fsync(fd)

    def replace(src, dst):
        calls.append(("replace", os.stat(src).st_ino))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    assert disk_cache.DiskCache("llvm").write(NAME, b"object")
    assert [c[0] for c in calls] == ["fsync", "replace"] and calls[0][1] == calls[1][1]  # its data, then its name


def test_a_write_behind_goes_to_the_directory_set_when_it_was_asked(fresh, tmp_path, monkeypatch):
    """``write_behind``: written on the writer thread (fsynced before its rename, as ``write``), into the
    directory of when it was queued even if ``LUMINAL_CACHE_DIR`` changes meanwhile; ``flush`` waits."""
    d = disk_cache.DiskCache("llvm")
    d.write_behind(NAME, b"behind")
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path / "elsewhere"))
    d.write_behind(OTHER, b"other")
    disk_cache.flush()
    assert d.read(OTHER) == b"other" and d.read(NAME) is None
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(fresh))
    assert d.read(NAME) == b"behind" and d.read(OTHER) is None


WRITER_AT_EXIT = textwrap.dedent("""
    import sys
    from luminal.core import disk_cache
    for i in range(50):
        disk_cache.DiskCache("llvm").write_behind(f"{i:02x}/" + f"{i:02x}" * 32 + ".o", bytes(100_000))
""")


def test_entries_written_behind_are_written_before_the_process_exits(fresh):
    r = subprocess.run([sys.executable, "-c", WRITER_AT_EXIT], timeout=120)
    assert r.returncode == 0
    d = disk_cache.DiskCache("llvm")
    assert all(d.read(f"{i:02x}/" + f"{i:02x}" * 32 + ".o") == bytes(100_000) for i in range(50))


KILLED_WRITER = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from luminal.core import disk_cache
    def die(src, dst):  # killed between writing the temporary file and renaming it
        os.kill(os.getpid(), signal.SIGKILL)
    os.replace = die
    disk_cache.write_atomic(Path(sys.argv[1]), b"x" * 4096)
""")


def test_a_killed_writers_temporary_file_is_cleaned_by_the_next_writer(fresh):
    d = disk_cache.DiskCache("llvm")
    assert d.write(NAME, b"first")
    folder = d.path(NAME).parent
    r = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(d.path(NAME))], timeout=120)
    assert r.returncode == -signal.SIGKILL
    (left,) = [p for p in folder.iterdir() if p.name.startswith(".tmp-")]  # fresh: its age says nothing
    live = folder / f"{disk_cache.TMP_PREFIX}{os.getpid()}-{disk_cache._HOST}-busy"  # this process's: alive
    live.write_bytes(b"being written")
    theirs = folder / ".tmp-notes"  # not luminal's name
    theirs.write_bytes(b"keep")
    os.utime(theirs, (0, 0))
    disk_cache._cleaned.clear()  # the next process
    assert d.write(NAME, b"second")
    assert not left.exists() and live.exists() and theirs.exists()
    assert d.read(NAME) == b"second"


def test_a_temporary_name_with_a_pid_out_of_range_is_no_error(fresh):
    """``.tmp-luminal-<pid>-<host>-`` with a pid no process can have (past 2**31, or 20 digits): a write
    and an eviction scan go on (a cache problem is never an error); such a file goes once it is old."""
    d = disk_cache.DiskCache("llvm")
    assert d.write(NAME, b"x")
    folder = d.path(OTHER).parent
    folder.mkdir(0o700)
    odd = {(pid, age): folder / f"{disk_cache.TMP_PREFIX}{pid}-{disk_cache._HOST}-{age}"
           for pid in ("9999999999", "9" * 20) for age in ("new", "old")}
    for (_, age), p in odd.items():
        p.write_bytes(b"")
        if age == "old":
            os.utime(p, (0, 0))
    assert d.write(OTHER, b"y") and d.read(OTHER) == b"y"
    assert disk_cache.evict(d.directory, 1 << 30) > 0
    assert {k: p.exists() for k, p in odd.items()} == {k: k[1] == "new" for k in odd}


def test_a_relative_root_is_checked_in_each_working_directory(fresh, tmp_path, monkeypatch):
    """``LUMINAL_CACHE_DIR=cache`` names another directory after a ``chdir``: the one it names now is
    checked (here one anybody can write, with an entry planted in it) and is not read."""
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir(0o700)
    monkeypatch.setenv("LUMINAL_CACHE_DIR", "cache")
    monkeypatch.chdir(a)
    d = disk_cache.DiskCache("llvm")
    assert d.write(NAME, b"mine") and d.read(NAME) == b"mine" and (a / "cache/llvm" / NAME).is_file()
    planted = b / "cache/llvm" / NAME
    planted.parent.mkdir(parents=True)
    planted.write_bytes(disk_cache.header(NAME, b"planted") + b"planted")
    os.chmod(planted, 0o600)
    os.chmod(b / "cache", 0o777)
    monkeypatch.chdir(b)
    _refused(d, str(b / "cache"), "writable by group or others")
    monkeypatch.chdir(a)
    assert d.read(NAME) == b"mine"


@pytest.mark.parametrize("open_one", ["the one the kernel reaches", "the one the text names"])
def test_a_root_through_a_link_and_dotdot_is_the_one_the_kernel_reaches(fresh, tmp_path, monkeypatch,
                                                                        open_one):
    """``<link>/../cache``: the kernel resolves the link, then ``..`` (``deep/cache``), where removing
    ``link/..`` from the text gives ``cache``. The directory checked is the one read and written."""
    (tmp_path / "deep/sub").mkdir(parents=True, mode=0o700)
    (tmp_path / "link").symlink_to(tmp_path / "deep/sub")
    reached, named = tmp_path / "deep/cache", tmp_path / "cache"
    for d in (reached, named):
        (d / "llvm/ab").mkdir(parents=True, mode=0o700)
        os.chmod(d, 0o700)
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path / "link/../cache"))
    d = disk_cache.DiskCache("llvm")
    if open_one == "the one the kernel reaches":
        planted = reached / "llvm" / NAME
        planted.write_bytes(disk_cache.header(NAME, b"planted") + b"planted")
        os.chmod(planted, 0o600)
        os.chmod(reached, 0o777)
        _refused(d, str(reached), "writable by group or others")
    else:
        os.chmod(named, 0o777)
        assert d.write(NAME, b"x") and d.read(NAME) == b"x" and (reached / "llvm" / NAME).is_file()


@as_root
def test_a_link_on_the_way_must_be_the_users_or_roots(fresh, tmp_path, monkeypatch):
    """A link in a sticky directory (``/tmp``) that another user owns: they may point it elsewhere at
    any time (what the kernel's ``protected_symlinks`` guards against), so the cache is refused."""
    sticky, mine = tmp_path / "sticky", tmp_path / "mine"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    mine.mkdir(0o700)
    link = sticky / "cache"
    link.symlink_to(mine)
    os.lchown(link, NOBODY, NOBODY)
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(link))
    _refused(disk_cache.DiskCache("llvm"), str(link), f"uid {NOBODY}")
    assert not list(mine.iterdir())


def test_a_link_pointed_elsewhere_after_the_check_is_not_followed(fresh, tmp_path, monkeypatch):
    """Once checked, the cache is read and written where the root's link led then: pointing the link
    at a directory anybody can write (with an entry planted there) changes nothing."""
    mine, other = tmp_path / "mine", tmp_path / "other"
    mine.mkdir(0o700)
    (other / "llvm/cd").mkdir(parents=True)
    planted = other / "llvm" / OTHER
    planted.write_bytes(disk_cache.header(OTHER, b"planted") + b"planted")
    os.chmod(planted, 0o600)
    os.chmod(other, 0o777)
    link = tmp_path / "link"
    link.symlink_to(mine)
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(link))
    d = disk_cache.DiskCache("llvm")
    assert d.write(NAME, b"x")
    link.unlink()
    link.symlink_to(other)
    assert d.read(OTHER) is None and d.read(NAME) == b"x"
    assert d.write(OTHER, b"y") and (mine / "llvm" / OTHER).is_file() and planted.read_bytes().endswith(b"planted")


@pytest.mark.parametrize("which", [".cache", ".cache/luminal"])
def test_a_group_writable_directory_is_refused_with_the_fix(fresh, tmp_path, monkeypatch, which):
    """Under umask 002 (a user-private group) another tool made ``~/.cache`` (or the root) 0775: refused
    as any other, and the warning says how to make it private."""
    home = tmp_path / "home"
    (home / ".cache/luminal").mkdir(parents=True, mode=0o700)
    os.chmod(home / ".cache", 0o700)
    os.chmod(home / which, 0o775)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("LUMINAL_CACHE_DIR")
    _refused(disk_cache.DiskCache("llvm"), f"chmod go-w {home / which}")


HEX = "0123456789abcdef" * 4
OLD_NAMES = {  # luminal's names before the entry header (git: 76778ab), per kind
    "compile": ["ab/ab" + HEX[2:] + ".pkl", "cd/cd" + HEX[2:] + ".entry"],
    "llvm": ["ab/ab" + HEX[2:] + ".o", "cd/cd" + HEX[2:] + ".o"],
    "cuda": [HEX + ".cubin", HEX[::-1] + ".cubin"],
}


@pytest.mark.parametrize("kind", disk_cache.KINDS)
def test_files_luminal_wrote_before_the_header_are_evicted(fresh, monkeypatch, kind):
    """An upgraded user's old entries (never read: they have no header) are counted and evicted, oldest
    first; a file of the user's that only looks like one stays."""
    top = fresh / kind
    old = OLD_NAMES[kind]
    alike = ["ab/cd" + HEX[2:] + ".o", "ab/ab" + HEX[2:] + ".txt", HEX[:-1] + ".cubin", HEX + ".o",
             "ab/AB" + HEX[2:] + ".pkl"]
    for i, rel in enumerate(old + alike):
        (top / rel).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        (top / rel).write_bytes(bytes(6000))
        os.utime(top / rel, (i, i))  # older than any entry; the old names the oldest
    os.chmod(fresh, 0o700)
    monkeypatch.setenv("LUMINAL_CACHE_MAX_MB", str(16384 / (1 << 20)))  # 16 KiB
    d = disk_cache.DiskCache(kind)
    name = "ef/" + "ef" * 32 + ".x"
    assert d.write(name, bytes(6000))
    assert not (top / old[0]).exists() and (top / old[1]).exists()  # 18 KiB: down to 13 KiB
    assert all((top / rel).exists() for rel in alike) and d.read(name) == bytes(6000)
    assert disk_cache.evict(top, 0, kind) == 0 and not (top / old[1]).exists()
    assert all((top / rel).exists() for rel in alike)

"""Files written whole or not at all: a temp file beside the target, fsynced, then renamed over it, so
readers see the old file or the new one, never half of one, and any failure leaves the old file as it
was and no temp behind. Checkpoints, safetensors files and model directories are saved this way.

:func:`stage` writes the temp and returns it unrenamed, so that a pair of files (a model's config and
its weights) can be written in full before either replaces its old version; ``commit`` renames,
``discard`` removes. The temp's name carries the writer's pid (``.<name>.<pid>.<random>.tmp``, the name
cut to 200 bytes so that the temp's stays a valid name): a save killed before its rename (kill -9,
SIGTERM, power loss) leaves its temp behind, and the next save of the same target removes the temps of
writers that no longer run, never those of a live concurrent writer.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile

_WRITING: set[str] = set()  # temp files this process is writing now (see _remove_stale_temps)


class Staged:
    """A target's new content, complete and fsynced in a temp file beside it (:func:`stage`)."""

    def __init__(self, temp: str, target: str):
        self.temp, self.target = temp, target

    def commit(self) -> None:
        """Rename the temp over the target (the temp is removed if that fails)."""
        try:
            os.chmod(self.temp, _mode_for(self.target))
            os.replace(self.temp, self.target)
        except BaseException:
            self.discard()
            raise
        finally:
            _WRITING.discard(self.temp)

    def discard(self) -> None:
        """Remove the temp: the target stays as it was."""
        _WRITING.discard(self.temp)
        try:
            os.unlink(self.temp)
        except OSError:
            pass


def stage(path, write) -> Staged:
    """Write a new version of ``path`` in full, without replacing it yet: ``write(f)`` (``f`` a binary
    file) or ``write`` the bytes themselves. ``path`` is checked as a save would check it (a directory,
    a missing directory, a read-only file: an error naming ``path``); a symlink's target is what the
    commit replaces."""
    target = _target(path)
    directory, base = os.path.split(target)
    _remove_stale_temps(directory, base)
    try:
        tmp = tempfile.NamedTemporaryFile(delete=False, dir=directory, prefix=f".{_temp_base(base)}.{os.getpid()}.",
                                          suffix=".tmp")
    except OSError as e:  # the error would name the hidden temp, not the file the user asked for
        raise OSError(e.errno, f"cannot save {os.fspath(path)!r}: {e.strerror} (creating a temp file in "
                               f"{directory!r})", os.fspath(path)) from None
    _WRITING.add(tmp.name)
    staged = Staged(tmp.name, target)
    try:
        with tmp:
            if isinstance(write, (bytes, bytearray)):
                tmp.write(write)
            else:
                write(tmp)
            tmp.flush()
            os.fsync(tmp.fileno())
    except BaseException:
        staged.discard()
        raise
    return staged


def write_atomic(path, data: bytes) -> None:
    """Replace ``path`` by a file holding ``data`` (:func:`stage`, then commit)."""
    stage(path, data).commit()


def _target(path) -> str:
    """The file a save really writes, checked the way ``open(path, "wb")`` would check it, with errors
    that name the path the user gave. A symlink is followed (its target is rewritten, the link stays a
    link); the rename would otherwise replace the link itself. A read-only file is refused although
    the rename could replace it (it needs only the directory's permission), and also for root, who
    may write anything: the mode bits say the file is not meant to change."""
    given = os.fspath(path)
    if isinstance(given, bytes):
        given = os.fsdecode(given)
    if given == "":
        raise FileNotFoundError(errno.ENOENT, "cannot save to an empty path", given)
    # realpath resolves '.', '..' and a trailing separator by the text alone, where the OS walks the path:
    # 'ckpt.pt/.' would overwrite the file ckpt.pt and 'ckpt.pt/../x' save beside it, which open refuses
    head, tail = os.path.split(given)
    if tail in ("", ".", ".."):
        raise IsADirectoryError(errno.EISDIR, "cannot save: the path ends in a separator, '.' or '..', so it "
                                              "names a directory, not a file", given)
    if head and not os.path.isdir(head):
        what = "is not a directory" if os.path.exists(head) else "does not exist (or a part of it is a file)"
        raise FileNotFoundError(errno.ENOENT, f"cannot save: the directory {head!r} {what}", given)
    target = os.path.realpath(given)
    directory = os.path.dirname(target)
    if os.path.isdir(target):
        raise IsADirectoryError(errno.EISDIR, "cannot save: the path is a directory", given)
    if not os.path.isdir(directory):
        what = "is not a directory" if os.path.exists(directory) else "does not exist"
        raise FileNotFoundError(errno.ENOENT, f"cannot save: the directory {directory!r} {what}", given)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return target
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "cannot save: the path exists and is not a regular file", given)
    if not st.st_mode & 0o222 or not os.access(target, os.W_OK):
        raise PermissionError(errno.EACCES, f"cannot save: the file is read-only (mode "
                                            f"{stat.S_IMODE(st.st_mode):04o})", given)
    return target


def _remove_stale_temps(directory: str, base: str) -> None:
    """Delete ``.<base>.<pid>.*.tmp`` files of writers that are dead: temps of saves of this target that
    were killed before their rename. A temp whose pid runs (a concurrent save, or an unrelated process
    that reuses the pid) is kept: removing a live writer's temp would fail its rename. Temps of other
    names, and names not in this form, are never touched."""
    prefix = f".{_temp_base(base)}."
    try:
        names = os.listdir(directory)
    except OSError:
        return  # the temp's creation reports the directory's problem, naming the user's path
    for name in names:
        if not (name.startswith(prefix) and name.endswith(".tmp")):
            continue
        # exactly <pid>.<random> (tempfile's random part has no dot): a temp of "ckpt.5000" is
        # ".ckpt.5000.<pid>.<random>.tmp", which must not read as one of "ckpt" by a dead pid 5000
        pid, dot, rest = name[len(prefix):-len(".tmp")].partition(".")
        if not (pid.isdigit() and dot and "." not in rest) or _alive(int(pid), os.path.join(directory, name)):
            continue
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:
            pass  # another save removed it first, or the directory forbids it: the save goes on


def _temp_base(base: str) -> str:
    """``base`` as a temp's name begins with it: its first 200 bytes, as the temp adds up to 30 to it and
    file systems allow names of 255 bytes (a target named with 230 of them would otherwise fail to save)."""
    raw = os.fsencode(base)
    return base if len(raw) <= 200 else os.fsdecode(raw[:200])


def _alive(pid: int, path: str) -> bool:
    if pid == os.getpid():  # a thread of this process saving now, or an earlier process with our pid
        return path in _WRITING  # (pids repeat across container restarts)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # it exists (owned by someone else), or cannot be asked: keep its temp
    return True


def _mode_for(path: str) -> int:
    """Keep an overwritten file's permissions; a new file gets the umask default (temp files are 0600)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask

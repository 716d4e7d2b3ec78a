"""safetensors files that change under a reader, saves that were killed, and targets a save must refuse
or resolve (read-only files, symlinks, missing directories, directories, empty paths)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from luminal.core.safetensors_io import load_file, load_metadata, save_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(code: str, path) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter: a SIGBUS kills that process, not pytest."""
    prog = "import sys, shutil, numpy as np\nfrom luminal.core.safetensors_io import load_file, save_file\n" \
           f"p = {os.fspath(path)!r}\n" + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", prog], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("change", ["truncate", "cp_over"])
def test_loaded_arrays_survive_the_file_being_rewritten_in_place(tmp_path, change):
    """Before: load_file returned views of a memory map, and reading them after ``cp small big`` or a
    truncation died of SIGBUS."""
    p = tmp_path / "w.safetensors"
    save_file({"w": np.arange(1 << 20, dtype=np.float32), "b": np.ones(3, np.int32)}, p)
    small = tmp_path / "small.safetensors"
    save_file({"w": np.zeros(1, np.float32)}, small)
    rewrite = "open(p, 'r+b').truncate(8)" if change == "truncate" else f"shutil.copyfile({os.fspath(small)!r}, p)"
    r = _run(f"""
        t = load_file(p)
        {rewrite}
        assert float(t["w"].sum(dtype=np.float64)) == float(np.arange(1 << 20, dtype=np.float64).sum())
        assert t["b"].tolist() == [1, 1, 1]
        print("ok")
    """, p)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])


def test_mmap_is_an_explicit_opt_in(tmp_path):
    p = tmp_path / "w.safetensors"
    save_file({"w": np.arange(10, dtype=np.float32)}, p)
    owned, mapped = load_file(p)["w"], load_file(p, mmap=True)["w"]
    assert owned.base is None or not isinstance(owned.base, np.memmap)
    assert owned.flags.writeable and not mapped.flags.writeable
    np.testing.assert_array_equal(owned, mapped)
    assert "must not change" in load_file.__doc__


def test_file_shrinking_between_header_and_data_is_a_clear_error(tmp_path, monkeypatch):
    p = tmp_path / "w.safetensors"
    save_file({"w": np.arange(100_000, dtype=np.float32)}, p)  # more than the reader's buffer
    import luminal.core.safetensors_io as sio

    real = sio._read_header

    def read_then_truncate(path, f=None):
        out = real(path, f)
        os.truncate(path, 40_000)
        return out

    monkeypatch.setattr(sio, "_read_header", read_then_truncate)
    with pytest.raises(ValueError, match=r"w\.safetensors: tensor 'w': the file ended early"):
        load_file(p)


# ------------------------------------------------------------------------------------ stale temp files
def _temps(d):
    return sorted(n for n in os.listdir(d) if n.endswith(".tmp"))


def test_save_killed_before_rename_leaves_a_temp_the_next_save_removes(tmp_path):
    p = tmp_path / "ckpt.safetensors"
    save_file({"x": np.zeros(2, np.float32)}, p)
    # a writer killed in the middle of its save (the real thing: kill -9 while it writes)
    r = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, signal, numpy as np
        import luminal.core.safetensors_io as sio
        def die(*a):
            os.kill(os.getpid(), signal.SIGKILL)
        os.replace = die
        sio.save_file({{"x": np.ones(1000, np.float32)}}, {os.fspath(p)!r})
    """)], cwd=ROOT)
    assert r.wait(timeout=120) == -signal.SIGKILL
    left = _temps(tmp_path)
    assert len(left) == 1 and left[0].startswith(".ckpt.safetensors.")
    # temps of another target, and of a writer still alive, are not this save's to remove
    other = tmp_path / f".other.safetensors.{r.pid}.abc.tmp"
    live = tmp_path / f".ckpt.safetensors.{os.getppid()}.abc.tmp"
    other.write_bytes(b"x")
    live.write_bytes(b"x")
    save_file({"x": np.full(2, 3, np.float32)}, p)
    assert _temps(tmp_path) == sorted([other.name, live.name])
    assert load_file(p)["x"].tolist() == [3.0, 3.0]


def test_own_pid_temp_from_an_earlier_process_is_stale(tmp_path):
    """pids repeat (a container's process restarts as the same pid): a temp with our pid that this
    process is not writing was left by a dead one."""
    p = tmp_path / "c.safetensors"
    (tmp_path / f".c.safetensors.{os.getpid()}.zz.tmp").write_bytes(b"x")
    save_file({"x": np.zeros(1, np.float32)}, p)
    assert _temps(tmp_path) == []


# --------------------------------------------------------------------------------------------- targets
def test_saving_over_a_read_only_file_is_refused(tmp_path):
    """root may replace a 0444 file, but ``open(p, "wb")`` refuses any other user: so does save."""
    p = tmp_path / "ro.safetensors"
    save_file({"x": np.zeros(2, np.float32)}, p)
    os.chmod(p, 0o444)
    before = p.read_bytes()
    with pytest.raises(PermissionError, match=r"read-only.*ro\.safetensors"):
        save_file({"x": np.ones(2, np.float32)}, p)
    assert p.read_bytes() == before and _temps(tmp_path) == []


def test_saving_through_a_symlink_writes_its_target(tmp_path):
    real = tmp_path / "real.safetensors"
    save_file({"x": np.zeros(2, np.float32)}, real)
    link = tmp_path / "link.safetensors"
    link.symlink_to(real.name)
    save_file({"x": np.ones(2, np.float32)}, link, metadata={"v": "2"})
    assert link.is_symlink() and os.readlink(link) == real.name
    assert load_metadata(real) == {"v": "2"}


@pytest.mark.parametrize("where,exc,match", [
    ("missing_dir", FileNotFoundError, r"does not exist.*'[^']*nope/x\.safetensors'"),
    ("directory", IsADirectoryError, r"is a directory.*'[^']*sub'"),
    ("empty", FileNotFoundError, r"empty path.*''"),
])
def test_bad_targets_name_the_users_path_not_the_temp(tmp_path, where, exc, match):
    (tmp_path / "sub").mkdir()
    path = {"missing_dir": tmp_path / "nope" / "x.safetensors", "directory": tmp_path / "sub", "empty": ""}[where]
    with pytest.raises(exc, match=match) as e:
        save_file({"x": np.zeros(2, np.float32)}, path)
    assert ".tmp" not in str(e.value)


# ---------------------------------------------------------------------------------- nested JSON header
def test_deeply_nested_header_is_a_value_error_naming_the_file(tmp_path):
    p = tmp_path / "deep.safetensors"
    head = ("[" * 100_000 + "]" * 100_000).encode()
    p.write_bytes(len(head).to_bytes(8, "little") + head)
    with pytest.raises(ValueError, match=r"deep\.safetensors: .*nested too deeply"):
        load_file(p)

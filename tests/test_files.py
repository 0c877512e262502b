"""nmt.files: atomic writes give files the permissions a plain `open` would, and the rename
itself is flushed to disk; an export replaces only an earlier export, and a kill at any
moment leaves one whole."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import ROOT, run_module

from nmt.errors import UsageError
from nmt.files import EXPORT_MARKER, atomic_path, staged_directory, write_bytes, write_lines


@contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o027, 0o640)], ids=oct)
def test_a_new_file_gets_the_mode_the_umask_gives(tmp_path, mask, expected):
    with umask(mask):
        write_bytes(tmp_path / "model.pt", b"new")
        write_lines(tmp_path / "report" / "bleu.txt", ["12.3"])  # opened again by the writer
    assert mode(tmp_path / "model.pt") == expected
    assert mode(tmp_path / "report" / "bleu.txt") == expected


@pytest.mark.parametrize("kept", [0o600, 0o640, 0o444], ids=oct)
def test_a_replaced_file_keeps_its_mode(tmp_path, kept):
    target = tmp_path / "model.pt"
    target.write_bytes(b"old")
    target.chmod(kept)
    with umask(0o022):
        write_bytes(target, b"new")
    assert target.read_bytes() == b"new" and mode(target) == kept


def test_the_folder_is_flushed_after_the_rename(tmp_path, monkeypatch):
    events: list[tuple] = []
    replace, fsync = os.replace, os.fsync

    def spy_replace(src, dst):
        replace(src, dst)
        events.append(("replace", Path(dst).name))

    def spy_fsync(fd: int) -> None:
        info = os.fstat(fd)
        events.append(("fsync dir", info.st_ino) if stat.S_ISDIR(info.st_mode) else ("fsync",))
        fsync(fd)

    monkeypatch.setattr(os, "replace", spy_replace)
    monkeypatch.setattr(os, "fsync", spy_fsync)
    write_bytes(tmp_path / "model.pt", b"new")
    assert events == [("fsync",), ("replace", "model.pt"), ("fsync dir", tmp_path.stat().st_ino)]


def test_a_folder_that_cannot_be_flushed_is_skipped_quietly(tmp_path, monkeypatch):
    fsync = os.fsync

    def no_dirs(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "Invalid argument")
        fsync(fd)

    monkeypatch.setattr(os, "fsync", no_dirs)
    write_bytes(tmp_path / "model.pt", b"new")
    assert (tmp_path / "model.pt").read_bytes() == b"new"


def test_a_failing_block_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "model.pt"
    write_bytes(target, b"old")
    target.chmod(0o640)
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_bytes(b"half of the ne")
        raise RuntimeError("the writer failed")
    assert target.read_bytes() == b"old" and mode(target) == 0o640
    assert os.listdir(tmp_path) == ["model.pt"]


def export_of(out: Path, text: str, overwrite: bool = False) -> None:
    """A stand-in export: one file holding `text`."""
    with staged_directory(out, overwrite) as built:
        (built / "model.bin").write_text(text)


def test_overwrite_refuses_a_folder_that_is_no_export(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(UsageError, match=f"out={mine} is not an export"):
        export_of(mine, "new", overwrite=True)
    assert os.listdir(mine) == ["notes.txt"] and (mine / "notes.txt").read_text() == "keep me"
    assert os.listdir(tmp_path) == ["mine"]  # no staging folder either


def test_overwrite_replaces_an_earlier_export(tmp_path):
    out = tmp_path / "ct2"
    export_of(out, "old")
    with pytest.raises(UsageError, match="exists: choose a new directory or add overwrite"):
        export_of(out, "new")
    export_of(out, "new", overwrite=True)
    assert sorted(os.listdir(out)) == [EXPORT_MARKER, "model.bin"]
    assert (out / "model.bin").read_text() == "new" and os.listdir(tmp_path) == ["ct2"]


def test_a_failing_build_leaves_the_earlier_export(tmp_path):
    out = tmp_path / "ct2"
    export_of(out, "old")
    with pytest.raises(RuntimeError), staged_directory(out, overwrite=True) as built:
        (built / "model.bin").write_text("half")
        raise RuntimeError("the converter failed")
    assert (out / "model.bin").read_text() == "old" and os.listdir(tmp_path) == ["ct2"]


def test_a_failing_rename_puts_the_earlier_export_back(tmp_path, monkeypatch):
    out = tmp_path / "ct2"
    export_of(out, "old")
    rename = Path.rename

    def refuse_the_new(self, target):
        if self.name == "built":
            raise OSError(errno.EIO, "Input/output error")
        return rename(self, target)

    monkeypatch.setattr(Path, "rename", refuse_the_new)
    with pytest.raises(OSError, match="Input/output"):
        export_of(out, "new", overwrite=True)
    assert (out / "model.bin").read_text() == "old" and os.listdir(tmp_path) == ["ct2"]


KILLED_BETWEEN_RENAMES = """
import os, sys
from pathlib import Path
from nmt.files import staged_directory
rename = Path.rename
def rename_then_die(self, target):
    rename(self, target)
    if Path(target).name == "previous":
        os._exit(9)  # SIGKILL's effect: no finally, no clean-up
Path.rename = rename_then_die
with staged_directory(sys.argv[1], overwrite=True) as built:
    (built / "model.bin").write_text("new")
"""


def test_a_kill_between_the_renames_leaves_both_exports_whole(tmp_path):
    out = tmp_path / "ct2"
    export_of(out, "old")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = [sys.executable, "-c", KILLED_BETWEEN_RENAMES, str(out)]
    assert subprocess.run(code, env=env, timeout=60).returncode == 9
    (staging,) = tmp_path.glob(".ct2.*.tmp")
    assert not out.exists() and sorted(os.listdir(staging)) == ["built", "previous"]
    for name, text in (("previous", "old"), ("built", "new")):  # either can be renamed to out
        assert (staging / name / "model.bin").read_text() == text
        assert (staging / name / EXPORT_MARKER).is_file()


def test_the_export_command_refuses_to_overwrite_a_folder_of_its_own(tmp_path):
    """`out=.` with overwrite=true: one line, exit code 2, the folder untouched."""
    (tmp_path / "model.pt").write_bytes(b"refused before it is read")
    (tmp_path / "notes.txt").write_text("keep me")
    done = run_module("nmt.export", ["ckpt=model.pt", "out=.", "overwrite=true"], tmp_path)
    err = done.stderr.decode().splitlines()
    assert done.returncode == 2 and len(err) == 1, err
    assert err[0].startswith("nmt.export: error: out=. is not an export")
    assert sorted(os.listdir(tmp_path)) == ["model.pt", "notes.txt"]

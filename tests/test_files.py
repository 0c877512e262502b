"""nmt.files: atomic writes give files the permissions a plain `open` would, and the rename
itself is flushed to disk."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from nmt.files import atomic_path, write_bytes, write_lines


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

"""Files written atomically, and the line-aligned text files of corpora and reports.

Every file `nmt` writes (checkpoints, tokenizers, caches, reports) goes to a temporary name in
the same folder, is flushed to disk and is then renamed over the target, and the folder is
flushed too: a kill or a crash at any moment leaves either the old file or the new one, never
half of one. A new file gets the mode the umask gives (0644 under 0022, as `open` would), a
replaced one keeps its own. Text is UTF-8 with "\\n" the only line break, so a line holding
"\\r" or "\\u2028" stays one line; CRLF files read as LF.

No torch, datasets or Lightning here: `nmt.report` imports this and starts fast.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

log = logging.getLogger(__name__)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; once the block has written it, rename it onto
    `path`. If the block fails, the temporary file is removed and `path` is untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = new_file_beside(path)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            with suppress(FileNotFoundError):  # a rewritten file keeps its mode
                os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    finally:
        tmp.unlink(missing_ok=True)


def new_file_beside(path: Path) -> Path:
    """A new empty file with an unused name beside `path`. The kernel gives it 0666 less the
    umask, as for any new file (mkstemp's 0600 would hide the model from other users), and
    reads the umask itself: changing it to look would race other threads."""
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return tmp
        except FileExistsError:
            continue


def fsync_dir(folder: Path) -> None:
    """Flush a folder's entries, so that a rename in it survives a crash; skipped where the
    platform cannot open or flush a folder (Windows, some network file systems)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


EXPORT_MARKER = ".nmt-export"  # in every folder staged_directory builds; overwrite needs it


def check_replaceable(out: str | Path, overwrite: bool) -> None:
    """Refuse, in one line (a UsageError), to build at an `out` that exists, unless
    `overwrite` is set and `out` is an earlier export (it holds EXPORT_MARKER)."""
    from nmt.errors import UsageError

    out = Path(out)
    if not os.path.lexists(out):
        return
    if not overwrite:
        raise UsageError(f"out={out} exists: choose a new directory or add overwrite=true")
    if not (out / EXPORT_MARKER).is_file():
        raise UsageError(
            f"out={out} is not an export (no {EXPORT_MARKER}): overwrite=true replaces only "
            "a directory nmt.export wrote; choose a new directory"
        )


@contextmanager
def staged_directory(out: str | Path, overwrite: bool) -> Iterator[Path]:
    """Yield a new empty folder beside `out`; once the block has filled it, it is marked as an
    export (EXPORT_MARKER) and becomes `out`. An existing `out` is replaced only with
    `overwrite`, and only if it is an earlier export (`check_replaceable`). If the block fails,
    `out` is as it was and the staging folder is removed: an export appears whole or not at all.

    Replacing takes two renames inside one staging folder `.<out name>.<random>.tmp` beside
    `out`: the old export to `previous` in it, then the new one (`built`) to `out`; only then
    is the staging folder, and the old export with it, removed. A kill between the two renames
    leaves no `out` but both exports whole in the staging folder: to recover, rename its
    `previous` (the old export) or `built` (the new one) to `out`.
    """
    check_replaceable(out, overwrite)
    out = Path(os.path.abspath(out))  # out=. has a name and a parent
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    built, previous = staging / "built", staging / "previous"
    try:
        built.mkdir()
        yield built
        write_text(built / EXPORT_MARKER, "Written by python -m nmt.export.\n")
        check_replaceable(out, overwrite)  # again: the block may have taken minutes
        if os.path.lexists(out):
            out.rename(previous)
        try:
            built.rename(out)
        except BaseException:
            if os.path.lexists(previous):
                previous.rename(out)
            raise
        fsync_dir(out.parent)
    finally:
        if os.path.lexists(out) or not os.path.lexists(previous):
            shutil.rmtree(staging, ignore_errors=True)  # else `previous` is the only export left


def write_bytes(path: str | Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text(path: str | Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_lines(path: str | Path, lines: Iterable[str]) -> Path:
    """One line per item, each followed by "\\n"; returns the path."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(line + "\n" for line in lines)
    return Path(path)


def read_lines(path: str | Path) -> Iterator[str]:
    """The lines of a UTF-8 file, as `decode_lines` gives them."""
    with open(path, "rb") as f:
        yield from decode_lines(f, str(path))


def read_chunks(stream: Iterable[bytes], size: int, name: str) -> Iterator[list[str]]:
    """The lines of a binary stream as text (see `decode_lines`), `size` at a time."""
    chunk: list[str] = []
    for line in decode_lines(stream, name):
        chunk.append(line)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def paired_chunks(
    chunks: Iterator[list[str]], others: Iterator[list[str]], name: str, others_name: str
) -> Iterator[tuple[list[str], list[str]]]:
    """Two files' chunks (`read_chunks`, one size), line for line; a UsageError (one line)
    where `others` has fewer or more lines than `chunks` ("tgt=b.de has fewer lines than
    src=a.en (from line 4)")."""
    from nmt.errors import UsageError

    total = 0
    for lines in chunks:
        paired = next(others, [])
        if len(paired) < len(lines):
            where = f"from line {total + len(paired) + 1}"
            raise UsageError(f"{others_name} has fewer lines than {name} ({where})")
        if len(paired) > len(lines):
            raise UsageError(f"{others_name} has more lines than {name} ({total + len(lines)})")
        yield lines, paired
        total += len(lines)
    if next(others, None):
        raise UsageError(f"{others_name} has more lines than {name} ({total})")


def decode_lines(stream: Iterable[bytes], name: str) -> Iterator[str]:
    """Binary lines as text. Only "\\n" ends a line, and one final "\\r" is dropped (CRLF
    files), and a UTF-8 byte-order mark at the start; bytes that are not UTF-8 become U+FFFD,
    with a warning naming the first such line and, at the end, how many there were."""
    bad, first_bad = 0, 0
    for number, raw in enumerate(stream, start=1):
        raw = raw.removesuffix(b"\n").removesuffix(b"\r")
        if number == 1:  # a byte-order mark starts the file, not its first line
            raw = raw.removeprefix(b"\xef\xbb\xbf")
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            if not bad:
                first_bad = number
                log.warning("%s line %d is not UTF-8: undecodable bytes replaced", name, number)
            bad += 1
            yield raw.decode("utf-8", errors="replace")
    if bad > 1:
        log.warning("%s: %d lines (from line %d) had undecodable bytes", name, bad, first_bad)

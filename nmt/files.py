"""Files written atomically, and the line-aligned text files of corpora and reports.

Every file `nmt` writes (checkpoints, tokenizers, caches, reports) goes to a temporary name in
the same folder, is flushed to disk and is then renamed over the target: a kill at any moment
leaves either the old file or the new one, never half of one. Text is UTF-8 with "\\n" the
only line break, so a line holding "\\r" or "\\u2028" stays one line; CRLF files read as LF.

No torch, datasets or Lightning here: `nmt.report` imports this and starts fast.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; once the block has written it, rename it onto
    `path`. If the block fails, the temporary file is removed and `path` is untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


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


def decode_lines(stream: Iterable[bytes], name: str) -> Iterator[str]:
    """Binary lines as text. Only "\\n" ends a line, and one final "\\r" is dropped (CRLF
    files); bytes that are not UTF-8 become U+FFFD, with a warning naming the first such line
    and, at the end, how many there were."""
    bad, first_bad = 0, 0
    for number, raw in enumerate(stream, start=1):
        raw = raw.removesuffix(b"\n").removesuffix(b"\r")
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

"""Text files (.txt, .md): one segment per line that holds text, each line's break kept.

A line ends at "\\n" alone, as for `translate`'s lines (nmt.files.decode_lines), so a file
splits into the same lines through every door; a "\\r" before it is kept with the break.
"""

from __future__ import annotations

from nmt.documents.parsed import Parsed
from nmt.errors import JobError
from nmt.translation.translated import Translation


def decode_utf8(data: bytes, name: str) -> str:
    """A text or HTML file's text: UTF-8 (a byte-order mark dropped), else JobError 422."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise JobError(422, f"{name or 'the file'} is not UTF-8 (byte {error.start})") from None


def body(line: str) -> str:
    """A line without its break ("\\n" or "\\r\\n")."""
    return line.removesuffix("\n").removesuffix("\r")


def read_file(data: bytes, name: str, limits) -> Parsed:
    lines = decode_utf8(data, name).split("\n")
    lines = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    segments = [b for b in map(body, lines) if b.strip()]
    return Parsed(segments, lambda found: rendered(lines, found))


def rendered(lines: list[str], found: list[Translation]) -> bytes:
    """The file's lines, each translated but a blank one, each keeping its line break."""
    answers = iter(found)
    out = []
    for line in lines:
        kept = body(line)
        out.append((next(answers).text if kept.strip() else kept) + line[len(kept) :])
    return "".join(out).encode()

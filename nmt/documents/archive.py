"""Zip-based documents (Word, EPUB, ...) bounded before they are unzipped, and their XML
parts before any parser builds a tree of them.

`check_archive` reads the central directory alone; `count_in_parts` inflates the XML parts
a chunk at a time (no tree, no whole part in memory), counting what bounds the reader and
refusing a part that declares an entity (`<!ENTITY`: the billion laughs and XXE both need
one, and no office file or book has one), whatever the parser behind the format's library.
"""

from __future__ import annotations

import io
import zipfile
import zlib

from nmt.errors import JobError

# parts larger than this are held to max_zip_ratio (XML deflates ~10x): smaller ones can hold
# at most MAX_PARTS x this in all
RATIO_FROM = 64 << 10
MAX_PARTS = 1000  # parts in one archive (a Word file of a long book has a few dozen)
# XML elements in all its parts, counted before a reader (lxml) builds a tree of each: a
# tree costs ~100 bytes an element (two 1 MiB parts of <a/> took 64 MB)
MAX_ELEMENTS = 1_000_000
ENTITY = b"<!ENTITY"


class ArchiveError(ValueError):
    """A file that is no archive of its kind, or one over a limit (one line)."""


def check_archive(
    data: bytes, max_inflated_bytes: int, max_ratio: float, kind: str = "a .docx file"
) -> None:
    """Refuse (ArchiveError, one line) a zip that is none, or one that would inflate past
    `max_inflated_bytes` in all, or any part over RATIO_FROM bytes past `max_ratio` times its
    compressed size (a zip bomb; Apache POI's ZipSecureFile checks the same), before any of
    it is unzipped."""
    # The sizes are the central directory's, and they bound what a reader can read:
    # zipfile reads a part through ZipExtFile, whose _read1 (CPython 3.11 Lib/zipfile.py)
    # inflates deflate at most max_length at a time and keeps `data[:self._left]`, _left
    # starting at the directory's file_size; a part that inflates further is cut there and
    # fails its CRC check. Other methods inflate a whole read at once: refused below.
    try:
        parts = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except (zipfile.BadZipFile, ValueError, EOFError) as error:
        raise ArchiveError(f"not {kind}: not a zip archive ({error})") from None
    if len(parts) > MAX_PARTS:
        raise ArchiveError(f"not {kind}: {len(parts)} parts, over {MAX_PARTS}")
    total = 0
    for part in parts:
        if part.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            # (Word and EPUB writers write stored and deflated parts alone)
            raise ArchiveError(f"not {kind}: {part.filename!r} is not stored or deflated")
        total += part.file_size
        if total > max_inflated_bytes:
            raise ArchiveError(
                f"the file inflates past max_inflated_bytes={max_inflated_bytes} "
                f"(at {part.filename!r})"
            )
        ratio = part.file_size / max(part.compress_size, 1)
        if part.file_size > RATIO_FROM and ratio > max_ratio:
            raise ArchiveError(
                f"{part.filename!r} inflates {ratio:.0f} times: the limit is "
                f"max_zip_ratio={max_ratio:g}"
            )


def count_in_parts(
    data: bytes, tags: tuple[bytes, ...], most: int, kind: str, parts=(".xml", ".rels")
) -> int:
    """How often `tags` occur in a checked archive's XML parts (names ending in `parts`),
    counted as they inflate (a part at a time, a chunk at a time: no tree, no whole part in
    memory), stopping once past `most`: what bounds the format's reader, counted before it
    reads. ArchiveError past MAX_ELEMENTS elements (every `<`) in all the parts, or for a
    part that declares an entity."""
    found, elements = 0, 0
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for part in archive.infolist():
            if not part.filename.lower().endswith(parts):
                continue
            with archive.open(part) as xml:
                carry = b""
                while found <= most and (chunk := xml.read(1 << 20)):
                    text = carry + chunk  # a tag cut by the chunk's end is counted next
                    found += sum(text.count(t) - carry.count(t) for t in tags)
                    elements += chunk.count(b"<")
                    if elements > MAX_ELEMENTS:
                        raise ArchiveError(
                            f"over {MAX_ELEMENTS:,} XML elements (at {part.filename!r}): "
                            f"more than {kind} holds"
                        )
                    if ENTITY in text:
                        raise ArchiveError(
                            f"{part.filename!r} declares an XML entity, which {kind} never needs"
                        )
                    carry = text[-len(ENTITY) :]
    return found


def checked(
    data: bytes,
    name: str,
    limits,
    kind: str,
    tags: tuple[bytes, ...],
    counted: tuple[str, str],
    parts=(".xml", ".rels"),
) -> None:
    """A zip-based file bounded before its reader sees it, as every such format is: its
    directory (`check_archive`, as `kind`), then `tags` in its XML `parts` (at most
    max_file_tags; `counted`: what they are and what holds them, for the messages, e.g.
    ("runs", "a Word file")). JobError 413 over a limit, 422 for a file of no such kind."""
    where = f"{name}: " if name else ""
    try:
        check_archive(data, limits.max_inflated_bytes, limits.max_zip_ratio, kind)
    except ArchiveError as error:  # a zip bomb, or no zip at all
        raise JobError(413 if "max_" in str(error) else 422, where + str(error)) from None
    noun, holder = counted
    try:
        found = count_in_parts(data, tags, limits.max_file_tags, holder, parts)
    except ArchiveError as error:  # too many elements, or an entity declared
        raise JobError(413 if "elements" in str(error) else 422, where + str(error)) from None
    except (zipfile.BadZipFile, zlib.error, RuntimeError, EOFError, OSError) as error:
        # a bad CRC, an encrypted or truncated part
        raise JobError(422, f"{where}not {kind}: {error}") from None
    if found > limits.max_file_tags:
        raise JobError(
            413, f"{where}over {found} {noun}: the limit is max_file_tags={limits.max_file_tags}"
        )


def rewritten(archive: zipfile.ZipFile, translated: dict[str, bytes]) -> bytes:
    """The archive again, part by part in its order, each stored or deflated as it was
    (`mimetype` first and stored, as EPUB and OpenDocument want), `translated` parts
    replaced and every other byte for byte."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as written:
        for part in archive.infolist():
            data = translated.get(part.filename)
            written.writestr(part, archive.read(part) if data is None else data)
    return out.getvalue()

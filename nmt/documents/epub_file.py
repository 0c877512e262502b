"""format=epub: a book's chapters translated as HTML, every other part of it kept.

An EPUB is a zip of XHTML documents and the package that lists them. The package is read
with defusedxml (`META-INF/container.xml` names the package document, whose manifest names
each XHTML document: chapters, the table of contents); each document is translated as an
HTML page is (nmt.documents.markup: tags, attributes, entities and whitespace as written),
and the book is written again part by part, in its order, each part stored or deflated as
it was (`mimetype` first and stored, as EPUB wants), every part but the documents byte for
byte. ebooklib was measured on books it wrote itself and dropped: it re-templates each
chapter (its stylesheet links went) and could not write a book it had read back.

Bounded before parsing: the archive (nmt.documents.archive: inflated size, ratio, parts),
then the `<`s of its XML parts (max_file_tags), and no part may declare an entity.
"""

from __future__ import annotations

import io
import posixpath
import zipfile
import zlib

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from nmt.documents.archive import ArchiveError, checked, rewritten
from nmt.documents.markup import fragment_file
from nmt.documents.parsed import Parsed
from nmt.documents.text_file import decode_utf8
from nmt.errors import JobError

BOOK = "an .epub file"
CONTAINER = "META-INF/container.xml"
DOCUMENT_TYPES = ("application/xhtml+xml", "text/html")
XML_PARTS = (".xml", ".opf", ".ncx", ".xhtml", ".html", ".svg")


def documents(archive: zipfile.ZipFile) -> list[str]:
    """The names of the book's XHTML documents, in its manifest's order."""
    names = set(archive.namelist())
    if CONTAINER not in names:
        raise ArchiveError(f"not {BOOK}: no {CONTAINER}")
    container = fromstring(archive.read(CONTAINER))
    root = next((e.get("full-path") for e in container.iter() if e.tag.endswith("rootfile")), None)
    if root not in names:
        raise ArchiveError(f"not {BOOK}: {CONTAINER} names no package document in the book")
    package = fromstring(archive.read(root))
    folder = posixpath.dirname(root)
    found = []
    for item in package.iter():
        if item.tag.endswith("}item") and item.get("media-type") in DOCUMENT_TYPES:
            name = posixpath.normpath(posixpath.join(folder, item.get("href", "")))
            if name in names:
                found.append(name)
    return found


def read_file(data: bytes, name: str, limits) -> Parsed:
    checked(data, name, limits, BOOK, (b"<",), ("tags", "a book"), XML_PARTS)
    where = f"{name}: " if name else ""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        names = documents(archive)
        pages = [decode_utf8(archive.read(n), f"{where}{n}") for n in names]
    except ArchiveError as error:  # no container, or none that names a package
        raise JobError(422, where + str(error)) from None
    except (DefusedXmlException, SyntaxError) as error:  # ParseError is a SyntaxError
        raise JobError(422, f"{where}not {BOOK}: {type(error).__name__} in its package") from None
    except (zipfile.BadZipFile, zlib.error, RuntimeError, EOFError, OSError) as error:
        raise JobError(422, f"{where}not {BOOK}: {error}") from None

    def write(translated: list[str]) -> bytes:
        return rewritten(archive, {n: t.encode() for n, t in zip(names, translated, strict=True)})

    return fragment_file(pages, name, limits.max_file_tags, write)

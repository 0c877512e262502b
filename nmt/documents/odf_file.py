"""format=odt and odp: OpenDocument text and presentations, every paragraph translated.

An OpenDocument file is a zip whose `content.xml` holds the body (a text's paragraphs,
headings, lists, tables; a presentation's slides, their text boxes and speaker notes) and
whose `styles.xml` holds the master pages (headers and footers). Both are read with lxml
(nmt.documents.xml_inline: no DTD, no entity, nothing fetched) after the archive is bounded
(nmt.documents.archive), and every `text:p` and `text:h` with words and no paragraph inside
it is one segment: its spans (`text:span`, and a link's `text:a`, whose target stays) carry
their style onto the target words aligned to theirs, as a Word file's runs do; spaces,
tabs, line breaks, fields and frames anchored in the paragraph are points kept where the
words beside them went. The file is written again part by part (nmt.documents.archive
`rewritten`), `mimetype` first and stored, every part but those two byte for byte.
A paragraph that holds another one (a frame with a caption, a footnote) is not translated
itself; the paragraphs inside it are.
"""

from __future__ import annotations

import io
import zipfile
import zlib

from lxml import etree

from nmt.documents.archive import checked, rewritten
from nmt.documents.markup import fragment_file
from nmt.documents.parsed import Parsed
from nmt.documents.xml_inline import PARSER, fragment, refill
from nmt.errors import JobError

TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
PARTS = ("content.xml", "styles.xml")
SPANS = {"span", "a"}
PARAGRAPHS = (f"{{{TEXT}}}p", f"{{{TEXT}}}h")


def paragraphs(root: etree._Element) -> list[etree._Element]:
    """The paragraphs and headings with words in them and no paragraph inside."""
    return [
        p
        for p in root.iter(*PARAGRAPHS)
        if "".join(p.itertext()).strip()
        and next(p.iter(*PARAGRAPHS), None) is p
        and not any(True for _ in p.iterdescendants(*PARAGRAPHS))
    ]


def reader(kind: str, mimetype: str):
    """read_file for the OpenDocument kind ("an .odt file") whose mimetype part is `mimetype`."""

    def read_file(data: bytes, name: str, limits) -> Parsed:
        checked(data, name, limits, kind, (b"<",), ("elements", "a document"), (".xml",))
        where = f"{name}: " if name else ""
        try:
            archive = zipfile.ZipFile(io.BytesIO(data))
            names = set(archive.namelist())
            if "mimetype" not in names or archive.read("mimetype").strip() != mimetype.encode():
                raise JobError(422, f"{where}not {kind}: its mimetype is not {mimetype}")
            trees = {p: etree.fromstring(archive.read(p), PARSER) for p in PARTS if p in names}
        except etree.XMLSyntaxError as error:
            raise JobError(422, f"{where}not {kind}: {error}") from None
        except (zipfile.BadZipFile, zlib.error, RuntimeError, EOFError, OSError) as error:
            raise JobError(422, f"{where}not {kind}: {error}") from None
        found = [(part, p) for part, root in trees.items() for p in paragraphs(root)]

        def write(pages: list[str]) -> bytes:
            for (_, paragraph), page in zip(found, pages, strict=True):
                refill(paragraph, page)
            parts = {
                part: etree.tostring(root, xml_declaration=True, encoding="UTF-8")
                for part, root in trees.items()
            }
            return rewritten(archive, parts)

        fragments = [fragment(p, SPANS) for _, p in found]
        return fragment_file(fragments, name, limits.max_file_tags, write)

    return read_file


read_text = reader("an .odt file", "application/vnd.oasis.opendocument.text")
read_presentation = reader("an .odp file", "application/vnd.oasis.opendocument.presentation")

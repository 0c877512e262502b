"""format=odt and odp: OpenDocument text and presentations, every paragraph translated.

An OpenDocument file is a zip whose `content.xml` holds the body (a text's paragraphs,
headings, lists, tables; a presentation's slides, their text boxes and speaker notes) and
whose `styles.xml` holds the master pages (headers and footers). Both are read with lxml
(nmt.documents.xml_inline: no DTD, no entity, nothing fetched) after the archive is bounded
(nmt.documents.archive), and every `text:p` and `text:h` with words of its own is one
segment: its spans (`text:span`, and a link's `text:a`, whose target stays) carry their
style onto the target words aligned to theirs, as a Word file's runs do; spaces, tabs, line
breaks, fields, notes and frames anchored in the paragraph are points kept where the words
beside them went. A paragraph inside such a point (a footnote's, a frame's caption) is a
segment of its own, written into the point after the paragraph around it. The file is
written again part by part (nmt.documents.archive `rewritten`), `mimetype` first and
stored, every part but those two byte for byte.
"""

from __future__ import annotations

import io
import zipfile
import zlib

from lxml import etree

from nmt.documents.archive import checked, rewritten
from nmt.documents.markup import fragment_file
from nmt.documents.parsed import Parsed
from nmt.documents.xml_inline import PARSER, code_names, fragment, local, refill
from nmt.errors import JobError

TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
PARTS = ("content.xml", "styles.xml")
SPANS = {"span", "a"}
SPACING = frozenset({"tab", "line-break", "s"})  # codes that make a space (or a break)
PARAGRAPHS = (f"{{{TEXT}}}p", f"{{{TEXT}}}h")


# the attribute holding a paragraph's number while the file is translated, removed on writing
SEGMENT_MARK = "nmt-segment"


def own_words(element: etree._Element) -> str:
    """The text of a paragraph that the model reads: outside its points (nmt.documents
    xml_inline), so not a footnote's or a frame's."""
    out = [element.text or ""]
    for child in element:
        if isinstance(child.tag, str) and local(child) in SPANS:
            out.append(own_words(child))
        out.append(child.tail or "")
    return "".join(out)


def paragraphs(root: etree._Element) -> list[etree._Element]:
    """The paragraphs and headings with words of their own, in document order (a paragraph
    before those inside it), each marked with its number."""
    for taken in root.xpath(f"//*[@{SEGMENT_MARK}]"):  # a file's own would mislead the lookup
        del taken.attrib[SEGMENT_MARK]
    found = [p for p in root.iter(*PARAGRAPHS) if own_words(p).strip()]
    for number, paragraph in enumerate(found):
        paragraph.set(SEGMENT_MARK, str(number))
    return found


def refill_all(found: list[etree._Element], pages: list[str]) -> None:
    """Each paragraph refilled with its page, outer ones first: refilling one writes its
    points anew from their XML, so the marked paragraphs inside are looked up again there."""
    found = list(found)
    for number, page in enumerate(pages):
        paragraph = found[number]
        refill(paragraph, page)
        del paragraph.attrib[SEGMENT_MARK]
        for inner in paragraph.iterdescendants(*PARAGRAPHS):
            if inner.get(SEGMENT_MARK) is not None:
                found[int(inner.get(SEGMENT_MARK))] = inner


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
        found = {part: paragraphs(root) for part, root in trees.items()}

        def write(pages: list[str]) -> bytes:
            at = 0
            for paragraphs_of_part in found.values():
                refill_all(paragraphs_of_part, pages[at : at + len(paragraphs_of_part)])
                at += len(paragraphs_of_part)
            parts = {
                part: etree.tostring(root, xml_declaration=True, encoding="UTF-8")
                for part, root in trees.items()
            }
            return rewritten(archive, parts)

        every = [p for part in found.values() for p in part]
        fragments = [fragment(p, SPANS, SPACING) for p in every]
        codes = code_names(every, SPANS)
        return fragment_file(fragments, name, limits.max_file_tags, write, codes)

    return read_file


read_text = reader("an .odt file", "application/vnd.oasis.opendocument.text")
read_presentation = reader("an .odp file", "application/vnd.oasis.opendocument.presentation")

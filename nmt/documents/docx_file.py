"""format=docx: a Word document's text translated, each run's formatting kept.

Read and written with python-docx. Every paragraph (of the body, of table cells however
nested, of text boxes, of headers and footers) is turned into an HTML fragment: the runs of
the paragraph's own formatting (the one most of its characters have, nmt.documents.runs)
plain text, each other text run a `<span>`, each line break in a run (Shift+Enter) a `<br>`
(which bounds segments, as in HTML), each hyperlink, tracked insertion, smart tag or simple
field an `<a>` around its runs, and everything else in the paragraph (images, text boxes,
bookmarks, a run holding more than text) a point; all fragments of the document are read
together as HTML pages (nmt.documents.markup), so a run's formatting lands on the target
words aligned to its words, as an inline HTML tag does. Each paragraph is then rebuilt from
the translated fragment: a copy of its source run (formatting and all) per `<span>`, with
the span's text; text outside the spans a run of the paragraph's own formatting; a point is
put back itself, so a text box inside is translated in place.
"""

from __future__ import annotations

import copy
import html
import io
import sys

import docx
from docx.oxml.ns import qn
from docx.text.run import Run
from lxml import etree

from nmt.documents.archive import ArchiveError, checked
from nmt.documents.html_tree import Element, Text, parse
from nmt.documents.markup import fragment_file
from nmt.documents.parsed import Parsed
from nmt.documents.runs import has_words, own_run
from nmt.errors import JobError

# lastRenderedPageBreak: where Word last laid out a page break, in every file it saves (a
# hint it writes anew, dropped with the run's other parts when the run is rebuilt)
TEXT_PARTS = {qn("w:rPr"), qn("w:t"), qn("w:tab"), qn("w:br"), qn("w:lastRenderedPageBreak")}
PARAGRAPH = qn("w:p")
# runs inside these are the paragraph's text as much as runs outside them: a hyperlink, a
# tracked insertion, a smart tag, custom XML, a simple field
DOCX_INLINE = {
    qn(f"w:{name}") for name in ("hyperlink", "ins", "smartTag", "customXml", "fldSimple")
}


def text_run(element) -> bool:
    """A run of text, tabs and line breaks only (a page break or an image is a point)."""
    return element.tag == qn("w:r") and all(
        child.tag in TEXT_PARTS and child.get(qn("w:type")) in (None, "textWrapping")
        for child in element
    )


def empty_copy(element):
    """`element`'s tag and attributes, none of its children (a copy of a run or a link, not
    of all it holds: a run of n line breaks is copied once per line)."""
    return element.makeelement(element.tag, element.attrib)


def bare_copy(run):
    """A copy of `run` with its formatting alone (its rPr), none of its text."""
    element = empty_copy(run)
    properties = run.find(qn("w:rPr"))
    if properties is not None:
        element.append(copy.deepcopy(properties))
    return element


def line_break(run):
    """A run of `run`'s formatting holding one line break."""
    element = bare_copy(run)
    element.append(element.makeelement(qn("w:br"), {}))
    return element


def formatting(run) -> bytes:
    """A run's formatting, to compare runs by: its rPr as XML (b"" for none)."""
    properties = run.find(qn("w:rPr"))
    return b"" if properties is None else etree.tostring(properties)


def paragraph_run(container):
    """The text run of `container` in the formatting that covers most of its characters
    (nmt.documents.runs): its text is the paragraph's own, not a tag."""
    texts = [child for child in container if text_run(child)]
    return own_run(texts, lambda run: Run(run, None).text, formatting)


def fragment(container, nodes: list) -> str:
    """`container`'s children as HTML; `nodes[k]` is the XML element of `data-k="k"`."""
    own = paragraph_run(container)
    own_formatting = None if own is None else formatting(own)
    parts = []
    for child in container:
        if child.tag == qn("w:pPr"):
            continue
        k = len(nodes)
        nodes.append(child)
        if text_run(child):  # a line break (Shift+Enter) bounds segments, as <br> does in HTML
            plain = formatting(child) == own_formatting
            for i, line in enumerate(Run(child, None).text.split("\n")):
                if i:
                    parts.append(f'<br data-k="{len(nodes)}">')
                    nodes.append(line_break(child))
                if line:
                    text = html.escape(line, quote=False)
                    parts.append(text if plain else f'<span data-k="{k}">{text}</span>')
        elif child.tag in DOCX_INLINE:
            parts.append(f'<a data-k="{k}">{fragment(child, nodes)}</a>')
        else:
            parts.append(f'<img data-k="{k}">')
    return "".join(parts)


def rebuild(container, translated: Element, nodes: list, own=None) -> None:
    """Replace `container`'s children (but its properties) by the translated fragment's;
    `own`: the run of the paragraph's own formatting (found in `container` when not given),
    for the text outside every `<span>`."""
    own = paragraph_run(container) if own is None else own
    for child in list(container):
        if child.tag != qn("w:pPr"):
            container.remove(child)
    last = None  # (the run made last, its source), while nothing came after it
    placed = set()  # the source elements put back as they are (a point once, its copies after)

    def add(text: str, source) -> None:
        nonlocal last
        if last is not None and last[1] is source:
            last[0].text += text
            return
        element = bare_copy(source) if source is not None else container.makeelement(qn("w:r"))
        container.append(element)
        run = Run(element, None)
        run.text = text
        last = (run, source)

    for node in translated.children:
        if isinstance(node, Text):
            add(node.text, own)
            continue
        if not isinstance(node, Element) or "data-k" not in node.attrs:
            continue
        source = nodes[int(node.attrs["data-k"])]
        if node.tag == "span":
            text = "".join(n.text for n in node.children if isinstance(n, Text))
            if text:  # else its words went to another run
                add(text, source)
            continue
        if node.tag == "a":
            element = empty_copy(source)  # its children are all rebuilt
            rebuild(element, node, nodes, paragraph_run(source))
            container.append(element)
        else:  # itself, not a copy: a text box inside is translated later, in place
            container.append(copy.deepcopy(source) if id(source) in placed else source)
            placed.add(id(source))
        last = None


def paragraphs(document) -> list:
    """Every paragraph element: body (tables included), then headers and footers."""
    found = list(document.element.body.iter(PARAGRAPH))
    seen = set()
    for section in document.sections:
        for part in (
            section.header,
            section.footer,
            section.first_page_header,
            section.first_page_footer,
            section.even_page_header,
            section.even_page_footer,
        ):
            if not part.is_linked_to_previous and id(part._element) not in seen:
                seen.add(id(part._element))
                found += list(part._element.iter(PARAGRAPH))
    return found


class WordFile:
    """A Word file read once: `fragments`, the HTML fragment of each paragraph with text (to
    count and translate), then `translated(pages)` writes their translations back."""

    def __init__(self, data: bytes):
        try:  # a missing body or part, a bad CRC, an encrypted part: one refusal for all
            self.document = docx.Document(io.BytesIO(data))
            self.todo = []
            for element in paragraphs(self.document):
                nodes: list = []
                source = fragment(element, nodes)
                if has_words(source):
                    self.todo.append((element, source, nodes))
        except Exception as error:  # noqa: BLE001 - zip, XML or package errors alike
            raise ArchiveError(
                f"not a .docx file python-docx can read ({type(error).__name__})"
            ) from None
        self.fragments = [source for _, source, _ in self.todo]

    def translated(self, pages: list[str]) -> bytes:
        """The file with each fragment's translated page in its place."""
        for (element, _, nodes), translated in zip(self.todo, pages, strict=True):
            rebuild(element, parse(translated), nodes)
        out = io.BytesIO()
        self.document.save(out)
        return out.getvalue()


def read_file(data: bytes, name: str, limits) -> Parsed:
    """A Word file, bounded before it is unzipped (`check_archive`) and before python-docx
    reads it (`archive.checked`: at most max_file_tags runs); JobError 413 over a limit, 422 for a
    file that is no Word file. Its translation is the file's bytes."""
    checked(data, name, limits, "a .docx file", (b"<w:r>", b"<w:r "), ("runs", "a Word file"))
    where = f"{name}: " if name else ""
    try:
        word_file = WordFile(data)
    except ArchiveError as error:
        raise JobError(422, where + str(error)) from None
    # its runs counted above
    return fragment_file(word_file.fragments, name, sys.maxsize, word_file.translated)

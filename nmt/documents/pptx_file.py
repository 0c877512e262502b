"""format=pptx: a presentation's text translated, each run's formatting kept.

Read and written with python-pptx. Every DrawingML paragraph (`a:p`) of every slide (text
boxes, placeholders, grouped shapes, table cells, the slide's footer, date and number
placeholders) and of its speaker notes is turned into an HTML fragment, as a Word
paragraph is (nmt.documents.docx_file): the runs of the paragraph's own formatting plain text
(nmt.documents.runs), each other run a `<span>`, each line break (`a:br`) a `<br>` (which
bounds segments), each field (a slide number, a date) a point; all fragments are translated
together as HTML pages, so a run's formatting lands on the target words aligned to its words.
Each paragraph is then rebuilt: a copy of its source run (its `a:rPr`) per `<span>`, with the
span's text; text outside the spans a run of the paragraph's own formatting; its paragraph
properties stay first and its end-of-paragraph properties last. Slide layouts
and masters (their prompt texts) and charts are not translated.
"""

from __future__ import annotations

import copy
import html
import io
import sys

import pptx
from lxml import etree
from pptx.oxml.ns import qn

from nmt.documents.archive import ArchiveError, checked
from nmt.documents.html_tree import Element, Text, parse
from nmt.documents.markup import fragment_file
from nmt.documents.parsed import Parsed
from nmt.documents.runs import has_words, own_run
from nmt.errors import JobError

DECK = "a .pptx file"
PARAGRAPH, RUN, TEXT, BREAK = qn("a:p"), qn("a:r"), qn("a:t"), qn("a:br")
PROPERTIES = {qn("a:pPr"), qn("a:endParaRPr")}  # a paragraph's own, first and last


# attributes of a run's a:rPr that PowerPoint sets by itself (a spelling mark, an edit
# flag): runs that differ only in these are of one formatting
VOLATILE = ("err", "dirty", "smtClean", "smtId")


def formatting(run) -> bytes:
    """A run's formatting, to compare runs by: its a:rPr as XML without VOLATILE."""
    properties = run.find(qn("a:rPr"))
    if properties is None:
        return b""
    properties = copy.deepcopy(properties)
    for name in VOLATILE:
        properties.attrib.pop(name, None)
    return etree.tostring(properties)


def run_text(run) -> str:
    return "".join(t.text or "" for t in run.iter(TEXT))


def paragraph_run(paragraph):
    """The run of `paragraph` in the formatting that covers most of its characters
    (nmt.documents.runs): its text is the paragraph's own, not a tag."""
    return own_run([c for c in paragraph if c.tag == RUN], run_text, formatting)


def fragment(paragraph, nodes: list) -> str:
    """`paragraph`'s runs, breaks and fields as HTML; `nodes[k]` is the element of
    `data-k="k"`. The runs of the paragraph's own formatting are plain text."""
    own = paragraph_run(paragraph)
    own_formatting = None if own is None else formatting(own)
    parts = []
    for child in paragraph:
        if child.tag in PROPERTIES:
            continue
        k = len(nodes)
        nodes.append(child)
        if child.tag == RUN:
            text = html.escape(run_text(child), quote=False)
            if text and formatting(child) == own_formatting:
                parts.append(text)
            elif text:
                parts.append(f'<span data-k="{k}">{text}</span>')
        elif child.tag == BREAK:
            parts.append(f'<br data-k="{k}">')
        else:
            parts.append(f'<img data-k="{k}">')
    return "".join(parts)


def new_run(source, text: str):
    """A run of `source`'s formatting (its a:rPr, or none) holding `text`."""
    run = source.makeelement(RUN, {})
    properties = source.find(qn("a:rPr"))
    if properties is not None:
        run.append(copy.deepcopy(properties))
    run.append(run.makeelement(TEXT, {}))
    run[-1].text = text
    return run


def rebuild(paragraph, translated: Element, nodes: list) -> None:
    """Replace `paragraph`'s runs, breaks and fields by the translated fragment's; text
    outside every `<span>` in the paragraph's own formatting."""
    own = paragraph_run(paragraph)
    end = paragraph.find(qn("a:endParaRPr"))
    for child in list(paragraph):
        if child.tag not in PROPERTIES:
            paragraph.remove(child)
    made: list = []
    last = None  # (the run made last, its source), while nothing came after it
    placed = set()

    def add(text: str, source) -> None:
        nonlocal last
        if last is not None and last[1] is source:
            last[0][-1].text += text
            return
        last = (new_run(paragraph if source is None else source, text), source)
        made.append(last[0])

    for node in translated.children:
        if isinstance(node, Text):
            add(node.text, own)
            continue
        if not isinstance(node, Element) or "data-k" not in node.attrs:
            continue
        source = nodes[int(node.attrs["data-k"])]
        if node.tag == "span":
            text = "".join(n.text for n in node.children if isinstance(n, Text))
            if text:
                add(text, source)
            continue
        made.append(copy.deepcopy(source) if id(source) in placed else source)
        placed.add(id(source))
        last = None
    for element in made:
        if end is not None:
            end.addprevious(element)
        else:
            paragraph.append(element)


class Presentation:
    """A .pptx read once: `fragments`, one per paragraph with text, then `translated(pages)`
    writes their translations back."""

    def __init__(self, data: bytes):
        try:
            self.deck = pptx.Presentation(io.BytesIO(data))
            roots = []
            for slide in self.deck.slides:
                roots.append(slide._element)
                if slide.has_notes_slide:
                    roots.append(slide.notes_slide._element)
            self.todo = []
            for root in roots:
                for paragraph in root.iter(PARAGRAPH):
                    nodes: list = []
                    source = fragment(paragraph, nodes)
                    if has_words(source):
                        self.todo.append((paragraph, source, nodes))
        except Exception as error:  # noqa: BLE001 - zip, XML or package errors alike
            raise ArchiveError(
                f"not {DECK} python-pptx can read ({type(error).__name__})"
            ) from None
        self.fragments = [source for _, source, _ in self.todo]

    def translated(self, pages: list[str]) -> bytes:
        for (paragraph, _, nodes), page in zip(self.todo, pages, strict=True):
            rebuild(paragraph, parse(page), nodes)
        out = io.BytesIO()
        self.deck.save(out)
        return out.getvalue()


def read_file(data: bytes, name: str, limits) -> Parsed:
    """A presentation, bounded before it is unzipped and before python-pptx reads it (at
    most max_file_tags runs); JobError 413 over a limit, 422 for no presentation."""
    checked(data, name, limits, DECK, (b"<a:r>", b"<a:r "), ("runs", "a presentation"))
    where = f"{name}: " if name else ""
    try:
        deck = Presentation(data)
    except ArchiveError as error:
        raise JobError(422, where + str(error)) from None
    return fragment_file(deck.fragments, name, sys.maxsize, deck.translated)  # runs counted

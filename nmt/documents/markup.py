"""format=html: translate the text of an HTML document and keep its tags.

The document is parsed into a tree that keeps its raw source (nmt.documents.html_tree).
Block elements (`p`, `li`, `td`, `h1`, `div`, `br`, ... every tag not in INLINE) bound
segments; a segment is a run of text and inline elements (`b`, `i`, `em`, `strong`, `a`,
`span`, `code`, ...), whose plain text is translated as any other text (cut into sentences
with segment=sentences, so a sentence may run across inline tags). Each inline element is
then put back around the target words aligned to the source words it covered
(nmt.documents.tag_projection), with its start tag as written, attributes included.
Elements with no words (an image, an empty anchor, a comment, an untranslated name) are
points, kept where the words beside them went, with the spaces they had around them.
`script`, `style`, `pre` (and the `code` inside it), `textarea`, `svg`, `math`, and any
element with translate="no" or class "notranslate" are copied as they are, and so is
whitespace between blocks. Every segment of every document goes to the engine
in one call: `Pages` parses the documents once, into segments that can be counted before
any translation (nmt.jobs.check), then renders them around their translations. The work
is linear in the document (n log n in the words of a segment), whatever its markup.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from nmt.documents.html_tree import VOID, Element, MarkupError, Raw, Text, parse
from nmt.documents.inline import SPACE
from nmt.documents.parsed import Parsed
from nmt.documents.tag_projection import Span, project
from nmt.documents.text_file import decode_utf8
from nmt.errors import JobError
from nmt.translation.translated import Translation

INLINE = frozenset(
    "a abbr b bdi bdo cite code data del dfn em font i img input ins kbd label mark q s samp "
    "small span strong sub sup time tt u var wbr".split()
)
UNTOUCHED = frozenset("script style pre textarea svg math template".split())
WORD = re.compile(r"\S+")
AFFIX = 16  # the most punctuation a tag leaves outside it (Span.head, Span.tail)
NEWLINES = re.compile(r"[\n\r\f\v]")


def untouched(node: Element) -> bool:
    classes = (node.attrs.get("class") or "").split()
    return node.tag in UNTOUCHED or node.attrs.get("translate") == "no" or "notranslate" in classes


def inline(node: Element | Raw, known: dict[int, bool], tags: frozenset = INLINE) -> bool:
    """Part of a segment: text, a comment, or an element of `tags` (HTML's inline ones, and
    a format's own codes around words) with no block inside (`known`: the answers so far, by
    node id, so that each node is looked at once)."""
    if not isinstance(node, Element):
        return True
    if id(node) not in known:
        answer = node.tag in tags
        if answer and not untouched(node):
            for child in node.children:
                answer = answer and inline(child, known, tags)
        known[id(node)] = answer
    return known[id(node)]


@dataclass
class Segment:
    """A run of inline nodes; `text`: their plain text, line breaks inside made spaces;
    `spans`: their elements as tag_projection spans, nested as in the source; `word_count`,
    `tag_count`: its whitespace words and elements (nested ones too), known before any
    translation, which bound the work of placing them (nmt.jobs.check)."""

    nodes: list[Element | Raw]
    text: str = ""
    spans: list[Span] = field(default_factory=list)
    word_count: int = field(init=False, default=0)
    tag_count: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        parts: list[str] = []
        chars: list[tuple[Span, int, int]] = []
        self.spans, _ = _collect(self.nodes, parts, chars, 0)
        text = "".join(parts)
        body = text.strip()
        if body:  # the whitespace around the run stays as it is; inside, a break is a space
            lead = text.index(body[0])
            end = lead + len(body)
            text = text[:lead] + NEWLINES.sub(" ", text[lead:end]) + text[end:]
        self.text = text
        words = [m.span() for m in WORD.finditer(text)]
        starts, ends = [ws for ws, _ in words], [we for _, we in words]
        self.word_count, self.tag_count = len(words), len(chars)
        written_before = set()  # points with another point right after them: "%s<x/>"
        last_point: dict[int, Span] = {}
        for span, start, end in chars:
            if start == end:
                if start in last_point:
                    written_before.add(id(last_point[start]))
                last_point[start] = span
        for span, start, end in chars:  # words in order: found by bisection, not by a scan
            if end > start:  # a point has no words, even inside one
                span.words = range(bisect_right(ends, start), bisect_left(starts, end))
            span.at = bisect_left(starts, start)
            before = start > 0 and text[start - 1].isspace()
            # (at the start, a space after it is its own: "<img> x", "%d dogs")
            spaced_after = (before or start == 0) and end < len(text) and text[end].isspace()
            span.spaced = (before, spaced_after)
            span.glued = end < len(text) and text[end].isalnum()
            if id(span) in written_before:  # glued to the next point: no space between them
                span.spaced, span.glued = (before, False), True
            if span.space:  # it is the space between its words
                span.spaced, span.glued = (False, False), False
            if span.words:
                span.head = affix(text, words[span.words[0]][0], start)
                span.tail = affix(text, end, words[span.words[-1]][1])

    def render(self, translation: Translation) -> str:
        """The run with `translation`'s best text and every element placed on it."""
        if not translation.alternatives:
            return "".join(map(str, self.nodes))
        target = translation.text
        words = [m.span() for m in WORD.finditer(target)]
        project(self.spans, translation.alignments[0], self.word_count, len(words))
        pieces: list[str] = []
        _emit(self.spans, 0, len(target), target, words, pieces)
        return "".join(pieces)


def affix(text: str, start: int, end: int) -> str:
    """text[start:end] where it is a little punctuation (AFFIX characters at most, no letter
    or digit), else ""."""
    piece = text[start:end] if end - start <= AFFIX else ""
    return "" if any(c.isalnum() for c in piece) else piece


def _collect(
    nodes: list[Element | Raw], parts: list[str], chars: list, length: int
) -> tuple[list[Span], int]:
    """Spans of `nodes`' elements, their text appended to `parts` (`length` characters so
    far) and (span, start, end) character offsets to `chars`; returns the spans and the new
    length."""
    spans = []
    for node in nodes:
        start = length
        if isinstance(node, Text):
            parts.append(node.text)
            length += len(node.text)
            continue
        span = Span(range(0), node=node, space=isinstance(node, Element) and node.start == SPACE)
        if span.space:  # the model reads the space it makes
            parts.append(" ")
            length += 1
        if isinstance(node, Element) and not untouched(node) and node.tag not in VOID:
            span.children, length = _collect(node.children, parts, chars, length)
        chars.append((span, start, length))
        spans.append(span)
    return spans, length


def _emit(
    spans: list[Span],
    lo: int,
    hi: int,
    target: str,
    words: list[tuple[int, int]],
    pieces: list[str],
) -> None:
    """Append target[lo:hi], escaped, with `spans` placed on its words, to `pieces`."""
    placed = []
    for span in spans:
        a, b = span.target
        if b > a:
            start, end = words[a][0], words[b - 1][1]
            if span.head and target.startswith(span.head, start, end):
                start += len(span.head)
            if span.tail and target.endswith(span.tail, start, end):
                end -= len(span.tail)
            placed.append((min(max(start, lo), hi), min(max(end, lo), hi), span))
        else:  # a point, or a tag left with no words: at the boundary, within its parent
            at = words[a - 1][1] if a > 0 else (words[0][0] if words else lo)
            while span.spaced[0] and not span.words and a > 0 and at < hi and target[at].isspace():
                at += 1  # after the space, as in the source
            placed.append((min(max(at, lo), hi), min(max(at, lo), hi), span))
    cursor = lo
    for start, end, span in sorted(placed, key=lambda p: (p[0], p[1] > p[0])):
        start, end = max(start, cursor), max(end, start, cursor)
        pieces.append(html.escape(target[cursor:start], quote=False))
        node = span.node
        if isinstance(node, Element) and span.words and not untouched(node):
            # (an empty range: its words went to a sibling; it keeps its points)
            pieces.append(node.start)
            _emit(span.children, start, end, target, words, pieces)
            pieces.append(node.end or f"</{node.tag}>")
        else:  # copied as it was; its space after it, but never inside a word
            # (one spaced before it that lands on a word's start is kept off the word)
            after = target[end : end + 1]
            spaced = span.spaced[1] or (span.spaced[0] and not span.glued and after.isalnum())
            spaced = spaced and not span.words and after != " "
            pieces.append(str(node) + (" " if spaced and not inside_word(words, end) else ""))
            if span.space and target[end : end + 1] == " ":
                end += 1  # the space it stands for
        cursor = end
    pieces.append(html.escape(target[cursor:hi], quote=False))


def inside_word(words: list[tuple[int, int]], at: int) -> bool:
    """Whether offset `at` falls strictly inside one of `words` (sorted (start, end) spans):
    a point clipped into a word that a tag's end splits (`A</b>&amp;`)."""
    i = bisect_left(words, (at + 1,)) - 1  # the last word that starts at or before `at`
    return i >= 0 and words[i][0] < at < words[i][1]


def plan(root: Element, tags: frozenset = INLINE) -> list[str | Segment]:
    """The document as raw pieces to copy and segments to translate, in order; `tags`: the
    elements a segment runs through."""
    out: list[str | Segment] = []
    run: list[Element | Raw] = []
    known: dict[int, bool] = {}

    def flush() -> None:
        if run:
            segment = Segment(list(run))
            out.append(segment if segment.text.strip() else "".join(map(str, run)))
            run.clear()

    def block(element: Element) -> None:
        out.append(element.start)
        for child in element.children:
            if inline(child, known, tags):
                run.append(child)
                continue
            flush()
            if untouched(child) or child.tag in VOID:
                out.append(str(child))
            else:
                block(child)
        flush()
        out.append(element.end)

    block(root)
    return out


class Pages:
    """Documents parsed once into what is copied and what is translated: `segments`, every
    segment of every document in order (`owners`: the document of each), counted before any
    translation (nmt.jobs.check), then `render`ed around their translations."""

    def __init__(self, documents: list[str], plans: list[list[str | Segment]]):
        self.documents, self.plans = documents, plans
        self.segments = [p for pieces in plans for p in pieces if isinstance(p, Segment)]
        self.owners = [
            i for i, pieces in enumerate(plans) for p in pieces if isinstance(p, Segment)
        ]

    @classmethod
    def plan(cls, documents: list[str], codes: frozenset = frozenset()) -> Pages:
        """`codes`: a format's own elements around words, inline as HTML's inline tags are;
        html_tree.MarkupError (one line) for a document nested too deeply (MAX_DEPTH)."""
        tags = INLINE | codes
        return cls(documents, [plan(parse(document), tags) for document in documents])

    def render(self, found: list[Translation]) -> list[Translation]:
        """One Translation per document: its one alternative the translated document, scored
        by the sum of its segments' scores (a document with no text: itself, as `empty`)."""
        rendered = iter([s.render(t) for s, t in zip(self.segments, found, strict=True)])
        scores = iter([t.alternatives[0][1] if t.alternatives else 0.0 for t in found])
        results = []
        for document, pieces in zip(self.documents, self.plans, strict=True):
            result = Translation(document, empty=document)
            if any(isinstance(p, Segment) for p in pieces):
                text = "".join(next(rendered) if isinstance(p, Segment) else p for p in pieces)
                score = sum(next(scores) for p in pieces if isinstance(p, Segment))
                result.alternatives = [(text, score)]
            results.append(result)
        return results


def read_pages(
    documents: list[str], name: str, max_file_tags: int, codes: frozenset = frozenset()
) -> Pages:
    """HTML documents parsed once (their tags, the `<`s, counted first: at most
    max_file_tags; `codes` inline, as Pages.plan); JobError 413 over it, 422 for markup we
    cannot read."""
    tags = sum(document.count("<") for document in documents)  # at most, before parsing
    if tags > max_file_tags:
        raise JobError(413, f"{tags} tags: the limit is max_file_tags={max_file_tags}")
    try:
        return Pages.plan(documents, codes)
    except MarkupError as error:
        raise JobError(422, f"{name or 'the HTML'}: {error}") from None


def parsed(pages: Pages, render) -> Parsed:
    counted = [(s.word_count, s.tag_count) for s in pages.segments]
    return Parsed([s.text for s in pages.segments], render, counted)


def fragment_file(
    fragments: list[str], name: str, max_tags: int, write, codes: frozenset = frozenset()
) -> Parsed:
    """A file read as HTML fragments (a Word paragraph, a subtitle cue, ...): its segments,
    and its bytes from `write(translated fragments)`; `codes`: the format's own elements
    around words (an XML file's spans, written with its prefixes), inline as HTML's are."""
    pages = read_pages(fragments, name, max_tags, codes)
    return parsed(pages, lambda found: write([p.text for p in pages.render(found)]))


def read_texts(texts: list[str], name: str, limits) -> Parsed:
    """A request's texts, each an HTML document: one Translation each."""
    pages = read_pages(texts, name, limits.max_file_tags)
    return parsed(pages, pages.render)


def read_file(data: bytes, name: str, limits) -> Parsed:
    """An HTML file: its translated bytes, in UTF-8 and saying so (`declared_utf8`)."""
    pages = read_pages([decode_utf8(data, name)], name, limits.max_file_tags)
    return parsed(pages, lambda found: declared_utf8(pages.render(found)[0].text).encode())


HEAD = re.compile(r"<head(?:\s[^>]*)?>", re.IGNORECASE)
# `<meta charset=X>`, or `<meta http-equiv=Content-Type content="text/html; charset=X">`
CHARSET = re.compile(r"(<meta\b[^>]*?\bcharset\s*=\s*[\"']?\s*)([^\s\"';>]*)", re.IGNORECASE)


def declared_utf8(page: str) -> str:
    """`page` as it is written out, in UTF-8: a charset its meta tags declare becomes utf-8, and a
    document with a `<head>` but no charset gets `<meta charset="utf-8">` first in it. English
    in ASCII reads the same in any charset, German does not: without this a browser that opens
    the file reads its umlauts as windows-1252. A fragment (no `<head>`) is left as it is."""
    if CHARSET.search(page):
        return CHARSET.sub(lambda m: m[1] + ("utf-8" if m[2].lower() != "utf-8" else m[2]), page)
    head = HEAD.search(page)
    if head is None:
        return page
    return page[: head.end()] + '<meta charset="utf-8">' + page[head.end() :]

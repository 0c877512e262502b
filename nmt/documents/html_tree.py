"""HTML as a tree that gives its source back byte for byte.

The standard library's tokenizer (html.parser) finds the tags; every node keeps the raw text
it came from, so `str(parse(html)) == html` for any input, valid or not, and whatever a
translation leaves alone (attributes, comments, scripts, entities, indentation) is copied,
never re-serialised. Nesting follows the tags as written, with HTML's void elements and
end tags that close what is still open inside them; a stray end tag is kept as raw text.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())


@dataclass
class Raw:
    """Text, a comment, a doctype or a stray end tag: `raw` as written."""

    raw: str

    @property
    def text(self) -> str:
        return html.unescape(self.raw)

    def __str__(self) -> str:
        return self.raw


@dataclass
class Text(Raw):
    """Character data (entities still escaped in `raw`; `text` unescapes them)."""


@dataclass
class Element:
    """A tag, its attributes, its children; `start`/`end` as written ("" for an end tag the
    source leaves out)."""

    tag: str
    attrs: dict[str, str | None]
    start: str
    children: list[Element | Raw] = field(default_factory=list)
    end: str = ""

    def __str__(self) -> str:
        return self.start + "".join(map(str, self.children)) + self.end


class _Builder(HTMLParser):
    def __init__(self, source: str):
        super().__init__(convert_charrefs=True)
        self.source = source
        self.line_starts = [0]
        for i, c in enumerate(source):
            if c == "\n":
                self.line_starts.append(i + 1)
        self.events: list[tuple[int, str, object]] = []  # (offset, kind, payload)

    def _at(self) -> int:
        line, column = self.getpos()
        return self.line_starts[line - 1] + column

    def handle_starttag(self, tag, attrs):
        self.events.append((self._at(), "start", (tag, dict(attrs))))

    def handle_startendtag(self, tag, attrs):
        self.events.append((self._at(), "void", (tag, dict(attrs))))

    def handle_endtag(self, tag):
        self.events.append((self._at(), "end", tag))

    def handle_data(self, data):
        self.events.append((self._at(), "text", None))

    def _other(self, *_):
        self.events.append((self._at(), "raw", None))

    handle_comment = handle_decl = handle_pi = unknown_decl = _other
    handle_entityref = handle_charref = handle_data  # not called with convert_charrefs


def parse(source: str) -> Element:
    """The document under a root Element (tag "", no start or end)."""
    builder = _Builder(source)
    builder.feed(source)
    builder.close()
    root = Element("", {}, "")
    stack = [root]
    events = builder.events
    for i, (at, kind, payload) in enumerate(events):
        raw = source[at : events[i + 1][0] if i + 1 < len(events) else len(source)]
        if not raw:
            continue
        top = stack[-1]
        if kind == "text":
            if top.children and type(top.children[-1]) is Text:
                top.children[-1].raw += raw
            else:
                top.children.append(Text(raw))
        elif kind in ("start", "void"):
            tag, attrs = payload
            element = Element(tag, attrs, raw)
            top.children.append(element)
            if kind == "start" and tag not in VOID:
                stack.append(element)
        elif kind == "end" and any(e.tag == payload for e in stack[1:]):
            while stack[-1].tag != payload:
                stack.pop()
            stack.pop().end = raw
        else:  # comments, declarations, end tags that close nothing
            top.children.append(Raw(raw))
    covered = events[0][0] if events else len(source)
    if covered:  # nothing is ever lost, even before the first event
        root.children.insert(0, Text(source[:covered]))
    return root


def tag_tree(node: Element | Raw, ordered: bool = True) -> tuple:
    """The tags alone, for comparing structure: (tag, sorted attributes, children's trees);
    with ordered=False siblings are sorted (a translation may reorder inline elements)."""
    if not isinstance(node, Element):
        return ()
    children = [t for t in (tag_tree(c, ordered) for c in node.children) if t]
    attrs = tuple(sorted((k, v or "") for k, v in node.attrs.items()))
    return (node.tag, attrs, tuple(children if ordered else sorted(children)))

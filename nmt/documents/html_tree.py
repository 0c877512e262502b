"""HTML as a tree that gives its source back byte for byte.

The standard library's tokenizer (html.parser) finds the tags, kept to linear time on any
input (CVE-2025-6069): no construct is left to scan the rest of the input for an end it
lacks (`_Builder`, `tokenizable`); an unclosed one is read as text, a marked section `<![`
as a bogus comment, up to its `>`, as browsers read it. Every node keeps the raw text it
came from, so `str(parse(html)) == html` for any input, valid or not, and whatever a
translation leaves alone (attributes, comments, scripts, entities, indentation) is copied,
never re-serialised. Nesting follows the tags as written, with HTML's void elements, its
implied end tags (a `<p>`, `<li>`, `<td>`, `<tr>`, `<dt>`, `<dd>` or `<option>` the source
leaves open ends where the next one, or a block for `<p>`, starts) and end tags that close
what is still open inside them; a stray end tag is kept as raw text. Elements nested deeper
than MAX_DEPTH are refused (MarkupError), so that no walk of the tree runs out of stack.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())

# HTML's implied end tags: a start tag ends the outermost open element it names (and what is
# open inside it: each end tag left out by the source) below the nearest element of its
# boundary
_SECTIONS = {"tbody", "thead", "tfoot"}
IMPLIED_END = {
    "li": ({"li"}, {"ul", "ol", "menu"}),
    "dt": ({"dt", "dd"}, {"dl"}),
    "dd": ({"dt", "dd"}, {"dl"}),
    "td": ({"td", "th"}, {"tr", "table"}),
    "th": ({"td", "th"}, {"tr", "table"}),
    "tr": ({"tr"}, {"table", *_SECTIONS}),
    **{tag: ({"tr", *_SECTIONS}, {"table"}) for tag in _SECTIONS},
    "option": ({"option"}, {"select", "datalist", "optgroup"}),
    "optgroup": ({"option", "optgroup"}, {"select", "datalist"}),
}
# a start tag of these ends an open <p> (up to the nearest block that may hold one)
ENDS_P = frozenset(
    "address article aside blockquote details dialog div dl fieldset figcaption figure footer "
    "form h1 h2 h3 h4 h5 h6 header hgroup hr main menu nav ol p pre section table ul".split()
)
P_BOUNDARY = frozenset("body html td th li dd dt div blockquote section article button".split())


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


class MarkupError(ValueError):
    """Markup we cannot read, in one line."""


MAX_DEPTH = 256  # elements open inside each other (libxml2's default limit too)
COMMENT_CLOSE = re.compile(r"--\s*>")  # html.parser's end of a comment


class _Builder(HTMLParser):
    """html.parser's events as (offset, kind, payload), kept linear: a comment with no end
    after it, or a marked section, is never searched to the end of the input for one."""

    def __init__(self, source: str):
        super().__init__(convert_charrefs=True)
        self.size = len(source)
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", source)]
        # where the last comment end starts: a "<!--" after it is not a comment
        self.last_close = max((m.start() for m in COMMENT_CLOSE.finditer(source)), default=-1)
        self.events: list[tuple[int, str, object]] = []

    def _at(self) -> int:
        line, column = self.getpos()
        return self.line_starts[line - 1] + column

    def parse_comment(self, i, report=1):
        # self.rawdata is what is left of the input: i is at its offset size - len(rawdata)
        if self.size - len(self.rawdata) + i + 4 > self.last_close:
            return -1  # unclosed: read as text up to the next ">", as html.parser does
        return super().parse_comment(i, report)

    def parse_marked_section(self, i, report=1):
        # "<![": html.parser scans for "]]>" or fails (AssertionError); HTML reads it as a
        # bogus comment, up to the next ">"
        return self.parse_bogus_comment(i, report)

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

    def pieces(self) -> list[tuple[int, int, str, object]]:
        """(start, end, kind, payload) of each event with text, consecutive texts joined."""
        found = []
        for i, (at, kind, payload) in enumerate(self.events):
            end = self.events[i + 1][0] if i + 1 < len(self.events) else self.size
            if end == at:
                continue
            if kind == "text" and found and found[-1][2] == "text":
                found[-1] = (found[-1][0], end, kind, payload)
            else:
                found.append((at, end, kind, payload))
        return found


def tokenizable(source: str) -> str:
    """`source` with every `<` after its last `>` made a space (the same length): there no
    construct can close, and html.parser would search the rest of the input for each one's
    end (quadratic). The tree takes its raw text from `source`, so they are kept, as text."""
    last = source.rfind(">")
    return source[: last + 1] + source[last + 1 :].replace("<", " ")


class _Open:
    """The open elements, root first, and the depths at which each tag is open (increasing),
    so that what an end tag or an implied end closes is found without walking the stack."""

    def __init__(self, root: Element):
        self.stack = [root]
        self.depths: dict[str, list[int]] = {}

    def push(self, element: Element) -> None:
        if len(self.stack) > MAX_DEPTH:
            raise MarkupError(
                f"the HTML nests its elements too deeply (more than {MAX_DEPTH} inside each other)"
            )
        self.depths.setdefault(element.tag, []).append(len(self.stack))
        self.stack.append(element)

    def close(self, depth: int) -> Element:
        """Pop the element at `depth` and all inside it; returns it."""
        for element in self.stack[depth:]:
            self.depths[element.tag].pop()
        closed = self.stack[depth]
        del self.stack[depth:]
        return closed

    def innermost(self, tag: str) -> int:
        """The depth of the innermost open `tag`; 0 where none is open."""
        found = self.depths.get(tag)
        return found[-1] if found else 0

    def outermost(self, tags, below: int) -> int | None:
        """The depth of the outermost open element of `tags` deeper than `below`."""
        deeper = []
        for tag in tags:
            found = self.depths.get(tag, [])
            k = bisect_right(found, below)
            if k < len(found):
                deeper.append(found[k])
        return min(deeper, default=None)


def parse(source: str) -> Element:
    """The document under a root Element (tag "", no start or end); MarkupError for elements
    nested deeper than MAX_DEPTH, or what html.parser cannot read even so."""
    builder = _Builder(source)
    try:
        builder.feed(tokenizable(source))
        builder.close()
    except AssertionError as error:  # html.parser's word for markup it cannot read
        raise MarkupError(f"malformed markup: {str(error).splitlines()[0]}") from None
    root = Element("", {}, "")
    open_ = _Open(root)
    pieces = builder.pieces()
    for at, end, kind, payload in pieces:
        raw = source[at:end]
        top = open_.stack[-1]
        if kind == "text":
            top.children.append(Text(raw))
        elif kind in ("start", "void"):
            tag, attrs = payload
            close_implied(open_, tag)
            element = Element(tag, attrs, raw)
            open_.stack[-1].children.append(element)
            if kind == "start" and tag not in VOID:
                open_.push(element)
        elif kind == "end" and open_.innermost(payload):
            open_.close(open_.innermost(payload)).end = raw
        else:  # comments, declarations, end tags that close nothing
            top.children.append(Raw(raw))
    covered = pieces[0][0] if pieces else len(source)
    if covered:  # nothing is ever lost, even before the first event
        root.children.insert(0, Text(source[:covered]))
    return root


def close_implied(open_: _Open, tag: str) -> None:
    """Close the elements a start `tag` ends (IMPLIED_END, ENDS_P: the outermost open one
    below the nearest element of its boundary) and what is open inside them."""
    if tag not in IMPLIED_END and tag not in ENDS_P:
        return
    ends, boundary = IMPLIED_END.get(tag, (set(), set()))
    if tag in ENDS_P:
        ends, boundary = ends | {"p"}, boundary | P_BOUNDARY
    below = max((open_.innermost(b) for b in boundary), default=0)
    outermost = open_.outermost(ends, below)
    if outermost is not None:
        open_.close(outermost)


def tag_tree(node: Element | Raw, ordered: bool = True) -> tuple:
    """The tags alone, for comparing structure: (tag, sorted attributes, children's trees);
    with ordered=False siblings are sorted (a translation may reorder inline elements)."""
    if not isinstance(node, Element):
        return ()
    children = [t for t in (tag_tree(c, ordered) for c in node.children) if t]
    attrs = tuple(sorted((k, v or "") for k, v in node.attrs.items()))
    return (node.tag, attrs, tuple(children if ordered else sorted(children)))

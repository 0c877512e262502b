"""HTML as a tree that gives its source back byte for byte.

The standard library's tokenizer (html.parser) finds the tags, in linear time on any input
(`tokenizable`: constructs it would scan the whole input for are read as text); every node
keeps the raw text it came from, so `str(parse(html)) == html` for any input, valid or not,
and whatever a translation leaves alone (attributes, comments, scripts, entities,
indentation) is copied, never re-serialised. Nesting follows the tags as written, with
HTML's void elements, its implied end tags (a `<p>`, `<li>`, `<td>`, `<tr>`, `<dt>`, `<dd>`
or `<option>` the source leaves open ends where the next one, or a block for `<p>`, starts)
and end tags that close what is still open inside them; a stray end tag is kept as raw text.
"""

from __future__ import annotations

import html
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


class MarkupError(ValueError):
    """Markup we cannot read, in one line."""


def tokenizable(source: str) -> str:
    """`source` as html.parser may read it in linear time and without failing, of the same
    length: the `<` of a construct it would scan to the end of the input for and not find
    closed (any construct after the last `>`: CVE-2025-6069, quadratic), or of a marked
    section `<![` (which it refuses with an AssertionError), becomes a space. The tree takes
    its raw text from `source` itself, so such a construct is kept, as text."""
    last = source.rfind(">")
    head = source[: last + 1].replace("<![", " ![")
    return head + source[last + 1 :].replace("<", " ")


def parse(source: str) -> Element:
    """The document under a root Element (tag "", no start or end); MarkupError for what
    html.parser cannot read even so (`tokenizable`)."""
    builder = _Builder(source)
    try:
        builder.feed(tokenizable(source))
        builder.close()
    except AssertionError as error:  # html.parser's word for malformed markup
        raise MarkupError(f"malformed markup: {str(error).splitlines()[0]}") from None
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
            top = close_implied(stack, tag)
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


def close_implied(stack: list[Element], tag: str) -> Element:
    """Pop the elements a start `tag` ends (IMPLIED_END, ENDS_P) and what is open inside
    them; returns the element the new one goes into."""
    ends, boundary = IMPLIED_END.get(tag, (set(), set()))
    if tag in ENDS_P:
        ends, boundary = ends | {"p"}, boundary | P_BOUNDARY
    outermost = None
    for depth in range(len(stack) - 1, 0, -1):
        if stack[depth].tag in boundary:
            break
        if stack[depth].tag in ends:
            outermost = depth
    if outermost is not None:
        del stack[outermost:]
    return stack[-1]


def tag_tree(node: Element | Raw, ordered: bool = True) -> tuple:
    """The tags alone, for comparing structure: (tag, sorted attributes, children's trees);
    with ordered=False siblings are sorted (a translation may reorder inline elements)."""
    if not isinstance(node, Element):
        return ()
    children = [t for t in (tag_tree(c, ordered) for c in node.children) if t]
    attrs = tuple(sorted((k, v or "") for k, v in node.attrs.items()))
    return (node.tag, attrs, tuple(children if ordered else sorted(children)))

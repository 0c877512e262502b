"""Plain strings as the HTML fragments nmt.documents.markup translates, and back.

A format whose texts are not HTML (a subtitle cue, a gettext message, a Markdown inline) is
written as a fragment: its text escaped, its inline markup as HTML elements (carried onto the
target words by the alignment), and what must come out byte for byte (a placeholder such as
`%s`, `{count}`, `%(name)s`) as an untouched `<code translate="no">`: a point, which the model
never reads and which the alignment puts back once, where the words beside it went. `flat`
turns a translated fragment back into the format's text.
"""

from __future__ import annotations

import html
import re

from nmt.documents.html_tree import Element, Text, parse
from nmt.written_numbers import PLACEHOLDERS

KEPT = '<code translate="no">'
# a point that stands between two words for the space it makes (an OpenDocument tab or line
# break written between them, "truck<tab/>A"): the model reads a space there
SPACE = '<code translate="no" data-space>'
TAG = re.compile(r"<(/?)([A-Za-z][\w-]*)[^<>]*?(/?)>")


def kept(raw: str, space: bool = False) -> str:
    """`raw` (already escaped) as a point carried byte for byte; with `space`, one read as
    the space between the words it stands between."""
    return f"{SPACE if space else KEPT}{raw}</code>"


def balanced(text: str) -> bool:
    """Whether `text`'s tags (`<b>`, `</b>`, `<br/>`) open and close as HTML's must nest."""
    open_: list[str] = []
    for match in TAG.finditer(text):
        if match[3]:
            continue
        if not match[1]:
            open_.append(match[2].lower())
        elif not open_ or open_.pop() != match[2].lower():
            return False
    return not open_


def escaped(text: str, keep: re.Pattern | None = PLACEHOLDERS, markup: bool = False) -> str:
    """`text` as a fragment: escaped, each match of `keep` a point kept as it is; with
    `markup`, its tags kept as HTML elements (carried onto the words they hold) where they
    nest, else each a point."""
    found = [(m.start(), m.end(), True) for m in keep.finditer(text)] if keep else []
    if markup:
        elements = balanced(text)
        found += [(m.start(), m.end(), not elements) for m in TAG.finditer(text)]
    out, at = [], 0
    for start, end, point in sorted(found):
        if start < at:  # inside one kept already
            continue
        piece = text[start:end]
        out += [
            html.escape(text[at:start], quote=False),
            kept(html.escape(piece)) if point else piece,
        ]
        at = end
    out.append(html.escape(text[at:], quote=False))
    return "".join(out)


def flat(fragment: str, unescape: bool = True) -> str:
    """A translated fragment as text: elements as written (start and end tags), points as
    the text they keep; with `unescape`, entities of the text turned back into characters
    (for formats whose text is not HTML)."""
    out: list[str] = []

    def walk(nodes) -> None:
        for node in nodes:
            if isinstance(node, Element) and node.start in (KEPT, SPACE):
                out.append("".join(html.unescape(str(c)) for c in node.children))
            elif isinstance(node, Element):
                out.append(node.start)
                walk(node.children)
                out.append(node.end)
            elif isinstance(node, Text) and unescape:
                out.append(node.text)
            else:
                out.append(str(node))

    walk(parse(fragment).children)
    return "".join(out)

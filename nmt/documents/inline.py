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


def kept(raw: str) -> str:
    """`raw` (already escaped) as a point carried byte for byte."""
    return f"{KEPT}{raw}</code>"


def escaped(text: str, keep: re.Pattern | None = PLACEHOLDERS) -> str:
    """`text` as a fragment: escaped, each match of `keep` a point kept as it is."""
    if keep is None:
        return html.escape(text, quote=False)
    out, at = [], 0
    for match in keep.finditer(text):
        out += [html.escape(text[at : match.start()], quote=False), kept(html.escape(match[0]))]
        at = match.end()
    out.append(html.escape(text[at:], quote=False))
    return "".join(out)


def flat(fragment: str, unescape: bool = True) -> str:
    """A translated fragment as text: elements as written (start and end tags), points as
    the text they keep; with `unescape`, entities of the text turned back into characters
    (for formats whose text is not HTML)."""
    out: list[str] = []

    def walk(nodes) -> None:
        for node in nodes:
            if isinstance(node, Element) and node.start == KEPT:
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

"""format=markdown: a Markdown file (.md) with its text translated and its syntax kept.

Parsed with markdown-it-py (CommonMark, with GFM's tables and strikethrough, and
mdit-py-plugins' front matter). Each block of inline text (a paragraph, a heading, a list
item's text, a table cell, a quoted paragraph) is one segment; code blocks, fences, HTML
blocks, front matter and rules are left as they are, byte for byte, as is every line around
them. Within a segment, emphasis, strong and struck text and a link's text are carried like
inline HTML tags onto the words they hold (a link keeps its target and title); inline code,
images, autolinks, inline HTML and the text's placeholders are points put back byte for byte
(nmt.documents.inline). A paragraph spread over several lines comes back on its first line
(the others, holding nothing but its words, are dropped): Markdown renders it the same. The
translated text escapes the characters Markdown would read as syntax (`*`, `_`, `` ` ``,
`[`, `]`, `<`, `\\`); a hard line break inside a paragraph comes back as `<br>`.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.front_matter import front_matter_plugin

from nmt.documents.html_tree import Element, Text, parse
from nmt.documents.inline import KEPT, escaped, kept
from nmt.documents.markup import fragment_file
from nmt.documents.parsed import Parsed
from nmt.documents.text_file import decode_utf8
from nmt.errors import JobError

MARKDOWN = MarkdownIt("commonmark").enable(["table", "strikethrough"]).use(front_matter_plugin)
SYNTAX = re.compile(r"([\\`*_\[\]<])")
PAIRS = {"em": "em", "strong": "strong", "s": "s", "link": "a"}
ONLY_PREFIX = re.compile(r"^[\s>]*$")  # what a paragraph's later line holds but its words
# the characters Markdown's inline syntax is made of: what its parser's time grows with
# (100,000 "[" take seconds), counted against max_file_tags before parsing
DELIMITERS = re.compile(r"[\[\]*_`<>!|~]")


@dataclass
class Inline:
    """A segment: its fragment, and the delimiters of each of its elements (by data-k)."""

    fragment: str
    delimiters: list[tuple[str, str]]


def link_end(token: Token) -> str:
    title = token.attrs.get("title")
    target = str(token.attrs.get("href", ""))
    return f"]({target}" + (f' "{title}"' if title else "") + ")"


def image(token: Token) -> str:
    title = token.attrs.get("title")
    return (
        f"![{token.content}]({token.attrs.get('src', '')}" + (f' "{title}"' if title else "") + ")"
    )


def as_inline(children: list[Token]) -> Inline:
    """An inline token's children as an HTML fragment."""
    out, delimiters, stack = [], [], []
    autolink = None
    for token in children:
        kind = token.type
        if autolink is not None:  # an autolink's text: the point is its whole <url>
            if kind == "link_close":
                out.append(kept(html.escape(f"<{autolink}>")))
                autolink = None
            continue
        if kind == "text":
            out.append(escaped(token.content))
        elif kind == "softbreak":
            out.append(" ")
        elif kind == "hardbreak":
            out.append(kept("&lt;br&gt;"))
        elif kind == "link_open" and token.markup == "autolink":
            autolink = token.attrs.get("href", "")
        elif kind.endswith("_open") and kind.removesuffix("_open") in PAIRS:
            name = kind.removesuffix("_open")
            close = link_end(token) if name == "link" else token.markup
            stack.append(PAIRS[name])
            out.append(f'<{PAIRS[name]} data-k="{len(delimiters)}">')
            delimiters.append(("[" if name == "link" else token.markup, close))
        elif kind.endswith("_close") and stack:
            out.append(f"</{stack.pop()}>")
        elif kind == "code_inline":
            out.append(kept(html.escape(token.markup + token.content + token.markup)))
        elif kind == "image":
            out.append(kept(html.escape(image(token))))
        elif kind == "html_inline":
            out.append(kept(html.escape(token.content)))
    return Inline("".join(out), delimiters)


def markdown_text(fragment: str, delimiters: list[tuple[str, str]]) -> str:
    """A translated fragment as Markdown: elements as their delimiters (the spaces at their
    edges moved outside), points as they were, text escaped."""

    def walk(nodes) -> str:
        out = []
        for node in nodes:
            if isinstance(node, Element) and node.start == KEPT:
                out.append("".join(html.unescape(str(c)) for c in node.children))
            elif isinstance(node, Element) and node.attrs.get("data-k") is not None:
                inner = walk(node.children)
                opening, closing = delimiters[int(node.attrs["data-k"])]
                lead = inner[: len(inner) - len(inner.lstrip())]
                trail = inner[len(inner.rstrip()) :]
                core = inner.strip()
                out.append(lead + (opening + core + closing if core else "") + trail)
            elif isinstance(node, Element):
                out.append(walk(node.children))
            elif isinstance(node, Text):
                out.append(SYNTAX.sub(r"\\\1", node.text))
        return "".join(out)

    return walk(parse(fragment).children)


def placed(lines: list[str], token: Token, cursors: dict[int, int]) -> list[tuple[int, int, int]]:
    """Where an inline token's content lies: (line, start, end) per content line, found in
    order from each line's cursor (a table row holds several cells); [] where not found."""
    start_line = token.map[0]
    found = []
    for k, piece in enumerate(token.content.split("\n")):
        line = start_line + k
        at = lines[line].find(piece, cursors.get(line, 0)) if line < len(lines) else -1
        if at < 0 or not piece:
            return []
        found.append((line, at, at + len(piece)))
    for line, _, end in found:
        cursors[line] = end
    return found


def read_file(data: bytes, name: str, limits) -> Parsed:
    """A Markdown file's inline texts: at most max_file_segments lines with text and
    max_file_tags syntax characters, both counted before parsing."""
    text = decode_utf8(data, name)
    lines = text.split("\n")
    if (found := sum(bool(line.strip()) for line in lines)) > limits.max_file_segments:
        raise JobError(
            413, f"{found} lines: the limit is max_file_segments={limits.max_file_segments}"
        )
    if (marks := len(DELIMITERS.findall(text))) > limits.max_file_tags:
        raise JobError(
            413,
            f"{marks} Markdown syntax marks: the limit is max_file_tags={limits.max_file_tags}",
        )
    cursors: dict[int, int] = {}
    segments: list[tuple[Inline, list[tuple[int, int, int]]]] = []
    for token in MARKDOWN.parse(text):
        if token.type == "inline" and token.map and token.content.strip():
            where = placed(lines, token, cursors)
            if where:
                segments.append((as_inline(token.children or []), where))

    def write(pages: list[str]) -> bytes:
        edits = {}  # line -> [(start, end, replacement)]
        for (inline, where), page in zip(segments, pages, strict=True):
            translated = markdown_text(page, inline.delimiters)
            for k, (line, start, end) in enumerate(where):
                edits.setdefault(line, []).append((start, end, translated if k == 0 else ""))
        out = []
        for number, line in enumerate(lines):
            for start, end, new in sorted(edits.get(number, []), reverse=True):
                line = line[:start] + new + line[end:]
            dropped = number in edits and all(new == "" for *_, new in edits[number])
            if not (dropped and ONLY_PREFIX.match(line)):
                out.append(line)
        return "\n".join(out).encode()

    return fragment_file([s.fragment for s, _ in segments], name, limits.max_file_tags, write)

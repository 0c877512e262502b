"""A text's shape, kept apart from the sentences it holds, so a translation has the same shape.

`lay_out` cuts a text into the sentences to translate and the text kept between them: the
whitespace (blank lines, leading and trailing spaces, runs of spaces between sentences) and
the Markdown block markers that start a line (`# `, `- `, `* `, `+ `, `1. `, `> `), and
runs with no letter or digit ("---", "..."). A sentence never spans a line break, so list
items and headings stay on their lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nmt.translation.sentences import SentenceSplitter

# Markdown's block markers at a line's start: headings, bullets, numbered items, quotes.
MARKERS = re.compile(r"[ \t]*(?:(?:#{1,6}|[-*+]|\d{1,9}[.)]|>)[ \t]+)*")


@dataclass
class Layout:
    """text == kept[0] + sentences[0] + kept[1] + ... + sentences[-1] + kept[-1]."""

    kept: list[str]
    sentences: list[str]

    @classmethod
    def whole(cls, text: str) -> Layout:
        """The text as one segment (segment=lines), whitespace included: the engine's own
        handling of a line, unchanged."""
        return cls(["", ""], [text])

    def join(self, translations: list[str]) -> tuple[str, list[int]]:
        """The translated text, and where each sentence's translation starts in it."""
        parts, starts, at = [self.kept[0]], [], len(self.kept[0])
        for translation, kept in zip(translations, self.kept[1:], strict=True):
            starts.append(at)
            parts += [translation, kept]
            at += len(translation) + len(kept)
        return "".join(parts), starts

    def source_starts(self) -> list[int]:
        """Where each sentence starts in the source text."""
        return self.join(self.sentences)[1]


def lay_out(text: str, splitter: SentenceSplitter) -> Layout:
    """`text`'s sentences (segment=sentences) and what is kept around them."""
    kept, sentences = [""], []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        marker = MARKERS.match(body).end()
        if not body[marker:].strip():  # "- " alone, or "1." as the whole line: no marker
            marker = 0
        placed = 0  # how much of `line` is in kept or sentences
        for start, end in splitter.spans(body[marker:]):
            if not any(c.isalnum() for c in body[marker + start : marker + end]):
                continue  # "---", "***", "...": kept as they are
            kept[-1] += body[placed : marker + start]
            sentences.append(body[marker + start : marker + end])
            kept.append("")
            placed = marker + end
        kept[-1] += line[placed:]
    return Layout(kept, sentences)

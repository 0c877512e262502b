"""format=srt and format=vtt: subtitles translated a sentence at a time, cue by cue.

Read and written by `srt` (SubRip) and `webvtt-py` (WebVTT), which give each file back byte
for byte when nothing is changed (pysubs2 was measured too: it drops WebVTT's header, styles,
notes, cue identifiers, settings and voices). Cue numbers, times, settings, notes and styles
are kept as they are. A cue's lines are one text (a line break in a cue is layout); cues that
continue one sentence (a cue that does not end in a sentence's punctuation runs on into the
next, at most GROUP cues) are one fragment, each cue a `<span>` in it, so the sentence is
translated whole and cut back into the same cues where the word alignment puts each cue's
words (nmt.documents.tag_projection). Where the alignment cannot (a cue left with no words,
or cues whose words come out in another order, as a German verb moved to the end does), the
translation is cut at the same share of its words as the source cues had. Styling tags
(`<i>`, `<b>`, `<u>`, `<font>`, WebVTT's `<c.x>`, `<v Name>`, `<lang>`, and timestamps) are
carried like an HTML inline tag. Each cue is then laid out in as many lines as it had, as
even as its words allow, and in more only where a line would pass LINE_CHARS.
"""

from __future__ import annotations

import html
import io
import re

import srt
import webvtt

from nmt.documents.html_tree import Element, parse
from nmt.documents.inline import flat
from nmt.documents.markup import fragment_file
from nmt.documents.parsed import Parsed
from nmt.documents.text_file import decode_utf8
from nmt.errors import JobError

LINE_CHARS = 42  # the longest line of a cue (the common timed-text guides' limit)
GROUP = 4  # the most cues one sentence is read across
ENDS_SENTENCE = re.compile(r"[.!?…:;♪\"'»“”’)\]-]\s*$")
# WebVTT's own cue tags, carried as a span (or, for a timestamp, a point) that names them
CUE_TAG = re.compile(r"<(/?)(c|v|lang|ruby|rt)(?=[\s.>])[^>]*>|<\d[\d:.]*>")
ANY_TAG = re.compile(r"<[^>]*>")
CUE_WORD = re.compile(r"(?:<[^>]*>|[^\s<])+")  # a word with its tags (a tag may hold a space)


class Cues:
    """The cues' texts (`texts`, one per cue, its lines joined), read from a file; `write`
    puts one text per cue back (its lines laid out again)."""

    def __init__(self, data: bytes, name: str, suffix: str, max_cues: int):
        text = decode_utf8(data, name)
        if (found := text.count("-->")) > max_cues:
            raise JobError(413, f"{found} cues: the limit is max_file_segments={max_cues}")
        self.vtt = suffix == "vtt"
        try:
            if self.vtt:
                self.file = webvtt.from_buffer(io.StringIO(text))
                self.cues = self.file.captions
                self.lines = [cue.lines for cue in self.cues]
            else:
                self.cues = list(srt.parse(text))
                self.lines = [cue.content.split("\n") for cue in self.cues]
        except Exception as error:  # noqa: BLE001 - each library's own errors
            raise JobError(
                422, f"{name or 'the file'}: not a .{suffix} file ({type(error).__name__})"
            ) from None

    def fragment(self, i: int) -> str:
        """Cue i's text as HTML: its lines joined, WebVTT's tags as spans naming them."""
        text = " ".join(line.strip() for line in self.lines[i])
        if not self.vtt:  # SubRip's text is not HTML: only its tags are markup
            pieces, at = [], 0
            for match in ANY_TAG.finditer(text):
                pieces += [html.escape(text[at : match.start()], quote=False), match[0]]
                at = match.end()
            text = "".join(pieces) + html.escape(text[at:], quote=False)
        return CUE_TAG.sub(as_span, text)

    def write(self, texts: list[str]) -> bytes:
        for cue, lines, text in zip(self.cues, self.lines, texts, strict=True):
            laid = "\n".join(layout(text, lines))
            if self.vtt:
                cue.text = laid
            else:
                cue.content = laid
        if self.vtt:
            return self.file.content.encode()
        return srt.compose(self.cues, reindex=False, strict=False).encode()


def as_span(match: re.Match) -> str:
    if match[0][1].isdigit():  # a timestamp: a point
        return f'<wbr data-cue="{html.escape(match[0])}">'
    if match[1]:
        return "</span>"
    return f'<span data-cue="{html.escape(match[0])}">'


def closing(tag: str) -> str:
    """The end tag of a start tag: `</c>` of `<c.loud>`, `</v>` of `<v Anna>`."""
    return "</" + re.split(r"[\s.>]", tag[1:], maxsplit=1)[0] + ">"


def cue_text(nodes) -> str:
    """A translated cue's nodes as the cue's own text (WebVTT's tags as they were)."""
    out = []
    for node in nodes:
        if isinstance(node, Element) and "data-cue" in node.attrs:
            tag = node.attrs["data-cue"] or ""
            inner = cue_text(node.children)
            out.append(tag + inner + (closing(tag) if node.tag == "span" else ""))
        elif isinstance(node, Element):
            out.append(node.start + cue_text(node.children) + node.end)
        else:
            out.append(str(node))
    return "".join(out)


def groups(texts: list[str]) -> list[range]:
    """Runs of cues that continue one sentence."""
    found, start = [], 0
    for i, text in enumerate(texts):
        plain = ANY_TAG.sub("", text)
        if i + 1 == len(texts) or i + 1 - start == GROUP or ENDS_SENTENCE.search(plain):
            found.append(range(start, i + 1))
            start = i + 1
    return found


def split_back(translated: str, cues: range, source: list[str]) -> list[str]:
    """A group's translated fragment cut back into its cues' texts (see the docstring)."""
    root = parse(translated)
    parts: dict[int, list] = {}
    order, whole = [], []  # the cues' spans in the target's order; its nodes, spans undone
    last = 0
    for node in root.children:
        if isinstance(node, Element) and "data-k" in node.attrs:
            last = int(node.attrs["data-k"])
            order.append(last)
            parts.setdefault(last, []).extend(node.children)
            whole.extend(node.children)
        else:  # words outside every cue's span: the cue before's (or the first's)
            parts.setdefault(last, []).append(node)
            whole.append(node)
    texts = [cue_text(parts.get(k, [])).strip() for k in range(len(cues))]
    words = [len(ANY_TAG.sub(" ", s).split()) for s in source]
    if order == sorted(set(order)) and all(t or not w for t, w in zip(texts, words, strict=True)):
        return texts
    return shares(cue_text(whole), words)


def shares(text: str, words: list[int]) -> list[str]:
    """`text` cut into len(words) pieces of about the same share of its words, each piece's
    open tags closed at its end and opened again at the next one's start."""
    tokens = CUE_WORD.findall(text)
    total = max(sum(words), 1)
    out, at, seen, opened = [], 0, 0, []
    for k, count in enumerate(words):
        seen += count
        end = len(tokens) if k + 1 == len(words) else round(len(tokens) * seen / total)
        piece = "".join(opened) + " ".join(tokens[at:end]) if end > at else ""
        for tag in ANY_TAG.findall(" ".join(tokens[at:end])):
            if tag.startswith("</"):
                opened = opened[:-1]
            elif not tag.startswith("<wbr") and not tag.endswith("/>"):
                opened.append(tag)
        closes = "".join(closing(t) for t in reversed(opened))
        out.append(piece + closes if piece else "")
        at = max(at, end)
    return out


def layout(text: str, lines: list[str]) -> list[str]:
    """`text` in as many lines as the cue had (`lines`, kept as they are when `text` is
    theirs), the longest as short as its words allow (tags take no width), more only where a
    line would pass LINE_CHARS."""
    if text == " ".join(line.strip() for line in lines):
        return lines
    words, lines = CUE_WORD.findall(text), len(lines)
    if not words:
        return [""] if lines else []
    widths = [len(ANY_TAG.sub("", w)) for w in words]
    lines = max(lines, len(packed(widths, LINE_CHARS)))
    low, high = max(widths), sum(widths) + len(widths)
    while low < high:  # the shortest longest line that takes at most `lines` lines
        middle = (low + high) // 2
        low, high = (low, middle) if len(packed(widths, middle)) <= lines else (middle + 1, high)
    return [" ".join(words[a:b]) for a, b in packed(widths, low)]


def packed(widths: list[int], most: int) -> list[tuple[int, int]]:
    """Words of `widths` put in lines of at most `most` characters, each as full as it goes
    (a longer word alone on its line): each line's (first, end) word."""
    found, start, width = [], 0, -1
    for i, w in enumerate(widths):
        if i > start and width + 1 + w > most:
            found.append((start, i))
            start, width = i, -1
        width += 1 + w
    return [*found, (start, len(widths))]


def read(suffix: str):
    def read_file(data: bytes, name: str, limits) -> Parsed:
        cues = Cues(data, name, suffix, limits.max_file_segments)
        texts = [cues.fragment(i) for i in range(len(cues.cues))]
        found = groups(texts)
        fragments = [
            " ".join(f'<span data-k="{k}">{texts[i]}</span>' for k, i in enumerate(group))
            for group in found
        ]

        def write(pages: list[str]) -> bytes:
            out: list[str] = []
            for group, page in zip(found, pages, strict=True):
                out += split_back(page, group, [texts[i] for i in group])
            return cues.write([flat(t, unescape=not cues.vtt) for t in out])

        return fragment_file(fragments, name, limits.max_file_tags, write)

    return read_file


read_srt, read_vtt = read("srt"), read("vtt")

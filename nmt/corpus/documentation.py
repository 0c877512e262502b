"""Documentation in both languages from Debian packages: paragraph pairs aligned by the
pages' structure, then sentence pairs where both sides cut into as many sentences.

A documentation set (DOC_SETS) is one package or two whose English and German HTML pages are
built from one DocBook source, the German translated with po4a, so a German page has its
English page's blocks (paragraphs, headings, list terms, table cells, captions) in the same
order. A page pair is read only where its two pages have the same blocks (the same tags, in
order); others are skipped and counted, as no aligner is needed where the structure already
aligns. Blocks inside `pre` (commands, listings) are not read. A block pair is one pair of
sentences each where both sides cut (nmt.translation.sentences, no length cut) into the same
number of sentences, else one pair whole (cleaning drops it if it is too long). A paragraph
po4a left untranslated comes out as English on both sides and is dropped as source = target.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lxml import html

from nmt.translation.sentences import SentenceSplitter

BLOCKS = ("p", "h1", "h2", "h3", "h4", "h5", "title", "dt", "td", "th", "caption")
Pairs = list[tuple[str, str]]


@dataclass(frozen=True)
class DocSet:
    """A documentation set: its packages, the English pages (a glob under a package's root)
    and how a German page's path is the English one's (`german`: a replacement)."""

    packages: tuple[str, ...]
    english: str
    german: tuple[str, str]


DOC_SETS = {
    "debian-reference": DocSet(
        ("debian-reference-en", "debian-reference-de"),
        "usr/share/debian-reference/*.en.html",
        (".en.html", ".de.html"),
    ),
    "installation-guide": DocSet(
        ("installation-guide-amd64",),
        "usr/share/doc/installation-guide-amd64/en/*.html",
        ("/en/", "/de/"),
    ),
}


def page_pairs(doc_set: DocSet, roots: list[Path]) -> Iterator[tuple[str, Path, Path]]:
    """(the page's name, its English file, its German file) for each English page of the set
    that has a German one, by name."""
    for root in roots:
        for english in sorted(root.glob(doc_set.english)):
            relative = str(english.relative_to(root)).replace(*doc_set.german)
            german = next((r / relative for r in roots if (r / relative).is_file()), None)
            if german is not None:
                yield str(english.relative_to(root)), english, german


def blocks(path: Path) -> list[tuple[str, str]]:
    """(tag, text with whitespace collapsed) of each block of the page, in order."""
    root = html.fromstring(path.read_bytes())
    return [
        (element.tag, " ".join(element.text_content().split()))
        for element in root.iter(*BLOCKS)
        if not element.xpath("ancestor::pre")
    ]


def aligned(english: list[tuple[str, str]], german: list[tuple[str, str]]) -> Pairs | None:
    """The block pairs of two pages with the same blocks, None where they differ."""
    if [tag for tag, _ in english] != [tag for tag, _ in german]:
        return None
    return [(en, de) for (_, en), (_, de) in zip(english, german, strict=True) if en and de]


SPLITTERS = {lang: SentenceSplitter(lang, max_words=1_000_000) for lang in ("en", "de")}


def sentence_pairs(en: str, de: str) -> Pairs:
    """A block pair as sentence pairs where both cut into as many sentences, else whole."""
    cuts = [SPLITTERS[lang].spans(text) for lang, text in (("en", en), ("de", de))]
    if len(cuts[0]) != len(cuts[1]) or len(cuts[0]) < 2:
        return [(en, de)]
    return [(en[a:b], de[c:d]) for (a, b), (c, d) in zip(*cuts, strict=True)]


def pages(doc_set: DocSet, roots: list[Path]) -> Iterator[tuple[str, Pairs | None]]:
    """(page name, its sentence pairs, or None for a page whose structure differs)."""
    for name, english, german in page_pairs(doc_set, roots):
        found = aligned(blocks(english), blocks(german))
        if found is None:
            yield name, None
        else:
            yield name, [pair for en, de in found for pair in sentence_pairs(en, de)]

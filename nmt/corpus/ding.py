"""The Ding dictionary (Debian's `trans-de-en`) as pairs: example sentences and word pairs.

Each line is `German :: English`; each side holds sub-entries split by " | ", matched by
position (the first is the headword, the later ones its forms and examples). A sub-entry's
alternatives are split by "; ". Annotations in braces and brackets ({f}, [ugs.]) are
dropped. A sub-entry is a sentence when both sides end in . ! or ? and the English holds 4
or more words; the first alternatives of a line's first sub-entry are its word pair.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from nmt.files import read_lines

DICTIONARY = Path("usr/share/trans/de-en")  # inside the package
ANNOTATION = re.compile(r"\s*(\{[^{}]*\}|\[[^\[\]]*\])")
SENTENCE_END = re.compile(r"[.!?][\"'»“]?$")
# a dictionary's placeholders (sth., jdm.) and slashed alternatives: not text as people write it
NOT_TEXT = re.compile(r"\b(sth|sb|etw|jdm|jdn|jds|jd)\.|/|…")
SENTENCE_ALTERNATIVES = re.compile(r"(?<=[.!?]);\s+")
PARENTHESES = re.compile(r"\s*\([^()]*\)")
SENTENCE_WORDS = 4


@dataclass(frozen=True)
class DictionaryLine:
    """What one dictionary line gives: its text (the unit kept whole in one split), the word
    pair of its headword (None where it has none) and its example sentences."""

    line: str
    words: tuple[str, str] | None
    sentences: list[tuple[str, str]]


def entries(root: Path) -> Iterator[DictionaryLine]:
    """Every line of the unpacked package's dictionary with a pair in it."""
    for line in read_lines(root / DICTIONARY):
        if line.startswith("#") or " :: " not in line:
            continue
        entry = parse(line)
        if entry.words or entry.sentences:
            yield entry


def parse(line: str) -> DictionaryLine:
    """One `German :: English` line, sub-entries matched by position."""
    german, english = (side.split(" | ") for side in line.split(" :: ", 1))
    if len(german) != len(english):
        return DictionaryLine(line, None, [])
    pairs = [(plain(en), plain(de)) for de, en in zip(german, english, strict=True)]
    sentences = [pair for en, de in pairs[1:] for pair in sentence_pairs(en, de)]
    return DictionaryLine(line, word_pair(*pairs[0]), sentences)


def plain(text: str) -> str:
    """A sub-entry without its annotations, its spaces single."""
    if "{" in text or "[" in text:  # most have none: the search is skipped
        text = ANNOTATION.sub("", text)
    return " ".join(text.split())


def sentence_pairs(en: str, de: str) -> list[tuple[str, str]]:
    """A sub-entry's sentences: its alternatives paired by position when both sides hold as
    many, else the first of each; none unless every one is a whole sentence."""
    ens, des = SENTENCE_ALTERNATIVES.split(en), SENTENCE_ALTERNATIVES.split(de)
    if len(ens) != len(des):
        ens, des = ens[:1], des[:1]
    return [
        (e, d)
        for e, d in zip(ens, des, strict=True)
        if is_sentence(e) and is_sentence(d) and len(e.split()) >= SENTENCE_WORDS
    ]


def is_sentence(text: str) -> bool:
    """Ends as a sentence, and holds no placeholder or slashed alternative."""
    return bool(SENTENCE_END.search(text)) and not NOT_TEXT.search(text)


def word_pair(en: str, de: str) -> tuple[str, str] | None:
    """The first alternative of each side, without parentheses; None if either is empty or
    not text."""
    first_en = PARENTHESES.sub("", en.split("; ")[0]).strip()
    first_de = PARENTHESES.sub("", de.split("; ")[0]).strip()
    if not first_en or not first_de or NOT_TEXT.search(first_en + " " + first_de):
        return None
    return first_en, first_de

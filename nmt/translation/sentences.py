"""Sentences inside a paragraph: where `segment=sentences` cuts a line before translating it.

A library splitter (sentencex: as exact as pysbd on Multi30k paragraphs and far faster,
measured by bench/bench_splitters.py, docs/benchmarks.md) finds the boundaries that
punctuation marks. Captions, titles, chat and list items often end without punctuation, and
the sentences after them reach the model merged, which it garbles. So a segment is cut again
before a word that starts a sentence: a capital after a lowercase word that ends in a letter,
- at any length where that word is a capitalised function word (`STARTERS`: "A", "The",
  "Two", "They", ...), which English capitalises only at a sentence's start, unless a
  capital follows it too (a title: "reading The Da Vinci Code");
- in a run of more than `max_words` words (far longer than the sentences the model learnt),
  before any capitalised word, unless the word before leads into a name ("in Boston", "the
  Eiffel Tower").
Ordinary sentences with names in them are not cut (bench_splitters: no val or test sentence).
"""

from __future__ import annotations

import re
from itertools import pairwise

import sentencex

SENTENCE_WORD = re.compile(r"\S+")
# Function words: capitalised after a lowercase word, they start a sentence.
STARTERS = frozenset(
    "A An The Two Three Four Five Six Several Some Many This These Those There He She They It "
    "We One Each Every All Both".split()
)
# Words after which a capitalised word is most likely a name, not a new sentence.
NAME_LEADERS = frozenset(
    "a an the of in on at by to from for with and or near into onto as like named called "
    "his her their its our my your this that these those some two three".split()
)


class SentenceSplitter:
    """`spans(text)`: the [start, end) character ranges of the sentences of `text`, in order,
    without surrounding whitespace; what lies between them is whitespace only."""

    def __init__(self, language: str = "en", max_words: int = 25):
        self.language, self.max_words = language, max_words

    def spans(self, text: str) -> list[tuple[int, int]]:
        if not text.strip():
            return []
        spans: list[tuple[int, int]] = []
        at = 0
        for sentence in sentencex.segment(self.language, text):
            found = text.find(sentence.strip(), at)  # the library's pieces, in order
            if found < 0:
                continue
            start, end = found, found + len(sentence.strip())
            at = end
            if start == end:
                continue
            if spans and spans[-1][1] == start:  # not separated by whitespace: one sentence
                start = spans.pop()[0]
            spans.append((start, end))
        return [cut for span in spans for cut in self.recut(text, *span)]

    def recut(self, text: str, start: int, end: int) -> list[tuple[int, int]]:
        """A segment cut before each likely sentence start (see the module docstring)."""
        words = list(SENTENCE_WORD.finditer(text, start, end))
        long = len(words) > self.max_words
        if len(words) < 2:
            return [(start, end)]
        after = [w.group() for w in words[2:]] + [""]  # the word after each candidate
        cuts = [
            word.start()
            for before, word, next_word in zip(words[:-1], words[1:], after, strict=True)
            if starts_sentence(before.group(), word.group())
            and (long or (word.group() in STARTERS and not next_word[:1].isupper()))
        ]
        if not cuts:
            return [(start, end)]
        bounds = [start, *cuts, end]
        return [strip(text, a, b) for a, b in pairwise(bounds)]


def starts_sentence(before: str, word: str) -> bool:
    return (
        word[0].isupper()
        and before[0].islower()  # not a name going on: "the Eiffel Tower"
        and before[-1].islower()
        and before.lower() not in NAME_LEADERS
        and not (len(word) > 1 and word.isupper())  # an acronym: "the USA", "a TV"
    )


def strip(text: str, start: int, end: int) -> tuple[int, int]:
    """[start, end) without the whitespace at either end."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end

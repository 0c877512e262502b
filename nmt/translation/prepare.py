"""The first step: texts cut into Sentences, each read as the model will read it.

With segment=sentences each text is laid out (nmt.translation.layout); with segment=lines,
or a forced prefix, it is one segment. With `protect` rules each sentence's spans become
placeholders (nmt.terms.spans), and a sentence of spans alone is given back as it came; for
a model that never saw a placeholder a sentence with spans is read whole first
(nmt.translation.carried). With search.fold_case a sentence in capitals is read in sentence
case (nmt.translation.casing).
A glossary's entries are found in the sentence as given (a span is no term's word), or in
capitals as folded; a model trained to read terms reads them annotated
(nmt.terms.annotation).
"""

from __future__ import annotations

from nmt.decoding.settings import DecodeConfig
from nmt.inference.engine import Engine
from nmt.inference.planner import line_number
from nmt.terms import spans
from nmt.terms.annotation import annotate
from nmt.terms.glossary import Glossary, Match
from nmt.terms.spans import Rules
from nmt.translation import casing
from nmt.translation.carried import read_whole_first
from nmt.translation.layout import Layout, lay_out
from nmt.translation.sentence import Sentence
from nmt.translation.sentences import SentenceSplitter


def lay_out_texts(
    texts: list[str],
    whole: list[bool],
    splitter: SentenceSplitter,
    first_line_number: int | list[int],
    prefixes: list[str] | None,
) -> tuple[list[Layout], list[Sentence]]:
    """Each text's layout, and the sentences of all of them in order."""
    layouts = [
        Layout.whole(text) if one else lay_out(text, splitter)
        for text, one in zip(texts, whole, strict=True)
    ]
    sentences = [
        Sentence(
            text,
            owner=i,
            number=line_number(first_line_number, i),
            prefix=prefixes[i] if prefixes else None,
        )
        for i, layout in enumerate(layouts)
        for text in layout.sentences
    ]
    return layouts, sentences


def guard(sentences: list[Sentence], rules: list, learnt: bool, numbers: str) -> None:
    """Each sentence's spans as placeholders for a model that learnt to carry them, taken
    out for any other; a sentence of spans alone ("https://example.org", "10:30") has
    nothing to translate."""
    for s in sentences:
        s.guarded = spans.protect(s.text, rules, learnt, numbers)
        g = s.guarded
        s.bare = bool(g.spans and not any(c.isalpha() for c in g.masked(g.text)))
        if s.bare:
            s.guarded = spans.protect(s.text, [])


def read_as_model(sentences: list[Sentence], fold_case: bool) -> None:
    """The line each sentence's model reads: its guarded text, folded out of capitals
    (not a forced prefix's)."""
    for s in sentences:
        line = s.guarded.text if s.guarded else s.text
        folded, s.casing = casing.fold(line) if fold_case and not s.prefix else (line, "")
        s.read = "" if s.bare else folded


def find_terms(sentences: list[Sentence], glossary: Glossary, engine: Engine) -> None:
    """The glossary's entries each sentence holds (none for a forced prefix's), and their
    annotation for a model trained to read them."""
    form, in_place = engine.info.get("terms"), bool(engine.info.get("terms_in_place"))
    for s in sentences:
        if s.prefix:
            s.matches = []
        elif s.casing:
            s.matches = glossary.find(s.read)
        else:
            s.matches = read_words(glossary.find(s.text), s.guarded)
        if form and s.matches:
            s.annotated = annotate(s.read, s.matches, form, in_place)


def read_words(matches: list[Match], guarded: spans.Protected | None) -> list[Match]:
    """Terms found in a sentence as given, their words made those the model read (a span's
    placeholder word stands for the span's words: nmt.terms.spans)."""
    if guarded is None or not guarded.spans:
        return matches
    read_of: dict[int, int] = {}
    for i, words in enumerate(guarded.source_of):
        for w in words:
            read_of.setdefault(w, i)
    return [
        Match(m.entry, range(read_of[m.words.start], read_of[m.words.stop - 1] + 1))
        for m in matches
        if m.words.start in read_of and m.words.stop - 1 in read_of
    ]


def prepare_sentences(
    engine: Engine,
    texts: list[str],
    search: DecodeConfig,
    segment: str,
    splitter: SentenceSplitter,
    first_line_number: int | list[int],
    prefixes: list[str] | None,
    protect: Rules | None,
    glossary: Glossary | None,
) -> tuple[list[Layout], list[bool], list[Sentence]]:
    """The texts' layouts, whether each is one segment, and their sentences, read."""
    rules = protect.compiled() if protect is not None and protect.active else None
    if rules:  # no sentence ends inside a span
        splitter = spans.KeepWhole(splitter, rules)
    whole = [segment == "lines" or bool(prefixes and prefixes[i]) for i in range(len(texts))]
    layouts, sentences = lay_out_texts(texts, whole, splitter, first_line_number, prefixes)
    learnt = bool(engine.info.get("placeholders"))
    if rules:
        guard(sentences, rules, learnt, protect.numbers)
    read_as_model(sentences, search.fold_case)
    if glossary is not None and len(glossary):
        find_terms(sentences, glossary, engine)
    if rules:
        read_whole_first(sentences, learnt, protect.numbers)
    return layouts, whole, sentences

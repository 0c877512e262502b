"""Texts in, translated texts out, on any engine: what every door calls.

The steps, in the order the data flows, each over the same Sentence records
(nmt.translation.sentence): prepare (cut, spans, casing, terms found), search (every sentence
of every text in one Engine.translate call, sharing batches; then again those read whole
first whose translations did not carry their spans: nmt.translation.carried), terms
(chosen and placed as nmt.terms.choice decides), finish (decoded, scored, checked, recased,
spans put back) and join (one Translation per text).
"""

from __future__ import annotations

from collections.abc import Callable

from nmt.decoding.settings import DecodeConfig
from nmt.inference.engine import Engine
from nmt.terms.choice import TermChoice
from nmt.terms.glossary import Glossary
from nmt.terms.spans import Rules
from nmt.translation.carried import not_carried
from nmt.translation.finish import finish
from nmt.translation.join import join
from nmt.translation.prepare import prepare_sentences
from nmt.translation.search import search_sentences, use_terms
from nmt.translation.sentences import SentenceSplitter
from nmt.translation.settings import check_segment
from nmt.translation.translated import Translation


def translate_texts(
    engine: Engine,
    texts: list[str],
    search: DecodeConfig,
    segment: str = "sentences",
    splitter: SentenceSplitter | None = None,
    first_line_number: int | list[int] = 1,
    prefixes: list[str] | None = None,
    alignments: bool = False,
    scores: bool = False,
    stop: Callable[[], bool] | None = None,
    done: Callable[[int], object] | None = None,
    protect: Rules | None = None,
    glossary: Glossary | None = None,
) -> list[Translation]:
    """One Translation per text, in order (see the module docstring). segment: sentences or
    lines (nmt.config.SEGMENTS); `stop` as Engine.translate's, and `done` too (told of
    sentences, not texts); `protect`: the spans to carry unchanged (nmt.terms.spans), None
    for none; `glossary`: the terms to use."""
    check_segment(segment)
    layouts, whole, sentences = prepare_sentences(
        engine,
        texts,
        search,
        segment,
        splitter or SentenceSplitter(),
        first_line_number,
        prefixes,
        protect,
        glossary,
    )
    choice = TermChoice.of(engine, search, glossary, [s.matches for s in sentences])
    search_sentences(engine, sentences, search, choice, alignments, scores, stop, done)
    if protect is not None and protect.active:  # done counted them in the first search
        again = not_carried(engine, sentences, protect.compiled())
        if again:
            search_sentences(engine, again, search, choice, alignments, scores, stop, None)
    use_terms(engine, sentences, search, choice, glossary, alignments, scores, stop)
    finish(
        engine,
        sentences,
        glossary,
        alignments,
        scores,
        protect.numbers if protect is not None else "keep",
    )
    owned: list[list] = [[] for _ in texts]
    for s in sentences:
        owned[s.owner].append(s)
    return [
        join(text, layout, one, mine, alignments, scores, engine.calibration)
        for text, layout, one, mine in zip(texts, layouts, whole, owned, strict=True)
    ]

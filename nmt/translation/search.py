"""The second and third steps: every sentence's n-best list from one `Engine.translate`
call (so they share batches with every other sentence), then its glossary's terms chosen and
placed as the TermChoice says (nmt.terms.choice)."""

from __future__ import annotations

from collections.abc import Callable

from nmt.decoding.settings import DecodeConfig
from nmt.inference.engine import Engine
from nmt.terms.choice import TermChoice
from nmt.terms.glossary import Glossary
from nmt.terms.placing import place_terms, terms_first
from nmt.translation.sentence import Sentence


def search_sentences(
    engine: Engine,
    sentences: list[Sentence],
    search: DecodeConfig,
    choice: TermChoice,
    alignments: bool,
    scores: bool,
    stop: Callable[[], bool] | None,
    done: Callable[[int], object] | None,
) -> None:
    """Each sentence's hypotheses, as the engine finds them for its model text."""
    forced = [s.prefix for s in sentences] if any(s.prefix is not None for s in sentences) else None
    found = engine.translate(
        [s.model_text for s in sentences],
        search,
        [s.number for s in sentences],
        forced,
        alignments=alignments,
        scores=scores,
        stop=stop,
        done=done,
        constraints=choice.constraints([s.matches for s in sentences]),
        # marks add nothing to translate
        sized_as=[s.read for s in sentences] if any(s.annotated for s in sentences) else None,
        hypotheses=choice.hypotheses(search),
        steer=choice.steer,
    )
    for s, nbest in zip(sentences, found, strict=True):
        s.hypotheses = nbest


def use_terms(
    engine: Engine,
    sentences: list[Sentence],
    search: DecodeConfig,
    choice: TermChoice,
    glossary: Glossary | None,
    alignments: bool,
    scores: bool,
    stop: Callable[[], bool] | None,
) -> None:
    """The hypotheses that use the most terms first, then terms still lacking placed; the
    alignments of annotated sentences made links from the sentence's own words."""
    matches = [s.matches for s in sentences]
    found = [s.hypotheses for s in sentences]
    if choice.choose:
        found = terms_first(engine, found, matches, glossary, search.nbest)
    if choice.place:
        place_terms(
            engine,
            search,
            [s.read for s in sentences],
            [s.annotated for s in sentences],
            matches,
            found,
            [s.number for s in sentences],
            glossary,
            alignments,
            scores,
            stop,
            glued_only=choice.glued_only,
        )
    for s, nbest in zip(sentences, found, strict=True):
        s.hypotheses = nbest
        for h in nbest if s.annotated else []:
            h.alignment = s.annotated.source_links(h.alignment)

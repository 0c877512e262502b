"""The fourth step: each sentence's hypotheses made texts, scored, checked and put back.

In order: the tokens decoded to one line each; the terms the best uses; a sentence of spans
alone given back as it came; the scores (Engine.rate); the best translation checked against
its source (numbers, URLs and addresses kept; no loop) and a wrong number fixed where the
word alignment allows (`check_best`); the casing restored; then the spans put back, byte for
byte, in every hypothesis (nmt.terms.spans): last, so an ALL CAPS line's translation is in
capitals and its spans as they were.
"""

from __future__ import annotations

from nmt.decoding.results import Hypothesis
from nmt.inference.engine import Engine
from nmt.inference.output_checks import check, fix_numbers
from nmt.inference.output_text import model_line
from nmt.terms import spans
from nmt.terms.glossary import Glossary
from nmt.terms.placing import TermUse
from nmt.translation import casing
from nmt.translation.sentence import Sentence


def finish(
    engine: Engine,
    sentences: list[Sentence],
    glossary: Glossary | None,
    alignments: bool,
    scores: bool,
    mode: str,
) -> None:
    """Fill each sentence's texts, links, scores, findings and warnings (the module
    docstring); `mode`: the form numbers come out in (nmt.written_numbers.MODES)."""
    decoded = iter(engine.tokenizer.decode([h.tokens for s in sentences for h in s.hypotheses]))
    for s in sentences:
        s.texts = [model_line(next(decoded)) for _ in s.hypotheses]
        if s.matches:
            targets = [m.entry.target for m in s.matches]
            used = glossary.used(s.texts[0] if s.texts else "", targets)
            s.uses = [TermUse(m.entry, u) for m, u in zip(s.matches, used, strict=True)]
        if s.bare:  # given back as it came
            identity = [(i, i) for i in range(len(s.text.split()))] if alignments else None
            s.hypotheses = [Hypothesis([], 0.0, 0.0, alignment=identity)]
            s.texts = [s.text]
    if scores:
        rated = engine.rate(
            [s.model_text for s in sentences],
            [s.hypotheses for s in sentences],
            [s.number for s in sentences],
        )
        for s, r in zip(sentences, rated, strict=True):
            s.rated = r
    check_best(engine, sentences, mode)
    for s in sentences:
        s.links = [h.alignment for h in s.hypotheses]
    guarded = [s for s in sentences if s.guarded is not None]
    align_lost_spans(engine, guarded)
    for s in sentences:
        if s.casing:
            s.texts = [casing.restore(text, s.casing) for text in s.texts]
            if s.rated is not None:
                s.rated.words = [casing.restore(word, s.casing) for word in s.rated.words]
    for s in guarded:
        restore_spans(s)


def check_best(engine: Engine, sentences: list[Sentence], mode: str = "keep") -> None:
    """Each sentence's best translation checked against its source as the model read it
    (nmt.inference.output_checks), and a missing number fixed where its word alignment makes
    that safe: from the search's own alignment where it kept one, else from one forced pass
    over those sentences alone. Fixes the texts (and the scores' words) in place."""
    for s in sentences:
        s.findings = check(s.checked, s.texts[0], mode) if s.texts else None
    fixable = [s for s in sentences if s.findings and s.findings.numbers]
    unaligned = [s for s in fixable if s.hypotheses[0].alignment is None]
    forced = (
        engine.align(
            [s.checked for s in unaligned],
            [s.texts[0] for s in unaligned],
            [s.number for s in unaligned],
        )
        if unaligned
        else []
    )
    links = {id(s): pairs for s, pairs in zip(unaligned, forced, strict=True)}
    for s in fixable:
        alignment = links[id(s)] if id(s) in links else s.hypotheses[0].alignment
        fixed = fix_numbers(s.checked, s.texts[0], alignment or [], s.findings, mode)
        if fixed != s.texts[0]:
            s.texts[0] = fixed
            if s.rated is not None and len(s.rated.words) == len(fixed.split()):
                s.rated.words = fixed.split()


def align_lost_spans(engine: Engine, sentences: list[Sentence]) -> None:
    """The word alignment of each translation that lost or doubled a placeholder and has none
    of the search's, from one forced pass over those alone."""
    todo = [
        (s, p)
        for s in sentences
        for p, text in enumerate(s.texts)
        if s.links[p] is None and spans.needs_alignment(s.guarded, text)
    ]
    if not todo:
        return
    forced = engine.align(
        [s.read for s, _ in todo], [s.texts[p] for s, p in todo], [s.number for s, _ in todo]
    )
    for (s, p), pairs in zip(todo, forced, strict=True):
        s.links[p] = pairs or []


def restore_spans(s: Sentence) -> None:
    """The sentence's spans put back in each of its translations (nmt.terms.spans): its
    texts, links (to the sentence's own words) and the best's score words rewritten; its
    warnings are its best translation's."""
    for p, text in enumerate(s.texts):
        restored = spans.restore(s.guarded, text, s.links[p])
        if p == 0:
            s.span_warnings = restored.warnings
            if s.rated is not None and len(s.rated.words) == len(text.split()):
                old = s.rated.word_log_probs
                s.rated.word_log_probs = [0.0 if o is None else old[o] for o in restored.origin]
                s.rated.words = restored.text.split()
        if s.links[p] is not None:
            s.links[p] = spans.restored_links(s.guarded, restored, s.links[p])
        s.texts[p] = restored.text

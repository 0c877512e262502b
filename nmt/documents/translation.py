"""Texts in, translated texts out, on any engine: what `translate` and the server call.

With segment=sentences each text is laid out (nmt.documents.layout) and the sentences of all
the texts go to the engine together, in one `Engine.translate` call, so they share batches
with every other sentence; each text is then joined back around its kept whitespace and
markers. With segment=lines a text is one segment, as the engine takes it. A text with a
forced prefix is one segment in either mode (the prefix starts its whole translation). With
search.fold_case, a sentence in capitals is read in sentence case (nmt.documents.casing).

Alternative k of a text joins each sentence's k-th best (its last, if it has fewer), scored by
the sum of their scores. Alignments index the whitespace words of the whole source text and
of the whole translation (Pharaoh, as nmt.inference.alignment); scores are the best
translation's, its kept marker words rated certain (log-prob 0). Each sentence's best
translation is checked (numbers, URLs and addresses kept; no loop) and a wrong number fixed
where the alignment allows (`check_best`): a text's warnings are its sentences', and its
confidence is lowered for each problem left. With `protect` rules, each sentence's spans are
read as placeholders and put back, byte for byte, in every alternative (nmt.terms.spans); a span
put back at its aligned position is a warning too. With a `glossary`, the torch engine's beam
search of a sentence that holds terms is steered to them (search.term_bonus,
nmt.decoding.steering); of the hypotheses a beam finished for it, the one that uses the most
comes first (search.term_choice); a sentence whose best translation still lacks one of its
terms then has it placed (nmt.terms.placing, search.term_place: written in, or decoded again
from it), unless its model read the terms and its search was steered to them (then only a
term glued into a longer word is); a model trained to read terms
(data.augment.terms) reads the sentence with its terms annotated (nmt.terms.annotation).
With an exact glossary (glossary_exact), the search must write each term as given
(nmt.decoding.constrained). Each text lists its terms and whether its translation uses
them, and a term not used is a warning.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from nmt.decoding.settings import DecodeConfig
from nmt.decoding.state import Hypothesis
from nmt.documents import casing
from nmt.documents.layout import Layout, lay_out
from nmt.documents.sentences import SentenceSplitter
from nmt.inference.calibration import Calibration
from nmt.inference.engine import Engine
from nmt.inference.output_checks import Findings, check, fix_numbers
from nmt.inference.output_text import one_line
from nmt.inference.planner import line_number
from nmt.inference.scores import Scores
from nmt.jobs.job import SEGMENTS
from nmt.terms import spans
from nmt.terms.annotation import annotate
from nmt.terms.glossary import Glossary, Match
from nmt.terms.placing import MAX_ROUNDS, TermUse, place_terms, terms_first
from nmt.terms.spans import Rules


@dataclass
class Translation:
    """One text's translation. alternatives: (text, score), best first ([] for a text with
    nothing to translate, whose translation is then `empty`: "" for a blank text, the text
    itself for Markdown markers or rules alone); alignments: per alternative, (source word,
    target word) pairs; scores: the best alternative's."""

    source: str
    empty: str = ""
    alternatives: list[tuple[str, float]] = field(default_factory=list)
    alignments: list[list[tuple[int, int]]] | None = None
    scores: Scores | None = None
    # what the output checks found in its sentences (missing numbers, URLs, addresses; a
    # loop) and the numbers they fixed (nmt.inference.output_checks)
    warnings: list[str] = field(default_factory=list)
    # the glossary entries its sentences hold: {"source", "target", "used"} (nmt.terms)
    terms: list[dict] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.alternatives[0][0] if self.alternatives else self.empty


def check_segment(segment: str) -> None:
    if segment not in SEGMENTS:
        raise ValueError(f"segment={segment}: choose one of {', '.join(SEGMENTS)}")


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
    """One Translation per text, in order (see the module docstring); `stop` as
    Engine.translate's, and `done` too (told of sentences, not texts); `protect`: the spans
    to carry unchanged (nmt.terms.spans), None for none; `glossary`: the terms to use."""
    check_segment(segment)
    splitter = splitter or SentenceSplitter()
    rules = protect.compiled() if protect is not None and protect.active else None
    if rules:  # no sentence ends inside a span
        splitter = spans.KeepWhole(splitter, rules)
    whole = [segment == "lines" or bool(prefixes and prefixes[i]) for i in range(len(texts))]
    layouts = [
        Layout.whole(text) if one else lay_out(text, splitter)
        for text, one in zip(texts, whole, strict=True)
    ]
    owner = [i for i, layout in enumerate(layouts) for _ in layout.sentences]
    flat = [s for layout in layouts for s in layout.sentences]
    numbers = [line_number(first_line_number, i) for i in owner]
    forced = [prefixes[i] for i in owner] if prefixes else None  # whole texts' alone
    # placeholders for a model that learnt to carry them; for any other, spans taken out
    learnt = bool(engine.info.get("placeholders"))
    guarded = (
        [spans.protect(line, rules, learnt, protect.numbers) for line in flat] if rules else None
    )
    # a sentence of spans alone ("https://example.org", "10:30") has nothing to translate
    bare = [
        bool(g and g.spans and not any(c.isalpha() for c in g.masked(g.text)))
        for g in guarded or []
    ]
    for j in [j for j, is_bare in enumerate(bare) if is_bare]:
        guarded[j] = spans.protect(flat[j], [])
    folded = [
        casing.fold(line) if search.fold_case and not (forced and forced[j]) else (line, "")
        for j, line in enumerate([g.text for g in guarded] if guarded else flat)
    ]
    read = ["" if bare and bare[j] else line for j, (line, _) in enumerate(folded)]
    matches: list[list[Match]] = [[] for _ in flat]
    if glossary is not None and len(glossary):
        # in the sentence as given (a span is no term's word), but in capitals as folded;
        # a forced prefix is the caller's: no term
        matches = [
            []
            if forced and forced[j]
            else glossary.find(read[j])
            if folded[j][1]
            else read_words(glossary.find(line), guarded, j)
            for j, line in enumerate(flat)
        ]
    # a model trained with glossary terms annotated reads them so (nmt.terms.annotation)
    form, in_place = engine.info.get("terms"), bool(engine.info.get("terms_in_place"))
    annotated = [
        annotate(line, m, form, in_place) if form and m else None
        for line, m in zip(read, matches, strict=True)
    ]
    model_read = [a.text if a else line for a, line in zip(annotated, read, strict=True)]
    # glossary_exact: each term's form given, a hard constraint of the search
    exact = glossary is not None and glossary.exact
    # else, on an engine that can, the search steered to the terms (search.term_bonus)
    steer = (
        not exact
        and any(matches)
        and search.term_bonus > 0
        and engine.constraints_refusal(search) is None
    )
    # (at most MAX_ROUNDS a sentence, as placing tries: a search's candidates grow with them)
    constraints = (
        [[m.entry.target for m in mine[:MAX_ROUNDS]] for mine in matches]
        if exact or steer
        else None
    )
    # the (up to beam_size) hypotheses a beam finished, to rank by the terms they use
    choosing = (
        not exact
        and any(matches)
        and search.term_choice
        and search.strategy == "beam"
        and search.beam_size > search.nbest
    )
    found = engine.translate(
        model_read,
        search,
        numbers,
        forced,
        alignments=alignments,
        scores=scores,
        stop=stop,
        done=done,
        constraints=constraints,
        sized_as=read if any(annotated) else None,  # marks add nothing to translate
        hypotheses=search.beam_size if choosing else 0,
        steer=steer,
    )
    if choosing:
        found = terms_first(engine, found, matches, glossary, search.nbest)
    # a term still lacking is placed; for a model that read it and was steered to it, only
    # one glued into a longer word (where steering took 97% of the terms, placing all the
    # rest doubled the time for 1.5 points)
    if any(matches) and not exact and search.term_place != "off":
        place_terms(
            engine,
            search,
            read,
            annotated,
            matches,
            found,
            numbers,
            glossary,
            alignments,
            scores,
            stop,
            glued_only=bool(form and steer),
        )
    for a, nbest in zip(annotated, found, strict=True):
        for h in nbest if a else []:  # links from the sentence's own words
            h.alignment = a.source_links(h.alignment)
    decoded = iter(engine.tokenizer.decode([h.tokens for nbest in found for h in nbest]))
    sentence_texts = [[one_line(next(decoded)) for _ in nbest] for nbest in found]
    uses = []  # per sentence, whether its best translation uses each of its terms
    for mine, written in zip(matches, sentence_texts, strict=True):
        targets = [m.entry.target for m in mine]
        used = glossary.used(written[0] if written else "", targets) if mine else []
        uses.append([TermUse(m.entry, u) for m, u in zip(mine, used, strict=True)])
    for j in [j for j, is_bare in enumerate(bare) if is_bare]:  # given back as it came
        identity = [(i, i) for i in range(len(flat[j].split()))] if alignments else None
        found[j] = [Hypothesis([], 0.0, 0.0, alignment=identity)]
        sentence_texts[j] = [flat[j]]
    rated = engine.rate(model_read, found, numbers) if scores else [None] * len(flat)
    # checked and fixed as the model wrote them, for the lines as it read them; then recased
    # (placeholders are no numbers to keep: they are checked, and put back, as spans)
    checked = [g.masked(line) for g, line in zip(guarded, read, strict=True)] if guarded else read
    mode = protect.numbers if protect is not None else "keep"
    findings = check_best(engine, checked, found, sentence_texts, rated, numbers, mode)
    links = [[h.alignment for h in nbest] for nbest in found]
    if guarded:
        align_lost_spans(engine, guarded, read, sentence_texts, links, numbers)
    for j, (_, kind) in enumerate(folded):
        if kind:
            sentence_texts[j] = [casing.restore(text, kind) for text in sentence_texts[j]]
            if rated[j] is not None:
                rated[j].words = [casing.restore(word, kind) for word in rated[j].words]
    # spans last: an ALL CAPS line's translation is in capitals, its spans as they were
    span_warnings = (
        restore_spans(guarded, sentence_texts, links, rated) if guarded else [[] for _ in flat]
    )
    calibration = engine.calibration
    results, at = [], 0
    for text, layout in zip(texts, layouts, strict=True):
        mine = range(at, at + len(layout.sentences))
        at += len(layout.sentences)
        # nothing to translate: "" for a whole or blank text; markers and rules stay
        empty = "" if whole[len(results)] or not text.strip() else text
        result = Translation(text, empty=empty)
        results.append(result)
        if all(not found[j] for j in mine):
            continue
        ranks = max(len(found[j]) for j in mine)
        if alignments:
            result.alignments = []
            source_words = [len(text[:start].split()) for start in layout.source_starts()]
        for k in range(ranks):
            picks = [min(k, len(found[j]) - 1) if found[j] else None for j in mine]
            chosen = list(zip(mine, picks, strict=True))
            joined, starts = layout.join(
                [sentence_texts[j][p] if p is not None else "" for j, p in chosen]
            )
            score = sum(found[j][p].score for j, p in chosen if p is not None)
            result.alternatives.append((joined, score))
            if alignments:
                pairs = []
                for (j, p), ds, tgt_start in zip(chosen, source_words, starts, strict=True):
                    if p is None:
                        continue
                    dt = len(joined[:tgt_start].split())
                    pairs += [(s + ds, t + dt) for s, t in links[j][p]]
                result.alignments.append(sorted(pairs))
        result.terms = [use.as_dict() for j in mine for use in uses[j]]
        result.warnings = [
            w
            for j in mine
            for w in (findings[j].warnings if findings[j] else []) + span_warnings[j]
        ] + [
            f"term {t['source']!r} -> {t['target']!r} not used"
            for t in result.terms
            if not t["used"]
        ]
        if scores:
            result.scores = merge_scores(layout, [rated[j] for j in mine], calibration)
            if result.scores is not None and result.warnings:
                for j in mine:
                    if findings[j]:
                        result.scores.confidence = findings[j].lowered(result.scores.confidence)
    return results


def read_words(matches: list[Match], guarded: list | None, j: int) -> list[Match]:
    """Terms found in sentence j as given, their words made those the model read (a span's
    placeholder word stands for the span's words: nmt.terms.spans)."""
    if guarded is None or not guarded[j].spans:
        return matches
    read_of: dict[int, int] = {}
    for i, words in enumerate(guarded[j].source_of):
        for w in words:
            read_of.setdefault(w, i)
    return [
        Match(m.entry, range(read_of[m.words.start], read_of[m.words.stop - 1] + 1))
        for m in matches
        if m.words.start in read_of and m.words.stop - 1 in read_of
    ]


def check_best(
    engine: Engine,
    sources: list[str],
    found: list[list],
    texts: list[list[str]],
    rated: list[Scores | None],
    numbers: list[int],
    mode: str = "keep",
) -> list[Findings | None]:
    """Each sentence's best translation checked against its source (nmt.inference.output_checks),
    and a missing number fixed where its word alignment makes that safe: from the search's own
    alignment where it kept one, else from one forced pass over those sentences alone.
    `sources` as the model read them (folded), `texts` as it wrote them. Fixes `texts` (and
    the scores' words) in place; None for an empty sentence. `mode`: the form numbers must
    come out in (nmt.written_numbers.MODES)."""
    findings = [
        check(src, t[0], mode) if t else None for src, t in zip(sources, texts, strict=True)
    ]
    fixable = [j for j, f in enumerate(findings) if f and f.numbers]
    unaligned = [j for j in fixable if found[j][0].alignment is None]
    links = dict(
        zip(
            unaligned,
            engine.align(
                [sources[j] for j in unaligned],
                [texts[j][0] for j in unaligned],
                [numbers[j] for j in unaligned],
            )
            if unaligned
            else [],
            strict=True,
        )
    )
    for j in fixable:
        alignment = links[j] if j in links else found[j][0].alignment
        fixed = fix_numbers(sources[j], texts[j][0], alignment or [], findings[j], mode)
        if fixed != texts[j][0]:
            texts[j][0] = fixed
            if rated[j] is not None and len(rated[j].words) == len(fixed.split()):
                rated[j].words = fixed.split()
    return findings


def align_lost_spans(
    engine: Engine,
    guarded: list[spans.Protected],
    sources: list[str],
    texts: list[list[str]],
    links: list[list],
    numbers: list[int],
) -> None:
    """The word alignment of each translation that lost or doubled a placeholder and has none
    of the search's, from one forced pass over those alone (`sources` as the model read them,
    `texts` as it wrote them), into `links`."""
    todo = [
        (j, p)
        for j, protected in enumerate(guarded)
        for p, text in enumerate(texts[j])
        if links[j][p] is None and spans.needs_alignment(protected, text)
    ]
    if not todo:
        return
    forced = engine.align(
        [sources[j] for j, _ in todo],
        [texts[j][p] for j, p in todo],
        [numbers[j] for j, _ in todo],
    )
    for (j, p), pairs in zip(todo, forced, strict=True):
        links[j][p] = pairs or []


def restore_spans(
    guarded: list[spans.Protected],
    texts: list[list[str]],
    links: list[list],
    rated: list[Scores | None],
) -> list[list[str]]:
    """Each sentence's spans put back in each of its translations (nmt.terms.spans).
    Rewrites `texts`, `links` (to the sentence's own words) and the best translation's score
    words in place; returns each sentence's warnings (its best translation's)."""
    warnings: list[list[str]] = []
    for j, protected in enumerate(guarded):
        mine: list[str] = []
        for p, text in enumerate(texts[j]):
            restored = spans.restore(protected, text, links[j][p])
            if p == 0:
                mine = restored.warnings
                if rated[j] is not None and len(rated[j].words) == len(text.split()):
                    old = rated[j].word_log_probs
                    rated[j].word_log_probs = [
                        0.0 if o is None else old[o] for o in restored.origin
                    ]
                    rated[j].words = restored.text.split()
            if links[j][p] is not None:
                links[j][p] = spans.restored_links(protected, restored, links[j][p])
            texts[j][p] = restored.text
        warnings.append(mine)
    return warnings


def merge_scores(
    layout: Layout, parts: list[Scores | None], calibration: Calibration | None
) -> Scores | None:
    """One text's scores from its sentences' (None for an empty sentence): their tokens in
    order, and one word per word of the joined translation, a kept marker word with log-prob
    0; the confidence of the tokens together."""
    present = [p for p in parts if p is not None]
    if not present:
        return None
    if len(parts) == 1 and not "".join(layout.kept).split():
        return parts[0]
    words, word_log_probs = [], []
    for kept, part in zip(layout.kept, [*parts, None], strict=True):
        words += kept.split()
        word_log_probs += [0.0] * len(kept.split())
        if part is not None:
            words += part.words
            word_log_probs += part.word_log_probs
    merged = Scores(
        [p for s in present for p in s.pieces],
        [lp for s in present for lp in s.token_log_probs],
        words,
        word_log_probs,
    )
    if calibration is not None:
        merged.confidence = calibration.confidence(merged.mean_log_prob)
    return merged

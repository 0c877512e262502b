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
confidence is lowered for each problem left.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from nmt.decoding.settings import DecodeConfig
from nmt.documents import casing
from nmt.documents.layout import Layout, lay_out
from nmt.documents.sentences import SentenceSplitter
from nmt.inference.calibration import Calibration
from nmt.inference.engine import Engine
from nmt.inference.output_checks import NUMBER, Findings, check, fix_numbers
from nmt.inference.output_text import one_line
from nmt.inference.planner import line_number
from nmt.inference.scores import Scores
from nmt.jobs.job import SEGMENTS


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
) -> list[Translation]:
    """One Translation per text, in order (see the module docstring); `stop` as
    Engine.translate's, and `done` too (told of sentences, not texts)."""
    check_segment(segment)
    splitter = splitter or SentenceSplitter()
    whole = [segment == "lines" or bool(prefixes and prefixes[i]) for i in range(len(texts))]
    layouts = [
        Layout.whole(text) if one else lay_out(text, splitter)
        for text, one in zip(texts, whole, strict=True)
    ]
    owner = [i for i, layout in enumerate(layouts) for _ in layout.sentences]
    flat = [s for layout in layouts for s in layout.sentences]
    numbers = [line_number(first_line_number, i) for i in owner]
    forced = [prefixes[i] for i in owner] if prefixes else None  # whole texts' alone
    folded = [
        casing.fold(line) if search.fold_case and not (forced and forced[j]) else (line, "")
        for j, line in enumerate(flat)
    ]
    read = [line for line, _ in folded]
    found = engine.translate(
        read, search, numbers, forced, alignments=alignments, scores=scores, stop=stop, done=done
    )
    decoded = iter(engine.tokenizer.decode([h.tokens for nbest in found for h in nbest]))
    sentence_texts = [[one_line(next(decoded)) for _ in nbest] for nbest in found]
    rated = engine.rate(read, found, numbers) if scores else [None] * len(flat)
    # checked and fixed as the model wrote them, for the lines as it read them; then recased
    findings = check_best(engine, read, found, sentence_texts, rated, numbers)
    for j, (_, kind) in enumerate(folded):
        if kind:
            sentence_texts[j] = [casing.restore(text, kind) for text in sentence_texts[j]]
            if rated[j] is not None:
                rated[j].words = [casing.restore(word, kind) for word in rated[j].words]
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
                links = []
                for (j, p), ds, tgt_start in zip(chosen, source_words, starts, strict=True):
                    if p is None:
                        continue
                    dt = len(joined[:tgt_start].split())
                    links += [(s + ds, t + dt) for s, t in found[j][p].alignment]
                result.alignments.append(sorted(links))
        result.warnings = [w for j in mine if findings[j] for w in findings[j].warnings]
        if scores:
            result.scores = merge_scores(layout, [rated[j] for j in mine], calibration)
            if result.scores is not None and result.warnings:
                for j in mine:
                    if findings[j]:
                        result.scores.confidence = findings[j].lowered(result.scores.confidence)
    return results


def check_best(
    engine: Engine,
    sources: list[str],
    found: list[list],
    texts: list[list[str]],
    rated: list[Scores | None],
    numbers: list[int],
) -> list[Findings | None]:
    """Each sentence's best translation checked against its source (nmt.inference.output_checks),
    and a missing number fixed where its word alignment makes that safe: from the search's own
    alignment where it kept one, else from one forced pass over those sentences alone.
    `sources` as the model read them (folded), `texts` as it wrote them. Fixes `texts` (and
    the scores' words) in place; None for an empty sentence."""
    findings = [check(src, t[0]) if t else None for src, t in zip(sources, texts, strict=True)]
    fixable = [
        j for j, f in enumerate(findings) if f and any(NUMBER.fullmatch(m) for m in f.missing)
    ]
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
        fixed = fix_numbers(sources[j], texts[j][0], alignment or [], findings[j])
        if fixed != texts[j][0]:
            texts[j][0] = fixed
            if rated[j] is not None and len(rated[j].words) == len(fixed.split()):
                rated[j].words = fixed.split()
    return findings


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

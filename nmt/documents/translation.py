"""Texts in, translated texts out, on any engine: what `translate` and the server call.

With segment=sentences each text is laid out (nmt.documents.layout) and the sentences of all
the texts go to the engine together, in one `Engine.translate` call, so they share batches
with every other sentence; each text is then joined back around its kept whitespace and
markers. With segment=lines a text is one segment, as the engine takes it. A text with a
forced prefix is one segment in either mode (the prefix starts its whole translation).

Alternative k of a text joins each sentence's k-th best (its last, if it has fewer), scored by
the sum of their scores. Alignments index the whitespace words of the whole source text and
of the whole translation (Pharaoh, as nmt.inference.alignment); scores are the best
translation's, its kept marker words rated certain (log-prob 0).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from nmt.decoding.settings import DecodeConfig
from nmt.documents.layout import Layout, lay_out
from nmt.documents.sentences import SentenceSplitter
from nmt.inference.calibration import Calibration
from nmt.inference.engine import Engine
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
) -> list[Translation]:
    """One Translation per text, in order (see the module docstring); `stop` as
    Engine.translate's."""
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
    found = engine.translate(
        flat, search, numbers, forced, alignments=alignments, scores=scores, stop=stop
    )
    decoded = iter(engine.tokenizer.decode([h.tokens for nbest in found for h in nbest]))
    sentence_texts = [[one_line(next(decoded)) for _ in nbest] for nbest in found]
    rated = engine.rate(flat, found, numbers) if scores else [None] * len(flat)
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
        if scores:
            result.scores = merge_scores(layout, [rated[j] for j in mine], calibration)
    return results


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

"""The last step: a text's sentences joined back around its kept whitespace and markers.

Alternative k of a text joins each sentence's k-th best (its last, if it has fewer), scored
by the sum of their scores. Alignments index the whitespace words of the whole source text
and of the whole translation (Pharaoh, as nmt.inference.alignment); scores are the best
translation's, its kept marker words rated certain (log-prob 0). A text's warnings are its
sentences', and a term not used; its confidence is lowered for each problem left.
"""

from __future__ import annotations

from nmt.inference.calibration import Calibration
from nmt.inference.scores import Scores
from nmt.translation.layout import Layout
from nmt.translation.sentence import Sentence
from nmt.translation.translated import Translation


def join(
    text: str,
    layout: Layout,
    whole: bool,
    mine: list[Sentence],
    alignments: bool,
    scores: bool,
    calibration: Calibration | None,
) -> Translation:
    """The Translation of `text` from its sentences `mine`."""
    # nothing to translate: "" for a whole or blank text; markers and rules stay
    result = Translation(text, empty="" if whole or not text.strip() else text)
    if all(not s.hypotheses for s in mine):
        return result
    if alignments:
        result.alignments = []
        source_words = [len(text[:start].split()) for start in layout.source_starts()]
    for k in range(max(len(s.hypotheses) for s in mine)):
        picks = [min(k, len(s.hypotheses) - 1) if s.hypotheses else None for s in mine]
        joined, starts = layout.join(
            [s.texts[p] if p is not None else "" for s, p in zip(mine, picks, strict=True)]
        )
        score = sum(
            s.hypotheses[p].score for s, p in zip(mine, picks, strict=True) if p is not None
        )
        result.alternatives.append((joined, score))
        if alignments:
            pairs = []
            for s, p, ds, tgt_start in zip(mine, picks, source_words, starts, strict=True):
                if p is not None:
                    dt = len(joined[:tgt_start].split())
                    pairs += [(i + ds, t + dt) for i, t in s.links[p]]
            result.alignments.append(sorted(pairs))
    result.terms = [use.as_dict() for s in mine for use in s.uses]
    result.warnings = [w for s in mine for w in s.warnings] + [
        f"term {t['source']!r} -> {t['target']!r} not used" for t in result.terms if not t["used"]
    ]
    if scores:
        result.scores = merge_scores(layout, [s.rated for s in mine], calibration)
        if result.scores is not None and result.warnings:
            for s in mine:
                if s.findings:
                    result.scores.confidence = s.findings.lowered(result.scores.confidence)
    return result


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

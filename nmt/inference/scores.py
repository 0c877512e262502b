"""How far the model trusts a translation: its log-probabilities per token, per word and per
sentence, from one force-decoded pass over the translation (both engines; `Engine.score`).

A word is what the output text separates by spaces: its pieces are the one that starts with
"▁" and those after it up to the next such piece ("▁Hemd" "." is the word "Hemd."), so word i
of `words` is word i of `text.split()`, the indexing of Pharaoh alignments. A word's log-prob
is the sum of its pieces' (the model's probability of the whole word); EOS belongs to no word
but counts in the sentence's figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

WORD_START = "\u2581"  # sentencepiece's mark of a piece that follows a space


@dataclass
class Scores:
    """One translation's scores. pieces: its target pieces and "</s>" last; token_log_probs:
    one per piece; words: the whitespace words; word_log_probs: one per word."""

    pieces: list[str]
    token_log_probs: list[float]
    words: list[str]
    word_log_probs: list[float]
    confidence: float | None = None  # calibrated (nmt.calibrate), None for a model without

    @property
    def log_prob(self) -> float:
        """The sentence's log-probability, EOS included (the search's own log_prob)."""
        return sum(self.token_log_probs)

    @property
    def mean_log_prob(self) -> float:
        """The log-prob per token, EOS included: the raw sentence score (length-fair)."""
        return self.log_prob / len(self.token_log_probs)

    @property
    def word_probs(self) -> list[float]:
        return [math.exp(lp) for lp in self.word_log_probs]


def word_spans(pieces: list[str]) -> list[tuple[int, int]]:
    """[start, end) piece ranges of the words of `pieces` (EOS excluded by the caller), one
    per word of the decoded text's `split()`. A piece that is only "▁" (a space before a piece
    the vocabulary has no ▁-form of) starts its word with the next piece; with no word after
    it (a trailing space), it ends the word before."""
    spans: list[tuple[int, int]] = []
    for i, piece in enumerate(pieces):
        starts = piece.startswith(WORD_START) and (i == 0 or pieces[i - 1] != WORD_START)
        if starts or not spans:
            spans.append((i, i + 1))
        else:
            spans[-1] = (spans[-1][0], i + 1)
    if len(spans) > 1 and not "".join(pieces[spans[-1][0] :]).strip(WORD_START + " "):
        spans[-2:] = [(spans[-2][0], len(pieces))]
    return spans


def scores(pieces: list[str], log_probs: list[float], calibration=None) -> Scores:
    """`pieces` of a translation without EOS, `log_probs` one per piece and EOS last;
    `calibration` (nmt.inference.calibration) gives the confidence."""
    if len(log_probs) != len(pieces) + 1:
        raise ValueError(f"{len(log_probs)} log-probs for {len(pieces)} pieces and EOS")
    spans = word_spans(pieces)
    words = ["".join(pieces[a:b]).replace(WORD_START, " ").strip() for a, b in spans]
    word_log_probs = [sum(log_probs[a:b]) for a, b in spans]
    rated = Scores([*pieces, "</s>"], list(log_probs), words, word_log_probs)
    if calibration is not None:
        rated.confidence = calibration.confidence(rated.mean_log_prob)
    return rated

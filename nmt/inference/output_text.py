"""Translations as text, each on one line whatever the model wrote: the best translation of
each line, the scores' columns."""

from __future__ import annotations

from nmt.decoding.results import Hypothesis
from nmt.inference.scores import Scores
from nmt.tokenizer import Tokenizer

# Characters that would split one output line into several.
SPLITS_A_LINE = str.maketrans({c: " " for c in "\n\r\t\v\f\x1c\x1d\x1e\x85\u2028\u2029"})


def one_line(text: str) -> str:
    """Text safe to write as a single line of a line-aligned (or tab-separated) file."""
    # none of SPLITS_A_LINE is printable: a printable text (nearly all) holds none, and the
    # check costs a seventh of the table's pass
    return text if text.isprintable() else text.translate(SPLITS_A_LINE)


def model_line(decoded: str) -> str:
    """A translation the model wrote, as one line without outer spaces: a lone word-boundary
    piece ("▁") written first or last is no text (MarianTokenizer strips it too, so an
    export to format=hf translates to the same bytes)."""
    return one_line(decoded).strip(" ")


def best_text(tokenizer: Tokenizer, hypotheses: list[list[Hypothesis]]) -> list[str]:
    """The best hypothesis of each sentence as one line of raw text ("" for none)."""
    texts = tokenizer.decode([nbest[0].tokens if nbest else [] for nbest in hypotheses])
    return [model_line(t) for t in texts]


def score_columns(scores: Scores | None) -> str:
    """A translation's scores as four tab-separated columns: log-prob per token (EOS
    included), log-prob, each word's log-prob (space-separated, one per word of the
    translation's text.split()), and the calibrated confidence ("" for a model with no
    calibration). Four empty columns for an empty line."""
    if scores is None:
        return "\t\t\t"
    words = " ".join(f"{lp:.4f}" for lp in scores.word_log_probs)
    confidence = "" if scores.confidence is None else f"{scores.confidence:.4f}"
    return f"{scores.mean_log_prob:.4f}\t{scores.log_prob:.4f}\t{words}\t{confidence}"

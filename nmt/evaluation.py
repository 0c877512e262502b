"""Decode raw source lines and score them with sacreBLEU: the one path that validation BLEU
during training and `nmt.evaluate` share, so the two never disagree."""

from __future__ import annotations

from dataclasses import dataclass

import sacrebleu

from nmt.config import DecodeConfig
from nmt.decode import Hypothesis
from nmt.inference import best_text, translate_lines
from nmt.model import Transformer
from nmt.tokenizer import Tokenizer


@dataclass
class Scores:
    """Corpus scores and their sacreBLEU signatures."""

    bleu: float  # cased, 13a tokenization
    chrf: float  # chrF2
    bleu_lowercase: float
    brevity_penalty: float
    length_ratio: float
    bleu_signature: str
    chrf_signature: str
    bleu_lowercase_signature: str


def score(hypotheses: list[str], references: list[str]) -> Scores:
    """BLEU (cased, 13a), chrF2 and lowercased BLEU of detokenized text against raw references."""
    bleu, chrf, bleu_lc = sacrebleu.BLEU(), sacrebleu.CHRF(), sacrebleu.BLEU(lowercase=True)
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    lc = bleu_lc.corpus_score(hypotheses, [references])
    return Scores(
        bleu=b.score,
        chrf=c.score,
        bleu_lowercase=lc.score,
        brevity_penalty=b.bp,
        length_ratio=b.ratio,
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        bleu_lowercase_signature=str(bleu_lc.get_signature()),
    )


def translate_and_score(
    model: Transformer,
    tokenizer: Tokenizer,
    sources: list[str],
    references: list[str],
    cfg: DecodeConfig,
    max_tokens: int,
) -> tuple[list[str], list[list[Hypothesis]], Scores]:
    """Translate raw source lines; return the best hypotheses as text, the n-best lists and
    the scores against the raw references."""
    if len(sources) != len(references):
        raise ValueError(f"{len(sources)} source lines but {len(references)} references")
    nbest = translate_lines(model, tokenizer, sources, cfg, max_tokens)
    text = best_text(tokenizer, nbest)
    return text, nbest, score(text, references)

"""Decode a dataset and score it with sacreBLEU: the one path that validation BLEU during
training and `nmt.evaluate` share, so the two never disagree."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import sacrebleu
import torch

from nmt.config import DecodeConfig
from nmt.decode import Hypothesis, translate_batch
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


def translate_batches(
    model: Transformer, tokenizer: Tokenizer, batches: Iterable, num_sentences: int, cfg: DecodeConfig,
) -> list[list[Hypothesis]]:
    """Decode every batch (objects with `src` (B, S) and `indices` (B,)) and return the n-best
    lists in dataset order, whatever order the batches came in."""
    results: list[list[Hypothesis] | None] = [None] * num_sentences
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        for batch in batches:
            nbest = translate_batch(model, batch.src.to(device), cfg)
            for index, hyps in zip(batch.indices.tolist(), nbest, strict=True):
                results[index] = hyps
    finally:
        model.train(was_training)
    missing = [i for i, r in enumerate(results) if r is None]
    if missing:
        raise RuntimeError(f"{len(missing)} sentences were not decoded (first: {missing[:5]})")
    return results


def detokenize(tokenizer: Tokenizer, hypotheses: list[list[Hypothesis]]) -> list[str]:
    """The best hypothesis of each sentence as raw text."""
    return tokenizer.decode([nbest[0].tokens for nbest in hypotheses])


def score(hypotheses: list[str], references: list[str]) -> Scores:
    """BLEU (cased, 13a), chrF2 and lowercased BLEU of detokenized text against raw references."""
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    bleu_lc = sacrebleu.metrics.BLEU(lowercase=True)
    refs = [references]
    b = bleu.corpus_score(hypotheses, refs)
    c = chrf.corpus_score(hypotheses, refs)
    lc = bleu_lc.corpus_score(hypotheses, refs)
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


@torch.inference_mode()
def translate_and_score(
    model: Transformer, tokenizer: Tokenizer, batches: Iterable, references: list[str], cfg: DecodeConfig,
) -> tuple[list[str], Scores]:
    """Decode the batches of a split and score the output against its raw references."""
    hypotheses = translate_batches(model, tokenizer, batches, len(references), cfg)
    text = detokenize(tokenizer, hypotheses)
    return text, score(text, references)

"""Sentence-level views of a scored split: BLEU by source length, the best and worst sentences.

Corpus BLEU is not the mean of sentence BLEU, so each length bucket is scored as a corpus of
its own through `nmt.evaluation.scoring.score` (the same sacreBLEU settings as the whole
split). Sentence BLEU (sacreBLEU with effective n-gram order) is only used to rank sentences.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

import sacrebleu

from nmt.evaluation.scoring import score


@dataclass
class BucketScore:
    """Corpus scores of the sentences whose source length falls in one bucket."""

    label: str  # source words, e.g. "11-20" or "31+"
    sentences: int
    bleu: float | None  # None for an empty bucket
    chrf: float | None


def bucket_labels(edges: list[int]) -> list[str]:
    """Upper edges [10, 20, 30] -> ["1-10", "11-20", "21-30", "31+"]."""
    if not edges or any(a >= b for a, b in zip(edges, edges[1:], strict=False)) or edges[0] < 1:
        raise ValueError(f"length_buckets must be increasing positive word counts, got {edges}")
    lows = [1] + [edge + 1 for edge in edges]
    return [f"{low}-{high}" for low, high in zip(lows, edges, strict=False)] + [f"{lows[-1]}+"]


def bucket_members(lengths: list[int], edges: list[int]) -> list[list[int]]:
    """Line indices per bucket (len(edges) + 1 buckets); a length <= edges[0] goes first."""
    members: list[list[int]] = [[] for _ in range(len(edges) + 1)]
    for index, length in enumerate(lengths):
        members[bisect_left(edges, length)].append(index)
    return members


def scores_by_length(
    sources: list[str], hypotheses: list[str], references: list[str], edges: list[int]
) -> list[BucketScore]:
    """BLEU and chrF2 of each source-length bucket (whitespace-separated source words)."""
    labels = bucket_labels(edges)
    members = bucket_members([len(s.split()) for s in sources], edges)
    buckets = []
    for label, indices in zip(labels, members, strict=True):
        if not indices:
            buckets.append(BucketScore(label, 0, None, None))
            continue
        scores = score([hypotheses[i] for i in indices], [references[i] for i in indices])
        buckets.append(BucketScore(label, len(indices), scores.bleu, scores.chrf))
    return buckets


def sentence_bleu(hypotheses: list[str], references: list[str]) -> list[float]:
    """Per-sentence BLEU; effective order keeps short sentences from scoring 0 by default."""
    metric = sacrebleu.BLEU(effective_order=True)
    return [
        metric.sentence_score(h, [r]).score for h, r in zip(hypotheses, references, strict=True)
    ]


def best_and_worst(scores: list[float], n: int) -> tuple[list[int], list[int]]:
    """Indices of the n highest and the n lowest scores; ties go to the earlier line."""
    best = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:n]
    worst = sorted(range(len(scores)), key=lambda i: (scores[i], i))[:n]
    return best, worst

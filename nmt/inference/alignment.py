"""Which source words produced each target word, from the cross-attention of the model's
alignment layer and heads (ModelConfig.alignment_layer / alignment_heads): each target piece is
linked to the source piece it attends to most (EOS on either side left out), and a word pair is
linked when any of their pieces are. Words are whitespace words (scores.word_spans), so the
pairs index `source.split()` and `translation.split()`: Pharaoh format, "0-0 1-2 ...", source
index first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from nmt.inference.scores import word_spans

if TYPE_CHECKING:
    import torch


def word_of_piece(pieces: list[str]) -> list[int]:
    """For each piece, the index of the whitespace word it belongs to."""
    owner = [0] * len(pieces)
    for word, (start, end) in enumerate(word_spans(pieces)):
        owner[start:end] = [word] * (end - start)
    return owner


def word_alignment(
    source_pieces: list[str], target_pieces: list[str], attention: torch.Tensor | np.ndarray
) -> list[tuple[int, int]]:
    """(source word, target word) pairs, sorted. source_pieces without EOS, target_pieces
    without EOS; attention: at least (len(target_pieces), len(source_pieces)), one row per
    target piece, one column per source piece (further rows and columns, EOS's, ignored); a
    tensor, or an array (CTranslate2's lists become one in a third of a tensor's time)."""
    if not source_pieces or not target_pieces:
        return []
    weights = attention[: len(target_pieces), : len(source_pieces)]
    if not isinstance(weights, np.ndarray):  # a tensor, perhaps in half precision
        weights = weights.float()
    best = weights.argmax(1).tolist()
    src_word, tgt_word = word_of_piece(source_pieces), word_of_piece(target_pieces)
    return sorted({(src_word[s], tgt_word[t]) for t, s in enumerate(best)})


def pharaoh(pairs: list[tuple[int, int]]) -> str:
    return " ".join(f"{s}-{t}" for s, t in pairs)


def parse_pharaoh(line: str) -> list[tuple[int, int]]:
    """`pharaoh`'s pairs back from its text."""
    return [(int(s), int(t)) for s, t in (link.split("-") for link in line.split())]

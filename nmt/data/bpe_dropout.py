"""BPE-dropout (Provilkov et al., 2020): a random segmentation of each training text, drawn
again each epoch, so the model sees words in smaller pieces now and then (data.bpe_dropout)."""

from __future__ import annotations

import random
import re
from functools import cached_property

from nmt.tokenizer import Tokenizer
from nmt.vocabulary import UNK_ID


class BpeDropout:
    """Sampled segmentations of a tokenizer's BPE model."""

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer

    def sample(self, texts: list[str], dropout: float, seed: int) -> list[list[int]]:
        """BPE-dropout (Provilkov et al., 2020): texts -> ids of a random segmentation. At each
        merge step every applicable merge is skipped with probability `dropout` and the best
        of the rest is applied, so a word comes in smaller pieces now and then.
        decode(sample(x)) == decode(encode(x)), and with dropout 0 the ids are encode's.

        Our own merge loop over the model's pieces and scores, drawing from
        random.Random(seed): the same (texts, dropout, seed) give the same ids in any process.
        sentencepiece's sampler (enable_sampling) is faster, but its generator is salted
        per process (the same seed draws differently in another process), so a resumed run or
        a spawned worker would read other pieces.
        """
        rng = random.Random(seed)
        return [self.sample_text(text, dropout, rng) for text in texts]

    def sample_text(self, text: str, dropout: float, rng: random.Random) -> list[int]:
        """One text's sampled ids, drawing from `rng` (shared by a call's texts)."""
        tokenizer = self.tokenizer
        normalized = tokenizer.sp.normalize(text)  # spaces as ▁, with the leading dummy ▁
        # No piece holds a ▁ after its first character: each ▁-word is segmented alone.
        words = re.split("(?=▁)", normalized) if tokenizer.words_split_exactly else [normalized]
        scores, ids = self.merge_scores, self.normal_piece_ids
        out, after_unknown = [], False
        for word in words:
            for piece in merge_pieces(word, scores, dropout, rng):
                known = piece in ids
                if known:
                    out.append(ids[piece])
                elif self.byte_fallback:  # outside the vocabulary: its UTF-8 bytes
                    out.extend(
                        self.tokenizer.sp.piece_to_id(f"<0x{b:02X}>") for b in piece.encode()
                    )
                elif not after_unknown:  # as sentencepiece: one unknown id for a run of them
                    out.append(UNK_ID)
                after_unknown = not known
        return out

    @cached_property
    def byte_fallback(self) -> bool:
        """Whether the model spells characters outside its vocabulary as UTF-8 byte pieces."""
        return self.tokenizer.sp.is_byte(self.tokenizer.sp.piece_to_id("<0x00>"))

    @cached_property
    def normal_piece_ids(self) -> dict[str, int]:
        """Every normal piece (not special, byte or unused) -> its id."""
        sp = self.tokenizer.sp
        return {
            sp.id_to_piece(i): i
            for i in range(sp.get_piece_size())
            if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i) or sp.is_unused(i))
        }

    @cached_property
    def merge_scores(self) -> dict[str, float]:
        """Every normal piece -> its score: BPE merges the pair whose union scores highest."""
        return {piece: self.tokenizer.sp.get_score(i) for piece, i in self.normal_piece_ids.items()}


def merge_pieces(
    word: str, merge_scores: dict[str, float], dropout: float, rng: random.Random
) -> list[str]:
    """BPE on one word: from its characters, merge the adjacent pair whose union scores
    highest (the leftmost of equals) until no pair is a piece. With dropout, each candidate
    of a step is skipped with that probability; the step applies the best of the rest."""
    symbols = list(word)
    while len(symbols) > 1:
        best, best_score = -1, 0.0
        for i in range(len(symbols) - 1):
            score = merge_scores.get(symbols[i] + symbols[i + 1])
            if score is None or (best >= 0 and score <= best_score):
                continue  # not a piece, or not better: whether it is skipped changes nothing
            if dropout and rng.random() < dropout:
                continue
            best, best_score = i, score
        if best < 0:
            break
        symbols[best : best + 2] = [symbols[best] + symbols[best + 1]]
    return symbols

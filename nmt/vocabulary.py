"""The special ids of a vocabulary. Ours are fixed: the tokenizer trains sentencepiece to use
them. An imported model keeps its own (Marian: EOS 0, UNK 1, PAD last and PAD as the decoder's
start, no BOS), which its ModelConfig and tokenizer carry."""

from __future__ import annotations

from dataclasses import dataclass

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


@dataclass(frozen=True)
class SpecialIds:
    """pad: what batches are padded with; bos: what the decoder starts from; eos: what ends a
    source and a translation. A search never outputs pad or bos."""

    pad: int = PAD_ID
    bos: int = BOS_ID
    eos: int = EOS_ID


OURS = SpecialIds()

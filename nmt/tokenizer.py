"""A joint sentencepiece BPE model over source and target text: raw text in, raw text out.
(An imported model's pair of models over its own vocabulary: nmt.split_tokenizer.)

Ids are fixed (nmt.vocabulary): pad=0, unk=1, bos=2, eos=3. Training one:
nmt.tokenizer_training; BPE-dropout: nmt.data.bpe_dropout; Arrow columns:
nmt.data.arrow_ids. Identity normalisation, kept whitespace and byte fallback make
`decode(encode(x)) == x` hold for any text without U+2581 (▁), sentencepiece's own sign for a
space, which comes back as a space.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import sentencepiece as spm

from nmt.vocabulary import BOS_ID, EOS_ID, PAD_ID, UNK_ID, SpecialIds

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


class Vocabulary:
    """What every tokenizer offers over its model's vocabulary (`vocabulary_pieces`, by id):
    the pieces of ids, and how they group into whitespace words (for alignments)."""

    pad_id: int
    bos_id: int
    eos_id: int
    unk_id: int
    vocabulary_pieces: list[str]

    @property
    def special_ids(self) -> SpecialIds:
        return SpecialIds(self.pad_id, self.bos_id, self.eos_id)

    @property
    def vocab_size(self) -> int:
        return len(self.vocabulary_pieces)

    def pieces(self, ids: list[int]) -> list[str]:
        """Ids -> their pieces (CTranslate2 reads pieces; attention plots show them)."""
        vocabulary = self.vocabulary_pieces
        return [vocabulary[i] for i in ids]

    @cached_property
    def piece_ids(self) -> dict[str, int]:
        """Piece -> id, the inverse of `vocabulary_pieces`."""
        return {piece: i for i, piece in enumerate(self.vocabulary_pieces)}

    def word_starts(self) -> np.ndarray:
        """(V,) bool: the ids whose piece begins a whitespace word (a leading "▁")."""
        return np.array([piece.startswith("\u2581") for piece in self.vocabulary_pieces])

    @cached_property
    def word_ends(self) -> np.ndarray:
        """(V,) bool, read-only: per id, whether it may follow a whole word: it starts a word,
        is punctuation alone but a hyphen's (which joins a compound: "Bank-Filiale" writes no
        "Bank"), or is EOS (a term of the constrained search ends there)."""
        ends = np.array(
            [
                piece.startswith("\u2581")
                or (all(not c.isalnum() for c in piece) and not piece.startswith("-"))
                or i == self.eos_id
                for i, piece in enumerate(self.vocabulary_pieces)
            ]
        )
        ends.flags.writeable = False  # shared by every call: a caller copies to change it
        return ends

    def word_texts(self, ids, word_starts: np.ndarray) -> list[str]:
        """The words of a row of ids as `piece_words` groups them, each as one token without
        spaces ("▁" where its pieces hold nothing else): `" ".join(...).split()` gives them
        back one for one, which the text's own split() does not where it has a tab, a
        no-break space or two spaces in a row."""
        pieces = self.pieces(ids)
        texts = ("".join(pieces[span.start : span.stop]) for span in piece_words(ids, word_starts))
        return ["\u2581".join(text.replace("\u2581", " ").split()) or "\u2581" for text in texts]


class Tokenizer(Vocabulary):
    """A loaded sentencepiece model with the project's special ids, for both sides."""

    pad_id, unk_id, bos_id, eos_id = PAD_ID, UNK_ID, BOS_ID, EOS_ID

    def __init__(self, model_bytes: bytes):
        self.model_bytes = model_bytes
        self.sp = spm.SentencePieceProcessor(model_proto=model_bytes)
        if (self.sp.pad_id(), self.sp.unk_id(), self.sp.bos_id(), self.sp.eos_id()) != (0, 1, 2, 3):
            raise ValueError("sentencepiece model must use pad=0, unk=1, bos=2, eos=3")
        self.words = WordCache(self.sp)
        self.words_split_exactly = pieces_stop_at_spaces(self.sp)

    @classmethod
    def from_file(cls, path: str | Path) -> Tokenizer:
        return cls(Path(path).read_bytes())

    @property
    def target(self) -> Tokenizer:
        """The tokenizer of target text: this one (the model is joint)."""
        return self

    @property
    def identity(self) -> bytes:
        """Equal for equal tokenizers: what ensembles and averaged checkpoints compare."""
        return self.model_bytes

    def payload(self) -> dict:
        """What a checkpoint stores of it (nmt.checkpoint)."""
        return {"sentencepiece": as_tensor(self.model_bytes)}

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Texts -> piece ids, without BOS/EOS; the same ids as sentencepiece's own encode.

        No piece crosses a space, so a text of words joined by single spaces encodes as the
        concatenation of its words' ids. Each distinct word goes through sentencepiece once and
        is remembered (word counts are Zipfian: nearly every lookup hits), so sentencepiece
        sees each word once rather than every time. Texts with other spacing are encoded whole.
        """
        if not self.words_split_exactly:
            return encode_all(self.sp, texts)
        split = [None if irregular_spacing(text) else text.split(" ") for text in texts]
        cache = self.words.lookup(w for words in split if words for w in words)
        whole = [text for text, words in zip(texts, split, strict=True) if words is None]
        whole_ids = iter(encode_all(self.sp, whole))
        return [
            next(whole_ids) if words is None else [i for w in words for i in cache[w]]
            for words in split
        ]

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Piece ids (special ids are dropped) -> raw text."""
        seqs = [[i for i in seq if i > EOS_ID] for seq in ids]
        if len(seqs) < THREADED_FROM:
            return [self.sp.decode(seq) for seq in seqs]
        return self.sp.decode(seqs)

    @cached_property
    def vocabulary_pieces(self) -> list[str]:
        """Every id's piece, by id (a list lookup, where a corpus's ids are many)."""
        return [self.sp.id_to_piece(i) for i in range(self.sp.get_piece_size())]

    # Dataset.map hashes its function with pickle: keep the bytes, rebuild the processor.
    def __getstate__(self) -> dict:
        return {"model_bytes": self.model_bytes}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["model_bytes"])


class WordCache:
    """Each distinct word's ids, from sentencepiece once: word counts are Zipfian, so nearly
    every lookup hits. At most WORD_CACHE_SIZE words (~100 MB); then it starts again."""

    def __init__(self, sp: spm.SentencePieceProcessor):
        self.sp, self.ids = sp, {}

    def lookup(self, words: Iterable[str]) -> dict[str, list[int]]:
        """The cache, now holding the ids of every one of `words`."""
        if len(self.ids) > WORD_CACHE_SIZE:
            self.ids.clear()
        new_words = list({w for w in words if w not in self.ids})
        self.ids.update(zip(new_words, encode_all(self.sp, new_words), strict=True))
        return self.ids


WORD_CACHE_SIZE = 1_000_000

# sentencepiece starts threads for each call on a list, even an empty one (~0.1 ms on 2
# cores: 20x the decoding of 5 short sentences one by one); shorter lists go one by one
THREADED_FROM = 100


def encode_all(sp: spm.SentencePieceProcessor, texts: list[str], out_type=int) -> list[list]:
    """Texts -> their ids (or pieces: out_type=str): `sp.encode`, one by one below
    THREADED_FROM texts."""
    if len(texts) < THREADED_FROM:
        return [sp.encode(text, out_type=out_type) for text in texts]
    return sp.encode(texts, out_type=out_type)


def irregular_spacing(text: str) -> bool:
    """A leading, trailing or double space: such texts are encoded whole, not word by word."""
    return text[:1] == " " or text[-1:] == " " or "  " in text


def pieces_stop_at_spaces(sp: spm.SentencePieceProcessor) -> bool:
    """True if a text's pieces are its space-separated words' pieces: every word gets the
    leading ▁ (dummy prefix) and no piece holds a ▁ after its first character."""
    if not sp.encode("a", out_type=str)[0].startswith("▁"):
        return False
    return not any("▁" in sp.id_to_piece(i)[1:] for i in range(sp.get_piece_size()))


def piece_words(ids, word_starts: np.ndarray) -> list[range]:
    """The piece positions of each word of a row of ids: from a piece that begins a word
    (`word_starts`, (V,) bool) to the next; the first piece begins one whatever it is."""
    starts = [i for i in range(len(ids)) if word_starts[ids[i]] or i == 0]
    return [range(a, b) for a, b in zip(starts, [*starts[1:], len(ids)], strict=True)]


def as_tensor(data: bytes) -> torch.Tensor:
    """Bytes as a uint8 tensor: how a checkpoint stores a tokenizer's model."""
    import torch  # here: the CTranslate2 path tokenizes without torch

    return torch.frombuffer(bytearray(data), dtype=torch.uint8)

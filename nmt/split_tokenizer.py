"""A source and a target sentencepiece model over one vocabulary of the model's own ids: how
Marian/OPUS-MT models tokenize (MarianTokenizer's `source.spm`, `target.spm`, `vocab.json`).

A text's pieces come from its side's model and are looked up by piece, UNK where its side's
vocabulary lacks one; a translation's pieces are joined by the target model. The special ids
are the model's (Marian: EOS 0, UNK 1, PAD last and the decoder's start). Our own models use
one joint model whose ids are the vocabulary (nmt.tokenizer).

A model with separate source and target vocabularies (`target_vocab.json`) is held in one id
space: the target vocabulary's ids, then the source pieces it lacks (nmt.hf.marian_import).
`target_size` says where the target's ids end, `source_ids` which ids are the source's.
"""

from __future__ import annotations

import sentencepiece as spm

from nmt.tokenizer import Tokenizer, Vocabulary, as_tensor, encode_all
from nmt.vocabulary import SpecialIds


class SplitTokenizer(Vocabulary):
    """Source text through `source_bytes`' model, target text through `target_bytes`', both to
    the ids of `vocabulary` (every id's piece, by id)."""

    words_split_exactly = False  # nmt.data.arrow_ids: encode texts whole, not word by word

    def __init__(
        self,
        source_bytes: bytes,
        target_bytes: bytes,
        vocabulary: list[str],
        special: SpecialIds,
        unk_id: int,
        source_ids: list[int] | None = None,
        target_size: int | None = None,
    ):
        """source_ids: the ids source text may take (None: all); target_size: target text
        takes the ids below it (None: all)."""
        self.source_bytes, self.target_bytes = source_bytes, target_bytes
        self.vocabulary_pieces = list(vocabulary)
        self.source_ids, self.target_size = source_ids, target_size
        self.pad_id, self.bos_id, self.eos_id = special.pad, special.bos, special.eos
        self.unk_id = unk_id
        for name in ("pad_id", "bos_id", "eos_id", "unk_id"):
            if not 0 <= getattr(self, name) < len(vocabulary):
                raise ValueError(f"{name} {getattr(self, name)} is not an id of the vocabulary")
        self.source_sp = spm.SentencePieceProcessor(model_proto=source_bytes)
        self.target_sp = spm.SentencePieceProcessor(model_proto=target_bytes)
        self.dropped = {self.pad_id, self.bos_id, self.eos_id, self.unk_id}
        index = {piece: i for i, piece in enumerate(self.vocabulary_pieces)}
        self.source_index = index
        if source_ids is not None:
            self.source_index = {self.vocabulary_pieces[i]: i for i in source_ids}
        self.target_index = index
        if target_size is not None:
            self.target_index = {p: i for p, i in index.items() if i < target_size}
        self.target = TargetText(self)

    def ids(self, pieces: list[list[str]], index: dict[str, int]) -> list[list[int]]:
        unk = self.unk_id
        return [[index.get(piece, unk) for piece in row] for row in pieces]

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Source texts -> ids, without EOS."""
        return self.ids(encode_all(self.source_sp, texts, str), self.source_index)

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Target ids (special ids dropped) -> text, joined as MarianTokenizer joins them."""
        vocabulary, dropped = self.vocabulary_pieces, self.dropped
        return [
            self.target_sp.decode_pieces([vocabulary[i] for i in row if i not in dropped])
            .replace("\u2581", " ")
            .strip()
            for row in ids
        ]

    @property
    def identity(self) -> bytes:
        """Equal for equal tokenizers: what ensembles and averaged checkpoints compare."""
        specials = f"{self.pad_id} {self.bos_id} {self.eos_id} {self.unk_id}\n"
        words = "\n".join(self.vocabulary_pieces).encode()
        sides = f"{self.source_ids} {self.target_size}".encode()
        return b"\0".join([self.source_bytes, self.target_bytes, specials.encode(), words, sides])

    def payload(self) -> dict:
        """What a checkpoint stores of it (nmt.checkpoint); the other special ids are the
        model's (ModelConfig)."""
        return {
            "sentencepiece": as_tensor(self.source_bytes),
            "target_sentencepiece": as_tensor(self.target_bytes),
            "vocabulary": self.vocabulary_pieces,
            "unk_id": self.unk_id,
        } | self.sides()

    def sides(self) -> dict:
        """source_ids and target_size, for a model of separate vocabularies only."""
        if self.source_ids is None and self.target_size is None:
            return {}
        return {"source_ids": self.source_ids, "target_size": self.target_size}

    # Dataset.map hashes its function with pickle: keep the bytes, rebuild the processors.
    def __getstate__(self) -> dict:
        return {
            "args": (
                self.source_bytes,
                self.target_bytes,
                self.vocabulary_pieces,
                self.special_ids,
                self.unk_id,
                self.source_ids,
                self.target_size,
            )
        }

    def __setstate__(self, state: dict) -> None:
        self.__init__(*state["args"])


class TargetText:
    """A SplitTokenizer's encoding of target text (references, forced prefixes, training
    targets): the target model's pieces, the shared ids."""

    words_split_exactly = False

    def __init__(self, tokenizer: SplitTokenizer):
        self.tokenizer = tokenizer

    def encode(self, texts: list[str]) -> list[list[int]]:
        tokenizer = self.tokenizer
        return tokenizer.ids(encode_all(tokenizer.target_sp, texts, str), tokenizer.target_index)


def tokenizer_from_payload(payload: dict, special: SpecialIds):
    """The tokenizer a checkpoint's payload stores: ours (one joint model) or a split one."""
    source = payload["sentencepiece"].numpy().tobytes()
    if "target_sentencepiece" not in payload:
        return Tokenizer(source)
    target = payload["target_sentencepiece"].numpy().tobytes()
    return SplitTokenizer(
        source,
        target,
        list(payload["vocabulary"]),
        special,
        int(payload["unk_id"]),
        payload.get("source_ids"),
        payload.get("target_size"),
    )


def read_tokenizer_files(folder, special: SpecialIds, settings: dict):
    """The tokenizer an exported directory holds (nmt.ct2.model_dir): `sentencepiece.model`,
    and for a split one `target_sentencepiece.model` with `settings`' vocabulary and unk_id."""
    source = (folder / "sentencepiece.model").read_bytes()
    target = folder / "target_sentencepiece.model"
    if not target.is_file():
        return Tokenizer(source)
    vocabulary, unk = settings["vocabulary"], settings["unk_id"]
    sides = (settings.get("source_ids"), settings.get("target_size"))
    return SplitTokenizer(source, target.read_bytes(), vocabulary, special, unk, *sides)


def write_tokenizer_files(folder, tokenizer, settings: dict) -> None:
    """`read_tokenizer_files`' files, and what `settings` (nmt.json) must hold for it."""
    from nmt.files import write_bytes

    split = isinstance(tokenizer, SplitTokenizer)
    write_bytes(
        folder / "sentencepiece.model", tokenizer.source_bytes if split else tokenizer.model_bytes
    )
    if split:
        write_bytes(folder / "target_sentencepiece.model", tokenizer.target_bytes)
        settings.update(vocabulary=tokenizer.vocabulary_pieces, unk_id=tokenizer.unk_id)
        settings.update(tokenizer.sides())

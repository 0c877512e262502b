"""Joint sentencepiece BPE over source and target text: raw text in, raw text out.

Ids are fixed: pad=0, unk=1, bos=2, eos=3. A trained model is saved as
`<dir>/<name>.model` + `.vocab` + `.json` (the settings and data it was trained on) and reused
while those match. Identity normalisation, kept whitespace and byte fallback make
`decode(encode(x)) == x` hold for any text without U+2581 (▁), sentencepiece's own sign for a
space, which comes back as a space.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import random
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict
from functools import cached_property
from itertools import chain
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sentencepiece as spm

from nmt.config import TokenizerConfig
from nmt.files import write_bytes

log = logging.getLogger(__name__)

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


class Tokenizer:
    """A loaded sentencepiece model with the project's special ids."""

    pad_id, unk_id, bos_id, eos_id = PAD_ID, UNK_ID, BOS_ID, EOS_ID

    def __init__(self, model_bytes: bytes):
        self.model_bytes = model_bytes
        self.sp = spm.SentencePieceProcessor(model_proto=model_bytes)
        if (self.sp.pad_id(), self.sp.unk_id(), self.sp.bos_id(), self.sp.eos_id()) != (0, 1, 2, 3):
            raise ValueError("sentencepiece model must use pad=0, unk=1, bos=2, eos=3")
        self.word_ids: dict[str, list[int]] = {}  # see encode
        self.words_split_exactly = pieces_stop_at_spaces(self.sp)

    @classmethod
    def from_file(cls, path: str | Path) -> Tokenizer:
        return cls(Path(path).read_bytes())

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Texts -> piece ids, without BOS/EOS; the same ids as sentencepiece's own encode.

        No piece crosses a space, so a text of words joined by single spaces encodes as the
        concatenation of its words' ids. Each distinct word goes through sentencepiece once and
        is remembered (word counts are Zipfian: nearly every lookup hits), so sentencepiece
        sees each word once rather than every time. Texts with other spacing are encoded whole.
        """
        if not self.words_split_exactly:
            return self.sp.encode(texts, out_type=int)
        split = [None if irregular_spacing(text) else text.split(" ") for text in texts]
        cache = self.remember(w for words in split if words for w in words)
        whole = [text for text, words in zip(texts, split, strict=True) if words is None]
        whole_ids = iter(self.sp.encode(whole, out_type=int))
        return [
            next(whole_ids) if words is None else [i for w in words for i in cache[w]]
            for words in split
        ]

    def encode_arrow(self, texts: pa.Array | pa.ChunkedArray, id_type: type) -> pa.ListArray:
        """`encode` for an Arrow string array: a ListArray of `id_type` ids, the same ids.

        No Python object is made per word or per piece: Arrow splits the texts into words and
        finds the distinct ones, only those go through the word cache, and numpy gathers each
        text's ids from its words'. Texts with irregular spacing are encoded whole and spliced in.
        """
        if isinstance(texts, pa.ChunkedArray):
            texts = texts.combine_chunks()
        if not self.words_split_exactly or texts.null_count:
            return ids_to_arrow(self.encode(texts.to_pylist()), id_type)
        irregular = pc.or_(
            pc.or_(pc.starts_with(texts, " "), pc.ends_with(texts, " ")),
            pc.match_substring(texts, "  "),
        )
        words = pc.split_pattern(pc.if_else(irregular, "", texts), " ")  # (N,) lists of words
        occurrences = pc.dictionary_encode(words.flatten())
        distinct = occurrences.dictionary.to_pylist()
        cache = self.remember(distinct)
        distinct_ids = ids_to_arrow([cache[w] for w in distinct], id_type)
        starts = distinct_ids.offsets.to_numpy()  # (D + 1,)
        word = occurrences.indices.to_numpy()  # (W,) distinct-word index of every word
        word_lengths = np.diff(starts)[word]
        regular_ids = distinct_ids.values.to_numpy()[segments(starts[:-1][word], word_lengths)]
        word_ends = np.concatenate([[0], np.cumsum(word_lengths)])
        lengths = np.diff(word_ends[words.offsets.to_numpy()])  # (N,) 0 for irregular texts

        rows = np.flatnonzero(irregular.to_numpy(zero_copy_only=False))
        whole = ids_to_arrow(self.sp.encode(texts.take(rows).to_pylist(), out_type=int), id_type)
        whole_lengths = np.diff(whole.offsets.to_numpy())
        regular_lengths = lengths.copy()
        lengths[rows] = whole_lengths
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        ids = np.empty(offsets[-1], dtype=id_type)
        ids[segments(offsets[:-1], regular_lengths)] = regular_ids
        ids[segments(offsets[rows], whole_lengths)] = whole.values.to_numpy()
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(ids))

    def remember(self, words: Iterable[str]) -> dict[str, list[int]]:
        """The word cache, now holding the ids of every one of `words`. No piece crosses a
        space, so a text of words joined by single spaces encodes as its words' ids joined."""
        cache = self.word_ids
        if len(cache) > WORD_CACHE_SIZE:
            cache.clear()
        new_words = list({w for w in words if w not in cache})
        cache.update(zip(new_words, self.sp.encode(new_words, out_type=int), strict=True))
        return cache

    def sample(self, texts: list[str], dropout: float, seed: int) -> list[list[int]]:
        """BPE-dropout (Provilkov et al., 2020): texts -> ids of a random segmentation. At each
        merge step every applicable merge is skipped with probability `dropout` and the best
        of the rest is applied, so a word comes in smaller pieces now and then.
        decode(sample(x)) == decode(encode(x)), and with dropout 0 the ids are encode's.

        Our own merge loop over the model's pieces and scores, drawing from
        random.Random(seed): the same (texts, dropout, seed) give the same ids in any process.
        sentencepiece's sampler (enable_sampling) is ~5x faster, but its generator is salted
        per process (the same seed draws differently in another process), so a resumed run or
        a spawned worker would read other pieces.
        """
        rng = random.Random(seed)
        return [self.sample_text(text, dropout, rng) for text in texts]

    def sample_text(self, text: str, dropout: float, rng: random.Random) -> list[int]:
        """One text's sampled ids, drawing from `rng` (shared by a call's texts)."""
        normalized = self.sp.normalize(text)  # spaces as ▁, with the leading dummy ▁
        # No piece holds a ▁ after its first character: each ▁-word is segmented alone.
        words = re.split("(?=▁)", normalized) if self.words_split_exactly else [normalized]
        scores, ids = self.merge_scores, self.normal_piece_ids
        out, after_unknown = [], False
        for word in words:
            for piece in merge_pieces(word, scores, dropout, rng):
                known = piece in ids
                if known:
                    out.append(ids[piece])
                elif self.byte_fallback:  # a character outside the vocabulary: its UTF-8 bytes
                    out.extend(self.sp.piece_to_id(f"<0x{b:02X}>") for b in piece.encode())
                elif not after_unknown:  # as sentencepiece: one unknown id for a run of them
                    out.append(self.unk_id)
                after_unknown = not known
        return out

    @cached_property
    def byte_fallback(self) -> bool:
        """Whether the model spells characters outside its vocabulary as UTF-8 byte pieces."""
        return self.sp.is_byte(self.sp.piece_to_id("<0x00>"))

    @cached_property
    def normal_piece_ids(self) -> dict[str, int]:
        """Every normal piece (not special, byte or unused) -> its id."""
        sp = self.sp
        return {
            sp.id_to_piece(i): i
            for i in range(sp.get_piece_size())
            if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i) or sp.is_unused(i))
        }

    @cached_property
    def merge_scores(self) -> dict[str, float]:
        """Every normal piece -> its score: BPE merges the pair whose union scores highest."""
        return {piece: self.sp.get_score(i) for piece, i in self.normal_piece_ids.items()}

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Piece ids (special ids are dropped) -> raw text."""
        return self.sp.decode([[i for i in seq if i > EOS_ID] for seq in ids])

    def pieces(self, ids: list[int]) -> list[str]:
        """Ids -> their pieces, for attention plots."""
        return [self.sp.id_to_piece(i) for i in ids]

    # Dataset.map hashes its function with pickle: keep the bytes, rebuild the processor.
    def __getstate__(self) -> dict:
        return {"model_bytes": self.model_bytes}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["model_bytes"])


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


WORD_CACHE_SIZE = 1_000_000  # distinct words remembered by Tokenizer.encode (~100 MB at most)


def irregular_spacing(text: str) -> bool:
    """A leading, trailing or double space: such texts are encoded whole, not word by word."""
    return text[:1] == " " or text[-1:] == " " or "  " in text


def segments(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices of consecutive ragged segments: starts[0] .. starts[0] + lengths[0] - 1,
    then starts[1] .., as one array (a vectorised concatenation of aranges)."""
    ends = np.cumsum(lengths)
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(ends[-1] if len(ends) else 0)


def ids_to_arrow(ids: list[list[int]], id_type: type) -> pa.ListArray:
    """Id lists -> a ListArray of `id_type`, built from flat numpy buffers."""
    lengths = np.fromiter(map(len, ids), dtype=np.int32, count=len(ids))
    offsets = np.zeros(len(ids) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.fromiter(chain.from_iterable(ids), dtype=id_type, count=int(offsets[-1]))
    return pa.ListArray.from_arrays(offsets, flat)


def pieces_stop_at_spaces(sp: spm.SentencePieceProcessor) -> bool:
    """True if a text's pieces are its space-separated words' pieces: every word gets the
    leading ▁ (dummy prefix) and no piece holds a ▁ after its first character."""
    if not sp.encode("a", out_type=str)[0].startswith("▁"):
        return False
    return not any("▁" in sp.id_to_piece(i)[1:] for i in range(sp.get_piece_size()))


def tokenizer_paths(cfg: TokenizerConfig) -> tuple[Path, Path, Path]:
    """The .model, .vocab and .json (metadata) files of a tokenizer config."""
    stem = Path(cfg.dir) / cfg.name
    return stem.with_suffix(".model"), stem.with_suffix(".vocab"), stem.with_suffix(".json")


def texts_sha256(texts: Iterable[str]) -> str:
    """The identity of some training text, read once as it streams by."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def train_or_load(
    cfg: TokenizerConfig,
    texts: Iterable[str] | Callable[[], Iterable[str]],
    data_description: str,
    fingerprint: str | None = None,
) -> Tokenizer:
    """Load `tokenizers/<name>.model` if it was trained with these settings on this text; else
    train it and save it atomically.

    texts: the sentences to train on (non-empty ones are used), or a function giving a fresh
    iterator of them each call, so a corpus can stream from disk in bounded memory (a big
    one sampled down to input_sentence_size by the caller: `nmt.data.encoding`).
    fingerprint: a cheap identity of the data (the `datasets` fingerprint of the training
    split): when it equals the stored one the text is not read at all; else the text's sha256,
    computed as it streams, decides. data_description: a human readable note of the data.
    """
    if not callable(texts):
        texts = list(texts)  # read twice (hash, training): a one-shot iterator would not be
    lines = texts if callable(texts) else (lambda: texts)
    model_path, vocab_path, meta_path = tokenizer_paths(cfg)
    settings = asdict(cfg)
    for machine_only in ("dir", "num_threads"):
        settings.pop(machine_only)
    if model_path.exists() and meta_path.exists():
        stored = json.loads(meta_path.read_text())
        same_data = (fingerprint is not None and stored.get("data_fingerprint") == fingerprint) or (
            stored.get("data_sha256") == texts_sha256(non_empty(lines()))
        )
        if stored.get("settings") == settings and same_data:
            log.info("Reusing tokenizer %s", model_path)
            return Tokenizer.from_file(model_path)
        log.warning(
            "Tokenizer %s was trained with other settings or data: retraining it", model_path
        )
    digest, count = hashlib.sha256(), 0

    def sentences() -> Iterator[str]:  # the training text, hashed and counted as it goes by
        nonlocal count
        for text in non_empty(lines()):
            digest.update(text.encode("utf-8"))
            digest.update(b"\n")
            count += 1
            yield text

    log.info("Training %s tokenizer (%d pieces)", cfg.model_type, cfg.vocab_size)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=sentences(),
        model_writer=model,
        vocab_size=cfg.vocab_size,
        model_type=cfg.model_type,
        character_coverage=cfg.character_coverage,
        normalization_rule_name=cfg.normalization_rule_name,
        remove_extra_whitespaces=False,
        byte_fallback=cfg.byte_fallback,
        pad_id=PAD_ID,
        unk_id=UNK_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
        num_threads=cfg.num_threads,
        input_sentence_size=0,  # the caller sampled; sentencepiece would keep a reservoir
        minloglevel=2,
    )
    log.info("Trained on %d sentences", count)
    tokenizer = Tokenizer(model.getvalue())
    vocab = "".join(
        f"{tokenizer.sp.id_to_piece(i)}\t{tokenizer.sp.get_score(i)}\n"
        for i in range(tokenizer.vocab_size)
    )
    meta = {"settings": settings, "data": data_description, "data_sha256": digest.hexdigest()}
    if fingerprint is not None:
        meta["data_fingerprint"] = fingerprint
    write_bytes(model_path, tokenizer.model_bytes)
    write_bytes(vocab_path, vocab.encode("utf-8"))
    write_bytes(meta_path, json.dumps(meta, indent=2).encode("utf-8"))
    return tokenizer


def non_empty(texts: Iterable[str]) -> Iterator[str]:
    return (t for t in texts if t.strip())

"""Training a joint sentencepiece BPE model, or reusing the one trained before with the same
settings on the same text: `tokenizers/<name>.model` + `.vocab` + `.json` (the settings and
the data it was trained on)."""

from __future__ import annotations

import hashlib
import io
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict
from pathlib import Path

import sentencepiece as spm

from nmt.config import TokenizerConfig
from nmt.files import write_bytes
from nmt.tokenizer import Tokenizer
from nmt.vocabulary import BOS_ID, EOS_ID, PAD_ID, UNK_ID

log = logging.getLogger(__name__)


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
    tokenizer, sha256 = train_tokenizer(cfg, non_empty(lines()))
    meta = {"settings": settings, "data": data_description, "data_sha256": sha256}
    if fingerprint is not None:
        meta["data_fingerprint"] = fingerprint
    vocab = "".join(
        f"{tokenizer.sp.id_to_piece(i)}\t{tokenizer.sp.get_score(i)}\n"
        for i in range(tokenizer.vocab_size)
    )
    write_bytes(model_path, tokenizer.model_bytes)
    write_bytes(vocab_path, vocab.encode("utf-8"))
    write_bytes(meta_path, json.dumps(meta, indent=2).encode("utf-8"))
    return tokenizer


def train_tokenizer(cfg: TokenizerConfig, texts: Iterable[str]) -> tuple[Tokenizer, str]:
    """A sentencepiece model trained on `texts` (streamed once), and their sha256."""
    digest, count = hashlib.sha256(), 0

    def sentences() -> Iterator[str]:  # the training text, hashed and counted as it goes by
        nonlocal count
        for text in texts:
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
    return Tokenizer(model.getvalue()), digest.hexdigest()


def non_empty(texts: Iterable[str]) -> Iterator[str]:
    return (t for t in texts if t.strip())

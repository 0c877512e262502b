"""An exported Hugging Face directory: `MarianMTModel` and `MarianTokenizer` load it with
no code of ours, written whole or not at all.

Layout: `config.json`, `model.safetensors` and `generation_config.json` (the checkpoint's
search, `nmt.hf.marian.generation_settings`), written by transformers' own `save_pretrained`;
MarianTokenizer's `source.spm` and `target.spm` (both our joint sentencepiece model) and
`vocab.json` (every piece at its id, so the ids are ours); `README.md`, the model card
(`nmt.hf.model_card`); `.nmt-export`, the mark of every export (nmt.files.staged_directory).
"""

from __future__ import annotations

import json
from pathlib import Path

from nmt.checkpoint import Checkpoint
from nmt.files import staged_directory, write_bytes, write_text
from nmt.hf.marian import generation_settings, marian_model
from nmt.hf.model_card import model_card
from nmt.split_tokenizer import SplitTokenizer

HF_DTYPES = ("float32", "float16", "bfloat16")  # the weights as saved; transformers casts on load
# checkpoint info that says how the model reads its source (nmt.translation.texts)
LEARNT_INPUTS = ("placeholders", "terms", "terms_in_place")


def export_hf(
    checkpoint: Checkpoint,
    out: str | Path,
    dtype: str,
    overwrite: bool,
    evaluation: dict | None = None,
) -> Path:
    """Write `checkpoint` as a transformers directory `out`, weights in `dtype`; `evaluation`
    (an evaluation.json of this checkpoint, or None) gives the model card its scores."""
    import torch
    from transformers import GenerationConfig

    if dtype not in HF_DTYPES:
        raise ValueError(f"dtype {dtype!r}: the Hugging Face export writes {', '.join(HF_DTYPES)}")
    model = checkpoint.model
    settings, notes = generation_settings(checkpoint.search, model.cfg)
    with staged_directory(out, overwrite) as built:
        hf = marian_model(model).to(getattr(torch, dtype))
        hf.generation_config = GenerationConfig(**settings)
        # what the model learnt to read (placeholders, term annotations), for nmt.import
        hf.config.nmt_reads = {key: checkpoint.info.get(key) for key in LEARNT_INPUTS}
        hf.save_pretrained(built)
        write_tokenizer(checkpoint, built)
        card = model_card(checkpoint, evaluation, settings, notes, dtype)
        write_text(built / "README.md", card)
    return Path(out)


def write_tokenizer(checkpoint: Checkpoint, folder: Path) -> None:
    """MarianTokenizer's files, saved by MarianTokenizer itself: our joint model as source and
    target (an imported model's own two), every piece at its id, the special pieces named,
    `<s>` declared BOS where the model has one (so decoding drops it), no space clean-up (our
    decode has none)."""
    from transformers import MarianTokenizer

    tokenizer = checkpoint.tokenizer
    split = isinstance(tokenizer, SplitTokenizer)
    source = tokenizer.source_bytes if split else tokenizer.model_bytes
    write_bytes(folder / "source.spm", source)
    write_bytes(folder / "target.spm", tokenizer.target_bytes if split else source)
    pieces = tokenizer.vocabulary_pieces
    vocab = {piece: i for i, piece in enumerate(pieces)}
    write_text(folder / "vocab.json", json.dumps(vocab, ensure_ascii=False, indent=1) + "\n")
    special = {
        "eos_token": pieces[tokenizer.eos_id],
        "unk_token": pieces[tokenizer.unk_id],
        "pad_token": pieces[tokenizer.pad_id],
    }
    if tokenizer.bos_id != tokenizer.pad_id:
        special["bos_token"] = pieces[tokenizer.bos_id]
    marian = MarianTokenizer(
        source_spm=str(folder / "source.spm"),
        target_spm=str(folder / "target.spm"),
        vocab=str(folder / "vocab.json"),
        source_lang=checkpoint.src_lang,
        target_lang=checkpoint.tgt_lang,
        clean_up_tokenization_spaces=False,
        **special,
    )
    marian.save_pretrained(folder)

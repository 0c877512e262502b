"""The joint tokenizer fitted to the training split, token ids for every split, and the
cleaning of the training split.

Encoding runs through `Dataset.map`, so its output is cached under the datasets fingerprint of
(input data, function, tokenizer): the Tokenizer pickles as its model bytes, so a retrained
tokenizer means new ids, and the same one means a cache hit.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nmt.config import DataConfig, TokenizerConfig
from nmt.data.arrow_ids import encode_arrow
from nmt.data.sources import load_split
from nmt.tokenizer import Tokenizer
from nmt.tokenizer_training import train_or_load

log = logging.getLogger(__name__)


def build_tokenizer(data_cfg: DataConfig, tok_cfg: TokenizerConfig) -> Tokenizer:
    """Train the joint tokenizer on the training split's source and target text, or load it if
    it was already trained with these settings on this text."""
    return tokenizer_for(data_cfg, tok_cfg, load_split(data_cfg, "train"))


def tokenizer_for(
    data_cfg: DataConfig, tok_cfg: TokenizerConfig, train: datasets.Dataset
) -> Tokenizer:
    """`build_tokenizer` on an already loaded training split: reused when the split's
    `datasets` fingerprint (its files' identity) is the one stored with the tokenizer, else
    trained on its sentences streamed from the Arrow table (`training_sentences`)."""
    description = (
        f"{data_cfg.name}: {data_cfg.source} split {data_cfg.splits['train']!r}, "
        f"{data_cfg.src_lang}+{data_cfg.tgt_lang}, {len(train)} pairs"
    )
    size, seed = tok_cfg.input_sentence_size, tok_cfg.seed
    return train_or_load(
        tok_cfg,
        lambda: training_sentences(train, size, seed),
        description,
        fingerprint=train._fingerprint,  # no public accessor; stable for the same files
    )


STREAM_ROWS = 100_000


def training_sentences(train: datasets.Dataset, limit: int, seed: int) -> Iterator[str]:
    """The split's source sentences, then its target sentences, read STREAM_ROWS rows at a
    time from the Arrow table: never the whole corpus as Python strings. With more than
    `limit` sentences, a uniform sample of `limit` of them (seeded), in corpus order."""
    n = len(train)
    keep = None
    if 2 * n > limit:
        keep = np.sort(np.random.default_rng(seed).choice(2 * n, size=limit, replace=False))
    table = train.with_format("arrow")
    for offset, column in ((0, "src"), (n, "tgt")):
        for start in range(0, n, STREAM_ROWS):
            chunk = table[start : start + STREAM_ROWS][column]
            if keep is not None:
                first, last = np.searchsorted(keep, [offset + start, offset + start + len(chunk)])
                chunk = chunk.take(pa.array(keep[first:last] - offset - start))
            yield from chunk.to_pylist()


ENCODE_BATCH_ROWS = 20_000


def encode_split(ds: datasets.Dataset, tokenizer: Tokenizer, num_proc: int) -> datasets.Dataset:
    """Add `src_ids` and `tgt_ids`: piece ids without BOS/EOS (collate adds those), their
    lengths `src_len`, `tgt_len`, and `blank`: either side empty after strip().

    Ids are stored as uint16 when the vocabulary fits (a quarter of int64's memory), else int32.
    Batches go in and out as Arrow tables (`nmt.data.arrow_ids.encode_arrow`), so the ids reach the
    cache file from flat numpy buffers, never as Python ints. Batches of ENCODE_BATCH_ROWS
    rows: the more rows, the fewer distinct words per row go through Python.
    """
    id_type = np.uint16 if tokenizer.vocab_size <= 1 << 16 else np.int32
    return (
        ds.with_format("arrow")
        .map(
            _encode_batch,
            batched=True,
            batch_size=ENCODE_BATCH_ROWS,
            fn_kwargs={"tokenizer": tokenizer, "id_type": id_type},
            # datasets 5 starts a pool for num_proc=1 too (~0.1 s a split to start one, and a
            # tiny run's data took longer to hand over than to tokenize): one runs in-process
            num_proc=num_proc if num_proc > 1 else None,
            desc="Tokenizing",
        )
        .with_format(None)
    )


def _encode_batch(batch: pa.Table, tokenizer: Tokenizer, id_type: type) -> pa.Table:
    blank = None
    for side, texts in (("src", tokenizer), ("tgt", tokenizer.target)):
        ids = encode_arrow(texts, batch[side], id_type)
        batch = batch.append_column(f"{side}_ids", ids)
        batch = batch.append_column(f"{side}_len", pc.list_value_length(ids))
        empty = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(batch[side])), 0)
        blank = empty if blank is None else pc.or_(blank, empty)
    return batch.append_column("blank", blank)  # a side empty after strip(): clean_train drops it


def add_word_alignments(ds: datasets.Dataset, tokenizer: Tokenizer) -> datasets.Dataset:
    """Add `word_align`: each pair's symmetrised eflomal word alignment as flattened (source
    word, target word) pairs (nmt.data.word_alignment), computed over the whole split at once
    (the aligner learns from all of it) and cached like the ids, under the split's
    fingerprint. The aligner reads each side as the tokenizer's words (`word_texts`), the
    words training maps the links onto (nmt.data.batching), so a tab, a no-break space or a
    double space in a line shifts no link."""
    return ds.map(
        _align_all,
        batched=True,
        batch_size=None,
        fn_kwargs={"tokenizer": tokenizer},
        desc="Word-aligning (eflomal)",
        num_proc=1,
    )


def _align_all(batch: dict, tokenizer: Tokenizer) -> dict:
    from nmt.data.word_alignment import align_corpus

    starts = tokenizer.word_starts()
    src, tgt = (
        [" ".join(tokenizer.word_texts(ids, starts)) for ids in batch[f"{side}_ids"]]
        for side in ("src", "tgt")
    )
    links = align_corpus(src, tgt)
    return {"word_align": [[i for pair in sorted(pairs) for i in pair] for pairs in links]}


def token_lengths(ds: datasets.Dataset) -> tuple[np.ndarray, np.ndarray]:
    """(N,) and (N,) int64: the number of pieces in each row's src_ids and tgt_ids, from the
    small length columns `encode_split` adds.

    A cleaned training split is an index mapping over the encoded table (`clean_train`).
    `datasets` gathers such rows one Python index at a time (~20 s for a million), so the
    columns are taken from the table through the mapping in Arrow (~30 ms).
    """
    return small_column(ds, "src_len"), small_column(ds, "tgt_len")


def small_column(ds: datasets.Dataset, name: str) -> np.ndarray:
    """(N,) int64: a scalar column of `ds`'s rows, taken in Arrow (see `token_lengths`)."""
    column = ds.data.table.column(name)
    mapping = ds._indices  # None, or a one-column table of row numbers (no public accessor)
    if mapping is not None:
        column = column.take(mapping.column(0))
    return column.to_numpy(zero_copy_only=False).astype(np.int64)


def clean_train(
    ds: datasets.Dataset,
    max_len: int,
    max_len_ratio: float,
    drop_duplicates: bool = False,
    drop_copies: bool = False,
) -> datasets.Dataset:
    """Drop training pairs that teach nothing or cost too much, and log how many and why.

    Dropped, each pair counted under the first reason that applies: (1) either side empty after
    strip(); (2) more than max_len pieces on either side; (3) longer/shorter piece count above
    max_len_ratio (misaligned pairs); with `drop_copies`, (4) a target equal to its source
    (left untranslated); with `drop_duplicates`, (5) a repeat of an earlier pair. Validation and
    test data are never cleaned: a reference line must stay aligned with its source line.
    """
    src_len, tgt_len = token_lengths(ds)
    empty = small_column(ds, "blank").astype(bool)  # never the text: its pages stay unread
    longest, shortest = np.maximum(src_len, tgt_len), np.minimum(src_len, tgt_len)
    too_long = ~empty & (longest > max_len)
    bad_ratio = ~empty & ~too_long & (longest > max_len_ratio * np.maximum(shortest, 1))
    dropped = empty | too_long | bad_ratio
    copies = duplicates = np.zeros(len(dropped), dtype=bool)
    if drop_copies or drop_duplicates:
        text = ds.select_columns(["src", "tgt"]).with_format("arrow")[:]
        if drop_copies:
            copies = ~dropped & pc.equal(text["src"], text["tgt"]).to_numpy(zero_copy_only=False)
            dropped |= copies
        if drop_duplicates:
            pairs = pc.binary_join_element_wise(text["src"], text["tgt"], "\t").to_pandas()
            duplicates = ~dropped & pairs.duplicated().to_numpy()
            dropped |= duplicates
    keep = ~dropped
    log.info(
        "Training data: kept %d of %d pairs; dropped %d with an empty side, %d longer than %d "
        "tokens, %d with a length ratio above %g%s%s",
        keep.sum(),
        len(keep),
        empty.sum(),
        too_long.sum(),
        max_len,
        bad_ratio.sum(),
        max_len_ratio,
        f", {copies.sum()} whose target is their source" if drop_copies else "",
        f", {duplicates.sum()} repeats of an earlier pair" if drop_duplicates else "",
    )
    if keep.all():
        return ds
    return ds.select(np.flatnonzero(keep), keep_in_memory=True)  # an index mapping, no copy

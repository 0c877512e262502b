"""Parallel data: load (sources), tokenize and clean (encoding), batch (batching), and the
LightningDataModule over them (module)."""

from nmt.data.batching import (
    Batch,
    BothDirections,
    IndexedPairs,
    SampledPairs,
    TokenBatchSampler,
    collate,
)
from nmt.data.encoding import clean_train, encode_split, token_lengths
from nmt.data.module import TranslationDataModule, build_tokenizer
from nmt.data.sources import PAIR_FEATURES, count_lines, load_split, load_splits, read_lines

__all__ = [
    "PAIR_FEATURES",
    "Batch",
    "BothDirections",
    "IndexedPairs",
    "SampledPairs",
    "TokenBatchSampler",
    "TranslationDataModule",
    "build_tokenizer",
    "clean_train",
    "collate",
    "count_lines",
    "encode_split",
    "load_split",
    "load_splits",
    "read_lines",
    "token_lengths",
]

"""Texts to ids in Arrow: the encoding of a dataset's columns, with no Python object made per
word or per piece (nmt.data.encoding)."""

from __future__ import annotations

from itertools import chain

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nmt.tokenizer import Tokenizer


def encode_arrow(
    tokenizer: Tokenizer, texts: pa.Array | pa.ChunkedArray, id_type: type
) -> pa.ListArray:
    """`tokenizer.encode` for an Arrow string array: a ListArray of `id_type` ids, the same ids.

    No Python object is made per word or per piece: Arrow splits the texts into words and
    finds the distinct ones, only those go through the word cache, and numpy gathers each
    text's ids from its words'. Texts with irregular spacing are encoded whole and spliced in.
    """
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if not tokenizer.words_split_exactly or texts.null_count:
        return ids_to_arrow(tokenizer.encode(texts.to_pylist()), id_type)
    irregular = pc.or_(
        pc.or_(pc.starts_with(texts, " "), pc.ends_with(texts, " ")),
        pc.match_substring(texts, "  "),
    )
    words = pc.split_pattern(pc.if_else(irregular, "", texts), " ")  # (N,) lists of words
    occurrences = pc.dictionary_encode(words.flatten())
    distinct = occurrences.dictionary.to_pylist()
    cache = tokenizer.words.lookup(distinct)
    distinct_ids = ids_to_arrow([cache[w] for w in distinct], id_type)
    starts = distinct_ids.offsets.to_numpy()  # (D + 1,)
    word = occurrences.indices.to_numpy()  # (W,) distinct-word index of every word
    word_lengths = np.diff(starts)[word]
    regular_ids = distinct_ids.values.to_numpy()[segments(starts[:-1][word], word_lengths)]
    word_ends = np.concatenate([[0], np.cumsum(word_lengths)])
    lengths = np.diff(word_ends[words.offsets.to_numpy()])  # (N,) 0 for irregular texts

    rows = np.flatnonzero(irregular.to_numpy(zero_copy_only=False))
    whole = ids_to_arrow(tokenizer.sp.encode(texts.take(rows).to_pylist(), out_type=int), id_type)
    whole_lengths = np.diff(whole.offsets.to_numpy())
    regular_lengths = lengths.copy()
    lengths[rows] = whole_lengths
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    ids = np.empty(offsets[-1], dtype=id_type)
    ids[segments(offsets[:-1], regular_lengths)] = regular_ids
    ids[segments(offsets[rows], whole_lengths)] = whole.values.to_numpy()
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(ids))


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

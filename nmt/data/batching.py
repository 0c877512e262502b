"""Token-budget batches, and their collation into padded tensors.

Teacher forcing convention (collate): for a source x1..xm and a target y1..yn,
    src     = x1 .. xm EOS
    tgt_in  = BOS y1 .. yn     (what the decoder reads)
    tgt_out = y1 .. yn EOS     (what it is trained to predict, position for position)
each padded on the right with PAD (the tokenizer's special ids: ours, or an imported
model's). So a pair costs m+1 source and n+1 target positions: the lengths TokenBatchSampler
takes are len(ids) + 1.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import datasets
import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from nmt.data.bpe_dropout import BpeDropout
from nmt.tokenizer import Tokenizer, piece_words
from nmt.vocabulary import OURS, SpecialIds

log = logging.getLogger(__name__)


class TokenBatchSampler:
    """Batches of dataset indices whose padded size fits a token budget, for one DDP rank.

    src_lens, tgt_lens (N,): positions per pair, EOS/BOS included (len(ids) + 1). A batch of b
    pairs pads to b * max(src) source and b * max(tgt) target positions; both stay <= max_tokens,
    except that a pair over the budget on its own gets a batch of its own (with a warning).

    Pairs are sorted by (source, target) length and packed greedily, which keeps padding low.
    Training (shuffle=True): ties in length are broken at random and the batch order is
    shuffled, both from (seed, epoch): the same for the same seed and epoch on every rank, new
    each epoch. Evaluation (shuffle=False): sorted by length, ties in index order; each batch is
    a list of dataset indices, so the caller can put outputs back in the original order.

    Since only equal-length pairs trade places, the batch sizes are the same every epoch and are
    computed once. For num_replicas > 1 the largest batches are halved until the count divides
    evenly, and rank r takes every num_replicas-th batch: ranks get equally many, disjoint batches
    covering every pair once, with nothing dropped or repeated.

    Lightning calls `set_epoch` through `batch_sampler.sampler` (not on the batch sampler
    itself), so `sampler` is this object.
    """

    def __init__(
        self,
        src_lens: npt.ArrayLike,
        tgt_lens: npt.ArrayLike,
        max_tokens: int,
        shuffle: bool,
        *,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
    ):
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} is outside 0..{num_replicas - 1}")
        self.src_lens = np.asarray(src_lens, dtype=np.int64)
        self.tgt_lens = np.asarray(tgt_lens, dtype=np.int64)
        if self.src_lens.shape != self.tgt_lens.shape:
            raise ValueError(
                f"lengths differ in shape: {self.src_lens.shape}, {self.tgt_lens.shape}"
            )
        self.max_tokens, self.shuffle, self.seed = max_tokens, shuffle, seed
        self.num_replicas, self.rank = num_replicas, rank
        self.epoch = 0
        self.sampler = self  # where Lightning looks for set_epoch
        self._skip = 0
        order = np.lexsort((self.tgt_lens, self.src_lens))
        sizes = _pack(self.src_lens[order], self.tgt_lens[order], max_tokens)
        self._sizes = _split_until_divisible(sizes, num_replicas)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def skip(self, num_batches: int) -> None:
        """Make the next iteration start at this rank's batch `num_batches` of the current epoch.

        For resuming mid-epoch: after set_epoch(e) and skip(k), iteration yields exactly the
        batches of epoch e that a full iteration would have yielded after its first k. Applies to
        the next iteration only. len() stays the full epoch's count, as a loop that resumes its
        batch counter at k expects.
        """
        if not 0 <= num_batches <= len(self):
            raise ValueError(f"cannot skip {num_batches} of {len(self)} batches")
        self._skip = num_batches

    def __len__(self) -> int:
        """Batches per epoch for this rank."""
        return len(self._sizes) // self.num_replicas

    def __iter__(self) -> Iterator[list[int]]:
        start, self._skip = self._skip, 0
        for batch in self.epoch_batches()[self.rank :: self.num_replicas][start:]:
            yield batch.tolist()

    def epoch_batches(self) -> list[np.ndarray]:
        """All ranks' batches of the current epoch, in order: arrays of dataset indices."""
        bounds = np.cumsum(self._sizes)[:-1]
        if not self.shuffle:
            order = np.lexsort((self.tgt_lens, self.src_lens))  # stable: ties in index order
            return np.split(order, bounds) if self._sizes else []
        rng = np.random.default_rng([self.seed, self.epoch])
        ties = rng.random(len(self.src_lens))
        batches = np.split(np.lexsort((ties, self.tgt_lens, self.src_lens)), bounds)
        return [batches[i] for i in rng.permutation(len(self._sizes))]


def _pack(src_lens: np.ndarray, tgt_lens: np.ndarray, max_tokens: int) -> list[int]:
    """Greedy packing of length-sorted pairs: the sizes of consecutive batches.

    A pair joins the current batch unless that would lift batch size * longest source or target
    above max_tokens. Plain Python over slices of _PACK_ROWS lengths (about 0.5 s per million
    pairs), so a corpus of millions never becomes millions of Python ints at once.
    """
    sizes: list[int] = []
    size = longest = oversized = 0
    for start in range(0, len(src_lens), _PACK_ROWS):
        stop = start + _PACK_ROWS
        for s, t in zip(src_lens[start:stop].tolist(), tgt_lens[start:stop].tolist(), strict=True):
            pair = s if s > t else t
            oversized += pair > max_tokens
            grown = pair if pair > longest else longest
            if size and (size + 1) * grown > max_tokens:
                sizes.append(size)
                size, grown = 0, pair
            size, longest = size + 1, grown
    if size:
        sizes.append(size)
    if oversized:
        log.warning(
            "%d pairs are longer than max_tokens=%d on their own: each gets a batch of its own",
            oversized,
            max_tokens,
        )
    return sizes


_PACK_ROWS = 100_000


def _split_until_divisible(sizes: list[int], num_replicas: int) -> list[int]:
    """Halve the largest batch until the count divides by num_replicas (fewer than
    num_replicas halvings; halves of a batch within budget are within budget)."""
    sizes = list(sizes)
    while len(sizes) % num_replicas:
        i = int(np.argmax(sizes))
        if sizes[i] == 1:
            raise ValueError(
                f"{sum(sizes)} pairs cannot give {num_replicas} ranks equally many batches"
            )
        sizes[i : i + 1] = [sizes[i] // 2, sizes[i] - sizes[i] // 2]
    return sizes


class IndexedPairs(torch.utils.data.Dataset):
    """An encoded split as collate's examples {index, src_ids, tgt_ids}.

    `__getitems__` reads a whole batch with one Arrow take; the DataLoader calls it when given a
    batch sampler. `index` is the row in the split, which for validation and test is the line.
    """

    def __init__(self, ds: datasets.Dataset):
        self.links = "word_align" in ds.column_names  # guided alignment: the word alignment too
        self.ds = ds.select_columns(["src_ids", "tgt_ids"] + (["word_align"] if self.links else []))

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, index: int) -> dict:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: list[int]) -> list[dict]:
        src_ids, tgt_ids = self.read_ids(indices)
        examples = [
            {"index": i, "src_ids": s, "tgt_ids": t}
            for i, s, t in zip(indices, src_ids, tgt_ids, strict=True)
        ]
        if self.links:
            for example, pairs in zip(examples, self.ds[indices]["word_align"], strict=True):
                example["word_align"] = pairs
        return examples

    def read_ids(self, indices: list[int]) -> tuple[list, list]:
        """The rows' source and target ids, as stored."""
        rows = self.ds[indices]
        return rows["src_ids"], rows["tgt_ids"]


class SampledPairs(IndexedPairs):
    """Training pairs segmented anew each time they are read, with BPE-dropout
    (`Tokenizer.sample`), as collate's examples {index, src_ids, tgt_ids}.

    The draws depend only on (seed, the sampler's epoch, the batch's first index): a batch of
    an epoch gets the same pieces however often it is read, on any rank or worker (workers get
    a copy of the sampler made after `set_epoch`), so a resumed run reads what the
    uninterrupted one did; the next epoch gets other pieces.
    """

    def __init__(
        self,
        ds: datasets.Dataset,
        tokenizer: Tokenizer,
        dropout: float,
        seed: int,
        batches: TokenBatchSampler,
    ):
        self.ds = ds.select_columns(["src", "tgt"])  # text, not ids: read_ids segments it
        self.links = False  # guided alignment reads the encoded pieces (training.fit refuses it)
        self.dropout_sampler = BpeDropout(tokenizer)
        self.dropout, self.seed, self.batches = dropout, seed, batches

    def read_ids(self, indices: list[int]) -> tuple[list, list]:
        """The rows' source and target text, segmented with this batch's draw."""
        rows = self.ds[indices]
        draw = hash((self.seed, self.batches.epoch, indices[0])) % 2**32
        ids = self.dropout_sampler.sample(rows["src"] + rows["tgt"], self.dropout, draw)
        return ids[: len(indices)], ids[len(indices) :]


class BothDirections(torch.utils.data.Dataset):
    """Every pair of `pairs` twice, as collate's examples: rows 0..N-1 as they are, rows
    N..2N-1 the same pairs with source and target swapped (for bidirectional training)."""

    def __init__(self, pairs: IndexedPairs):
        self.pairs = pairs

    @staticmethod
    def lengths(src_lens: np.ndarray, tgt_lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(N,), (N,) lengths of the pairs -> (2N,), (2N,) lengths of these rows."""
        return np.concatenate([src_lens, tgt_lens]), np.concatenate([tgt_lens, src_lens])

    def __len__(self) -> int:
        return 2 * len(self.pairs)

    def __getitem__(self, index: int) -> dict:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: list[int]) -> list[dict]:
        n = len(self.pairs)
        src_ids, tgt_ids = self.pairs.read_ids([i % n for i in indices])
        return [
            {"index": i, "src_ids": t, "tgt_ids": s}
            if i >= n
            else {"index": i, "src_ids": s, "tgt_ids": t}
            for i, s, t in zip(indices, src_ids, tgt_ids, strict=True)
        ]


@dataclass
class TrainingBatch:
    """Padded tensors for one step; see the module docstring for the teacher forcing layout."""

    src: Tensor  # (B, S) long: x1..xm EOS, PAD
    tgt_in: Tensor  # (B, T) long: BOS y1..yn, PAD
    tgt_out: Tensor  # (B, T) long: y1..yn EOS, PAD
    indices: Tensor  # (B,) long: dataset rows, to restore the original order
    num_tgt_tokens: int  # non-PAD positions of tgt_out, the loss normaliser
    # (N, 3) long (batch row, target position, source position): the pieces of the word
    # alignment of each pair, for guided alignment (collate_with_links); None without
    links: Tensor | None = None


def collate(examples: list[dict], special: SpecialIds = OURS) -> TrainingBatch:
    """[{index, src_ids, tgt_ids}] -> TrainingBatch, with the tokenizer's special ids."""
    eos, pad = special.eos, special.pad
    src = [list(e["src_ids"]) + [eos] for e in examples]
    tgt_in = [[special.bos] + list(e["tgt_ids"]) for e in examples]
    tgt_out = [list(e["tgt_ids"]) + [eos] for e in examples]
    return TrainingBatch(
        src=_pad(src, pad),
        tgt_in=_pad(tgt_in, pad),
        tgt_out=_pad(tgt_out, pad),
        indices=torch.tensor([e["index"] for e in examples], dtype=torch.long),
        num_tgt_tokens=sum(len(t) for t in tgt_out),
    )


def collate_with_links(
    examples: list[dict], word_starts: np.ndarray, special: SpecialIds = OURS
) -> TrainingBatch:
    """`collate`, and each example's word alignment ("word_align": flattened source word,
    target word pairs) as links between their pieces: every piece of the source word with
    every piece of the target word. `word_starts` (V,) bool: the ids whose piece begins a
    word (a leading "▁"): the words the aligner read (nmt.data.encoding). A link past
    the pair's pieces (from a cache of other words) is left out."""
    batch = collate(examples, special)
    links = []
    for row, example in enumerate(examples):
        pairs = np.asarray(example["word_align"], dtype=np.int64).reshape(-1, 2)
        if not len(pairs):
            continue
        src_words = piece_words(np.asarray(example["src_ids"], dtype=np.int64), word_starts)
        tgt_words = piece_words(np.asarray(example["tgt_ids"], dtype=np.int64), word_starts)
        for s, t in pairs:
            if s < len(src_words) and t < len(tgt_words):
                for tp in tgt_words[t]:
                    links.extend((row, tp, sp) for sp in src_words[s])
    batch.links = torch.tensor(links, dtype=torch.long).reshape(-1, 3)
    return batch


def _pad(seqs: list[list[int]], pad: int) -> Tensor:
    """Lists of ids -> (B, max length) long, right-padded with `pad`."""
    tensors = [torch.tensor(s, dtype=torch.long) for s in seqs]
    return pad_sequence(tensors, batch_first=True, padding_value=pad)

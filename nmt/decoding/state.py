"""What greedy and beam search share: the step-by-step decoder, the list of finished
hypotheses, and the batch set-up (the result type: nmt.decoding.results).

Shapes: B sentences, N rows being decoded (live sentences, or live sentences x beams),
S source length, t tokens generated so far, V vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from nmt.decoding.constraints import constrain
from nmt.decoding.penalties import max_output_lengths
from nmt.decoding.results import STOP_EVERY, Hypothesis, Stopped
from nmt.decoding.settings import DecodeConfig
from nmt.model import Ensemble, Transformer
from nmt.vocabulary import SpecialIds


@dataclass
class SearchOptions:
    """How a search runs, beside what it searches for (the DecodeConfig).

    target_prefix (B, P): right-padded ids every output of a sentence starts with, or None;
    record_attention: keep each hypothesis's cross-attention (for plots); use_cache: the KV
    cache (off only to test that it changes nothing); hypotheses: a beam search returns up to
    this many of the hypotheses it finished (at least nbest), its stopping rule unchanged;
    prefix_ends_word (B,) bool: the token after a sentence's prefix starts a word (the prefix
    ends one), with ends_word (V,) bool the ids that may (a word's start, punctuation alone,
    EOS), or None; stop: asked every STOP_EVERY decoder steps, True ends the search with
    Stopped, or None."""

    target_prefix: Tensor | None = None
    record_attention: bool = False
    use_cache: bool = True
    hypotheses: int = 0
    prefix_ends_word: Tensor | None = None
    ends_word: Tensor | None = None
    stop: Callable[[], bool] | None = None


@dataclass
class SearchBatch:
    """A source batch ready for search. src_pad_mask (B, S) True at padding; src_lengths (B,)
    real source tokens (EOS included); max_lengths (B,) most output tokens (EOS excluded);
    target_prefix (B, P) the forced first output tokens of each sentence, right-padded with
    PAD, or None; special: the model's PAD, BOS and EOS; word_start_at (B,): the output
    position whose token must start a word (a prefix that ends one ends there), -1 for none,
    or None, with ends_word (V,) the ids that may."""

    src_pad_mask: Tensor
    src_lengths: Tensor
    max_lengths: Tensor
    special: SpecialIds
    target_prefix: Tensor | None = None
    word_start_at: Tensor | None = None
    ends_word: Tensor | None = None

    def forced_tokens(self, sentence: Tensor, t: int) -> Tensor | None:
        """sentence (N,) each row's sentence -> (N,) the token a forced prefix puts at output
        position t (0-based), PAD where the row is free; None when no row is forced."""
        if self.target_prefix is None or t >= self.target_prefix.size(1):
            return None
        return self.target_prefix[sentence, t]

    def constrain(
        self, log_probs: Tensor, prefix: Tensor, sentence: Tensor, t: int, cfg: DecodeConfig
    ) -> Tensor:
        """log_probs (N, V) of output position t, prefix (N, t + 1) BOS and each row's tokens,
        sentence (N,) each row's sentence -> log_probs with what the position may not hold
        forbidden (nmt.decoding.constraints.constrain): past the sentence's length limit,
        before cfg.min_len, a repeated n-gram, other than its forced prefix's token, a token
        that goes on with a word its prefix ends."""
        return constrain(
            log_probs,
            prefix[:, 1:],
            self.max_lengths[sentence],
            cfg.min_len,
            cfg.no_repeat_ngram_size,
            self.special,
            self.forced_tokens(sentence, t),
            self.banned_tokens(sentence, t),
        )

    def banned_tokens(self, sentence: Tensor, t: int) -> Tensor | None:
        """sentence (N,) each row's sentence -> (N, V) True for the tokens a row may not write
        at output position t: where its prefix ends a word, those that would go on with it
        ("Reh" + "a"); None when no row is held so."""
        if self.word_start_at is None:
            return None
        rows = self.word_start_at[sentence].eq(t)  # (N,)
        if not rows.any():
            return None
        return rows[:, None] & ~self.ends_word[None, :]


def prepare(
    model: Transformer | Ensemble,
    src: Tensor,
    max_len_a: float,
    max_len_b: int,
    target_prefix: Tensor | None = None,
    prefix_ends_word: Tensor | None = None,
    ends_word: Tensor | None = None,
) -> SearchBatch:
    """src (B, S) right-padded ids -> masks and length limits; a forced target prefix (B, P)
    raises a sentence's limit to the prefix's length if it is longer; prefix_ends_word (B,)
    and ends_word (V,) as SearchOptions'."""
    src_pad_mask = model.source_padding_mask(src)
    src_lengths = (~src_pad_mask).sum(dim=1)
    max_lengths = max_output_lengths(src_lengths, max_len_a, max_len_b, model.cfg.max_positions)
    start_at = None  # (B,) where a prefix that ends a word ends, -1 for the other sentences
    if target_prefix is not None:
        if target_prefix.size(1) >= model.cfg.max_positions:
            raise ValueError(
                f"a target prefix of {target_prefix.size(1)} tokens leaves no room in the "
                f"model's {model.cfg.max_positions} positions"
            )
        pad = model.cfg.pad_id
        lengths = target_prefix.ne(pad).sum(dim=1)
        max_lengths = torch.maximum(max_lengths, lengths)
        if prefix_ends_word is not None and prefix_ends_word.any():
            start_at = torch.where(prefix_ends_word, lengths, torch.full_like(lengths, -1))
    ends_word = ends_word if start_at is not None else None
    special = model.cfg.special_ids
    return SearchBatch(
        src_pad_mask, src_lengths, max_lengths, special, target_prefix, start_at, ends_word
    )


class StepDecoder:
    """Runs the decoder of every member one output position at a time for N rows.

    Keeps each member's memory (B', S, D), the src_pad_mask (B', S) of the live sentences
    and, with `use_cache`, each member's `DecoderCache` of every row's prefix, whose
    cross-attention K/V are projected once per sentence (N = B' * beams rows share them).
    Without the cache each step recomputes the whole prefix (slow; for the equality tests
    only). An ensemble's next-token distribution is the mean of its members' probabilities.
    """

    def __init__(
        self,
        model: Transformer | Ensemble,
        src: Tensor,
        src_pad_mask: Tensor,
        record_attention: bool,
        use_cache: bool,
        stop: Callable[[], bool] | None = None,
    ):
        self.stop, self.steps = stop, 0  # asked every STOP_EVERY steps (SearchOptions.stop)
        self.members = members = list(model.members) if isinstance(model, Ensemble) else [model]
        self.src_pad_mask = src_pad_mask
        self.memories = [member.encode(src, src_pad_mask) for member in members]
        self.record_attention = record_attention
        self.caches = (
            [
                member.start_cache(memory, record_attention)
                for member, memory in zip(members, self.memories, strict=True)
            ]
            if use_cache
            else None
        )

    def step(self, prefix: Tensor) -> tuple[Tensor, Tensor | None]:
        """prefix (N, t + 1) = BOS y_1..y_t -> log-probs of y_{t+1} (N, V) float32, and the
        cross-attention of this position (N, S), averaged over members, if recorded; Stopped
        where `stop` says so."""
        self.steps += 1
        if self.stop is not None and self.steps % STOP_EVERY == 0 and self.stop():
            raise Stopped(f"stopped after {self.steps} decoder steps")
        log_probs, attentions = [], []
        for i, (member, memory) in enumerate(zip(self.members, self.memories, strict=True)):
            if self.caches is not None:
                inputs, cache = prefix[:, -1:], self.caches[i]
            else:  # The whole prefix; a fresh cache is cache=None that can record attention.
                inputs = prefix
                cache = member.start_cache(memory, True) if self.record_attention else None
            logits, cache = member.decode(inputs, memory, self.src_pad_mask, cache)
            last = logits[:, -1].float()  # (N, V), written over: the logits are not kept
            log_probs.append(torch.log_softmax(last, dim=-1, out=last))
            if self.record_attention:
                attentions.append(cache.cross_attention[:, -1])
        if len(log_probs) == 1:
            step_log_probs = log_probs[0]
        else:  # log of the mean probability
            step_log_probs = torch.stack(log_probs).logsumexp(dim=0) - math.log(len(log_probs))
        attention = torch.stack(attentions).mean(dim=0) if self.record_attention else None
        return step_log_probs, attention

    def empty_attention(self) -> Tensor | None:
        """(N, 0, S) attention history to grow one row per step, or None when not recorded."""
        if not self.record_attention:
            return None
        N, S, _ = self.memories[0].shape
        return self.memories[0].new_zeros(N, 0, S)

    def select(self, index: Tensor, sources: Tensor | None) -> None:
        """Keep (and repeat) rows `index` (N',): beams re-ranked, finished sentences dropped.
        `sources`: the source rows to keep, or None for all. Rows keep reading sources in
        groups (`Transformer.decode`): N' must be a multiple of the sources kept."""
        if sources is not None:
            self.src_pad_mask = self.src_pad_mask.index_select(0, sources)
        if self.caches is not None:  # the caches hold the cross-attention K/V: memory is done
            self.caches = [Transformer.reorder_cache(c, index, sources) for c in self.caches]
        elif sources is not None:
            self.memories = [memory.index_select(0, sources) for memory in self.memories]


class Finished:
    """Hypotheses that ended (EOS), collected in one chunk per step and sorted at the end."""

    def __init__(self, batch_size: int):
        self.batch_size = batch_size
        self.chunks: list[tuple[Tensor, ...]] = []

    def add(
        self,
        sentence: Tensor,
        tokens: Tensor,
        log_prob: Tensor,
        score: Tensor,
        attention: Tensor | None,
        token_log_probs: Tensor,
        first: Tensor | None = None,
    ) -> None:
        """M hypotheses of one step: sentence (M,) index in the batch, tokens (M, t) without
        BOS/EOS, log_prob and score (M,), attention (M, t + 1, S) or None, token_log_probs
        (M, t + 1): each token's and EOS's; first (M,) bool: those that rank before any
        other whatever the scores (the constrained search's that hold their constraints),
        None for all."""
        if first is None:
            first = torch.ones_like(score, dtype=torch.bool)
        self.chunks.append((sentence, tokens, log_prob, score, attention, token_log_probs, first))

    def results(self, src_lengths: Tensor, nbest: int) -> list[list[Hypothesis]]:
        """Each sentence's `nbest` best hypotheses, those `first` first, then by score;
        impossible ones (-inf) left out."""
        out: list[list[tuple[bool, Hypothesis]]] = [[] for _ in range(self.batch_size)]
        lengths = src_lengths.tolist()
        for sentence, tokens, log_prob, score, attention, token_log_probs, first in self.chunks:
            attention = attention.float().cpu() if attention is not None else None
            rows = zip(
                sentence.tolist(),
                tokens.tolist(),
                log_prob.tolist(),
                score.tolist(),
                token_log_probs.float().tolist(),
                first.tolist(),
                strict=True,
            )
            for i, (b, ids, lp, sc, each, ahead) in enumerate(rows):
                if sc == float("-inf"):
                    continue
                attn = attention[i, :, : lengths[b]] if attention is not None else None
                out[b].append((ahead, Hypothesis(ids, sc, lp, attn, token_log_probs=each)))
        return [[hyp for _, hyp in sorted(hyps, key=_rank, reverse=True)][:nbest] for hyps in out]


def _rank(entry: tuple[bool, Hypothesis]) -> tuple[bool, float]:
    return entry[0], entry[1].score


def start_prefix(batch_size: int, bos: int, device: torch.device) -> Tensor:
    """(B, 1) decoder input: BOS for every row."""
    return torch.full((batch_size, 1), bos, dtype=torch.long, device=device)


class SearchStart(NamedTuple):
    """What every search begins with: the batch's masks and limits, the step decoder, an empty
    finished list, each row's sentence (B,) and each row's prefix (B, 1): BOS alone."""

    batch: SearchBatch
    decoder: StepDecoder
    finished: Finished
    sentence: Tensor
    prefix: Tensor


def start_search(
    model: Transformer | Ensemble, src: Tensor, cfg: DecodeConfig, options: SearchOptions | None
) -> SearchStart:
    """src (B, S) right-padded ids ending in EOS, cfg's length limits, the options -> the
    search's starting state."""
    options = options or SearchOptions()
    batch = prepare(
        model,
        src,
        cfg.max_len_a,
        cfg.max_len_b,
        options.target_prefix,
        options.prefix_ends_word,
        options.ends_word,
    )
    record, cache = options.record_attention, options.use_cache
    decoder = StepDecoder(model, src, batch.src_pad_mask, record, cache, options.stop)
    n = src.size(0)
    sentence = torch.arange(n, device=src.device)
    return SearchStart(
        batch, decoder, Finished(n), sentence, start_prefix(n, batch.special.bos, src.device)
    )


@dataclass
class LiveRows:
    """The live hypotheses of a beam search between steps (B' sentences, N = B' * beams
    rows): sentence (B',) each one's index in the batch; log_prob (B', beams) float32 sums
    of their token log-probs; prefix (N, t + 1) BOS and their tokens; each (N, t) their
    tokens' log-probs; attention (N, t, S) the cross-attention history, or None."""

    sentence: Tensor
    log_prob: Tensor
    prefix: Tensor
    each: Tensor
    attention: Tensor | None

    @classmethod
    def start(cls, decoder: StepDecoder, sentence: Tensor, prefix: Tensor) -> LiveRows:
        n, device = sentence.size(0), sentence.device
        log_prob = torch.zeros(n, 1, device=device)
        each = torch.zeros(n, 0, device=device)
        return cls(sentence, log_prob, prefix, each, decoder.empty_attention())

    def record(self, step_attention: Tensor | None) -> None:
        """Add this step's cross-attention (N, S) to the history (N, t + 1, S)."""
        if self.attention is not None:
            self.attention = torch.cat([self.attention, step_attention[:, None]], dim=1)

    def finish(
        self,
        finished: Finished,
        rows: Tensor,
        sentence: Tensor,
        log_prob: Tensor,
        score: Tensor,
        eos_log_prob: Tensor,
        first: Tensor | None = None,
    ) -> None:
        """The hypotheses of `rows` (M,) end with EOS (its log-prob (M,)): sentence, log_prob,
        score (M,) and first as Finished.add's."""
        finished.add(
            sentence,
            self.prefix[rows, 1:],
            log_prob,
            score,
            self.attention[rows] if self.attention is not None else None,
            torch.cat([self.each[rows], eos_log_prob[:, None]], dim=1),
            first=first,
        )

    def next(
        self, rows: Tensor, keep: Tensor, token: Tensor, log_prob: Tensor, token_log_prob: Tensor
    ) -> LiveRows:
        """The next step's rows: rows (N',) extended by token (N',), whose log-prob is
        token_log_prob (N',); keep (B'',) the sentences still searching; log_prob (B'', k)."""
        return LiveRows(
            self.sentence[keep],
            log_prob,
            torch.cat([self.prefix[rows], token[:, None]], dim=1),
            torch.cat([self.each[rows], token_log_prob[:, None]], dim=1),
            self.attention[rows] if self.attention is not None else None,
        )

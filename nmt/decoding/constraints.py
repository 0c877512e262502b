"""Tokens the search may not choose at the next step, applied to the step's log-probs.

Constraints only forbid (set -inf); they never renormalise, so scores stay the model's own
log-probs and every step's log-prob stays <= 0 (the early-stop bound relies on it).
"""

from __future__ import annotations

import torch
from torch import Tensor

from nmt.vocabulary import SpecialIds


def repeated_ngram_mask(tokens: Tensor, n: int, vocab_size: int) -> Tensor:
    """tokens (N, t) generated so far -> (N, V) bool, True for tokens that would repeat an n-gram.

    A token w is banned when (last n-1 tokens, w) already occurs as an n-gram of `tokens`.
    """
    N, t = tokens.shape
    hits = torch.zeros(N, vocab_size, device=tokens.device)  # (N, V)
    if t >= n:
        ngrams = tokens.unfold(1, n, 1)  # (N, t - n + 1, n)
        context = tokens[:, t - n + 1 :]  # (N, n - 1)
        matches = (ngrams[:, :, :-1] == context[:, None, :]).all(dim=-1)  # (N, t - n + 1)
        hits.scatter_add_(1, ngrams[:, :, -1], matches.to(hits.dtype))
    return hits > 0


def constrain(
    log_probs: Tensor,
    tokens: Tensor,
    max_lengths: Tensor,
    min_len: int,
    no_repeat_ngram_size: int,
    special: SpecialIds,
    forced: Tensor | None = None,
    banned: Tensor | None = None,
) -> Tensor:
    """Forbid, in place, what the next token may not be; returns log_probs (N, V) float32.

    tokens (N, t): each row's output so far (BOS excluded); max_lengths (N,): each row's
    maximum output length; forced (N,): a target prefix's token for this position, PAD where
    the row is free, or None; banned (N, V): tokens a row may not write here (a word's
    continuation after a prefix that ends one), or None; special: the model's PAD, BOS and
    EOS. PAD and BOS are never allowed; EOS not while t < min_len; no token that repeats an
    n-gram, nor a banned one; at t == max length only EOS, with its own log-prob (forced end,
    which wins over min_len); and a row with a forced token allows that token alone, with its
    own log-prob (a prefix wins over every other rule).
    """
    t = tokens.size(1)
    if forced is not None:
        is_forced = forced.ne(special.pad)  # (N,)
        forced_log_prob = log_probs.gather(1, forced[:, None])  # (N, 1), before any rule
    eos = special.eos
    eos_log_prob = log_probs[:, eos].clone()  # (N,), before min_len forbids it
    log_probs[:, [special.pad, special.bos]] = float("-inf")
    if t < min_len:
        log_probs[:, eos] = float("-inf")
    if no_repeat_ngram_size > 0:
        repeats = repeated_ngram_mask(tokens, no_repeat_ngram_size, log_probs.size(1))
        log_probs.masked_fill_(repeats, float("-inf"))
    if banned is not None:
        log_probs.masked_fill_(banned, float("-inf"))
    at_end = t >= max_lengths  # (N,)
    if at_end.any():
        log_probs.masked_fill_(at_end[:, None], float("-inf"))
        log_probs[:, eos] = torch.where(at_end, eos_log_prob, log_probs[:, eos])
    if forced is not None and is_forced.any():
        only = torch.full_like(log_probs, float("-inf")).scatter_(
            1, forced[:, None], forced_log_prob
        )
        log_probs = torch.where(is_forced[:, None], only, log_probs)
    return log_probs

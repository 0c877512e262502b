"""Greedy search: the most probable token at every step, one row per sentence; or, with a
`pick` rule (nmt.decoding.sampling), a token drawn from the step's distribution.

State between steps (N = sentences still decoding): prefix (N, t + 1) BOS and tokens so far;
sentence (N,) each row's index in the batch; log_prob (N,) float32 sum of token log-probs;
attention (N, t, S) or None. A row leaves the batch as soon as it emits EOS.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from nmt.decoding.results import Hypothesis
from nmt.decoding.settings import DecodeConfig
from nmt.decoding.state import SearchOptions, start_search
from nmt.model import Ensemble, Transformer


@torch.inference_mode()
def greedy_search(
    model: Transformer | Ensemble,
    src: Tensor,
    cfg: DecodeConfig,
    options: SearchOptions | None = None,
    pick: Callable[[Tensor], Tensor] | None = None,
) -> list[list[Hypothesis]]:
    """src (B, S) right-padded ids, each row ending in EOS -> one hypothesis per sentence.

    Reads cfg's lengths (max_len_a, max_len_b, min_len) and no_repeat_ngram_size.
    pick: (N, V) constrained log-probs -> (N,) the chosen tokens; None = the most probable.
    The score is the log_prob (no length penalty), the model's own whatever `pick` drew from.
    `model` may be an `Ensemble`. Call `model.eval()` first.
    """
    batch, decoder, finished, sentence, prefix = start_search(model, src, cfg, options)
    log_prob = torch.zeros(src.size(0), device=src.device)
    each = torch.zeros(src.size(0), 0, device=src.device)  # (N, t) every token's log-prob
    attention = decoder.empty_attention()
    for _ in range(int(batch.max_lengths.max()) + 1):
        step_log_probs, step_attention = decoder.step(prefix)
        step_log_probs = batch.constrain(step_log_probs, prefix, sentence, prefix.size(1) - 1, cfg)
        if pick is None:
            best, token = step_log_probs.max(dim=-1)  # (N,), (N,)
        else:
            token = pick(step_log_probs)
            best = step_log_probs.gather(1, token[:, None]).squeeze(1)
        log_prob += best
        each = torch.cat([each, best[:, None]], dim=1)  # (N, t + 1)
        if attention is not None:
            attention = torch.cat([attention, step_attention[:, None]], dim=1)  # (N, t + 1, S)
        ended = token.eq(batch.special.eos)  # (N,)
        if ended.any():
            finished.add(
                sentence[ended],
                prefix[ended, 1:],
                log_prob[ended],
                log_prob[ended],
                attention[ended] if attention is not None else None,
                each[ended],
            )
            keep = (~ended).nonzero().squeeze(1)  # (N',)
            if keep.numel() == 0:
                break
            decoder.select(keep, keep)
            sentence, prefix, token = sentence[keep], prefix[keep], token[keep]
            log_prob, each = log_prob[keep], each[keep]
            attention = attention[keep] if attention is not None else None
        prefix = torch.cat([prefix, token[:, None]], dim=1)  # (N, t + 2)
    return finished.results(batch.src_lengths, nbest=1)

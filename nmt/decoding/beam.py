"""Beam search with the GNMT length penalty, flattened over sentences x beams.

State between steps (B' sentences still searching, k beams each, N = B' * k rows; N = B' at
the first step, which has a single beam):
  prefix (N, t + 1)     BOS and the tokens so far of every live hypothesis
  log_prob (B', k)      float32 sum of their token log-probs
  attention (N, t, S)   cross-attention history, or None
  sentence (B',)        each sentence's index in the batch
  best_finished (B, k)  each sentence's k best finished scores, sorted, -inf while fewer

Each step ranks the 2k best extensions of a sentence's beams. EOS extensions among the first
k are finished (scored with the length penalty); the k best others stay live, so a finished
hypothesis never leaves the live beam short. At its maximum length only EOS is allowed, so
every live hypothesis ends there (forced end) and every sentence gets k finished ones.

Stopping rule (penalties.sentence_done): a sentence is done once it has k finished
hypotheses and no live one can still beat the worst of them. With alpha >= 0 the best a live
hypothesis can still reach is log_prob / lp(max |Y|), max |Y| = max output tokens + 1 (EOS),
since log-probs only fall and lp only grows. Done sentences leave the batch.
"""

from __future__ import annotations

import torch
from torch import Tensor

from nmt.decoding.constraints import constrain
from nmt.decoding.penalties import normalized_score, sentence_done
from nmt.decoding.state import Finished, Hypothesis, StepDecoder, prepare, start_prefix
from nmt.model import Ensemble, Transformer
from nmt.tokenizer import EOS_ID


def check_arguments(beam_size: int, len_penalty: float, nbest: int, vocab_size: int) -> None:
    """Reject settings the search cannot honour, in plain words."""
    if beam_size < 1 or 2 * beam_size > vocab_size:
        raise ValueError(f"beam_size must be in 1..vocab_size/2, got {beam_size}")
    if not 1 <= nbest <= beam_size:
        raise ValueError(f"nbest must be in 1..beam_size={beam_size}, got {nbest}")
    if len_penalty < 0:
        raise ValueError(
            f"len_penalty must be >= 0, got {len_penalty}: the early stop assumes the length "
            "penalty grows with length"
        )


def top_candidates(
    log_prob: Tensor, step_log_probs: Tensor, k: int
) -> tuple[Tensor, Tensor, Tensor]:
    """The 2k best one-token extensions of each sentence's beams.

    log_prob (B', beams), step_log_probs (B' * beams, V) -> cand_log_prob, parent (row of the
    extended hypothesis in N), token, each (B', 2k), best first.
    """
    n_sentences, beams = log_prob.shape
    V = step_log_probs.size(1)
    scores = log_prob[:, :, None] + step_log_probs.view(n_sentences, beams, V)  # (B', beams, V)
    cand_log_prob, flat = scores.view(n_sentences, beams * V).topk(2 * k, dim=1)  # (B', 2k)
    first_row = torch.arange(n_sentences, device=flat.device)[:, None] * beams  # (B', 1)
    return cand_log_prob, first_row + flat // V, flat % V


@torch.inference_mode()
def beam_search(
    model: Transformer | Ensemble,
    src: Tensor,
    beam_size: int,
    len_penalty: float,
    max_len_a: float,
    max_len_b: int,
    min_len: int = 0,
    no_repeat_ngram_size: int = 0,
    nbest: int = 1,
    record_attention: bool = False,
    use_cache: bool = True,
    length_norm: str = "gnmt",
    target_prefix: Tensor | None = None,
) -> list[list[Hypothesis]]:
    """src (B, S) right-padded ids, each row ending in EOS -> `nbest` hypotheses per sentence,
    best score first. len_penalty is alpha of the `length_norm` penalty (penalties).
    target_prefix (B, P): right-padded ids every hypothesis of a sentence starts with, or None.
    `model` may be an `Ensemble`. Call `model.eval()` first."""
    check_arguments(beam_size, len_penalty, nbest, model.cfg.vocab_size)
    k, alpha, device = beam_size, len_penalty, src.device
    batch = prepare(model, src, max_len_a, max_len_b, target_prefix)
    decoder = StepDecoder(model, src, batch.src_pad_mask, record_attention, use_cache)
    finished = Finished(src.size(0))
    best_finished = torch.full((src.size(0), k), float("-inf"), device=device)
    sentence = torch.arange(src.size(0), device=device)
    prefix = start_prefix(src.size(0), device)
    log_prob = torch.zeros(src.size(0), 1, device=device)
    attention = decoder.empty_attention()
    for t in range(int(batch.max_lengths.max()) + 1):
        n_sentences, beams = log_prob.shape
        max_lengths = batch.max_lengths[sentence]  # (B',)
        step_log_probs, step_attention = decoder.step(prefix)
        step_log_probs = constrain(
            step_log_probs,
            prefix[:, 1:],
            max_lengths.repeat_interleave(beams),
            min_len,
            no_repeat_ngram_size,
            batch.forced_tokens(sentence.repeat_interleave(beams), t),
        )
        cand_log_prob, parent, token = top_candidates(log_prob, step_log_probs, k)  # (B', 2k)
        if attention is not None:
            attention = torch.cat([attention, step_attention[:, None]], dim=1)  # (N, t + 1, S)

        is_eos = token.eq(EOS_ID)  # (B', 2k)
        ended = is_eos[:, :k]  # (B', k)
        if ended.any():
            score = normalized_score(cand_log_prob[:, :k], t + 1, alpha, length_norm)  # |Y| = t + 1
            score = score.masked_fill(~ended, float("-inf"))
            best_finished[sentence] = (
                torch.cat([best_finished[sentence], score], dim=1).topk(k).values
            )
            rows = parent[:, :k][ended]  # (M,)
            finished.add(
                sentence[:, None].expand_as(ended)[ended],
                prefix[rows, 1:],
                cand_log_prob[:, :k][ended],
                score[ended],
                attention[rows] if attention is not None else None,
            )

        live = is_eos.to(torch.uint8).sort(dim=1, stable=True).indices[:, :k]  # (B', k)
        log_prob = cand_log_prob.gather(1, live)
        parent, token = parent.gather(1, live), token.gather(1, live)
        # Forced end, or the early stop; the longest |Y| still reachable is max_lengths + 1.
        done = (t >= max_lengths) | sentence_done(
            best_finished[sentence, -1],
            log_prob.max(dim=1).values,
            max_lengths + 1,
            alpha,
            length_norm,
        )
        keep = (~done).nonzero().squeeze(1)  # (B'',)
        if keep.numel() == 0:
            break
        rows = parent[keep].view(-1)  # (B'' * k,)
        # Each parent is a beam of its own sentence, so the k new rows of a sentence read its
        # one source row: sources change only when sentences leave.
        decoder.select(rows, None if keep.numel() == n_sentences else keep)
        prefix = torch.cat([prefix[rows], token[keep].view(-1, 1)], dim=1)  # (B'' * k, t + 2)
        log_prob, sentence = log_prob[keep], sentence[keep]
        attention = attention[rows] if attention is not None else None
    return finished.results(batch.src_lengths, nbest)

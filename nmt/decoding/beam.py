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

With `steering` (nmt.decoding.steering) a step's candidates are more (each beam's best token
and its terms' next tokens too) and ranked by a bonus for the term tokens written as well:
the ends among the first k finish, the first k others live. Log-probs and scores stay the
model's. It stops by first_k whatever cfg.stop: the exact rule's bound is on log-probs, which
a steered beam does not follow (a live hypothesis without its terms may rank too low ever to
finish, and would hold the search to its maximum length).

Stopping rules (DecodeConfig.stop). exact (penalties.sentence_done): a sentence is done once
it has nbest finished hypotheses and no live one can still beat the worst of those nbest
(hypotheses that end later could not enter the n-best list returned). With alpha >= 0
the best a live hypothesis can still reach is log_prob / lp(max |Y|), max |Y| = max output
tokens + 1 (EOS), since log-probs only fall and lp only grows; a penalty that rewards length
loosens that bound, and the search runs towards the maximum length. first_k: done once k
hypotheses have finished (fairseq's, Hugging Face's early_stopping=True, CTranslate2's
patience 1), which may miss a longer hypothesis that would have scored higher. Done sentences
leave the batch.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor

from nmt.decoding.penalties import normalized_score, sentence_done
from nmt.decoding.results import Hypothesis
from nmt.decoding.settings import DecodeConfig
from nmt.decoding.state import Finished, LiveRows, SearchOptions, start_search
from nmt.decoding.steering import Steering
from nmt.decoding.top import row_top
from nmt.model import Ensemble, Transformer


def top_candidates(
    log_prob: Tensor, step_log_probs: Tensor, k: int
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The 2k best one-token extensions of each sentence's beams.

    log_prob (B', beams), step_log_probs (B' * beams, V) -> cand_log_prob, parent (row of the
    extended hypothesis in N), token and the token's own log-prob, each (B', 2k), best first.
    A sentence's 2k best are among each of its beams' own 2k best (`row_top`), so only those
    are added to their beam's log-prob and ranked.
    """
    n_sentences, beams = log_prob.shape
    width = 2 * k
    row_lp, row_token = row_top(step_log_probs, width)  # (N, 2k)
    scores = (log_prob.view(-1, 1) + row_lp).view(n_sentences, beams * width)
    cand_log_prob, flat = scores.topk(width, dim=1)  # (B', 2k)
    first_row = torch.arange(n_sentences, device=flat.device)[:, None] * beams  # (B', 1)
    token = row_token.view(n_sentences, -1).gather(1, flat)
    token_log_prob = row_lp.view(n_sentences, -1).gather(1, flat)
    return cand_log_prob, first_row + flat // width, token, token_log_prob


def finished_scores(log_prob: Tensor, ended: Tensor, length: int, cfg: DecodeConfig) -> Tensor:
    """log_prob, ended (B', k): the first k candidates' log-probs and which of them end in EOS
    at |Y| = length -> (B', k) their scores (penalised), -inf for those that do not end."""
    score = normalized_score(log_prob, length, cfg.len_penalty, cfg.length_norm)
    return score.masked_fill(~ended, float("-inf"))


def search_done(
    cfg: DecodeConfig, t: int, max_lengths: Tensor, worst: Tensor, log_prob: Tensor
) -> Tensor:
    """(B',) True for the sentences whose search ends after step t: at their maximum length
    (max_lengths (B',)), or by the stopping rule (cfg.stop). worst (B',): the k-th best
    finished score (first_k), else the nbest-th, -inf until that many have finished;
    log_prob (B', k): the live hypotheses'."""
    at_end = t >= max_lengths
    if cfg.stop == "first_k":
        return at_end | worst.gt(float("-inf"))
    # the longest |Y| a live hypothesis can still reach is max_lengths + 1 (EOS)
    best_live = log_prob.max(dim=1).values
    alpha, norm = cfg.len_penalty, cfg.length_norm
    return at_end | sentence_done(worst, best_live, max_lengths + 1, alpha, norm)


def finish_ended(
    live: LiveRows,
    finished: Finished,
    best_finished: Tensor,
    ended: Tensor,
    cand_log_prob: Tensor,
    parent: Tensor,
    cand_token: Tensor,
    length: int,
    cfg: DecodeConfig,
) -> None:
    """The first k candidates that end (ended (B', k)) at |Y| = length join `finished`, and
    their scores `best_finished` (B, k); cand_log_prob, parent, cand_token (B', 2k) as
    beam_search's."""
    k = ended.size(1)
    score = finished_scores(cand_log_prob[:, :k], ended, length, cfg)
    both = torch.cat([best_finished[live.sentence], score], 1)
    best_finished[live.sentence] = both.topk(k).values
    sentences = live.sentence[:, None].expand_as(ended)[ended]
    log_probs, eos_log_prob = cand_log_prob[:, :k][ended], cand_token[:, :k][ended]
    rows = parent[:, :k][ended]  # (M,)
    live.finish(finished, rows, sentences, log_probs, score[ended], eos_log_prob)


def candidates(live, step_log_probs, row_sentence, k, steering):
    """A step's (B', M) candidates: their log-probs, parent rows, tokens and each one's own token
    log-prob; the best by log-prob, or with `steering` in the order of their steered ranks."""
    if steering is None:
        return top_candidates(live.log_prob, step_log_probs, k)
    cand_log_prob, parent, token = steering.candidates(
        live.log_prob, step_log_probs, row_sentence, k
    )
    return cand_log_prob, parent, token, step_log_probs[parent, token]  # parent: a B' * beams row


@torch.inference_mode()
def beam_search(
    model: Transformer | Ensemble,
    src: Tensor,
    cfg: DecodeConfig,
    options: SearchOptions | None = None,
    steering: Steering | None = None,
) -> list[list[Hypothesis]]:
    """src (B, S) right-padded ids, each row ending in EOS -> cfg.nbest hypotheses per
    sentence, best score first (cfg: a checked search, settings.check_search). `model` may be
    an `Ensemble`. Call `model.eval()` first. `steering`: the beam keeps the best extensions
    by their steered ranks, not their log-probs (nmt.decoding.steering)."""
    k, device = cfg.beam_size, src.device
    if steering is not None:  # the exact rule bounds log-probs, which its beam no longer follows
        cfg = replace(cfg, stop="first_k")
    batch, decoder, finished, sentence, prefix = start_search(model, src, cfg, options)
    best_finished = torch.full((src.size(0), k), float("-inf"), device=device)
    live = LiveRows.start(decoder, sentence, prefix)
    for t in range(int(batch.max_lengths.max()) + 1):
        n_sentences, beams = live.log_prob.shape
        max_lengths = batch.max_lengths[live.sentence]  # (B',)
        step_log_probs, step_attention = decoder.step(live.prefix)
        row_sentence = live.sentence.repeat_interleave(beams)  # (N,)
        step_log_probs = batch.constrain(step_log_probs, live.prefix, row_sentence, t, cfg)
        cand_log_prob, parent, token, cand_token = candidates(
            live, step_log_probs, row_sentence, k, steering
        )
        live.record(step_attention)

        is_eos = token.eq(batch.special.eos)  # (B', 2k)
        ended = is_eos[:, :k]  # (B', k)
        if ended.any():
            finish_ended(
                live, finished, best_finished, ended, cand_log_prob, parent, cand_token, t + 1, cfg
            )

        places = is_eos.to(torch.uint8).sort(dim=1, stable=True).indices[:, :k]  # (B', k)
        log_prob = cand_log_prob.gather(1, places)
        parent, token = parent.gather(1, places), token.gather(1, places)
        step_token = cand_token.gather(1, places)  # (B', k)
        bar = k - 1 if cfg.stop == "first_k" else cfg.nbest - 1  # the finished score to beat
        done = search_done(cfg, t, max_lengths, best_finished[live.sentence, bar], log_prob)
        keep = (~done).nonzero().squeeze(1)  # (B'',)
        if keep.numel() == 0:
            break
        rows = parent[keep].view(-1)  # (B'' * k,)
        # Each parent is a beam of its own sentence, so the k new rows of a sentence read its
        # one source row: sources change only when sentences leave.
        decoder.select(rows, None if keep.numel() == n_sentences else keep)
        if steering is not None:
            steering.advance(rows, token[keep].view(-1), live.sentence[keep].repeat_interleave(k))
        live = live.next(
            rows, keep, token[keep].view(-1), log_prob[keep], step_token[keep].view(-1)
        )
    kept = max(cfg.nbest, options.hypotheses if options is not None else 0)
    return finished.results(batch.src_lengths, kept)

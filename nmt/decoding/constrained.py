"""Beam search that must write given token sequences: hard lexical constraints with dynamic
beam allocation (Post & Vilar 2018), for glossary terms in their exact form.

Each live hypothesis carries its `Progress`: which constraints it has written, and the one it
is in the middle of. A step's candidates for a sentence are the 2k best extensions of its beams
(as `beam_search`), each beam's best token, and each beam's next token of every constraint it
may start or continue, so a constraint can always be taken up even where the model ranks it
low. A constraint is written as whole words: it counts once the token after it ends its word
(a word's start, punctuation, EOS); a word that goes on ("Helmen" + "syste") unwrites it.
The k survivors are dealt out over banks (hypotheses grouped by how many constraint tokens
they have written), the best of each bank in turn from the fullest one, so hypotheses that
took a constraint early are not pushed out by ones that put it off. EOS is allowed only once
every constraint is written, except at the maximum length, where every hypothesis ends; those
that end without their constraints rank below any that met them.

Bookkeeping is per sentence in Python (a few candidates a beam); the model still runs once a
step for all the batch's rows with the KV cache, as `beam_search`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from nmt.decoding.constraints import constrain
from nmt.decoding.penalties import best_reachable_score, normalized_score
from nmt.decoding.settings import DecodeConfig
from nmt.decoding.state import Hypothesis, SearchOptions, start_search
from nmt.model import Ensemble, Transformer

Constraints = list[list[int]]  # a sentence's token sequences, each to be written once


@dataclass(frozen=True)
class Progress:
    """What a hypothesis has written of its sentence's constraints: `met`, per constraint;
    `active`, (constraint, tokens of it written) while one is under way; `written`, the
    constraint tokens written (those of the met ones and of the one under way): its bank."""

    met: tuple[bool, ...]
    active: tuple[int, int] | None = None
    closing: int | None = None  # the constraint just written, until the next token ends its word
    written: int = 0

    @classmethod
    def start(cls, constraints: Constraints) -> Progress:
        return cls(tuple(False for _ in constraints))

    def complete(self) -> bool:
        return all(self.met)

    def next_tokens(self, constraints: Constraints) -> set[int]:
        """The tokens that would take a constraint forward: the next of the one under way,
        else the first of each not yet written."""
        if self.active is not None:
            c, at = self.active
            return {constraints[c][at]}
        return {c[0] for c, met in zip(constraints, self.met, strict=True) if not met}

    def advance(self, token: int, constraints: Constraints, ends_word: list[bool]) -> Progress:
        """After writing `token`: a constraint just written holds if `token` ends its word
        (ends_word[token]: a word's start, punctuation, EOS), else it is unwritten again (its
        word went on: "Helmen" + "syste"); a constraint under way goes on or is dropped (its
        tokens so far count for nothing); a free hypothesis may start (or at once meet) one.
        Called for every candidate of every step, so the common case (nothing under way,
        nothing starts) returns `self`."""
        met, written = self.met, self.written
        if self.closing is not None and not ends_word[token]:
            met, written = _with(met, self.closing, False), written - len(constraints[self.closing])
        if self.active is not None:
            c, at = self.active
            if constraints[c][at] == token:
                if at + 1 < len(constraints[c]):
                    return Progress(met, (c, at + 1), None, written + 1)
                return Progress(_with(met, c), None, c, written + 1)
            written -= at
        for c, tokens in enumerate(constraints):
            if tokens[0] == token and not met[c]:
                if len(tokens) == 1:
                    return Progress(_with(met, c), None, c, written + 1)
                return Progress(met, (c, 1), None, written + 1)
        if self.active is None and self.closing is None:
            return self
        return Progress(met, None, None, written)


def _with(met: tuple[bool, ...], c: int, value: bool = True) -> tuple[bool, ...]:
    return met[:c] + (value,) + met[c + 1 :]


def allocate(candidates: list[tuple[float, int, int, Progress]], k: int) -> list:
    """The k survivors of (log_prob, beam, token, progress) candidates, given best first: the
    best of each bank (by constraint tokens written) in turn, fullest bank first, until k are
    chosen."""
    banks: dict[int, list] = {}
    for cand in candidates:
        banks.setdefault(cand[3].written, []).append(cand)
    if len(banks) == 1:
        return candidates[:k]
    order = [banks[n] for n in sorted(banks, reverse=True)]
    chosen: list = []
    depth = 0
    while len(chosen) < k and any(depth < len(bank) for bank in order):
        chosen += [bank[depth] for bank in order if depth < len(bank)][: k - len(chosen)]
        depth += 1
    return chosen


@torch.inference_mode()
def constrained_beam_search(
    model: Transformer | Ensemble,
    src: Tensor,
    cfg: DecodeConfig,
    constraints: list[Constraints],
    ends_word: list[bool],
    options: SearchOptions | None = None,
) -> list[list[Hypothesis]]:
    """src (B, S) right-padded ids, each row ending in EOS; constraints: per sentence, the
    token sequences every output must hold, each as whole words; ends_word (V,): the ids that
    may follow a whole word (a word's start, punctuation alone, EOS) -> cfg.nbest hypotheses
    per sentence, those that hold all their constraints first, then by score (see the module
    docstring)."""
    k, device = cfg.beam_size, src.device
    batch, decoder, _, sentence, prefix = start_search(model, src, cfg, options)
    eos = batch.special.eos
    progress = [[Progress.start(constraints[b])] for b in range(src.size(0))]
    log_prob = torch.zeros(src.size(0), 1, device=device)
    each = torch.zeros(src.size(0), 0, device=device)
    attention = decoder.empty_attention()
    ended: list[list[tuple[bool, Hypothesis]]] = [[] for _ in range(src.size(0))]
    lengths = batch.src_lengths.tolist()
    for t in range(int(batch.max_lengths.max()) + 1):
        n_sentences, beams = log_prob.shape
        max_lengths = batch.max_lengths[sentence]  # (B',)
        step_log_probs, step_attention = decoder.step(prefix)
        forced = batch.forced_tokens(sentence.repeat_interleave(beams), t)
        rules = (max_lengths.repeat_interleave(beams), cfg.min_len, cfg.no_repeat_ngram_size)
        step_log_probs = constrain(step_log_probs, prefix[:, 1:], *rules, batch.special, forced)
        at_end = (t >= max_lengths).tolist()
        batch_index, limits = sentence.tolist(), max_lengths.tolist()
        unmet = [
            i * beams + r
            for i in range(n_sentences)
            for r in range(beams)
            if not at_end[i] and not progress[i][r].complete()
        ]
        step_log_probs[unmet, eos] = float("-inf")  # EOS once every constraint is written
        if attention is not None:
            attention = torch.cat([attention, step_attention[:, None]], dim=1)  # (N, t + 1, S)
        V = step_log_probs.size(1)
        scores = log_prob.view(-1, 1) + step_log_probs  # (N, V)
        top_lp, top = scores.view(n_sentences, beams * V).topk(min(2 * k, beams * V), dim=1)
        best_token = step_log_probs.argmax(dim=1).tolist()
        wanted = [
            (i, r, token)
            for i in range(n_sentences)
            for r in range(beams)
            for token in progress[i][r].next_tokens(constraints[batch_index[i]])
        ]
        wanted += [
            (i, r, best_token[i * beams + r]) for i in range(n_sentences) for r in range(beams)
        ]
        rows = torch.tensor([i * beams + r for i, r, _ in wanted], device=device)
        tokens = torch.tensor([token for _, _, token in wanted], device=device)
        wanted_lp = scores[rows, tokens].tolist()
        top_lp, top = top_lp.tolist(), top.tolist()
        extra: list[dict] = [{} for _ in range(n_sentences)]  # per sentence (beam, token) -> lp
        for (i, r, token), lp in zip(wanted, wanted_lp, strict=True):
            extra[i][(r, token)] = lp

        parents, new_tokens, new_lp, keep = [], [], [], []
        kept_progress = []
        for i in range(n_sentences):
            b = batch_index[i]
            mine = constraints[b]
            options_i = {
                (flat // V, flat % V): lp for lp, flat in zip(top_lp[i], top[i], strict=True)
            }
            options_i.update(extra[i])
            candidates = sorted(
                (
                    (lp, r, token, progress[i][r].advance(token, mine, ends_word))
                    for (r, token), lp in options_i.items()
                    if lp != float("-inf")
                ),
                key=_first,
                reverse=True,
            )
            # the ends among the k a step would keep finish (beam_search's rule, by bank)
            for lp, r, token, _ in allocate(candidates, k):
                if token != eos:
                    continue
                row = i * beams + r
                score = normalized_score(lp, t + 1, cfg.len_penalty, cfg.length_norm)
                token_lps = torch.cat([each[row], step_log_probs[row, eos : eos + 1]]).tolist()
                attn = None if attention is None else attention[row, :, : lengths[b]].float().cpu()
                hyp = Hypothesis(
                    prefix[row, 1:].tolist(), score, lp, attn, token_log_probs=token_lps
                )
                ended[b].append((progress[i][r].complete(), hyp))
            live = [c for c in candidates if c[2] != eos]
            chosen = allocate(live, k)
            if not chosen or at_end[i] or _done(cfg, ended[b], chosen, k, limits[i]):
                continue
            while len(chosen) < k:  # a sentence keeps k rows: a copy that can never win
                lp, r, token, state = chosen[0]
                chosen.append((float("-inf"), r, token, state))
            keep.append(i)
            for lp, r, token, _ in chosen:
                parents.append(i * beams + r)
                new_tokens.append(token)
                new_lp.append(lp)
            kept_progress.append([c[3] for c in chosen])
        if not keep:
            break
        rows = torch.tensor(parents, device=device)
        kept = torch.tensor(keep, device=device)
        decoder.select(rows, None if len(keep) == n_sentences else kept)
        step_token = step_log_probs[rows, torch.tensor(new_tokens, device=device)]
        prefix = torch.cat([prefix[rows], torch.tensor(new_tokens, device=device)[:, None]], dim=1)
        log_prob = torch.tensor(new_lp, device=device).view(len(keep), k)
        sentence = sentence[kept]
        each = torch.cat([each[rows], step_token[:, None]], dim=1)
        attention = attention[rows] if attention is not None else None
        progress = kept_progress
    return [
        [hyp for _, hyp in sorted(hyps, key=lambda e: (e[0], e[1].score), reverse=True)][
            : cfg.nbest
        ]
        for hyps in ended
    ]


def _first(candidate: tuple) -> float:
    return candidate[0]


def _done(cfg: DecodeConfig, ended: list, chosen: list, k: int, max_length: int) -> bool:
    """Whether a sentence's search may stop (beam_search's rule, on the hypotheses that ended
    with all their constraints): k of them (first_k), or (exact) nbest of them and none of
    `chosen`, the live ones, can still beat the worst of those nbest."""
    complete = sorted((h.score for ok, h in ended if ok), reverse=True)
    if cfg.stop == "first_k":
        return len(complete) >= k
    if len(complete) < cfg.nbest:
        return False
    best_live = max(c[0] for c in chosen)
    reachable = best_reachable_score(best_live, max_length + 1, cfg.len_penalty, cfg.length_norm)
    return reachable <= complete[cfg.nbest - 1]

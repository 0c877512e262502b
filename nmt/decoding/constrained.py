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

All of it runs on tensors for the whole batch at once, as `beam_search` does: a batch's
constraints are a `Table`, every hypothesis's progress a row of `Progress`. Shapes: B
sentences, B' still searching, k beams, N = B' * k rows (B' at the first step), C constraints
and L tokens at most per constraint, M candidates per sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from nmt.decoding.penalties import best_reachable_score, normalized_score
from nmt.decoding.results import Hypothesis
from nmt.decoding.settings import DecodeConfig
from nmt.decoding.state import Finished, LiveRows, SearchOptions, start_search
from nmt.decoding.top import row_top
from nmt.model import Ensemble, Transformer

Constraints = list[list[int]]  # a sentence's token sequences, each to be written once
NONE = -1  # no constraint, no token


@dataclass(frozen=True)
class Table:
    """A batch's constraints: tokens (B, C, L), NONE past each one's end and in the places of
    a sentence with fewer than C; lengths (B, C), 0 in those places."""

    tokens: Tensor
    lengths: Tensor

    @classmethod
    def of(cls, constraints: list[Constraints], device: torch.device) -> Table:
        C = max([len(mine) for mine in constraints] + [1])
        L = max([len(c) for mine in constraints for c in mine] + [1])
        tokens = torch.full((len(constraints), C, L), NONE, dtype=torch.long)
        for b, mine in enumerate(constraints):
            for c, sequence in enumerate(mine):
                tokens[b, c, : len(sequence)] = torch.tensor(sequence)
        return cls(tokens.to(device), tokens.ne(NONE).sum(dim=2).to(device))


@dataclass(frozen=True)
class Progress:
    """What each of R hypotheses has written of its sentence's constraints: met (R, C), per
    constraint (places without one count as met); active (R,), the constraint under way or
    NONE, and at (R,), its tokens written; closing (R,), the constraint just written, until
    the next token ends its word, or NONE; written (R,), the constraint tokens written (those
    of the met ones and of the one under way): the hypothesis's bank."""

    met: Tensor
    active: Tensor
    at: Tensor
    closing: Tensor
    written: Tensor

    @classmethod
    def start(cls, lengths: Tensor) -> Progress:
        """lengths (R, C) of each row's sentence's constraints -> nothing written."""
        none = torch.full(lengths.shape[:1], NONE, dtype=torch.long, device=lengths.device)
        return cls(lengths.eq(0), none, torch.zeros_like(none), none, torch.zeros_like(none))

    def rows(self, index: Tensor) -> Progress:
        return Progress(*(field[index] for field in self.fields()))

    def fields(self) -> tuple[Tensor, ...]:
        return self.met, self.active, self.at, self.closing, self.written

    def complete(self) -> Tensor:
        """(R,) whether every constraint is written."""
        return self.met.all(dim=1)

    def next_tokens(self, tokens: Tensor) -> Tensor:
        """tokens (R, C, L) each row's sentence's constraints -> (R, C) the tokens that would
        take a constraint forward: the next of the one under way (column 0), else the first
        of each not yet written; NONE elsewhere."""
        under_way = self.active.ne(NONE)
        step = _at(tokens, self.active.clamp(min=0), self.at)  # (R,)
        firsts = tokens[:, :, 0].masked_fill(self.met, NONE)  # (R, C)
        ahead = torch.full_like(firsts, NONE)
        ahead[:, 0] = step
        return torch.where(under_way[:, None], ahead, firsts)

    def gains(self, tokens: Tensor, lengths: Tensor, ends_word: Tensor) -> tuple[Tensor, ...]:
        """What advancing by a token would change `written` by, without advancing (tokens
        (R, C, L), lengths (R, C), ends_word (V,)), in parts: any (R,), by any token (the one
        under way dropped: -its tokens so far); undo (R,), taken too by a token that goes on
        its word (the one just written unwritten: its length); and places (R, P), the tokens
        that decide more, with their gains (R, P): the next of the one under way (+1), and
        the first of each not yet written or of the one unwritten by it (+1 beside any and
        undo). NONE marks a place with no token; P = C + 1."""
        rows = torch.arange(self.active.size(0), device=self.active.device)
        under_way, closing = self.active.ne(NONE), self.closing.ne(NONE)
        undo = torch.where(closing, lengths[rows, self.closing.clamp(min=0)], 0)
        any_token = -torch.where(under_way, self.at, 0)
        step = _at(tokens, self.active.clamp(min=0), self.at)  # (R,)
        goes_on = under_way & step.ne(NONE)
        firsts = tokens[:, :, 0]  # (R, C)
        goes_on_word = ~ends_word[firsts.clamp(min=0)]
        unwritten = F.one_hot(self.closing.clamp(min=0), firsts.size(1)).bool() & closing[:, None]
        starts = (~self.met | (unwritten & goes_on_word)) & firsts.ne(NONE)
        starts &= ~(goes_on[:, None] & firsts.eq(step[:, None]))  # going on comes first
        start_gain = any_token[:, None] - undo[:, None] * goes_on_word.long() + 1
        places = torch.cat(
            [torch.where(goes_on, step, NONE)[:, None], torch.where(starts, firsts, NONE)], dim=1
        )
        gains = torch.cat([torch.ones_like(step)[:, None], start_gain], dim=1)
        return any_token, undo, places, gains.masked_fill(places.eq(NONE), 0)

    def advance(self, token: Tensor, tokens: Tensor, lengths: Tensor, ends_word: Tensor):
        """After writing token (R,) (tokens (R, C, L), lengths (R, C): each row's sentence's
        constraints; ends_word (V,) bool: a word's start, punctuation, EOS): a constraint
        just written holds if the token ends its word, else it is unwritten again (its word
        went on: "Helmen" + "syste"); a constraint under way goes on or is dropped (its
        tokens so far count for nothing); a hypothesis with none under way may start (or at
        once meet) the first one not yet written that begins with the token."""
        rows = torch.arange(token.size(0), device=token.device)
        met, written = self.met.clone(), self.written.clone()
        # the constraint just written, if its word went on
        undo = self.closing.ne(NONE) & ~ends_word[token]
        closing = self.closing.clamp(min=0)
        met[rows, closing] &= ~undo
        written -= torch.where(undo, lengths[rows, closing], 0)
        # the one under way: goes on, is met, or is dropped
        under_way = self.active.ne(NONE)
        active = self.active.clamp(min=0)
        goes_on = under_way & _at(tokens, active, self.at).eq(token)
        ends = goes_on & (self.at + 1).ge(lengths[rows, active])
        written -= torch.where(under_way & ~goes_on, self.at, 0)
        # else the first constraint not yet written that starts with the token
        starting = tokens[:, :, 0].eq(token[:, None]) & ~met & ~goes_on[:, None]  # (R, C)
        starts = starting.any(dim=1)
        first = starting.long().argmax(dim=1)  # the first True
        meets = starts & lengths[rows, first].eq(1)
        met[rows, active] |= ends
        met[rows, first] |= meets
        return Progress(
            met,
            torch.where(goes_on & ~ends, active, torch.where(starts & ~meets, first, NONE)),
            torch.where(goes_on & ~ends, self.at + 1, torch.where(starts & ~meets, 1, 0)),
            torch.where(ends, active, torch.where(meets, first, NONE)),
            written + (goes_on | starts).long(),
        )


def _at(tokens: Tensor, constraint: Tensor, position: Tensor) -> Tensor:
    """tokens (R, C, L), constraint and position (R,) -> (R,) that token, NONE past the end."""
    rows = torch.arange(tokens.size(0), device=tokens.device)
    return tokens[rows, constraint, position.clamp(max=tokens.size(2) - 1)].masked_fill(
        position.ge(tokens.size(2)), NONE
    )


def allocate(valid: Tensor, bank: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """valid, bank (B', M): candidates given best first, whether each may be chosen and its
    bank -> (B', k) the places of the k survivors (the best of each bank in turn, fullest bank
    first, until k are chosen) and whether each is a real one (a sentence with fewer than k
    valid candidates fills its places with invalid ones)."""
    banks = int(bank.max()) + 1 if bank.numel() else 1
    member = F.one_hot(bank.clamp(min=0), banks).bool() & valid[:, :, None]  # (B', M, banks)
    depth = (member.long().cumsum(dim=1) * member).sum(dim=2) - 1  # place in its bank
    key = (depth * banks + (banks - 1 - bank)).masked_fill(~valid, torch.iinfo(torch.long).max)
    place = key.argsort(dim=1, stable=True)[:, :k]
    return place, valid.gather(1, place)


@torch.inference_mode()
def constrained_beam_search(
    model: Transformer | Ensemble,
    src: Tensor,
    cfg: DecodeConfig,
    constraints: list[Constraints],
    ends_word: Sequence[bool],
    options: SearchOptions | None = None,
) -> list[list[Hypothesis]]:
    """src (B, S) right-padded ids, each row ending in EOS; constraints: per sentence, the
    token sequences every output must hold, each as whole words; ends_word (V,): the ids that
    may follow a whole word (a word's start, punctuation alone, EOS) -> cfg.nbest hypotheses
    (or `options.hypotheses`, if more) per sentence, those that hold all their constraints
    first, then by score (see the module docstring)."""
    k, device = cfg.beam_size, src.device
    batch, decoder, finished, sentence, prefix = start_search(model, src, cfg, options)
    eos, inf = batch.special.eos, float("-inf")
    table = Table.of(constraints, device)
    word_end = torch.tensor(ends_word, dtype=torch.bool, device=device)
    progress = Progress.start(table.lengths)
    live = LiveRows.start(decoder, sentence, prefix)
    # the k best scores of each sentence's hypotheses that ended with all their constraints
    best_complete = torch.full((src.size(0), k), inf, device=device)
    for t in range(int(batch.max_lengths.max()) + 1):
        n_sentences, beams = live.log_prob.shape
        row_sentence = live.sentence.repeat_interleave(beams)  # (N,)
        max_lengths = batch.max_lengths[live.sentence]  # (B',)
        step_log_probs, step_attention = decoder.step(live.prefix)
        step_log_probs = batch.constrain(step_log_probs, live.prefix, row_sentence, t, cfg)
        at_end = t >= max_lengths  # (B',)
        complete = progress.complete()  # (N,)
        step_log_probs[:, eos].masked_fill_(~complete & ~at_end.repeat_interleave(beams), inf)
        live.record(step_attention)
        cand_lp, parent, token, moved = ranked_candidates(
            live.log_prob, step_log_probs, progress, table, row_sentence, word_end, k
        )
        valid = cand_lp.gt(inf)
        bank = moved.written.view(n_sentences, -1)
        is_eos = token.eq(eos)
        # the ends among the k a step would keep finish (beam_search's rule, by bank)
        ends = Ends.among(allocate(valid, bank, k), is_eos, parent, cand_lp, t + 1)
        if ends is not None:
            ends.finish(live, finished, best_complete, complete, step_log_probs[:, eos], cfg)
        # the k best that go on, by bank; places without a real one copy the first, at -inf
        place, real = allocate(valid & ~is_eos, bank, k)
        live_lp = cand_lp.gather(1, place).masked_fill(~real, inf)
        reached = _done(cfg, best_complete[live.sentence], live_lp, max_lengths)
        keep = (real[:, 0] & ~at_end & ~reached).nonzero().squeeze(1)  # (B'',)
        if keep.numel() == 0:
            break
        place = torch.where(real, place, place[:, :1])[keep]
        rows = parent[keep].gather(1, place).view(-1)  # (B'' * k,)
        chosen_token = token[keep].gather(1, place).view(-1)
        chosen = (keep[:, None] * parent.size(1) + place).view(-1)  # into the flat candidates
        decoder.select(rows, None if keep.numel() == n_sentences else keep)
        log_prob = cand_lp[keep].gather(1, place).masked_fill(~real[keep], inf)
        chosen_lp = step_log_probs[rows, chosen_token]
        live = live.next(rows, keep, chosen_token, log_prob, chosen_lp)
        progress = moved.rows(chosen)
    kept = max(cfg.nbest, options.hypotheses if options is not None else 0)
    return finished.results(batch.src_lengths, kept)


def ranked_candidates(
    log_prob: Tensor,
    step_log_probs: Tensor,
    progress: Progress,
    table: Table,
    row_sentence: Tensor,
    word_end: Tensor,
    k: int,
) -> tuple[Tensor, Tensor, Tensor, Progress]:
    """A constrained step's candidates (B', M), best first: the 2k best, each beam's best
    token, each beam's next tokens of its constraints (`candidates`): their log-probs,
    parents and tokens, and each one's progress (B' * M rows) once its token is written."""
    tokens = table.tokens[row_sentence]  # (N, C, L)
    cand_lp, parent, token, _ = candidates(
        log_prob, step_log_probs, progress.next_tokens(tokens), k
    )
    cand_lp, order = cand_lp.sort(dim=1, descending=True, stable=True)
    parent, token = parent.gather(1, order), token.gather(1, order)
    flat_parent, flat_token = parent.view(-1), token.view(-1)
    moved = progress.rows(flat_parent).advance(
        flat_token, tokens[flat_parent], table.lengths[row_sentence[flat_parent]], word_end
    )
    return cand_lp, parent, token, moved


@dataclass(frozen=True)
class Ends:
    """The hypotheses a constrained step finishes: place, finishing (B', k) the places of
    the k a step would keep and which of them end in EOS; parent, cand_lp (B', M) the
    candidates'; length |Y|."""

    place: Tensor
    finishing: Tensor
    parent: Tensor
    cand_lp: Tensor
    length: int

    @classmethod
    def among(cls, kept: tuple[Tensor, Tensor], is_eos: Tensor, parent, cand_lp, length: int):
        """kept: the places of the k a step would keep and whether each is real (`allocate`);
        is_eos (B', M) -> the Ends among them, or None."""
        place, real = kept
        finishing = real & is_eos.gather(1, place)  # (B', k)
        return cls(place, finishing, parent, cand_lp, length) if finishing.any() else None

    def finish(
        self,
        live: LiveRows,
        finished: Finished,
        best_complete: Tensor,
        complete: Tensor,
        eos_log_probs: Tensor,
        cfg: DecodeConfig,
    ) -> None:
        """Add them to `finished` (complete (N,): the rows that hold every constraint rank
        first; eos_log_probs (N,) EOS's log-prob per row), and the scores of those that hold
        every constraint to best_complete (B, k), for the stopping rule."""
        finishing = self.finishing
        end_parent, end_lp = self.parent.gather(1, self.place), self.cand_lp.gather(1, self.place)
        end_score = normalized_score(end_lp, self.length, cfg.len_penalty, cfg.length_norm)
        rows = end_parent[finishing]  # (E,)
        row_sentence = live.sentence.repeat_interleave(live.log_prob.size(1))
        live.finish(
            finished,
            rows,
            row_sentence[rows],
            end_lp[finishing],
            end_score[finishing],
            eos_log_probs[rows],
            first=complete[rows],
        )
        counted = end_score.masked_fill(~(finishing & complete[end_parent]), float("-inf"))
        both = torch.cat([best_complete[live.sentence], counted], dim=1)
        best_complete[live.sentence] = both.topk(best_complete.size(1), dim=1).values


def candidates(
    log_prob: Tensor, step_log_probs: Tensor, extra: Tensor, k: int
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """A step's candidates, for both searches: log_prob (B', beams) the live hypotheses',
    step_log_probs (N, V), extra (N, E) each row's own tokens to try (NONE: none) -> log-prob,
    parent (row in N), token (NONE as 0) and none (no token), each (B', M), M = 2k + beams *
    (1 + E): the sentence's 2k best extensions, each beam's best token, each beam's `extra`.
    A place without a token, or whose extension an earlier place holds, has log-prob -inf."""
    n_sentences, beams = log_prob.shape
    V = step_log_probs.size(1)
    # a sentence's 2k best are among each of its beams' own 2k best, the first the best
    row_lp, row_token = row_top(step_log_probs, min(2 * k, V))  # (N, 2k)
    width = row_lp.size(1)
    row_lp = (row_lp + log_prob.view(-1, 1)).view(n_sentences, beams * width)
    _, top = row_lp.topk(min(2 * k, beams * width), dim=1)  # (B', 2k)
    rows = torch.arange(n_sentences * beams, device=top.device).view(n_sentences, beams)
    parent = torch.cat(
        [
            rows[:, :1] + top // width,
            rows,
            rows[:, :, None].expand(-1, -1, extra.size(1)).reshape(n_sentences, -1),
        ],
        dim=1,
    )
    top_token = row_token.view(n_sentences, -1).gather(1, top)
    best = row_token[:, 0].view(n_sentences, beams)
    token = torch.cat([top_token, best, extra.view(n_sentences, -1)], dim=1)  # (B', M)
    none = token.eq(NONE)
    token = token.clamp(min=0)
    lp = log_prob.view(-1)[parent] + step_log_probs[parent, token]
    lp = first_of_each(lp.masked_fill(none, float("-inf")), parent * V + token, none)
    return lp, parent, token, none


def first_of_each(lp: Tensor, key: Tensor, none: Tensor) -> Tensor:
    """lp, key, none (B', M) -> lp, -inf for each candidate whose key an earlier one in its row
    has (a beam's best token is often among the 2k best too); `none` places are no candidate."""
    places = torch.arange(key.size(1), device=key.device).expand_as(key)
    key = torch.where(none, -1 - places, key)  # each its own
    sorted_key, order = key.sort(dim=1, stable=True)
    repeat = torch.zeros_like(sorted_key, dtype=torch.bool)
    repeat[:, 1:] = sorted_key[:, 1:].eq(sorted_key[:, :-1])
    again = torch.zeros_like(repeat).scatter(1, order, repeat)
    return lp.masked_fill(again, float("-inf"))


def _done(cfg: DecodeConfig, complete: Tensor, live: Tensor, max_lengths: Tensor) -> Tensor:
    """(B',) whether a sentence's search may stop (beam_search's rule, on the hypotheses that
    ended with all their constraints; complete (B', k) their best scores, -inf while fewer):
    k of them (first_k), or (exact) nbest of them and no live one (live (B', k) log-probs) can
    still beat the worst of those nbest."""
    if cfg.stop == "first_k":
        return complete[:, -1].gt(float("-inf"))
    worst = complete[:, cfg.nbest - 1]
    reachable = best_reachable_score(
        live.max(dim=1).values, max_lengths + 1, cfg.len_penalty, cfg.length_norm
    )
    return worst.gt(float("-inf")) & reachable.le(worst)

"""Soft lexical constraints: a beam search steered to given token sequences by a bonus for
each of their tokens written, none of them required (a glossary's terms: DecodeConfig.
term_bonus; nmt.decoding.constrained holds the hard ones).

Each live hypothesis carries its `Progress` over its sentence's constraints (a `Table`, as
the hard search's). A step's candidates are the hard search's: a sentence's 2k best
extensions, each beam's best token, and each beam's tokens that go on with or start a
constraint. `beam_search` takes them in the order of their rank: their log-prob plus `bonus`
times the constraint tokens their hypothesis has then written (`Progress.gains`; a constraint
counts as whole words, and one dropped halfway, or unwritten because its word went on, takes
its tokens' bonus back). So a hypothesis that wrote a term keeps its best continuation in the
beam, where the log-probs alone would have let it go, without the beam filling with its
variants. EOS is allowed at every step, and a hypothesis's log-prob and score (its n-best
order) are the model's own: the bonus only decides which hypotheses the beam keeps. The search
stops by first_k (k hypotheses finished) whatever DecodeConfig.stop: the exact rule bounds
log-probs, which a steered beam does not follow. Shapes: B' sentences still searching, k
beams (`beams` at the first step), N rows, C constraints, L tokens at most per constraint, V
vocabulary, M candidates per sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from nmt.decoding.constrained import Constraints, Progress, Table, candidates


@dataclass
class Steering:
    """A batch's constraints (table), the ids that may follow a whole word (word_end (V,)
    bool), the bonus per constraint token written, and every row's progress (N rows)."""

    table: Table
    word_end: Tensor
    bonus: float
    progress: Progress

    @classmethod
    def of(
        cls, constraints: list[Constraints], ends_word: Sequence[bool], bonus: float, device
    ) -> Steering:
        """Per sentence its token sequences; ends_word (V,) -> nothing written, one row a
        sentence (a search's first step)."""
        table = Table.of(constraints, device)
        word_end = torch.tensor(ends_word, dtype=torch.bool, device=device)
        return cls(table, word_end, bonus, Progress.start(table.lengths))

    def candidates(
        self, log_prob: Tensor, step_log_probs: Tensor, sentence: Tensor, k: int
    ) -> tuple[Tensor, Tensor, Tensor]:
        """log_prob (B', beams) the live hypotheses', step_log_probs (N, V), sentence (N,)
        each row's -> log-prob, parent (row in N), token, each (B', M), by rank, best first;
        a place that is no candidate (no token, or one taken earlier) has log-prob -inf."""
        tokens, lengths = self.table.tokens[sentence], self.table.lengths[sentence]
        any_token, undo, places, place_gains = self.progress.gains(tokens, lengths, self.word_end)
        lp, parent, token, none = candidates(log_prob, step_log_probs, places, k)
        # each candidate's gain: its place's, if its token is one of its parent's, else any
        # token's (less undo where it goes on a word)
        placed = places[parent].eq(token[:, :, None]) & ~none[:, :, None]  # (B', M, P)
        gain = any_token[parent] - undo[parent] * (~self.word_end[token]).long()
        at_place = place_gains[parent].masked_fill(~placed, torch.iinfo(torch.long).min).amax(2)
        gain = torch.where(placed.any(dim=2), at_place, gain)
        rank = lp + self.bonus * (self.progress.written[parent] + gain)
        order = rank.argsort(dim=1, descending=True, stable=True)
        return lp.gather(1, order), parent.gather(1, order), token.gather(1, order)

    def advance(self, rows: Tensor, token: Tensor, sentence: Tensor) -> None:
        """The hypotheses kept: rows (N',) of the last step's, each extended by token (N'),
        sentence (N',) each one's."""
        tokens, lengths = self.table.tokens[sentence], self.table.lengths[sentence]
        self.progress = self.progress.rows(rows).advance(token, tokens, lengths, self.word_end)

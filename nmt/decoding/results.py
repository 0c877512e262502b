"""What a search gives back: its Hypothesis, or Stopped when it ends early. Without torch, so
the CTranslate2 path imports none (a hypothesis's attention is a tensor only on the torch path).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from torch import Tensor

STOP_EVERY = 8  # decoder steps between two asks of a search's `stop` (SearchOptions)


class Stopped(Exception):
    """A search ended early: its `stop()` said so (its request's time ran out, or its client
    left), asked between batches (Engine.translate) and every STOP_EVERY steps within one."""


@dataclass
class Hypothesis:
    """One translation: ids without BOS and EOS, and how the search rated it.

    score: the search's ranking value (beam: log_prob / length penalty; greedy: log_prob).
    log_prob: sum of the token log-probs, EOS included. Both NaN for a text no pass rated (a
    glossary's term written in where no output shows a score: Engine.force).
    attention: (len(tokens) + 1, S_real) the alignment layer's cross-attention averaged over
    heads, one row per output token and EOS, on the CPU (a tensor; CTranslate2's, for
    alignments only, an array); None unless asked for.
    """

    tokens: list[int]
    score: float
    log_prob: float
    attention: Tensor | np.ndarray | None = None
    # (source word, target word) pairs (nmt.inference.alignment), when asked for
    alignment: list[tuple[int, int]] | None = None
    # each token's log-prob and EOS's last (they sum to log_prob); None if the engine gave none
    token_log_probs: list[float] | None = None

"""The scoring rules of the search, as tiny pure functions on floats or tensors.

Lengths: |x| is the number of source tokens the encoder sees, EOS included, padding excluded.
|Y| is the number of output tokens EOS included, i.e. `len(Hypothesis.tokens) + 1`: every
hypothesis ends with EOS, by choice of the model or forced at the maximum length.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from torch import Tensor

Number = TypeVar("Number", float, "Tensor")


# a * |x| + b lands a hair under the integer it is meant to be (1.4 * 45 = 62.99...)
LENGTH_SLACK = 1e-9


def length_penalty(length: Number, alpha: float, norm: str = "gnmt") -> Number:
    """lp(Y), with |Y| counting EOS: GNMT's ((5 + |Y|) / 6) ** alpha (Wu et al. 2016), or
    "power", |Y| ** alpha (CTranslate2's). Both grow with |Y| when alpha >= 0."""
    return ((5 + length) / 6) ** alpha if norm == "gnmt" else length**alpha


def normalized_score(log_prob: Number, length: Number, alpha: float, norm: str = "gnmt") -> Number:
    """The beam's score of a hypothesis: sum of token log-probs (EOS included) / lp(|Y|)."""
    return log_prob / length_penalty(length, alpha, norm)


def gnmt_as_power(alpha: float, length: int = 20) -> float:
    """The power-law exponent whose penalty grows like GNMT's alpha at `length` tokens: the
    slopes of log lp, alpha / (5 + L) and beta / L, agree there, so beta = alpha * L / (5 + L).
    A starting point for CTranslate2, which has only the power law; tune it on val."""
    return round(alpha * length / (5 + length), 3)


def max_output_lengths(src_lengths: Tensor, a: float, b: int, max_positions: int) -> Tensor:
    """(B,) source lengths |x| -> (B,) long: most tokens a hypothesis may hold, EOS excluded.

    floor(a * |x| + b), at least 0 and at most max_positions - 1: the decoder reads BOS and
    then every output token but the last, and the last (EOS) is forced at this length. In
    float64 with LENGTH_SLACK, as `output_length` (a = 1.4, |x| = 45: 63, not 62.99...).
    """
    lengths = (a * src_lengths.double() + b + LENGTH_SLACK).floor().long()
    return lengths.clamp(0, max_positions - 1)


def output_length(a: float, length: int, b: int) -> int:
    """floor(a * length + b) for one sentence, as `max_output_lengths` computes it."""
    return math.floor(a * length + b + LENGTH_SLACK)


def best_reachable_score(
    live_log_prob: Tensor, max_length: Tensor, alpha: float, norm: str = "gnmt"
) -> Tensor:
    """Upper bound on the final score of a live hypothesis; needs alpha >= 0.

    live_log_prob (B,): its current sum of log-probs; max_length (B,): the largest |Y| it may
    still reach (max output tokens + 1 for EOS). Log-probs are <= 0, so the sum can only fall,
    and lp(|Y|) grows with |Y| when alpha >= 0, so the score is at most sum / lp(max |Y|).
    """
    return normalized_score(live_log_prob, max_length, alpha, norm)


def sentence_done(
    worst_finished: Tensor,
    best_live_log_prob: Tensor,
    max_length: Tensor,
    alpha: float,
    norm: str = "gnmt",
) -> Tensor:
    """The beam's early stop (B,) bool: True once no live hypothesis can beat a full n-best list.

    worst_finished (B,): score of the k-th best finished hypothesis, -inf while fewer than k
    have finished (so the rule cannot fire before then); best_live_log_prob (B,): highest sum
    of log-probs among the live hypotheses; max_length (B,): the largest |Y| they may reach.
    A sentence is done when best_reachable_score <= worst_finished: a tie cannot beat it.
    """
    return best_reachable_score(best_live_log_prob, max_length, alpha, norm) <= worst_finished

"""Sampling: the next token drawn from the model's distribution, sharpened or flattened by a
temperature and cut to the top-k tokens and to the top-p nucleus (Holtzman et al. 2020).
Used for sampling-based back-translation (Edunov et al. 2018) and for diverse outputs.
"""

from __future__ import annotations

import torch
from torch import Tensor


class Sampler:
    """A `pick` rule for `greedy_search`: (N, V) log-probs -> (N,) drawn tokens.

    Draws come from one generator seeded once, so a seed and the same batches in the same
    order give the same samples. Tokens the search forbids (-inf) are never drawn.
    """

    def __init__(
        self, temperature: float, top_k: int, top_p: float, seed: int, device: torch.device
    ):
        self.temperature, self.top_k, self.top_p = temperature, top_k, top_p
        self.generator = torch.Generator(device=device).manual_seed(seed)

    def __call__(self, log_probs: Tensor) -> Tensor:
        if self.temperature == 0:
            return log_probs.argmax(dim=-1)
        # From the row's best: a tiny temperature then sends the rest to -inf, never all of it.
        logits = (log_probs - log_probs.max(dim=-1, keepdim=True).values) / self.temperature
        if 0 < self.top_k < logits.size(-1):
            kth = logits.topk(self.top_k, dim=-1).values[:, -1:]  # (N, 1)
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if self.top_p < 1.0:
            logits = nucleus(logits, self.top_p)
        probs = logits.softmax(dim=-1)
        return torch.multinomial(probs, 1, generator=self.generator).squeeze(1)


def nucleus(logits: Tensor, top_p: float) -> Tensor:
    """(N, V) logits -> the same with -inf outside each row's nucleus: the fewest most probable
    tokens whose probabilities sum to at least top_p (the most probable one always stays)."""
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(dim=-1)
    before = probs.cumsum(dim=-1) - probs  # probability of the tokens ranked above each one
    cut = before >= top_p  # (N, V) in sorted order
    cut[:, 0] = False
    return logits.scatter(1, order, sorted_logits.masked_fill(cut, float("-inf")))

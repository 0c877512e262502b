"""The n largest entries of each row of a step's log-probs (N, V): the searches' candidates.

On the CPU, `torch.topk` over a vocabulary row partially sorts (value, index) pairs, a few
nanoseconds an entry, and a beam step spent more time there than in its output projection.
`row_top` first takes the row's maximum over each block of entries, a vectorised pass: the
n largest entries of a row lie in the n blocks whose maxima are largest (an entry outside
them has n block maxima at least as large, each another entry), so topk then ranks n blocks
instead of the row. The values are the row's own. Only entries that tie may be ranked in
another order than a whole-row topk would give, as topk itself promises no order for ties.
"""

from __future__ import annotations

import torch
from torch import Tensor

BLOCKS_PER_TOP = 8  # blocks per wanted entry below which a whole-row topk is cheaper
BLOCK_RANGE = (64, 160)  # block sizes that measured well on the CPU (docs/benchmarks.md)


def block_size(vocab_size: int, n: int) -> int:
    """The block `row_top` splits a row of vocab_size entries into for its n largest: the
    divisor of vocab_size nearest 100 within BLOCK_RANGE that leaves BLOCKS_PER_TOP * n
    blocks or more, or 0 where none does (then the whole row is ranked)."""
    low, high = BLOCK_RANGE
    sizes = [
        b
        for b in range(low, high + 1)
        if vocab_size % b == 0 and vocab_size // b >= BLOCKS_PER_TOP * n
    ]
    return min(sizes, key=lambda b: abs(b - 100)) if sizes else 0


def row_top(x: Tensor, n: int) -> tuple[Tensor, Tensor]:
    """x (N, V) -> values, indices (N, n): each row's n largest entries, largest first."""
    N, V = x.shape
    b = block_size(V, n) if x.device.type == "cpu" and x.is_contiguous() else 0
    if not b:
        return x.topk(n, dim=1)
    blocks = x.view(N, V // b, b).amax(dim=2).topk(n, dim=1).indices  # (N, n)
    columns = (blocks[:, :, None] * b + torch.arange(b, device=x.device)).view(N, n * b)
    values, place = x.gather(1, columns).topk(n, dim=1)
    return values, columns.gather(1, place)

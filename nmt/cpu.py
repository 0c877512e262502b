"""CPU runtime settings that have to be made before the first matrix product."""

from __future__ import annotations

import os


def set_onednn_kernel_cache(capacity: int | None) -> None:
    """Let oneDNN keep up to `capacity` compiled matrix-product kernels (its default: 1024).

    With native bf16 (AVX-512 BF16, AMX) every new product shape compiles a kernel, ~2 ms
    each. Token-budget batches come in a few hundred shapes that recur every epoch (see
    TokenBatchSampler), several thousand kernels for a whole step's products: with the
    default cache they are compiled again every epoch (tiny model, bf16, second epoch: 11.9k
    target tokens/s with 1,024, 14.3k with 16,384). oneDNN reads the capacity when it
    creates its first kernel, so call this first. None leaves oneDNN's own setting
    (ONEDNN_PRIMITIVE_CACHE_CAPACITY) alone.
    """
    if capacity is not None:
        if capacity < 0:
            raise ValueError(f"onednn_kernel_cache must be >= 0, not {capacity}")
        os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = str(capacity)

"""The dispatcher: translate a batch of source ids with the search a `DecodeConfig` asks for.

The searches live beside it (greedy, beam, sampling, penalties, constraints); this is the one entry
point that `nmt.decoding.text`, and through it validation BLEU, `translate` and `evaluate`,
call.
"""

from __future__ import annotations

import warnings

from torch import Tensor

from nmt.config import DecodeConfig
from nmt.decoding.beam import beam_search
from nmt.decoding.greedy import greedy_search
from nmt.decoding.sampling import Sampler
from nmt.decoding.state import Hypothesis
from nmt.model import Ensemble, Transformer


def warn_unused_greedy_settings(cfg: DecodeConfig) -> None:
    """Say, once per setting, which beam-only settings greedy search ignores."""
    unused = {
        "len_penalty": cfg.len_penalty is not None,
        "beam_size": cfg.beam_size > 1,
        "nbest": cfg.nbest > 1,
    }
    for name, ignored in unused.items():
        if ignored:
            warnings.warn(
                f"decode.{name}={getattr(cfg, name)} does nothing with greedy search; "
                "set decode.strategy=beam to use it",
                UserWarning,
                stacklevel=3,
            )


def translate_batch(
    model: Transformer | Ensemble,
    src: Tensor,
    cfg: DecodeConfig,
    record_attention: bool = False,
    target_prefix: Tensor | None = None,
) -> list[list[Hypothesis]]:
    """src (B, S) right-padded ids ending in EOS -> per sentence, its n-best list (1 for greedy,
    cfg.nbest samples for sampling, most probable first).

    target_prefix (B, P): right-padded ids every output of a sentence starts with, or None.
    Beam search needs cfg.len_penalty (alpha; the beam config sets 0.6).
    """
    if cfg.strategy == "greedy":
        warn_unused_greedy_settings(cfg)
        return greedy_search(
            model,
            src,
            cfg.max_len_a,
            cfg.max_len_b,
            cfg.min_len,
            cfg.no_repeat_ngram_size,
            record_attention,
            target_prefix=target_prefix,
        )
    if cfg.strategy == "sample":
        n = cfg.nbest  # each sentence's rows sit together: sample j of sentence i is row i*n+j
        samples = greedy_search(
            model,
            src.repeat_interleave(n, dim=0),
            cfg.max_len_a,
            cfg.max_len_b,
            cfg.min_len,
            cfg.no_repeat_ngram_size,
            record_attention,
            pick=Sampler(cfg.temperature, cfg.top_k, cfg.top_p, cfg.seed, src.device),
            target_prefix=None if target_prefix is None else target_prefix.repeat_interleave(n, 0),
        )
        return [
            sorted((h for hyps in samples[i * n : (i + 1) * n] for h in hyps), key=by_score)
            for i in range(src.size(0))
        ]
    if cfg.strategy == "beam":
        if cfg.len_penalty is None:
            raise ValueError("decode.len_penalty must be set for beam search (beam.yaml: 0.6)")
        return beam_search(
            model,
            src,
            cfg.beam_size,
            cfg.len_penalty,
            cfg.max_len_a,
            cfg.max_len_b,
            cfg.min_len,
            cfg.no_repeat_ngram_size,
            cfg.nbest,
            record_attention,
            length_norm=cfg.length_norm,
            target_prefix=target_prefix,
        )
    raise ValueError(f"decode.strategy must be greedy, beam or sample, got {cfg.strategy!r}")


def by_score(hypothesis: Hypothesis) -> float:
    """Sort key: best score first."""
    return -hypothesis.score

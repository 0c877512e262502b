"""The dispatcher: translate a batch of source ids with the search a `DecodeConfig` asks for.

The searches live beside it (greedy, beam, sampling, penalties, constraints); this is the one
entry point the engines (`nmt.inference`), and through them validation BLEU, translate,
evaluate and serve, call. The search is checked by the caller (`settings.check_search`), once.
"""

from __future__ import annotations

from torch import Tensor

from nmt.decoding.beam import beam_search
from nmt.decoding.greedy import greedy_search
from nmt.decoding.results import Hypothesis
from nmt.decoding.sampling import Sampler
from nmt.decoding.settings import DecodeConfig
from nmt.decoding.state import SearchOptions
from nmt.model import Ensemble, Transformer


def sample_search(
    model: Transformer | Ensemble, src: Tensor, cfg: DecodeConfig, options: SearchOptions | None
) -> list[list[Hypothesis]]:
    """cfg.nbest samples per sentence, most probable first: greedy search drawing each token
    (sampling.Sampler). A sentence's rows sit together: sample j of sentence i is row i*n+j."""
    n, options = cfg.nbest, options or SearchOptions()
    prefix, ends = options.target_prefix, options.prefix_ends_word
    repeated = SearchOptions(
        target_prefix=None if prefix is None else prefix.repeat_interleave(n, 0),
        record_attention=options.record_attention,
        use_cache=options.use_cache,
        prefix_ends_word=None if ends is None else ends.repeat_interleave(n, 0),
        ends_word=options.ends_word,
    )
    pick = Sampler(cfg.temperature, cfg.top_k, cfg.top_p, cfg.seed, src.device)
    samples = greedy_search(model, src.repeat_interleave(n, dim=0), cfg, repeated, pick)
    return [
        sorted((h for hyps in samples[i * n : (i + 1) * n] for h in hyps), key=by_score)
        for i in range(src.size(0))
    ]


SEARCHES = {"greedy": greedy_search, "beam": beam_search, "sample": sample_search}


def translate_batch(
    model: Transformer | Ensemble,
    src: Tensor,
    cfg: DecodeConfig,
    options: SearchOptions | None = None,
) -> list[list[Hypothesis]]:
    """src (B, S) right-padded ids ending in EOS -> per sentence, its n-best list (1 for greedy,
    cfg.nbest hypotheses or samples otherwise, most probable first)."""
    return SEARCHES[cfg.strategy](model, src, cfg, options)


def by_score(hypothesis: Hypothesis) -> float:
    """Sort key: best score first."""
    return -hypothesis.score

"""The sentence cache (nmt.inference.cache): a cached translation is the fresh one, on both
engines, whatever else is in the call; the least recently used goes first; sampling is never
cached; the server uses it."""

from __future__ import annotations

from dataclasses import asdict, replace

import pytest

from nmt.decoding.settings import DecodeConfig
from nmt.inference.cache import TranslationCache

BEAM = DecodeConfig(strategy="beam", beam_size=3, nbest=2, len_penalty=1.0)


@pytest.fixture(params=["torch", "ctranslate2"])
def engine(request, overfit_engine, ct2_f32):
    engine = overfit_engine if request.param == "torch" else ct2_f32
    yield engine
    engine.cache = None


def as_data(found) -> list:
    """Tokens, alignments and scores; `same` compares them."""
    return [
        [(h.tokens, h.alignment, [h.score, *(h.token_log_probs or [])]) for h in nbest]
        for nbest in found
    ]


def same(a: list, b: list) -> bool:
    """Tokens and alignments exactly; scores to 1e-4 (a batch's padding moves their last bits,
    and a cached line was decoded in other company than the fresh one)."""
    return len(a) == len(b) and all(
        len(x) == len(y)
        and all(
            hx[:2] == hy[:2] and hx[2] == pytest.approx(hy[2], abs=1e-4)
            for hx, hy in zip(x, y, strict=True)
        )
        for x, y in zip(a, b, strict=True)
    )


def test_a_cached_translation_is_the_fresh_one_alone_or_in_any_company(engine, overfit_pairs):
    lines = overfit_pairs[0][:6]
    fresh = as_data(engine.translate(lines, BEAM, alignments=True, scores=True))
    engine.cache = TranslationCache(100)
    first = as_data(engine.translate(lines[:3], BEAM, alignments=True, scores=True))
    assert engine.cache.hits == 0 and engine.cache.misses == 3
    mixed = engine.translate(["", lines[1], *lines], BEAM, alignments=True, scores=True)
    assert same(as_data(mixed), [[], fresh[1], *fresh]) and same(first, fresh[:3])
    assert engine.cache.hits == 4 and engine.cache.misses == 6  # lines[3:] were new
    # another search, or alignments not asked for: other entries
    assert as_data(engine.translate(lines[:1], replace(BEAM, beam_size=4)))[0] != [] and (
        engine.cache.misses == 7
    )
    engine.translate(lines[:1], BEAM)
    assert engine.cache.misses == 8


def test_the_least_recently_used_goes_and_sampling_is_never_cached(overfit_engine, overfit_pairs):
    lines = overfit_pairs[0][:3]
    overfit_engine.cache = cache = TranslationCache(2)
    try:
        overfit_engine.translate(lines, BEAM)  # 0, 1, 2: 0 goes
        overfit_engine.translate(lines[1:2], BEAM)  # 1 used again: 2 is the oldest
        overfit_engine.translate(lines[:1], BEAM)  # 0 again: a miss, 2 goes
        assert (cache.hits, cache.misses, len(cache.entries)) == (1, 4, 2)
        assert {key[0] for key in cache.entries} == {lines[0], lines[1]}
        sample = DecodeConfig(strategy="sample", seed=3, nbest=2)
        overfit_engine.translate(lines, sample)
        assert (cache.hits, cache.misses, len(cache.entries)) == (1, 4, 2)
    finally:
        overfit_engine.cache = None
    with pytest.raises(ValueError, match="at least one sentence"):
        TranslationCache(0)


def test_the_server_answers_from_its_cache_as_fresh(model_pt, overfit_pairs):
    from conftest import compose, worker_answers

    from nmt.serving.api import TranslationAPI

    cfg = compose("serve", [f"ckpt={model_pt}", "threads=1", "cache_sentences=50"])
    api = TranslationAPI(cfg, [], "overfit")
    api.setup("cpu")
    assert api.engine.cache is not None and api.engine.cache.size == 50
    body = {"text": overfit_pairs[0][:4], "scores": True}

    def served():
        return worker_answers(api, [body])[0]

    fresh = served()
    again = served()
    assert again == fresh and api.engine.cache.hits == 4
    assert asdict(cfg)["cache_sentences"] == 50
